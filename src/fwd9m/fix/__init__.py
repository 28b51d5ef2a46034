"""``fwd9m fix``: a fix that is proven. Check the script as it is; make the smallest
patch that can remove what differs (:mod:`fwd9m.fix._edits`); run ``fwd9m check`` on a
patched copy; report the first patch whose copy is reproducible, as a unified diff,
with the check's verdict on it.

The copy is a folder of symbolic links to the script's folder, the script itself
replaced by its patched text; the check runs there as it runs anywhere, every write
kept out of the user's folder (``fwd9m check``'s isolation covers the links' targets).
The user's files change only with :func:`write`, and only when the script is still
what was checked.
"""

from __future__ import annotations

import ast
import contextlib
import difflib
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import _edits

__all__ = ["Attempt", "FixResult", "fix", "write"]


@dataclass(frozen=True)
class Attempt:
    """One patch tried: what it does, its diff, and the check's verdict on the copy."""

    name: str
    patch: str
    changed_lines: int
    verdict: str
    reproducible: bool
    text: str = field(default="", repr=False)  #: the patched script


@dataclass(frozen=True)
class FixResult:
    """The outcome of :func:`fix`: truthy when the script needed no fix or a verified
    one was found (:attr:`fixed`)."""

    target: str
    before: str  #: the check's verdict on the script as it is
    cause: str  #: the first difference it found ("" when reproducible)
    attempts: list[Attempt] = field(default_factory=list)
    digest: str = ""  #: SHA-256 of the script as checked (:func:`write` requires it unchanged)

    @property
    def fixed(self) -> Attempt | None:
        return next((a for a in self.attempts if a.reproducible), None)

    @property
    def needed(self) -> bool:
        return bool(self.cause)

    def __bool__(self) -> bool:
        return not self.needed or self.fixed is not None

    def report(self) -> str:
        from ..compare import escape_control

        if not self.needed:
            lines = [f"NOTHING TO FIX: {self.before}"]
        elif self.fixed is not None:
            a = self.fixed
            lines = [
                f"FIXED (verified): with the patch below ({a.name}; {a.changed_lines} changed line(s)), "
                f"fwd9m check says: {a.verdict}",
                "",
                f"Before: {self.before}",
                f"  first difference: {self.cause}",
                "",
                "The patch (fwd9m fix -o fix.patch saves it; --write applies it to your file):",
                *a.patch.rstrip("\n").splitlines(),
            ]
        else:
            lines = [
                f"NO VERIFIED FIX: {len(self.attempts)} patch(es) tried, the copy still differs in each.",
                "",
                f"Before: {self.before}",
                f"  first difference: {self.cause}",
                "",
                "Tried:",
                *(f"  - {a.name}: {a.verdict}" for a in self.attempts),
                "",
                f"Next: fwd9m debug {self.target} (finds the first op that differs and why)",
            ]
        return "\n".join(escape_control(line) for line in lines)

    def to_dict(self) -> dict[str, Any]:
        fixed = self.fixed
        return {
            "schema": "fwd9m.fix",
            "schema_version": 1,
            "target": self.target,
            "needed": self.needed,
            "fixed": fixed is not None,
            "before": self.before,
            "cause": self.cause,
            "patch": fixed.patch if fixed else None,
            "attempts": [{k: v for k, v in a.__dict__.items() if k != "text"} for a in self.attempts],
        }


def _candidates(source: str, seed: int | None) -> list[tuple[str, str]]:
    """``(what it does, patched source)`` to try, smallest first, each distinct."""
    tree = ast.parse(source)
    seed = _edits.script_seed(tree) if seed is None else seed
    seed = 0 if seed is None else seed
    base = _edits.enable_after_imports(source, tree, seed) + _edits.fixed_clock_seeds(source, tree, seed)
    what = f"fwd9m.enable_determinism(seed={seed}) after the imports"
    if len(base) > 1:
        what += ", clock seeds replaced by the seed"
    out = [(what, _edits.apply(source, base))]
    workers = _edits.worker_seeding(source, tree)
    if workers:
        out.append((what + ", DataLoader workers seeded (worker_init_fn)", _edits.apply(source, base + workers)))
    return out


