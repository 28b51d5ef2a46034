"""Whole-program checks: :func:`check_script` runs a script, module or command several
times, each in a fresh interpreter, and compares the runs."""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._hashseed import MAX_RUNS, experiment
from .._log import logger
from .._runtime import isolation, lease
from .._runtime.workdir import Guard
from ..errors import RunError
from . import _parallel
from ._lockstep import Divergence
from ._process import _execute, _Run, _run_notes, clock_gap
from ._result import CheckResult, Draft, RunInfo
from ._runs import _compare_runs, _finding_key, _settle_hash_seed


@dataclass(frozen=True)
class Variant:
    """One changed setting for a ``--vary`` run: an environment variable, the shorthand
    ``threads`` (``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``, ``OPENBLAS_NUM_THREADS`` and
    TensorFlow's ``TF_NUM_INTRAOP_THREADS``, read at start-up by
    tensorflow/core/common_runtime/process_util.cc,
    https://github.com/tensorflow/tensorflow/blob/master/tensorflow/core/common_runtime/process_util.cc;
    the name is present in the installed TF 2.21 ``libtensorflow_framework.so.2``), or a
    script argument (a name starting with ``-``)."""

    name: str
    value: str

    @property
    def label(self) -> str:
        return f"{self.name}={self.value}"

    def env(self) -> dict[str, str]:
        if self.name == "threads":
            return {
                k: self.value
                for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TF_NUM_INTRAOP_THREADS")
            }
        if self.name.startswith("-"):
            return {}
        return {self.name: self.value}

    def argv(self, args: Sequence[str]) -> list[str]:
        """``args`` with this option set to this value (replaced, or appended)."""
        if not self.name.startswith("-"):
            return list(args)
        out, i, done = [], 0, False
        args = list(args)
        while i < len(args):
            a = args[i]
            if a == self.name and i + 1 < len(args):
                out += [a, self.value]
                i, done = i + 2, True
                continue
            if a.startswith(self.name + "="):
                out.append(f"{self.name}={self.value}")
                i, done = i + 1, True
                continue
            out.append(a)
            i += 1
        return out if done else out + [self.name, self.value]


def parse_vary(specs: Sequence[str]) -> list[Variant]:
    """``["OMP_NUM_THREADS=1,4", "--batch-size=32,64"]`` -> one :class:`Variant` per value.

    Raises:
        ConfigurationError: a spec without ``=`` or without values.
    """
    from ..errors import ConfigurationError

    out = []
    for spec in specs:
        name, sep, values = spec.partition("=")
        vals = [v for v in values.split(",") if v != ""]
        if not sep or not name or not vals:
            raise ConfigurationError(
                f"--vary {spec!r}: expected NAME=V1,V2 (an environment variable, "
                f"'threads', or a script option such as --vary=--batch-size=32,64)"
            )
        if name == "threads" and not all(v.isdigit() and int(v) > 0 for v in vals):
            raise ConfigurationError(
                f"--vary {spec!r}: thread counts must be positive integers, for example --vary threads=1,4"
            )
        out += [Variant(name, v) for v in vals]
    return out


def _launch_command(target: str, args: Sequence[str], mode: str, seed: int, python: str) -> list[str]:
    if mode == "command":
        exe = shutil.which(target)
        if exe is None:
            raise RunError(f"command not found: {target}")
        return [target, *args]
    module = mode == "module"
    if mode.startswith("enable"):
        module = mode == "enable-module"
        return [python, "-m", "fwd9m", "run", "--seed", str(seed), *(["-m"] if module else []), target, *args]
    return [python, "-m", "fwd9m._runtime.capture", *(["-m"] if module else []), target, *args]


