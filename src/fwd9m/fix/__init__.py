"""``fwd9m fix``: a fix that is proven. Check the script as it is; patch a copy step by
step (:mod:`fwd9m.fix._edits`: at each step the group of edits that what still differs
points at, else the next in order, the seeding call first; up to :data:`MAX_STEPS`), running
``fwd9m check`` on the copy after each; report each step and the patch that made the copy
reproducible, as a unified diff, with the check's verdict on it.

The copy is a folder of symbolic links to the script's folder, the script itself
replaced by its patched text; the check runs there as it runs anywhere, every write
kept out of the user's folder (``fwd9m check``'s isolation covers the links' targets).
The user's files change only with :func:`write`, and only when the script is still
what was checked.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import difflib
import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._files import shown
from . import _edits, _source

__all__ = ["Attempt", "FixResult", "Option", "fix", "write"]


@dataclass(frozen=True)
class Attempt:
    """One patch tried: what it does, its diff, and the check's verdict on the copy."""

    name: str  #: what this step added (each step's patch holds the steps before it too)
    patch: str
    changed_lines: int
    verdict: str
    reproducible: bool
    text: str = field(default="", repr=False)  #: the patched script
    #: the patched local modules the script imports: ``{path relative to its folder: text}``
    modules: dict[str, str] = field(default_factory=dict, repr=False)
    left: str = ""  #: the first difference the patched copy still shows ("" when none)


@dataclass(frozen=True)
class Option:
    """A measured way out when no patch is free: an edit with a cost (one CPU thread),
    checked on a copy of the last patched script; its time per run against that of the
    last patched copy as it was, both measured by running them."""

    name: str
    patch: str  #: the last step's patch with this option's edit added
    verdict: str
    reproducible: bool
    seconds: float | None  #: mean seconds per run with the option (None: not measured)
    baseline: float | None  #: mean seconds per run of the last patched copy without it
    env: dict[str, str] = field(default_factory=dict)  #: the environment it runs with (a device move)

    def cost(self) -> str:
        if self.seconds is None or not self.baseline:
            return "time per run not measured (a run stopped early or failed)"
        return f"{self.seconds:.1f} s per run instead of {self.baseline:.1f} s ({self.seconds / self.baseline:.2f}x)"


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
    #: with no verified patch: the options measured, the best first (:func:`_options`)
    options: list[Option] = field(default_factory=list)
    #: the op that has no deterministic kernel here (it raised under the switch), then the catalog's lines on it
    blocked: list[str] = field(default_factory=list)

    @property
    def fixed(self) -> Attempt | None:
        return next((a for a in self.attempts if a.reproducible), None)

    @property
    def needed(self) -> bool:
        return bool(self.cause)

    def __bool__(self) -> bool:
        return not self.needed or self.fixed is not None

    def steps(self) -> list[str]:
        """A line per step: what it added and what the check said of the copy then."""
        return [
            f"step {i}: {a.name}: "
            + ("REPRODUCIBLE" if a.reproducible else f"still differs: {a.left}" if a.left else a.verdict)
            for i, a in enumerate(self.attempts, 1)
        ]

    def report(self) -> str:
        from ..compare import escape_control

        if not self.needed:
            lines = [f"NOTHING TO FIX: {self.before}"]
        elif self.fixed is not None:
            a = self.fixed
            lines = [
                f"FIXED (verified): with the patch below ({len(self.attempts)} step(s); {a.changed_lines} changed "
                f"line(s)), fwd9m check says: {a.verdict}",
                "",
                f"Before: {self.before}",
                f"  first difference: {self.cause}",
                "",
                *self.steps(),
                "",
                "The patch (fwd9m fix -o fix.patch saves it; --write applies it to your file):",
                *a.patch.rstrip("\n").splitlines(),
            ]
        else:
            lines = self._unfixed_lines()
        return "\n".join(escape_control(line) for line in lines)

    def _unfixed_lines(self) -> list[str]:
        """No verified patch: the steps and what each left; the op that has no
        deterministic kernel here (with the catalog's lines on it) when the switch raised
        on one; the best measured option with its cost and patch, then the others."""
        if self.blocked:
            op, *catalog = self.blocked
            head = [
                f"NO PATCH POSSIBLE: {op} has no deterministic implementation on this device: under the "
                "deterministic switch the patch turns on (torch.use_deterministic_algorithms(True)) it raises.",
                *catalog,
            ]
        else:
            head = [f"NO VERIFIED FIX: after {len(self.attempts)} step(s) the patched copy still differs."]
        lines = [*head, "", f"Before: {self.before}", f"  first difference: {self.cause}", "", *self.steps(), ""]
        if not self.blocked:
            lines.append(
                "Left: what the last step still shows has no edit fwd9m fix makes (an op without a deterministic "
                "kernel on this device, a source outside the script and its local modules)."
            )
        lines += self._options_lines()
        return [*lines, f"Next: fwd9m debug {self.target} (finds the first op that differs and why)"]

    def _options_lines(self) -> list[str]:
        """The best measured option (a REPRODUCIBLE one, the cheapest), with its cost
        and its patch, then the others; each measured by fwd9m check on a copy."""
        if not self.options:
            return []
        best, *rest = self.options
        if not best.reproducible:
            return [
                "No measured option made the runs agree either:",
                *(f"  - {o.name}: {o.verdict}" for o in self.options),
                "",
            ]
        run = f" (run it with {' '.join(f'{k}={v}' for k, v in best.env.items())})" if best.env else ""
        return [
            f"Best measured option: {best.name}: fwd9m check says REPRODUCIBLE; cost: {best.cost()}.",
            f"Its patch{run}, not applied by --write (which applies only a verified fix without such a cost):",
            *best.patch.rstrip("\n").splitlines(),
            *(f"Also measured: {o.name}: {o.verdict}; {o.cost()}" for o in rest),
            "",
        ]

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
            "steps": self.steps(),
            "attempts": [{k: v for k, v in a.__dict__.items() if k not in ("text", "modules")} for a in self.attempts],
            "no_deterministic_kernel": self.blocked[0] if self.blocked else None,
            "catalog": self.blocked[1:],
            "options": [{**o.__dict__, "cost": o.cost()} for o in self.options],
        }