def _diff(name: str, before: str, after: str) -> tuple[str, int]:
    lines = list(difflib.unified_diff(before.splitlines(True), after.splitlines(True), f"a/{name}", f"b/{name}"))
    changed = sum(1 for x in lines if x[:1] == "+" and not x.startswith("+++"))  # lines new or changed
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines), changed


@contextlib.contextmanager
def _patched_copy(script: Path, text: str) -> Iterator[Path]:
    """A folder beside nothing of the user's: a symbolic link to each entry of the
    script's folder, the script itself written with ``text``. Yields the copy's path of
    the script; the folder (links only, never their targets) goes on the way out."""
    root = Path(tempfile.mkdtemp(prefix="fwd9m-fix-"))
    script = script.absolute()  # links to absolute paths: a link to "./x" would point at itself
    try:
        for entry in os.scandir(script.parent):
            if entry.name != script.name:
                os.symlink(entry.path, root / entry.name)
        (root / script.name).write_text(text, encoding="utf-8")
        yield root / script.name
    finally:
        shutil.rmtree(root, ignore_errors=True)  # unlinks the links; never follows them


@contextlib.contextmanager
def _cwd(path: Path | None) -> Iterator[None]:
    before = os.getcwd()
    if path is not None:
        os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def _verify(script: Path, text: str, args: Sequence[str], check: Callable[..., Any]) -> tuple[bool, str]:
    """Whether ``script`` patched to ``text`` is reproducible, and the check's verdict
    (naming the script as the user does), run from the copy's folder when the user runs
    the script from its own folder."""
    with _patched_copy(script, text) as copy:
        same_folder = Path.cwd().resolve() == script.parent.resolve()
        with _cwd(copy.parent if same_folder else None):
            result = check(copy.name if same_folder else str(copy), list(args))
        return bool(result), result.verdict().replace(str(copy), str(script))


def fix(
    target: str,
    args: Sequence[str] = (),
    *,
    seed: int | None = None,
    progress: Callable[[str], None] | None = None,
    **check_options: Any,
) -> FixResult:
    """Check ``target``; when it is not reproducible, try the patches of
    :func:`_candidates` on a copy, each verified by a check, and return what was found.
    ``check_options`` go to :func:`fwd9m.check.check_script` (``timeout``, ``env``...).

    Raises:
        RunError: the script is missing, not Python, or the check has no verdict.
    """
    from ..check import check_script
    from ..errors import RunError

    say = progress or (lambda _: None)
    script = Path(target)
    try:
        source = script.read_text(encoding="utf-8")
        ast.parse(source)
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError) as exc:
        raise RunError(f"cannot fix {target}: {exc}") from None
    digest = hashlib.sha256(source.encode()).hexdigest()

    def check(path: str, argv: list[str]) -> Any:
        return check_script(path, argv, progress=progress, **check_options)

    say(f"checking {target} as it is")
    before = check(target, list(args))
    if before:
        return FixResult(target, before.verdict(), "", [], digest)
    ranked = before.ranked()
    result = FixResult(target, before.verdict(), ranked[0].summary if ranked else "", [], digest)
    candidates = _candidates(source, seed)
    for i, (what, text) in enumerate(candidates, 1):
        say(f"patch {i} of {len(candidates)}: {what}; checking the patched copy")
        try:
            ok, verdict = _verify(script, text, args, check)
        except RunError as exc:  # the patch broke the script (a kernel with no deterministic version)
            ok, verdict = False, f"the patched copy gave no verdict: {exc}"
        patch, changed = _diff(script.name, source, text)
        result.attempts.append(Attempt(what, patch, changed, verdict, ok, text))
        if ok:
            break
    return result


def write(result: FixResult) -> Path:
    """Apply the verified patch to the user's script, atomically, keeping its mode.

    Raises:
        RunError: no verified patch, or the script changed since it was checked.
    """
    from ..errors import RunError

    fixed = result.fixed
    if fixed is None:
        raise RunError("no verified patch to write")
    script = Path(result.target)
    source = script.read_text(encoding="utf-8")
    if hashlib.sha256(source.encode()).hexdigest() != result.digest:
        raise RunError(f"{script} changed since it was checked: not written (run fwd9m fix again)")
    text = fixed.text
    tmp = script.with_name(f".{script.name}.fwd9m-fix.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.chmod(tmp, script.stat().st_mode & 0o7777)
    os.replace(tmp, script)
    return script