def check_script(
    target: str,
    args: Sequence[str] = (),
    *,
    module: bool = False,
    command: bool = False,
    runs: int = 2,
    seed: int = 0,
    timeout: float | None = None,
    env: dict[str, str] | None = None,
    enable: bool = False,
    vary: Sequence[Variant] = (),
    cwd: str = "isolate",
    keep: bool = False,
    progress: Callable[[str], None] | None = None,
    python: str | None = None,
    hashseed_check: bool = True,
    strict: bool = False,
    early_stop: bool = True,
) -> CheckResult:
    """Run ``target`` ``runs`` times (plus once per ``vary`` setting), each in a fresh
    interpreter and its own working directory, and compare what the runs print, write
    and hold at exit.

    Args:
        target: a script path; a module name when ``module``; an executable when
            ``command`` (``args`` are its arguments: ``-- torchrun ... train.py``).
        runs: number of runs under the same settings (>= 2).
        seed: with ``enable``, passed to ``fwd9m run --seed``; otherwise unused (the
            script runs exactly as written).
        timeout: seconds per run; the whole process group is killed after it.
        env: extra environment variables for every run.
        enable: launch each run as ``python -m fwd9m run --seed SEED target args``.
        vary: one extra run per :class:`Variant`, compared with run 1.
        cwd: ``"isolate"`` (default: each run sees your directory copy-on-write, where
            the machine allows it, else as ``"link"``), ``"link"`` (see the module
            docstring) or ``"empty"``.
        keep: keep the runs' directories (their path is in the notes).
        progress: called with one-line progress messages (which run, how long).
        python: interpreter for the runs (default: this one).
        hashseed_check: when the runs differ and so did their string-hash seed
            (PYTHONHASHSEED unset), run the controlled experiment of
            :mod:`fwd9m._hashseed` (three more runs, side by side where cores allow:
            seeds 0, 1 and 0 again; a fourth with seed 2 only when the three agree):
            hash order is "confirmed" only when the runs point at it and fwd9m lint
            finds hash-order code in the script, "likely" when only the runs do; "not
            confirmed" when seeds 0-2 agree, ruled out as the only cause when the two
            0-runs differ.
        strict: compare printed output and text files with nothing masked (timings,
            timestamps, addresses, temporary names are compared too); only the runs'
            own folder paths are still rewritten. Otherwise every masked value is listed
            in ``result.ignored`` and the report.
        early_stop: run 2 starts beside run 1 once run 1 imports torch, Keras or JAX (PyTorch
            optimizer steps, Keras ``fit`` batches and JAX steps at ``optax.apply_updates``
            are recorded); both stop at the first training
            step whose loss, parameters, gradients, buffers or optimizer state differ
            (:mod:`fwd9m.check._lockstep`); the result then has one ``step`` finding.
            Not for a ``command``. Without training steps the check is as without it.

    Returns:
        A :class:`CheckResult`. The runs' standard input is closed.

    Raises:
        RunError: the script or module does not exist, or every run failed the same
            way (crashed or timed out), or the runs printed, wrote and held nothing
            fwd9m could compare: there is no verdict.
        ConfigurationError: ``runs < 2``.
    """
    from ..errors import ConfigurationError

    if runs < 2:
        raise ConfigurationError(f"--runs must be at least 2, got {runs}")
    options = CheckOptions(
        module=module,
        command=command,
        runs=runs,
        seed=seed,
        timeout=timeout,
        env=dict(env or {}),
        enable=enable,
        vary=tuple(vary),
        cwd=cwd,
        keep=keep,
        python=python or sys.executable,
        hashseed_check=hashseed_check,
        strict=strict,
        early_stop=early_stop,
    )
    return _check(_resolve(target, tuple(args), options), options, progress or (lambda msg: logger.info(msg)))


@dataclass(frozen=True)
class CheckOptions:
    """How :func:`check_script` runs and compares (its keyword arguments, once)."""

    module: bool = False
    command: bool = False
    runs: int = 2
    seed: int = 0
    timeout: float | None = None
    env: dict[str, str] = field(default_factory=dict)
    enable: bool = False
    vary: tuple[Variant, ...] = ()
    cwd: str | isolation.Isolation = "isolate"  #: an Isolation once chosen (``_check``)
    keep: bool = False
    python: str = sys.executable
    hashseed_check: bool = True
    strict: bool = False
    early_stop: bool = True