def _module_edits(script: Path, tree: ast.AST, seed: int) -> dict[str, str]:
    """``{relative path: patched text}`` of the local modules whose seeds come from the
    clock or ``hash()``, or that make generators without a seed."""
    out = {}
    from ..lint._imports import local_modules

    for rel, f in local_modules(script, tree).items():
        try:
            text = _source.read(f)[0]
            sub = ast.parse(text)
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
            continue
        edits = (
            _edits.fixed_clock_seeds(text, sub, seed)
            + _edits.clock_seed_variables(text, sub, seed)
            + _edits.seeded_generators(text, sub, seed)
        )
        hashed = _edits.hash_seeds(text, sub, seed)
        if hashed and not _edits.imports_fwd9m(sub):
            hashed += _edits.after_imports(text, sub, "import fwd9m\n")
        edits += hashed
        if edits:
            out[rel] = _edits.apply(text, edits)
    return out


#: at most this many steps, each adding one group of edits to the patch before it
MAX_STEPS = 4


@dataclass(frozen=True)
class _Group:
    """Edits that remove one kind of source: what they do, the script's edits, the local
    modules' patched texts, and words that, in what a check still finds, point at them."""

    what: str
    edits: list[_edits.Edit]
    modules: dict[str, str] = field(default_factory=dict)
    hints: tuple[str, ...] = ()


def _line(source: str, offset: int) -> int:
    return source.count("\n", 0, offset) + 1


def _groups(script: Path, source: str, seed: int) -> list[_Group]:
    """The groups that apply to ``script``, in the order they are tried when nothing
    points at one: the seeding call (with the clock seeds it would be undone by), the
    sets iterated in order, the generators without a seed, the local modules, the
    DataLoader workers."""
    tree = ast.parse(source)
    name = script.name
    clock = _edits.fixed_clock_seeds(source, tree, seed) + _edits.clock_seed_variables(source, tree, seed)
    first = f"fwd9m.enable_determinism(seed={seed}) after the imports"
    if clock:
        first += (
            f", the clock seed at {', '.join(f'{name}:{_line(source, e.start)}' for e in clock)} replaced by {seed}"
        )
    hashed = _edits.hash_seeds(source, tree, seed)
    if hashed:
        where = ", ".join(f"{name}:{_line(source, e.start)}" for e in hashed)
        first += f", the hash() seed at {where} made with fwd9m.derive_seed({seed}, ...)"
    out = [_Group(first, _edits.enable_after_imports(source, tree, seed) + clock + hashed)]
    sets = _edits.sorted_sets(source, tree)
    if sets:
        where = ", ".join(f"{name}:{_line(source, e.start)}" for e in sets)
        out.append(_Group(f"sorted() over the set at {where}", sets, hints=("hash", "pythonhashseed")))
    gens = _edits.seeded_generators(source, tree, seed)
    if gens:
        where = ", ".join(f"{name}:{_line(source, e.start)}" for e in gens)
        out.append(_Group(f"the generator at {where} given seed {seed}", gens, hints=("generator", "rng")))
    modules = _module_edits(script, tree, seed)
    if modules:
        what = f"seeds from the clock or the OS fixed in {', '.join(modules)}"
        out.append(_Group(what, [], modules, hints=tuple(modules)))
    workers = _edits.worker_seeding(source, tree)
    if workers:
        out.append(_Group("DataLoader workers seeded (worker_init_fn)", workers, hints=("worker",)))
    return out


