"""Next steps for a check that found differences: catalog entries that may explain
them, and the ``fwd9m debug`` command that localises them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .._lint_hints import script_frameworks as _script_frameworks
from .._log import logger


def _debug_can_record(fp: dict[str, Any] | None) -> bool:
    """Whether the runs imported a framework ``fwd9m debug`` records (PyTorch,
    TensorFlow/Keras, JAX); True when the runs' fingerprint is unknown."""
    if fp is None:
        return True
    from .. import _frameworks

    return bool(set(fp.get("frameworks") or {}) & set(_frameworks.FRAMEWORKS))


def _debug_args(display: str, command: bool) -> str:
    """``fwd9m debug`` arguments for what was checked: a command ``python X.py ARGS``
    becomes ``X.py ARGS``; a launcher's (``accelerate launch ... X.py ARGS``, ``torchrun
    ... X.py``) the script it runs, alone; other commands are named as the script they
    run."""
    if not command:
        return display
    parts = display.split()[1:]  # drop "--"
    launcher = parts[1:3] in (["-m", "torch.distributed.run"], ["-m", "accelerate.commands.launch"])
    if parts and Path(parts[0]).name.startswith("python") and len(parts) > 1 and not launcher:
        return " ".join(parts[1:])
    script = next((i for i, part in enumerate(parts) if part.endswith(".py")), None)
    if script is not None:
        return " ".join(parts[script:]) + " (the script the launcher runs, alone, in one process)"
    return "SCRIPT.py [ARGS] (the Python script this command runs)"


def fix_step(display: str, command: bool) -> str:
    """The first next step of a check of a script that is not reproducible: the
    ``fwd9m fix`` command (empty for a command or a module)."""
    if command or not display.split(" ", 1)[0].endswith(".py"):
        return ""
    return (
        f"find and verify a patch: fwd9m fix {display} (patches a copy, checks it, prints the diff; "
        f"your files are not changed)"
    )


def _source_words(path: str | None) -> set[str]:
    """Identifiers in a script's source (empty when unreadable)."""
    import re

    text = _read(path)
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text)) if text else set()


def _read(path: str | None) -> str:
    if not path:
        return ""
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


#: module names as the catalog spells them (``tf.data.Dataset``, ``numpy.random``)
_ROOTS = {"tensorflow": "tf"}