@dataclass(frozen=True)
class _Program:
    """What is run: the resolved target, its arguments, how it is launched (``mode``),
    the source file linted for the hints, and the name the report gives it."""

    target: str
    args: tuple[str, ...]
    mode: str  #: script | module | command | enable-script | enable-module
    source: str | None
    display: str
    invocation: Path  #: the user's directory

    def argv(self, o: CheckOptions) -> list[str] | None:
        """What the runs' conditions on sys.argv saw, for the lint hints: known when
        every run had the same (no --vary, no --enable start-up settings)."""
        return None if (o.vary or o.enable or o.command or self.source is None) else [self.source, *self.args]


def _module_source(target: str, invocation: Path) -> str | None:
    """The file of module ``target``, found as ``python -m`` would: the working
    directory first on sys.path."""
    import importlib.util

    from .._runtime.launch import resolve_target

    sys.path.insert(0, str(invocation))
    try:
        resolve_target(target, module=True)
        return getattr(importlib.util.find_spec(target), "origin", None)
    except (ImportError, ValueError):
        return None
    finally:
        sys.path.remove(str(invocation))


def _resolve(target: str, args: tuple[str, ...], o: CheckOptions) -> _Program:
    from .._runtime.launch import resolve_target

    invocation = Path.cwd()
    display = " ".join([*(["-m"] if o.module else ["--"] if o.command else []), target, *args])
    if o.command:
        # the training script a launcher runs (torchrun ... train.py): linted for the hints
        source = next(
            (str(Path(a).resolve()) for a in [target, *args] if a.endswith(".py") and Path(a).is_file()), None
        )
        return _Program(target, args, "command", source, display, invocation)
    if o.module:
        source = _module_source(target, invocation)
    else:
        target = source = str(Path(resolve_target(target)).resolve())
    mode = ("enable-module" if o.module else "enable-script") if o.enable else ("module" if o.module else "script")
    return _Program(target, args, mode, source, display, invocation)


def _plan(prog: _Program, o: CheckOptions) -> list[tuple[str, list[str], dict[str, str], dict[str, str]]]:
    """(label, command line, extra environment, settings) of each run: ``runs`` alike,
    then one per ``vary`` setting."""
    base_cmd = _launch_command(prog.target, prog.args, prog.mode, o.seed, o.python)
    plan: list[tuple[str, list[str], dict[str, str], dict[str, str]]] = [
        (f"run {i + 1}", base_cmd, {}, {}) for i in range(o.runs)
    ]
    for v in o.vary:
        cmd = base_cmd[: len(base_cmd) - len(prog.args)] + v.argv(prog.args)
        plan.append((f"run with {v.label}", cmd, v.env(), {v.name: v.value}))
    return plan


def _new_run(root: Path, k: int, label: str, cmd: list[str], settings: dict[str, str]) -> _Run:
    d = root / f"run{k + 1}"
    return _Run(RunInfo(label, list(cmd), settings), d, d / "cwd", d / "stdout")


def _run_all(
    prog: _Program, o: CheckOptions, root: Path, guard: Guard | None, say: Callable[[str], None]
) -> tuple[list[_Run], Divergence | None]:
    """Every run of the plan; runs 1 and 2 side by side first (the early stop), and the
    :class:`~fwd9m.check._lockstep.Divergence` where they stopped (None: all ran)."""
    site = prog.mode not in ("script", "module")  # other interpreters: capture in each (start-up hook)
    plan = _plan(prog, o)
    done: list[_Run] = []
    if o.early_stop and prog.mode != "command":
        done, found = _side_by_side(prog, o, root, guard, say, plan, site)
        if found is not None:
            return done, found
    ended = time.monotonic()  # runs 1 and 2 side by side, if any, ended by now
    for k, (label, cmd, extra_env, settings) in enumerate(plan[len(done) :], start=len(done)):
        run = _new_run(root, k, label, cmd, settings)
        env = {**o.env, **extra_env, **_steps_env(prog, run)}
        if done:  # a seed read from the clock in seconds: read in another second by each run
            time.sleep(clock_gap(ended, done[-1].info.seconds))
        _execute(run, prog.invocation, o.cwd, env, site, o.timeout, f"{k + 1}/{len(plan)}", say, guard)
        ended = time.monotonic()
        done.append(run)
    if o.timeout is not None and all(r.info.timed_out for r in done):
        raise RunError(
            f"every run of {prog.display} timed out (--timeout {o.timeout:g} s); raise --timeout "
            f"or check the script for a hang (the whole process group was killed)"
        )
    return done, None


