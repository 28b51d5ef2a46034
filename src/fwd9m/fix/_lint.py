"""``fwd9m lint --fix``: the edits of :mod:`fwd9m.fix._edits` made for lint findings,
ruff's way: safe edits by default, the others with ``--unsafe-fixes``.

A rule that has a fix names it (``Rule.autofix``); :data:`EDITS` says which edits are
safe. Safe: the edit only fixes something that was arbitrary, and the program computes
what it computed before in one of the ways it could already have computed it (an order a
set's string hashing chose; the seed of each DataLoader worker's NumPy and ``random``
generators, which were copies of the parent's or drawn from the OS). Unsafe: the edit
changes results on purpose (a seed replaces the clock; ``enable_determinism`` seeds
every generator and turns deterministic kernels on) or may raise where the code did
not (``sorted`` over a set whose items may not compare).

Each file is read, linted and edited from one text, and replaced only when it still is
that text (written beside it first, then moved over it, keeping its mode, its encoding,
a BOM and its line endings; through a symbolic link, its target is written). A file
that does not parse is left as it is, with a line saying why.
"""

from __future__ import annotations

import ast
import difflib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from .._files import shown
from ..compare._escape import printable
from . import _edits, _source

__all__ = ["EDITS", "FileFix", "apply", "plan", "plan_paths"]

_Make = Callable[[str, ast.Module, int], list[_edits.Edit]]


def _clock(source: str, tree: ast.Module, seed: int) -> list[_edits.Edit]:
    return (
        _edits.fixed_clock_seeds(source, tree, seed)
        + _edits.clock_seed_variables(source, tree, seed)
        + _edits.hash_seeds(source, tree, seed)
    )


#: ``autofix`` name: (safe edits, unsafe edits, what it does, whole file: one edit for
#: every finding of the rule rather than the edits on a finding's lines)
EDITS: dict[str, tuple[_Make | None, _Make | None, str, bool]] = {
    "sorted_sets": (
        lambda s, t, _: _edits.sorted_sets(s, t, strings_only=True),
        lambda s, t, _: _edits.sorted_sets(s, t),
        "sorted() over the set",
        False,
    ),
    "worker_seeding": (
        lambda s, t, _: _edits.worker_seeding(s, t),
        None,
        "worker_init_fn=fwd9m.data.worker_init_fn",
        False,
    ),
    "clock_seeds": (None, _clock, "the clock seed replaced by the script's seed (a hash() one derived from it)", False),
    "seeded_generators": (None, _edits.seeded_generators, "the generator given the script's seed", False),
    "enable_after_imports": (None, _edits.enable_after_imports, "fwd9m.enable_determinism after the imports", True),
}


@dataclass
class FileFix:
    """The fixes for one file: its text as read, as fixed, and a line per fix made."""

    path: Path
    before: str
    after: str
    fixed: list[str] = field(default_factory=list)
    unsafe_left: int = 0  #: findings an unsafe fix would edit (left out without --unsafe-fixes)
    encoding: str = "utf-8"  #: how the file was read, and is written back
    skipped: str = ""  #: why no fix is made (a file that does not parse), else ""

    def diff(self) -> str:
        name = shown(self.path)
        lines = difflib.unified_diff(
            self.before.splitlines(True), self.after.splitlines(True), f"a/{name}", f"b/{name}"
        )
        return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _autofix(code: str) -> str:
    """The name of the fix the rule ``code`` carries ("" for none, or an engine code)."""
    from ..lint import all_rules

    return getattr(all_rules().get(code), "autofix", "")


def _scope_lines(tree: ast.Module, line: int) -> range:
    """The lines of the innermost function, lambda or class around ``line`` (all of the
    file's when none is)."""
    best = range(1, 2**31)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            end = node.end_lineno or node.lineno
            if node.lineno <= line <= end and end - node.lineno < len(best) - 1:
                best = range(node.lineno, end + 1)
    return best


