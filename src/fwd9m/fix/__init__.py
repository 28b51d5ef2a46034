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
    #: the patched local modules the script imports: ``{path relative to its folder: text}``
    modules: dict[str, str] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class FixResult:
    """The outcome of :func:`fix`: truthy when the script needed no fix or a verified
    one was found (:attr:`fixed`)."""

    target: str
    before: str  #: the check's verdict on the script as it is
    cause: str  #: the first difference it found ("" when reproducible)
    attempts: list[Attempt] = field(default_factory=list)
    digest: str = ""  #: SHA-256 of the script as checked (:func:`write` requires it unchanged)
    #: SHA-256 of each local module a patch changes, as checked
    module_digests: dict[str, str] = field(default_factory=dict)

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
            "attempts": [{k: v for k, v in a.__dict__.items() if k not in ("text", "modules")} for a in self.attempts],
        }


def _module_edits(script: Path, tree: ast.AST, seed: int) -> dict[str, str]:
    """``{relative path: patched text}`` of the local modules whose seeds come from the
    clock or that make generators without a seed."""
    out = {}
    from ..lint._imports import local_modules

    for rel, f in local_modules(script, tree).items():
        try:
            text = f.read_text(encoding="utf-8")
            sub = ast.parse(text)
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
            continue
        edits = (
            _edits.fixed_clock_seeds(text, sub, seed)
            + _edits.clock_seed_variables(text, sub, seed)
            + _edits.seeded_generators(text, sub, seed)
        )
        if edits:
            out[rel] = _edits.apply(text, edits)
    return out


def _candidates(source: str, seed: int | None) -> list[tuple[str, str]]:
    """``(what it does, patched source)`` to try, smallest first, each distinct."""
    tree = ast.parse(source)
    seed = _seed(source, seed)
    base = _edits.enable_after_imports(source, tree, seed)
    what = [f"fwd9m.enable_determinism(seed={seed}) after the imports"]
    for edits, said in (
        (_edits.fixed_clock_seeds(source, tree, seed) + _edits.clock_seed_variables(source, tree, seed), "clock seeds"),
        (_edits.seeded_generators(source, tree, seed), "generators without a seed seeded"),
        (_edits.sorted_sets(source, tree), "sets iterated in sorted order"),
    ):
        if edits:
            base += edits
            what.append(said + (" replaced by the seed" if said == "clock seeds" else ""))
    out = [(", ".join(what), _edits.apply(source, base))]
    what = out[0][0]
    workers = _edits.worker_seeding(source, tree)
    if workers:
        out.append((what + ", DataLoader workers seeded (worker_init_fn)", _edits.apply(source, base + workers)))
    return out


def _diff(name: str, before: str, after: str) -> tuple[str, int]:
    lines = list(difflib.unified_diff(before.splitlines(True), after.splitlines(True), f"a/{name}", f"b/{name}"))
    changed = sum(1 for x in lines if x[:1] == "+" and not x.startswith("+++"))  # lines new or changed
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines), changed


def _mirror(source: Path, copy: Path, skip: str | None = None) -> None:
    """``copy`` (a new folder): a symbolic link to each entry of ``source`` but ``skip``."""
    copy.mkdir(exist_ok=True)
    for entry in os.scandir(source):
        if entry.name != skip:
            os.symlink(entry.path, copy / entry.name)


def _write_in_copy(root: Path, source: Path, rel: str, text: str) -> None:
    """Write ``text`` at ``rel`` in the copy ``root`` of ``source``, turning each linked
    folder on the way into a folder of links (the user's folder is never written)."""
    parts = Path(rel).parts
    here, there = root, source
    for part in parts[:-1]:
        here, there = here / part, there / part
        if here.is_symlink():
            here.unlink()
            _mirror(there, here)
    target = here / parts[-1]
    if target.is_symlink():
        target.unlink()
    target.write_text(text, encoding="utf-8")