def _steps_env(prog: _Program, run: _Run) -> dict[str, str]:
    """Every run but a command's records its steps, as runs 1 and 2 side by side do, so
    that all runs are alike: a step callback without a file of its own
    (``StepDigests()``) writes there instead of stopping the script with an error."""
    from ..steps._session import ENV_CHECK

    if prog.mode == "command":
        return {}
    folder = run.root / "steps"
    folder.mkdir(parents=True, exist_ok=True)
    return {ENV_CHECK: str(folder)}


def _side_by_side(
    prog: _Program, o: CheckOptions, root: Path, guard: Guard | None, say: Callable[[str], None], plan, site: bool
) -> tuple[list[_Run], Divergence | None]:
    """Runs 1 and 2 side by side (:func:`~fwd9m.check._lockstep.run_pair`): both, and
    where they diverged; no runs when their outcome is in doubt (they run again one
    after the other)."""
    from ._lockstep import doubt, run_pair

    pair = [_new_run(root / "side-by-side", k, plan[k][0], plan[k][1], plan[k][3]) for k in (0, 1)]
    which = [f"{k + 1}/{len(plan)}" for k in (0, 1)]
    clock = _clock_seed(prog, o)
    when = f"records its first training step ({clock})" if clock else "imports torch, Keras or JAX"
    say(
        f"early stop: run 2 starts beside run 1 once run 1 {when} (in lock step, one training step at a time "
        "each, where the two runs' threads do not fit the cores together), and both stop at the first training "
        "step that differs; a script that "
        "imports none runs one after the other (--no-early-stop: always one after the other, to the end)"
    )
    envs = [{**o.env, **plan[k][2]} for k in (0, 1)]
    found, overlapped = run_pair(
        pair,
        prog.invocation,
        o.cwd,
        envs,
        site,
        o.timeout,
        which,
        say,
        guard,
        prog.display,
        at_import=not clock,
        parallel=lambda module: _parallel.for_runs(_parallel.frameworks_of(module), {**os.environ, **o.env}),
    )
    reason = doubt(pair, found is not None) if overlapped else None
    if reason is None:
        return pair, found
    say(f"run 1 and run 2 ran side by side, but {reason}: running them again one after the other")
    return [], None


#: clock reads made in C, which :mod:`fwd9m._runtime.clock` does not move in each run
_UNMOVED_CLOCKS = ("datetime", "date.today", ".now(", ".utcnow(", ".today(")


def _unmoved_clock(hit: dict[str, Any]) -> bool:
    """Whether a FWD104 finding's seed may come from a clock read in C (its message, its
    line or the line it says the seed was set on names one); True when the file cannot be
    read (the run waits, as it always did)."""
    import re

    lines = [int(hit["line"]), *map(int, re.findall(r"on line (\d+)", hit["message"]))]
    try:
        source = Path(hit["path"]).read_text(encoding="utf-8", errors="replace").splitlines()
    except (OSError, ValueError):
        return True
    text = " ".join([hit["message"], *(source[n - 1] for n in lines if 0 < n <= len(source))])
    return any(c in text for c in _UNMOVED_CLOCKS)