def _edits_for(finding, source: str, tree: ast.Module, seed: int, unsafe: bool) -> tuple[list[_edits.Edit], bool]:
    """The edits that fix ``finding`` (its rule's, on its lines), and whether an unsafe
    edit would have fixed it had it been allowed."""
    name = _autofix(finding.code)
    if name not in EDITS:
        return [], False
    safe, risky, _, whole = EDITS[name]
    lines = range(finding.line, (finding.end_line or finding.line) + 1)

    assigned = {  # a finding on an assignment (a set made there): the edits where that name is used
        f"sorted({t.id})": _scope_lines(tree, node.lineno)  # in the function (or module) that assigns it
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and node.lineno in lines
        for t in node.targets
        if isinstance(t, ast.Name)
    }

    def mine(make: _Make | None) -> list[_edits.Edit]:
        found = make(source, tree, seed) if make else []
        if whole:
            return found
        at = [(e, source.count("\n", 0, e.start) + 1) for e in found]
        return [e for e, line in at if line in lines or line in assigned.get(e.text, ())]

    edits = mine(safe)
    if edits or not risky:
        return edits, False
    return (mine(risky), False) if unsafe else ([], bool(mine(risky)))


def plan(path: Path, source: str, findings: Iterable, unsafe: bool = False, encoding: str = "utf-8") -> FileFix:
    """The fixes of ``findings`` (all of ``path``, linted from ``source``); none, with
    ``skipped`` saying why, for a file that does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError) as exc:
        return FileFix(
            path,
            source,
            source,
            encoding=encoding,
            skipped=f"{shown(path)}: does not parse ({printable(str(exc))}): not fixed",
        )
    seed = _edits.script_seed(tree)
    seed = 0 if seed is None else seed
    result = FileFix(path, source, source, encoding=encoding)
    edits: list[_edits.Edit] = []
    for f in findings:
        found, risky = _edits_for(f, source, tree, seed, unsafe)
        result.unsafe_left += risky
        new = [e for e in found if e not in edits]
        if found:
            edits += new
            result.fixed.append(f"{shown(path)}:{f.line}: {f.code} fixed: {EDITS[_autofix(f.code)][2]}")
    if any("fwd9m." in e.text for e in edits) and not _edits.imports_fwd9m(tree):
        if not any(e.text.lstrip("\r\n").startswith("import fwd9m") for e in edits):
            edits += _edits.after_imports(source, tree, "import fwd9m.data\n")
    after = _edits.apply(source, edits)
    try:
        ast.parse(after)
    except (SyntaxError, ValueError):  # an edit that would break the file: none is made
        return FileFix(path, source, source, encoding=encoding)
    result.after = after
    return result


def apply(fixes: list[FileFix]) -> list[str]:
    """Write each fixed file that is still as it was read; the paths refused (changed
    since read) come back, each with why."""
    from . import _replace_all

    refused = []
    for f in fixes:
        if f.after == f.before:
            continue
        target = f.path.resolve()  # through a link: its target
        try:
            now = _source.read(target)
            if now != (f.before, f.encoding):
                refused.append(f"{shown(f.path)}: changed since it was read: not written (run fwd9m lint --fix again)")
                continue
            _replace_all([(target, f.after.encode(f.encoding))])
        except (OSError, SyntaxError, UnicodeError) as exc:
            refused.append(f"{shown(f.path)}: not written ({printable(str(exc))})")
    return refused


def plan_paths(findings: Iterable, config, unsafe: bool = False) -> list[FileFix]:
    """The fixes for each file that has a finding whose rule carries a fix: the file read
    once, linted again from that text (so the edits match it), then planned."""
    from ..lint import lint_source

    paths = sorted({f.path for f in findings if _autofix(f.code) in EDITS} - {"-", "<stdin>"})
    out = []
    for name in paths:
        path = Path(name)
        try:
            text, encoding = _source.read(path)
        except (OSError, SyntaxError, UnicodeDecodeError):
            continue
        fix = plan(path, text, lint_source(text, name, config), unsafe, encoding)
        if fix.after != fix.before or fix.unsafe_left or fix.skipped:
            out.append(fix)
    return _one_per_file(out)


def _one_per_file(fixes: list[FileFix]) -> list[FileFix]:
    """One fix per file: a file linted under two names (``link.py`` -> ``target.py`` in
    the same folder) is fixed once, under its own name rather than a link's; the other
    name's fix, planned from the same text, would find the file changed (by the first)."""
    chosen: dict[Path, FileFix] = {}
    for fix in sorted(fixes, key=lambda f: f.path.is_symlink()):
        try:
            key = fix.path.resolve()
        except (OSError, RuntimeError):  # a loop of links: its own name
            key = fix.path
        chosen.setdefault(key, fix)
    kept = set(map(id, chosen.values()))
    return [f for f in fixes if id(f) in kept]