def _next_group(groups: list[_Group], left: str) -> _Group:
    """The group that what a check still finds (``left``, lowercase) points at, else the
    first one left."""
    import re

    return next((g for g in groups if any(re.search(rf"\b{re.escape(h.lower())}", left) for h in g.hints)), groups[0])


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
    target.write_bytes(text.encode(_encoding(there / parts[-1])))


def _encoding(path: Path) -> str:
    """The encoding ``path`` is read in (:func:`_source.read`; UTF-8 when it cannot be
    read), so a patched copy is written the way Python will read it."""
    try:
        return _source.read(path)[1]
    except (OSError, SyntaxError, UnicodeDecodeError):
        return "utf-8"


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
        (copy / script.name).write_bytes(text.encode(_encoding(script)))
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
) -> tuple[bool, str, str, str]:
    """Whether ``script`` patched to ``text`` (and its local ``modules``) is reproducible,
    the check's verdict (naming the script as the user does), the first difference it
    still finds and every word of its findings and possible causes (which group to add
    next), run from the copy's folder when the user runs the script from its own folder."""
    with _patched_copy(script, text, modules) as copy:
        same_folder = Path.cwd().resolve() == script.parent.resolve()
        with _cwd(copy.parent if same_folder else None):
            result = check(copy.name if same_folder else str(copy), list(args))
        ranked = result.ranked()
        first = ranked[0].summary if ranked else ""
        words = " ".join([*(f.summary for f in ranked), *result.causes])
        words += " hash" if getattr(result, "hash_seed_suspect", False) else ""
        name = str(script)
        return bool(result), result.verdict().replace(str(copy), name), first.replace(str(copy), name), words


def fix(
    target: str,
    args: Sequence[str] = (),
    *,
    seed: int | None = None,
    progress: Callable[[str], None] | None = None,
    **check_options: Any,
) -> FixResult:
    """Check ``target``; when it is not reproducible, patch a copy step by step (at most
    :data:`MAX_STEPS`, each adding the edits that what the copy still shows points at),
    each step verified by a check, and return what each step did.
    ``check_options`` go to :func:`fwd9m.check.check_script` (``timeout``, ``env``...).

    Raises:
        RunError: the script is missing, not Python, or the check has no verdict.
    """
    from ..check import check_script
    from ..errors import RunError

    say = progress or (lambda _: None)
    script = Path(target)
    try:
        source = _source.read(script)[0]
        ast.parse(source)
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError) as exc:
        raise RunError(f"cannot fix {target}: {exc}") from None
    digest = hashlib.sha256(source.encode()).hexdigest()

    def check(path: str, argv: list[str], **more: Any) -> Any:
        return check_script(path, argv, progress=progress, **{**check_options, **more})

    say(f"checking {target} as it is")
    before = check(target, list(args))
    if before:
        return FixResult(target, before.verdict(), "", [], digest)
    ranked = before.ranked()
    result = FixResult(target, before.verdict(), ranked[0].summary if ranked else "", [], digest)
    words = " ".join([*(f.summary for f in ranked), *before.causes]) + (" hash" * before.hash_seed_suspect)
    _iterate(result, script, source, _seed(source, seed), words, lambda t, m: _verify(script, t, m, args, check), say)
    if result.fixed is None and result.attempts:
        _options(result, script, source, lambda t, m, **kw: _measure(script, t, m, args, check, **kw), say)
    return result


def _measure(
    script: Path, text: str, modules: dict[str, str], args: Sequence[str], check: Callable[..., Any], **options: Any
) -> tuple[bool, str, float | None]:
    """Check ``script`` patched to ``text`` (and ``modules``) with ``options`` for the
    check: whether it is reproducible, its verdict, and the mean seconds of its runs
    (None when one stopped early, failed or timed out: not a whole run)."""
    with _patched_copy(script, text, modules) as copy:
        same_folder = Path.cwd().resolve() == script.parent.resolve()
        with _cwd(copy.parent if same_folder else None):
            result = check(copy.name if same_folder else str(copy), list(args), **options)
        runs = [r for r in result.runs if r.label.startswith("run ")]
        whole = runs and all(r.returncode == 0 and not r.error and not r.timed_out for r in runs)
        seconds = sum(r.seconds for r in runs) / len(runs) if whole else None
        return bool(result), result.verdict().replace(str(copy), str(script)), seconds