def _clock_seed(prog: _Program, o: CheckOptions) -> str | None:
    """Where the script (or a local module it imports) seeds from a clock that each run
    does not read moved (``datetime.now()``: fwd9m lint FWD104), said for the progress
    line; None when it does not. Two runs started together could read the same second of
    such a seed and agree by chance: such a script's run 2 starts only once run 1 has
    trained a step. A seed from ``time.time()`` needs no wait: each run reads that clock
    moved by its own shift (:mod:`fwd9m._runtime.clock`)."""
    from .._lint_hints import findings

    hits = [f for f in findings(prog.source, None, argv=prog.argv(o)) if f["code"] == "FWD104" and _unmoved_clock(f)]
    if not hits:
        return None
    return f"the seed comes from the clock: {hits[0]['path']}:{hits[0]['line']} FWD104"


def _hash_seed_runs(
    result: Draft[CheckResult],
    prog: _Program,
    o: CheckOptions,
    root: Path,
    guard: Guard | None,
    say: Callable[[str], None],
) -> None:
    """The controlled hash-seed experiment (:mod:`fwd9m._hashseed`) on reruns of the
    script, side by side where the machine's cores allow (:func:`_side_by_side_width`)."""
    from ._process import _execute_together

    base_cmd = _launch_command(prog.target, prog.args, prog.mode, o.seed, o.python)
    site = prog.mode not in ("script", "module")
    argv = prog.argv(o)
    known_env = None if argv is None else {**os.environ, **o.env}
    moved: set[str] = set()

    def new(seed: int, k: int) -> tuple[_Run, dict[str, str], str]:
        d = root / f"hashseed{k}"
        label = f"PYTHONHASHSEED={seed} run {k}"
        run = _Run(RunInfo(label, list(base_cmd), {"PYTHONHASHSEED": str(seed)}), d, d / "cwd", d / "stdout")
        env = {**o.env, "PYTHONHASHSEED": str(seed), **_steps_env(prog, run)}
        return run, env, f"{k}/{MAX_RUNS} at most"

    def hash_run(seed: int, k: int) -> _Run:
        run, env, which = new(seed, k)
        _execute(run, prog.invocation, o.cwd, env, site, o.timeout, which, say, guard)
        return run

    def together(plan: list[tuple[int, int]]) -> list[_Run]:
        items = [new(seed, k) for seed, k in plan]
        width = _side_by_side_width(o)
        if width > 1:
            say(f"{min(width, len(items))} of these runs at a time, side by side ({_cores()} cores)")
        for i in range(0, len(items), width):
            _execute_together(items[i : i + width], prog.invocation, o.cwd, site, o.timeout, say, guard)
        return [run for run, _, _ in items]

    def agree(a: _Run, b: _Run) -> bool:
        found = _compare_runs(prog.display, [a, b], prog.source, o.command, o.strict).findings
        if a.info.settings != b.info.settings and not moved:  # where another seed's run differs
            moved.update(_finding_key(f) for f in found)
        return not found

    outcome = experiment(
        hash_run,
        agree,
        script=prog.source,
        target=prog.display,
        progress=say,
        errors=(RunError,),
        argv=argv,
        env=known_env,
        together=together,
    )
    _settle_hash_seed(result, outcome, moved, prog.source, argv=argv, env=known_env)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _side_by_side_width(o: CheckOptions) -> int:
    """How many runs may run at once: one per usable core, at most three; one at a time
    when the runs see your directory through links (each could see what the other
    writes there)."""
    if not isinstance(o.cwd, isolation.Isolation) and o.cwd != "empty":
        return 1
    return max(1, min(3, _cores()))