def _used_names(path: str | None) -> tuple[set[str], set[str]]:
    """What a script calls or names, from its syntax tree (comments and strings do not
    count): ``(qualified, methods)``. ``qualified``: dotted names resolved through the
    script's imports (``import torch.nn as nn`` makes ``nn.Dropout`` ``torch.nn.Dropout``;
    ``from torch.utils.data import DataLoader`` makes ``DataLoader`` its full name) and
    builtins used by name (``set``); ``methods``: attributes taken from something that is
    not an imported module (``out.index_put_``, ``model.compile``). Both empty when the
    source is unreadable or not Python."""
    import ast

    text = _read(path)
    try:
        tree = ast.parse(text) if text else None
    except (SyntaxError, ValueError):
        tree = None
    if tree is None:
        return set(), set()
    alias: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                alias[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                alias[a.asname or a.name] = f"{node.module}.{a.name}"
    qualified: set[str] = set()
    methods: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            parts, base = [node.attr], node.value
            while isinstance(base, ast.Attribute):
                parts.append(base.attr)
                base = base.value
            if isinstance(base, ast.Name) and base.id in alias:
                full = ".".join([alias[base.id], *reversed(parts)])
                root, _, rest = full.partition(".")
                qualified.add(f"{_ROOTS.get(root, root)}.{rest}" if rest else _ROOTS.get(root, root))
            else:
                methods.add(node.attr)
        elif isinstance(node, ast.Name):
            full = alias.get(node.id, node.id)
            root, _, rest = full.partition(".")
            qualified.add(f"{_ROOTS.get(root, root)}.{rest}" if rest else _ROOTS.get(root, root))
    return qualified, methods


def _names_symbol(symbol: str, qualified: set[str], methods: set[str]) -> bool:
    """Whether the script uses ``symbol`` (a catalog symbol such as ``torch.compile`` or
    ``torch.Tensor.index_put_``): by its full name, or, for a method of a class
    (``Tensor.index_put_``, ``Model.compile``), called on any object."""
    if symbol in qualified or any(q.startswith(symbol + ".") for q in qualified):
        return True
    parts = symbol.split(".")
    return len(parts) > 2 and parts[-2][:1].isupper() and parts[-1] in methods


def _general(e: Any, python: bool, threads_differ: bool) -> bool:
    """Entries worth showing for any difference, whatever the script names: seeding
    (an entry about a framework's seed functions), CPU threads when the runs' thread
    settings differed (two runs on one machine with the same settings share a thread
    count, so it cannot explain their difference), and, when the string-hash seed
    differed between the runs, the hash-seed entries."""
    if python and "PYTHONHASHSEED" in e.env:
        return True
    if e.id.endswith("cpu-threads"):
        return threads_differ
    return e.kind == "seed" and any("seed" in s.rsplit(".", 1)[-1].lower() for s in e.symbols)


def _hint_frameworks(fp: dict[str, Any] | None, source: str | None) -> dict[str, str | None]:
    """``{framework: version}`` whose entries may explain the differences: those the runs
    imported (from their fingerprint ``fp``, else this process) that the script trains
    with, and ``python``."""
    if fp and fp.get("frameworks"):
        frameworks = {n: i.get("version") for n, i in fp["frameworks"].items()}
    else:
        from .. import _frameworks

        frameworks = {n: _frameworks.installed_version(n) for n in _frameworks.imported()}
    used_frameworks = _script_frameworks(source, fp)
    if used_frameworks is not None:
        frameworks = {n: v for n, v in frameworks.items() if n in used_frameworks}
    frameworks["python"] = None
    return frameworks


def _score(
    e: Any, framework: str, names: tuple, python: bool, threads_differ: bool, seeding_lines: bool, unseeded: bool
) -> int:
    """How likely catalog entry ``e`` explains the differences; 0: not shown."""
    if e.behaviour == "not-applicable":
        return 0
    qualified, methods = names
    used = [_names_symbol(s, qualified, methods) for s in e.symbols]
    # a compiler entry needs its compiler (the first symbol: torch.compile) and,
    # when it lists more, one of them too (torch.compile with a Dropout)
    named = (used[0] and (len(used) == 1 or any(used[1:]))) if e.kind == "compiler" and used else any(used)
    general = _general(e, python, threads_differ) and not (seeding_lines and e.kind == "seed")
    if not (named or general):
        return 0
    score = (
        (4 + 2 * (e.kind == "op")) * named
        + 3 * (python and "PYTHONHASHSEED" in e.env)
        + 6 * (unseeded and e.kind == "seed" and framework != "python")
    )
    if framework == "python" and not score:
        return 0
    return score + {"op": 0, "setting": 1, "seed": 1}.get(e.kind, 0) + 1


def _catalog_hints(
    fp: dict[str, Any] | None,
    device: str | None,
    python: bool = False,
    source: str | None = None,
    limit: int = 5,
    threads_differ: bool = False,
    argv: list[str] | None = None,
    env: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Catalog entries that may explain the differences, likeliest first: entries for
    the frameworks the runs imported (at their versions and device) whose symbols the
    script's source uses (``torch.compile``, ``x.index_put_(...)``; see
    :func:`_used_names`), then the general ones (:func:`_general`: seeding, threads
    when the runs' thread settings differed (``threads_differ``), and the hash-seed
    entries when the hash seed differed), global-seed entries first when the script
    seeds nothing. Only frameworks the script trains with count
    (:func:`_script_frameworks`: JAX imported by a library is not the script's JAX). An
    entry the script gives no reason for (``torch.inductor-rng`` without
    ``torch.compile``) is not shown, nor a general seeding entry when fwd9m lint points
    at the script's own seeding lines (they say the same, for the line). The script's
    lint findings come first. [] when the catalog is unavailable.
    ``argv``, ``env``: the runs' command line and environment when every run had the
    same (which branches of the script ran: see :func:`fwd9m._lint_hints.findings`)."""
    try:
        from .. import catalog
    except ImportError:
        return []
    frameworks = _hint_frameworks(fp, source)
    from .._lint_hints import check_hints  # the script's lines that fwd9m lint flags

    lint = check_hints(source, hash_seed=python, argv=argv, env=env)
    seeding_lines = any(h["id"].startswith("FWD1") for h in lint)
    words = _source_words(source)
    # a script that seeds nothing at all: the global-seed entries come first
    unseeded = bool(words) and not any("seed" in w.lower() or w == "enable_determinism" for w in words)
    names = _used_names(source)
    scored: list[tuple[int, str, Any]] = []
    try:
        for name, version in frameworks.items():
            for e in catalog.query(framework=name, version=version, device=device):
                score = _score(e, name, names, python, threads_differ, seeding_lines, unseeded)
                if score:
                    scored.append((score, e.id, e))
    except Exception as exc:  # a catalog still being built must not break a check
        logger.debug("catalog query failed: %s", exc)
    scored.sort(key=lambda t: (-t[0], t[1]))
    return lint + [
        {"id": e.id, "title": e.title, "kind": e.kind, "fix": e.fix, "references": list(e.references)}
        for score, _, e in scored[:limit]
    ]
