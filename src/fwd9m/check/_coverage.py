"""What a check compared, and what it could not: the report's "Compared" lines.

A verdict is only as good as what it rests on. Each line names one source (standard
output, standard error, files, final state) with its size, and the last lines say what
was seen but not compared (values known only by their type, leaves the capture could
not read)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._process import _Run

_SHOWN = 4


def _listed(names: list[str]) -> str:
    head = ", ".join(names[:_SHOWN])
    return head + (f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' * (n != 1)}"


def state_root(path: str) -> str:
    """The object a final-state leaf belongs to: ``model`` for ``model.fc.weight``,
    ``params`` for ``globals.params[0]``, ``main(): w`` for ``locals.main().w``."""
    head, _, rest = path.partition(".")
    if head == "locals" and "()." in rest:
        function, _, name = rest.partition("().")
        return f"{function}(): {name.split('.', 1)[0].split('[', 1)[0]}"
    if head == "globals" and rest:
        return rest.split(".", 1)[0].split("[", 1)[0]
    return head.split("[", 1)[0]


def _state_lines(captures: list[dict[str, Any]]) -> list[str]:
    """The final state: arrays and other values by the objects they are in; then the
    leaves compared by type only and those the capture could not read."""
    from ..compare import Tensor

    arrays = others = 0
    roots: dict[str, None] = {}
    opaque: list[str] = []
    unread: list[str] = []
    for cap in captures:
        for path, leaf in (cap.get("flat") or {}).items():
            roots.setdefault(state_root(path))
            if isinstance(leaf, Tensor):
                arrays += 1
            elif isinstance(leaf, dict) and "opaque" in leaf:
                opaque.append(f"{path} ({leaf['opaque']})")
            else:
                others += 1
        unread += [f"{leaf.get('path')}: {leaf['error']}" for leaf in cap.get("leaves") or () if "error" in leaf]
        if cap.get("error"):
            unread.append(str(cap["error"]))
    if not roots:
        lines = [
            "final state: none found at exit (no framework model, optimizer or variable alive, no array "
            "in a global of the script or in its entry function's locals)"
        ]
    else:
        lines = [
            f"final state: {_plural(arrays, 'array')}, {_plural(others, 'other value')}, in {_listed(list(roots))}"
        ]
    if opaque:
        lines.append(f"seen, compared by type only: {_plural(len(opaque), 'value')} ({_listed(opaque)})")
    if unread:
        lines.append(f"could not be read from the final state: {_listed(unread)}")
    return lines


def lines(first: _Run, stdout_lines: int, stderr: tuple[int, int] | None) -> list[str]:
    """The "Compared" lines of a check whose first run is ``first``: ``stderr`` is (lines
    compared, framework log lines left out), None when standard error was not compared."""
    out = [f"standard output: {_plural(stdout_lines, 'line')}"]
    if stderr is None:
        out.append("standard error: not compared (a resumed run warns of the checkpoint it loads)")
    else:
        n, left = stderr
        out.append(
            f"standard error: {_plural(n, 'line')}"
            + (f" ({_plural(left, 'framework log line')} left out, listed under Ignored)" if left else "")
        )
    files = sorted(first.files)
    out.append(f"files: {len(files)} ({_listed(files)})" if files else "files: none written")
    out += _state_lines(first.captures)
    return out