def _check(prog: _Program, o: CheckOptions, say: Callable[[str], None]) -> CheckResult:
    lease.recover(say)
    root, guard = Path(tempfile.mkdtemp(prefix="fwd9m-check-")), None
    try:  # from here on, every way out (SIGTERM too) goes through lease.finish
        lease.claim(root)
        mode = isolation.choose(o.cwd, prog.invocation, prog.source, str(root), say)
        o = dataclasses.replace(o, cwd=mode)
        # a copy of your files first, so that what a run writes into them through its links is undone
        guard = Guard.make(prog.invocation, root / "backup") if mode == "link" else None
        done, found = _run_all(prog, o, root, guard, say)
        argv = prog.argv(o)
        known_env = None if argv is None else {**os.environ, **o.env}
        if found is not None:
            from ._lockstep import early_result

            seeded = "PYTHONHASHSEED" in {**os.environ, **o.env}
            result = early_result(prog.display, done, found, prog.source, argv, known_env, seeded)
        else:
            result = _compare_runs(prog.display, done, prog.source, o.command, o.strict, argv=argv, env=known_env)
            _no_step_note(result, prog, o, done)
        result.notes[:0] = _run_notes(done, prog.display, guard)
        if o.strict:
            result.notes.append(
                "--strict: printed output and text files were compared with nothing masked "
                "(timings, rates, timestamps, addresses and temporary names too)"
            )
        if o.hashseed_check and result.hash_seed_suspect:
            _hash_seed_runs(result, prog, o, root, guard, say)
        elif result.hash_seed_suspect:
            _hash_seed_untested(result)
        if o.enable and not result:
            _enable_did_not_fix(result)
        if o.keep:
            result.notes.append(f"run directories kept in {root}")
        return result.freeze()
    finally:
        lease.finish(root, guard, o.keep, say)


def _no_step_note(result: Draft[CheckResult], prog: _Program, o: CheckOptions, done: list[_Run]) -> None:
    """A JAX script whose runs recorded no training step: say that only their end states
    were compared (no step boundary: no jitted function returned what one of its
    arguments is, and optax.apply_updates was not called)."""
    import re

    if not o.early_stop or prog.mode == "command" or prog.source is None:
        return
    if any(next((run.root / "steps").glob("steps-*"), None) for run in done):
        return
    try:
        text = Path(prog.source).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return
    if re.search(r"^\s*(import\b[^\n#]*\bjax\b|from jax\b)", text, re.M):
        result.notes.append(
            "no JAX training step was recorded (no jitted function returned what one of its arguments is, the "
            "weights, and optax.apply_updates was not called: an eager loop), so the runs were compared at their "
            f"end only, not step by step; fwd9m debug {prog.display} finds the first op that differs"
        )


def _enable_did_not_fix(result) -> None:
    """Under ``--enable`` (``fwd9m run`` settings) the runs still differ: say that no
    launcher setting reaches what remains, and point at the script's own lines when
    fwd9m lint flags some (a generator the script creates, a seed drawn from the clock)."""
    lines = [e for e in result.catalog if e.get("kind") == "lint"]
    where = (
        f"; change the line{'s' if len(lines) > 1 else ''} fwd9m lint points at: "
        + ", ".join(e["title"].removeprefix("in your code: ").split(" ", 1)[0] for e in lines[:3])
        if lines
        else "; find the first op or input that differs with fwd9m debug --enable"
    )
    result.causes.insert(
        0,
        "the runs still differ with every fwd9m run setting switched on (--enable): "
        "what remains is something no launcher setting reaches, such as a generator "
        "the script creates or seeds itself, a seed taken from the clock, or an op "
        "that has no deterministic implementation" + where,
    )


def _hash_seed_untested(result) -> None:
    """``--no-hashseed-check`` with a hash seed that differed: the hash seed is one
    possibility among others, not the cause; its fix is a next step only when fwd9m lint
    finds hash-order code in the script."""
    from .._lint_hints import HASH_CODES
    from ._runs import _HASH_SEED_STEP

    result.causes = [c for c in result.causes if not c.startswith("PYTHONHASHSEED differed")]
    hash_code = any(e.get("kind") == "lint" and e.get("id", "").startswith(HASH_CODES) for e in result.catalog)
    result.causes.append(
        "PYTHONHASHSEED also differed between the runs; not tested (--no-hashseed-check): it "
        "matters only if the script iterates over a set of strings or hashes them"
        + (", as fwd9m lint finds it does (below)" if hash_code else ", and fwd9m lint finds no such code")
    )
    if not hash_code:
        result.next_steps = [s for s in result.next_steps if s != _HASH_SEED_STEP]
        result.catalog = [
            e for e in result.catalog if e.get("id") not in ("python.hash-seed", "python.set-iteration-order")
        ]