#: torch's error when the switch is on and an op has no deterministic kernel
_NO_KERNEL = re.compile(r"(\w+) does not have a deterministic implementation")


def _device() -> str:
    """This machine's device for the catalog: ``gpu`` when an NVIDIA GPU is visible."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return "gpu" if shutil.which("nvidia-smi") and visible not in ("", "-1") else "cpu"


def _no_kernel(verdict: str) -> tuple[str, list[str]]:
    """The op the switch raised on in the patched copy (torch's message), and what the
    catalog says of it for this device and torch version: its entries that raise under
    the switch, and their replacement ops."""
    found = _NO_KERNEL.search(verdict)
    if found is None:
        return "", []
    op, lines = found.group(1), []
    try:
        from ..catalog import for_op, installed_version

        entries = for_op("torch", f"aten::{op}", installed_version("torch"), _device())
    except Exception:  # noqa: BLE001 - no catalog line: the op is still named
        entries = []
    for e in (e for e in entries if e.behaviour == "raises"):
        when = f" ({e.condition})" if e.condition else ""
        lines.append(f"catalog {e.id}{when}: {' '.join(e.summary.split())}")
        lines += [f"  replacement (an edit of your op, not measured): {x.text} {x.code}" for x in e.solutions]
    return op, lines


#: the switch the first step inserts, and its warn-only form (an op without a
#: deterministic kernel then warns instead of raising)
_SWITCH = re.compile(r"(fwd9m\.enable_determinism\(seed=\d+)\)")


def _options(
    result: FixResult,
    script: Path,
    source: str,
    measure: Callable[..., tuple[bool, str, float | None]],
    say: Callable[[str], None],
) -> None:
    """No verified patch: say which op has no deterministic kernel (it raised under the
    switch: the catalog's entries for it), and measure the ways out that cost time, each
    checked on a copy: one CPU thread for PyTorch (with the switch in warn-only mode when
    it raised), the CPU instead of the GPU; and the time per run without them (the
    patched copy run to the end). ``result.options`` gets them, a REPRODUCIBLE one first,
    the cheapest of those first."""
    last = result.attempts[-1]
    op, catalog = _no_kernel(last.verdict)
    base = last.text
    if op:
        result.blocked.extend([op, *catalog])
        base = _SWITCH.sub(r"\1, warn_only=True)", base)
    threads = _edits.one_thread(base, ast.parse(base))
    tried: list[tuple[str, str, dict[str, str]]] = []
    if threads:
        name = "one CPU thread (torch.set_num_threads(1))" + (", the switch in warn-only mode" if op else "")
        tried.append((name, _edits.apply(base, threads), {}))
    if _device() == "gpu":
        tried.append(
            ("the CPU instead of the GPU (run with CUDA_VISIBLE_DEVICES=)", base, {"CUDA_VISIBLE_DEVICES": ""})
        )
    if not tried:
        return
    say(f"no patch verified: measuring {', '.join(t[0] for t in tried)} on a copy, and what each costs")
    baseline = None
    for name, text, env in tried:
        ok, verdict, seconds = _measured(measure, text, last.modules, env)
        if ok and baseline is None:
            baseline = _measured(measure, base, last.modules, {}, early_stop=False)[2]
        diffs = [_diff(script.name, source, text), *(_diff(r, o, t) for r, (o, t) in _originals(script, last).items())]
        result.options.append(Option(name, "".join(d for d, _ in diffs), verdict, ok, seconds, None, env))
    result.options[:] = [dataclasses.replace(o, baseline=baseline) for o in result.options]
    result.options.sort(key=lambda o: (not o.reproducible, o.seconds or float("inf")))


def _measured(
    measure: Callable[..., tuple[bool, str, float | None]],
    text: str,
    modules: dict[str, str],
    env: dict[str, str],
    **options: Any,
) -> tuple[bool, str, float | None]:
    """:func:`_measure` without the hash-seed runs; a run error is a verdict too."""
    from ..errors import RunError

    try:
        return measure(text, modules, hashseed_check=False, env=env, **options)
    except RunError as exc:
        return False, f"no verdict: {str(exc).splitlines()[0]}", None


def _originals(script: Path, attempt: Attempt) -> dict[str, tuple[str, str]]:
    """``{relative path: (original text, patched text)}`` of the local modules ``attempt`` patches."""
    return {rel: (_source.read(script.parent / rel)[0], text) for rel, text in attempt.modules.items()}


def _iterate(
    result: FixResult,
    script: Path,
    source: str,
    seed: int,
    words: str,
    verify: Callable[[str, dict[str, str]], tuple[bool, str, str, str]],
    say: Callable[[str], None],
) -> None:
    """Up to :data:`MAX_STEPS` steps, each adding the group of edits that what the script
    (then the copy) still shows points at (``words``), else the next in :func:`_groups`'
    order (the seeding call first); each step's patch is checked on a copy and recorded
    in ``result.attempts``, until one is reproducible. A script whose only source is the
    string-hash order gets ``sorted()`` alone, no seeding call."""
    from ..errors import RunError

    groups = _groups(script, source, seed)
    edits: list[_edits.Edit] = []
    modules: dict[str, str] = {}
    originals: dict[str, str] = {}
    for step in range(1, MAX_STEPS + 1):
        if not groups:
            break
        group = _next_group(groups, words.lower())
        groups.remove(group)
        edits, modules = edits + group.edits, {**modules, **group.modules}
        for rel in group.modules:
            originals[rel] = _source.read(script.parent / rel)[0]
            result.module_digests[rel] = hashlib.sha256(originals[rel].encode()).hexdigest()
        text = _edits.apply(source, edits)
        say(f"step {step}: {group.what}; checking the patched copy")
        try:
            ok, verdict, left, words = verify(text, modules)
        except RunError as exc:  # the patch broke the script (a kernel with no deterministic version)
            ok, verdict, left, words = False, f"the patched copy gave no verdict: {_gist(exc)}", "", ""
        diffs = [_diff(script.name, source, text), *(_diff(r, originals[r], t) for r, t in modules.items())]
        patch, changed = "".join(d for d, _ in diffs), sum(n for _, n in diffs)
        result.attempts.append(Attempt(group.what, patch, changed, verdict, ok, text, dict(modules), left))
        if ok or not left:
            break


def _gist(exc: Exception) -> str:
    """A run error in one line: what failed and the error it ended with (the last line
    of its traceback), without the traceback."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if len(lines) < 2:
        return lines[0] if lines else type(exc).__name__
    return f"{lines[0].split(', so there is nothing')[0]}: {lines[-1]}"


def _seed(source: str, seed: int | None) -> int:
    """The seed a patch uses: ``seed``, else the script's own, else 0."""
    if seed is not None:
        return seed
    own = _edits.script_seed(ast.parse(source))
    return 0 if own is None else own


def write(result: FixResult) -> Path:
    """Apply the verified patch to the user's script (and the local modules it patches),
    each file atomically, keeping its mode, its encoding (a BOM too) and its line endings.

    Raises:
        RunError: no verified patch, or a file changed since it was checked.
    """
    from ..errors import RunError

    fixed = result.fixed
    if fixed is None:
        raise RunError("no verified patch to write")
    script = Path(result.target)
    files = [(script, fixed.text, result.digest)]
    files += [(script.parent / r, t, result.module_digests.get(r)) for r, t in fixed.modules.items()]
    out = []
    for path, text, digest in files:
        source, encoding = _source.read(path)
        if digest is not None and hashlib.sha256(source.encode()).hexdigest() != digest:
            raise RunError(f"{shown(path)} changed since it was checked: not written (run fwd9m fix again)")
        out.append((path.resolve(), text.encode(encoding)))  # through a link: its target
    _replace_all(out)
    return script


def _replace_all(files: list[tuple[Path, bytes]]) -> None:
    """Write every ``(path, data)`` to a temporary file of its own beside it first (each
    keeping its file's mode), then replace the files one after the other while Ctrl-C
    and SIGTERM wait: an interruption leaves either no file or every file patched, and
    no temporary file behind."""
    from .._runtime.lease import shielded

    for path, _ in files:
        if not path.is_file() or not os.access(path.parent, os.W_OK):
            raise OSError(f"{shown(path)} is not a file fwd9m can replace: nothing was written")
    temps: list[tuple[Path, Path]] = []
    try:
        for path, data in files:
            fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".fwd9m-fix.tmp")
            temps.append((Path(name), path))
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.chmod(name, path.stat().st_mode & 0o7777)
        with shielded():
            for tmp, path in temps:
                os.replace(tmp, path)
    finally:
        for tmp, _ in temps:
            tmp.unlink(missing_ok=True)