@contextlib.contextmanager
def _patched_copy(script: Path, text: str, modules: dict[str, str] | None = None) -> Iterator[Path]:
    """A folder in fwd9m's temporary folder: a symbolic link to each entry of the
    script's folder, the script itself written with ``text`` and each of ``modules``
    (relative path: text) with its patched text. Yields the copy's path of the script;
    the folder (links only, never their targets) goes on the way out."""
    from .._runtime.lease import claim, release

    root = Path(tempfile.mkdtemp(prefix="fwd9m-fix-"))
    claim(root)  # its owner file: the next fwd9m command removes it if this one is killed
    script = script.absolute()  # links to absolute paths: a link to "./x" would point at itself
    copy = root / (script.parent.name or "script")  # the owner file stays out of the script's folder
    try:
        _mirror(script.parent, copy, skip=script.name)
        (copy / script.name).write_text(text, encoding="utf-8")
        for rel, module in (modules or {}).items():
            _write_in_copy(copy, script.parent, rel, module)
        yield copy / script.name
    finally:
        release(root)
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


def _verify(
    script: Path, text: str, modules: dict[str, str], args: Sequence[str], check: Callable[..., Any]
) -> tuple[bool, str]:
    """Whether ``script`` patched to ``text`` (and its local ``modules``) is reproducible,
    and the check's verdict (naming the script as the user does), run from the copy's
    folder when the user runs the script from its own folder."""
    with _patched_copy(script, text, modules) as copy:
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
    modules = _module_edits(script, ast.parse(source), _seed(source, seed))
    originals = {rel: (script.parent / rel).read_text(encoding="utf-8") for rel in modules}
    result.module_digests.update({rel: hashlib.sha256(t.encode()).hexdigest() for rel, t in originals.items()})
    for i, (what, text) in enumerate(candidates, 1):
        what += f", seeds from the clock fixed in {', '.join(modules)}" if modules else ""
        say(f"patch {i} of {len(candidates)}: {what}; checking the patched copy")
        try:
            ok, verdict = _verify(script, text, modules, args, check)
        except RunError as exc:  # the patch broke the script (a kernel with no deterministic version)
            ok, verdict = False, f"the patched copy gave no verdict: {exc}"
        diffs = [_diff(script.name, source, text), *(_diff(r, originals[r], t) for r, t in modules.items())]
        patch, changed = "".join(d for d, _ in diffs), sum(n for _, n in diffs)
        result.attempts.append(Attempt(what, patch, changed, verdict, ok, text, modules))
        if ok:
            break
    return result


def _seed(source: str, seed: int | None) -> int:
    """The seed a patch uses: ``seed``, else the script's own, else 0."""
    if seed is not None:
        return seed
    own = _edits.script_seed(ast.parse(source))
    return 0 if own is None else own


def write(result: FixResult) -> Path:
    """Apply the verified patch to the user's script (and the local modules it patches),
    each file atomically, keeping its mode.

    Raises:
        RunError: no verified patch, or a file changed since it was checked.
    """
    from ..errors import RunError

    fixed = result.fixed
    if fixed is None:
        raise RunError("no verified patch to write")
    script = Path(result.target)
    source = script.read_text(encoding="utf-8")
    if hashlib.sha256(source.encode()).hexdigest() != result.digest:
        raise RunError(f"{script} changed since it was checked: not written (run fwd9m fix again)")
    for rel, digest in result.module_digests.items():
        module = script.parent / rel
        if hashlib.sha256(module.read_text(encoding="utf-8").encode()).hexdigest() != digest:
            raise RunError(f"{module} changed since it was checked: not written (run fwd9m fix again)")
    files = [(script, fixed.text), *((script.parent / r, t) for r, t in fixed.modules.items())]
    _replace_all([(path.resolve(), text) for path, text in files])  # through a link: its target
    return script


def _replace_all(files: list[tuple[Path, str]]) -> None:
    """Write every ``(path, text)`` to a temporary file beside it first (each keeping its
    file's mode), then replace the files one after the other while Ctrl-C and SIGTERM
    wait: an interruption leaves either no file or every file patched, and no temporary
    file behind."""
    from .._runtime.lease import shielded

    for path, _ in files:
        if not path.is_file() or not os.access(path.parent, os.W_OK):
            raise OSError(f"{path} is not a file fwd9m can replace: nothing was written")
    temps: list[tuple[Path, Path]] = []
    try:
        for path, text in files:
            tmp = path.with_name(f".{path.name}.fwd9m-fix.tmp")
            temps.append((tmp, path))
            tmp.write_text(text, encoding="utf-8")
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        with shielded():
            for tmp, path in temps:
                os.replace(tmp, path)
    finally:
        for tmp, _ in temps:
            tmp.unlink(missing_ok=True)
