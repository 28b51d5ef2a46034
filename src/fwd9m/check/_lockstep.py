"""The early stop of ``fwd9m check``: run 1 and run 2 run side by side (or, where two
runs' threads do not fit the cores together, one after the other:
:mod:`fwd9m.check._parallel`), each process writing its training steps' digests
(:data:`fwd9m.steps._session.ENV_CHECK`, the PyTorch optimizer hooks and the step
callbacks); this process compares the two streams as they grow and stops the runs still
running at the first step where a tensor that determines the result differs.

Only :data:`RESULT_GROUPS` stop a run: the parameters before the first update, the loss,
gradients, parameters, buffers and optimizer state, and a JAX step's other outputs
(:mod:`fwd9m.steps._jax`). RNG states, batches and the step
numbers do not (a script may draw different random numbers that never reach its result);
a run with more or fewer steps, a crash, a timeout, a script whose own process records
no step (the processes it starts are not compared: which pairs with which is unknown):
the runs go on to the end and are compared as without the early stop. Side by side, runs
could meet where sequential runs do not (the user's directory through the links of their
folders, a port); so a pair whose runs changed the user's directory, or ended
differently, is not trusted: :func:`doubt` says so and the caller runs them again one
after the other.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .._runtime.isolation import Isolation
from .._runtime.process import kill_group, kill_leftovers
from ..errors import FileFormatError
from ..steps._compare import compare_records
from ..steps._follow import StepFollower
from ..steps._format import StepRecord
from ..steps._session import ENV_CHECK, FRAMEWORK_MARK
from ._gate import Gates
from ._parallel import Parallel
from ._process import CLOCK_GAP_S, STOPPED, Guard, _collect_run, _launch, _Launched, _Run, clock_gap

__all__ = ["RESULT_GROUPS", "Divergence", "doubt", "run_pair"]

#: the step digest groups whose difference stops both runs: what the result is made of
RESULT_GROUPS = ("initial", "loss", "grads", "params", "buffers", "optimizer", "outputs")
#: seconds between the "run 1 at step N, run 2 at step M" progress lines
PROGRESS_S = 10.0
#: seconds between two looks at the runs and their streams
POLL_S = 0.02


@dataclass
class Divergence:
    """The first step whose result tensors differ: ``index`` (the record's position,
    from 0), ``step`` (its number), ``differ`` (``(group, name, meta_1, meta_2)``),
    ``compared`` (digests in that step), ``process`` (who wrote the streams)."""

    index: int
    step: int
    differ: list[tuple[str, str, str, str]]
    compared: int
    process: str
    environment: dict | None = None
    other: list[str] = field(default_factory=list)  #: ``group/name`` that differ there but do not stop a run
    #: who recorded the steps (the stream header's ``source``): ``"auto"`` is one record
    #: per PyTorch ``optimizer.step()``; else the callback or ``step_digest``
    source: str | None = None
    #: run 2 ran after run 1 (which ran to its end) and was stopped alone there
    after: bool = False
    #: the runs ran in lock step (one computing a step at a time, in turn: :mod:`fwd9m.check._gate`)
    lockstep: bool = False


class _Streams:
    """The step stream of one run's own process (``steps-<pid>``; what the processes it
    starts record is not compared: which of them pairs with which is unknown)."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.follower: StepFollower | None = None
        self.records: list[StepRecord] = []
        self.pid: int | None = None  #: the run's process, once started
        self.off: str | None = None  #: why this run's steps are not compared
        self.framework: str | None = None  #: the framework the process started importing
        self.at_import = False  #: whether that import starts run 2 (run 1's stream)
        self.ended: str | None = None  #: how the process ended ("exit 0"), once it did

    def poll(self) -> None:
        if self.off or self.pid is None:
            return
        if self.framework is None:
            mark = self.folder / f"{FRAMEWORK_MARK}{self.pid}"
            if mark.exists():
                self.framework = mark.read_text(encoding="utf-8", errors="replace").strip() or "a framework"
        try:
            if self.follower is None:
                path = self.folder / f"steps-{self.pid}"
                if not path.exists():
                    return
                self.follower = StepFollower(path)
            self.records += self.follower.poll()
        except (OSError, FileFormatError) as exc:
            self.off = f"its step digests could not be read ({exc})"

    @property
    def header(self) -> dict | None:
        return self.follower.header if self.follower is not None else None

    def close(self) -> None:
        if self.follower is not None:
            self.follower.close()


def _first_divergence(a: _Streams, b: _Streams, start: int, display: str) -> tuple[int, Divergence | None]:
    """Compare the records both runs have from ``start`` on; returns the next index to
    compare and the first step whose result tensors differ."""
    if a.off or b.off:
        return start, None
    n = min(len(a.records), len(b.records))
    for i in range(start, n):
        d = compare_records(i, a.records[i], b.records[i])
        stop = [x for x in d.differ if x[0] in RESULT_GROUPS]
        if stop:
            other = [f"{g}/{k}" for g, k, _, _ in d.differ if g not in RESULT_GROUPS]
            header = b.header or {}
            return i, Divergence(
                i,
                b.records[i].step,
                stop,
                d.compared,
                f"{display} (the run's own process: pid {a.pid} in run 1, pid {b.pid} in run 2)",
                header.get("environment"),
                other,
                header.get("source"),
            )
    return n, None


def run_pair(
    runs: list[_Run],
    invocation: Path,
    cwd_mode: str | Isolation,
    envs: list[dict[str, str]],
    site: bool,
    timeout: float | None,
    which: list[str],
    say: Callable[[str], None],
    guard: Guard | None,
    display: str,
    together: bool = False,
    compared: Callable[[int, Divergence | None], None] | None = None,
    at_import: bool = True,
    parallel: Callable[[str | None], Parallel] | None = None,
) -> tuple[Divergence | None, bool]:
    """Run ``runs`` (two) side by side from run 1's first step on, comparing their step
    streams as they grow; at the first step whose result tensors differ both are
    stopped (their ``info.error`` says so). Returns that :class:`Divergence` (None when
    no step differed: each run ran to its end, collected as by
    :func:`~fwd9m.check._process._execute`) and whether the runs overlapped (False: run
    1 recorded no step and ended before run 2 started, as without the early stop).
    ``together``: start both at once (``fwd9m debug``'s digest runs, whose verdict
    the op-level runs give). ``compared(n, found)`` is told, at each look, that the
    first ``n`` steps agree, and the divergence once found (``fwd9m debug``'s op-level
    runs started beside these wait on it). ``at_import``: run 2 may start when run 1
    starts importing a framework (else only at its first step: a seed read from the
    clock before the first step is then read in another second by each run).
    ``parallel(framework)``: whether the runs fit side by side, given the framework run 1
    imports (None: not known yet; :func:`fwd9m.check._parallel.for_runs`); asked once,
    when run 2 would start beside run 1 (with ``together``: before run 1 starts). One
    after the other, run 2 starts when run 1 ended (after
    :func:`~fwd9m.check._process.clock_gap`) and is compared with run 1's whole stream
    as it goes: it stops at the first step that differs (run 1 ran to its end). None:
    side by side; in lock step (:attr:`Parallel.lockstep`), both run, one step at a time
    each in turn (:mod:`fwd9m.check._gate`), and stop together at the first that differs."""
    streams = [_Streams(run.root / "steps") for run in runs]
    streams[0].at_import = at_import
    after_first = _Order(parallel, streams[0], runs, say)
    gates = Gates()

    def launch(k: int) -> _Launched | None:
        folder = streams[k].folder
        folder.mkdir(parents=True)
        env = {**envs[k], ENV_CHECK: str(folder), **gates.env(k, folder, after_first.gated(k))}
        x = _launch(runs[k], invocation, cwd_mode, env, site, which[k], say)
        streams[k].pid = x.proc.pid if x is not None else None
        gates.started(k, folder, streams[k].pid)
        return x

    together = together and not after_first()
    launched: list[_Launched | None] = [launch(0), _after_gap(launch) if together else None]
    collected, stopped = list[int](), list[int]()

    def second() -> _Launched | None:
        x = launched[0]
        ended = x is not None and x.proc.poll() is not None
        say(_why_second(runs, streams[0], ended, after_first.after))
        if x is not None and ended:  # run 1 ended: one after the other
            kill_leftovers(x.proc)
            _collect_run(runs[0], x, invocation, say, guard)  # your files put back before run 2
            collected.append(0)
            time.sleep(clock_gap(x.t0 + runs[0].info.seconds, runs[0].info.seconds))  # a clock seed: another second
        return launch(1)

    try:
        found = _watch(
            runs, launched, streams, timeout, say, display, stopped, second, together, compared, after_first, gates
        )
    except BaseException:
        _kill_all(launched)
        raise
    finally:
        _close(gates, streams)
    if found is not None:
        found.after, found.lockstep = bool(collected), bool(after_first.lockstep)
    for k, (run, x) in enumerate(zip(runs, launched)):
        if x is not None and k not in collected:
            _collect_stopped(run, x, found if k in stopped else None, invocation, say, guard)
    return found, not collected


def _kill_all(launched: list[_Launched | None]) -> None:
    for x in launched:
        if x is not None:
            kill_group(x.proc)


def _close(gates: Gates, streams: list[_Streams]) -> None:
    gates.close()  # a run still waiting goes on (to its end, or to the signal that stops it)
    for s in streams:
        s.close()


def _collect_stopped(
    run: _Run,
    x: _Launched,
    found: Divergence | None,
    invocation: Path,
    say: Callable[[str], None],
    guard: Guard | None,
) -> None:
    """Collect a run of the pair; ``found``: where the early stop stopped it."""
    kill_leftovers(x.proc)
    _collect_run(run, x, invocation, say, guard, f"{STOPPED} at step {found.step}" if found is not None else None)
    if found is not None:
        run.info.returncode = None
        run.info.error = f"{STOPPED} at step {found.step}"


class _Order:
    """Whether run 2 waits for run 1's end (:func:`run_pair`'s ``parallel``): decided once,
    when first asked, and said."""

    def __init__(
        self,
        parallel: Callable[[str | None], Parallel] | None,
        first: _Streams,
        runs: list[_Run],
        say: Callable[[str], None],
    ):
        self.parallel, self.first, self.runs, self.say = parallel, first, runs, say
        self.decided: Parallel | None = None

    def __call__(self) -> bool:
        if self.decided is None:
            self.decided = self.parallel(self.first.framework) if self.parallel is not None else _BESIDE
            if self.parallel is not None:
                self.say(_order_line(self.decided, self.runs))
        return not (self.decided.side_by_side or self.decided.lockstep)

    @property
    def after(self) -> bool:
        """The runs go one after the other (False while undecided)."""
        return self.decided is not None and not (self.decided.side_by_side or self.decided.lockstep)

    def gated(self, k: int) -> bool:
        """Whether run ``k`` starts with a gate: run 1 unless the order is decided and
        not lock step (it is decided when run 2 starts), run 2 in lock step only."""
        return self.lockstep is not False if k == 0 else self.lockstep is True

    @property
    def lockstep(self) -> bool | None:
        """The runs go in lock step (None while undecided)."""
        return None if self.decided is None else self.decided.lockstep


def _after_gap(launch: Callable[[int], _Launched | None]) -> _Launched | None:
    """Run 2 launched :data:`CLOCK_GAP_S` after run 1."""
    time.sleep(CLOCK_GAP_S)
    return launch(1)


def _watch(
    runs: list[_Run],
    launched: list[_Launched | None],
    streams: list[_Streams],
    timeout: float | None,
    say: Callable[[str], None],
    display: str,
    stopped: list[int],
    second: Callable[[], _Launched | None],
    started: bool = False,
    compared: Callable[[int, Divergence | None], None] | None = None,
    after_first: Callable[[], bool] = lambda: False,
    gates: Gates | None = None,
) -> Divergence | None:
    """Until both runs ended or a step differs: poll the processes and the streams;
    ``stopped`` gets the index of each run stopped at the divergence. Run 2 starts
    (``second``) when run 1 starts importing a framework whose steps are recorded
    (:data:`~fwd9m.steps._session.FRAMEWORK_MARK`) or records its first step, or when run
    1 ended: a script that imports none runs one after the other, as without the early
    stop; or, where ``after_first()`` says the runs go one after the other, once run 1
    ended. In lock step, ``gates`` (:class:`~fwd9m.check._gate.Gates`) give the runs
    their turns, and a run's timeout counts only the time it did not wait for one."""
    gates = gates if gates is not None else Gates()
    t0 = time.monotonic()
    beat = t0 + PROGRESS_S
    index = 0
    while True:
        alive = [x for x in launched if x is not None and x.proc.poll() is None]
        for s in streams:  # after the poll: a run that ended has written all its records
            s.poll()
        for s, x in zip(streams, launched):
            if x is not None and x not in alive and s.ended is None:
                s.ended = _ending(x.proc.returncode)
        s = streams[0]
        first = launched[0]
        gap = first is None or time.monotonic() - first.t0 >= CLOCK_GAP_S
        due = s.records or (s.at_import and s.framework and gap) or s.off or first not in alive
        if not started and due and (first not in alive or not after_first()):
            started = True
            launched[1] = second()
            continue
        index, found = _first_divergence(streams[0], streams[1], index, display)
        if compared is not None:
            compared(index, found)
        if found is not None:
            for k, x in enumerate(launched):
                if x in alive:
                    kill_group(x.proc)
                    stopped.append(k)
            say(f"run 1 and run 2 differ at step {found.step}: {'both' if len(stopped) > 1 else 'run 2'} stopped")
            return found
        if not alive and started:
            return None
        _turn(gates, launched, streams, alive, started, getattr(after_first, "lockstep", False))
        for k, (run, x) in enumerate(zip(runs, launched)):
            if x in alive and timeout is not None and time.monotonic() - x.t0 - gates.waited(k) > timeout:
                run.info.timed_out = True
                kill_group(x.proc)
        if time.monotonic() >= beat:
            beat += PROGRESS_S
            say(
                ", ".join(_where(run, s, x) for run, s, x in zip(runs, streams, launched))
                + f" ({time.monotonic() - t0:.0f} s)"
            )
        gates.wait(POLL_S)


def _turn(
    gates: Gates,
    launched: list[_Launched | None],
    streams: list[_Streams],
    alive: list[_Launched],
    started: bool,
    lockstep: bool | None,
) -> None:
    """Give the turn in lock step (:meth:`Gates.turn`); every run free when the runs are
    not in lock step."""
    live: list[bool | None] = []
    for k, (x, s) in enumerate(zip(launched, streams)):
        if k == 1 and not started or lockstep is None:
            live.append(None)
        else:
            live.append(bool(lockstep) and x in alive and not s.off)
    gates.turn([len(s.records) for s in streams], live)


#: the order of runs without a :func:`run_pair` ``parallel``: side by side
_BESIDE = Parallel(True, 0, 0)


def _order_line(p: Parallel, runs: list[_Run]) -> str:
    """The progress line of the decision: ``runs one after the other: 2 threads each on
    2 cores; run 2 is compared with run 1's steps as it goes``."""
    if p.side_by_side:
        return p.describe()
    if p.lockstep:
        return (
            f"{p.describe()}; both start, then compute one training step at a time each in turn, and stop "
            "together at the first that differs"
        )
    return (
        f"{p.describe()}; {runs[1].info.label} starts when {runs[0].info.label} ended, and stops at the "
        f"first training step that differs from {runs[0].info.label}'s"
    )


def _why_second(runs: list[_Run], s: _Streams, ended: bool, after: bool = False) -> str:
    """Why run 2 starts now, and whether beside run 1 or after it (``after``: the runs go
    one after the other, :func:`run_pair`'s ``parallel``)."""
    one, two = runs[0].info.label, runs[1].info.label
    if ended and after:
        steps = f"after {len(s.records)} training step(s)" if s.records else "without recording a training step"
        return f"{one} ended {steps}: {two} starts, compared with {one}'s steps as it goes"
    if ended:
        return (
            f"{one} ended without importing a framework that trains (torch, Keras, JAX) or recording a "
            f"training step: {two} runs after it, as without the early stop"
        )
    if s.records:
        return f"{one} recorded its first training step: {two} starts beside it"
    if s.framework:
        return f"{one} imports {s.framework}: {two} starts beside it"
    return f"{two} starts beside {one} ({one}'s steps are not compared: {s.off})"


def _where(run: _Run, s: _Streams, x: _Launched | None) -> str:
    """Where one run is: not started, ended (how, after how many steps), or running."""
    label = run.info.label
    if x is None:
        return f"{label}: not started"
    steps = f"step {s.records[-1].step}" if s.records else "no training step"
    if s.ended is not None:
        return f"{label}: ended ({s.ended}) at {steps}" if s.records else f"{label}: ended ({s.ended}), {steps}"
    if s.off:
        return f"{label}: running (steps not compared: {s.off})"
    if s.records:
        return f"{label}: at {steps}"
    return f"{label}: {'importing ' + s.framework if s.framework else 'running'}, no training step yet"


def _ending(code: int | None) -> str:
    if code is not None and code < 0:
        return f"signal {-code}"
    return f"exit {code}"


def doubt(runs: list[_Run], diverged: bool) -> str | None:
    """Why runs that ran side by side must run again one after the other (None: their
    outcome stands): they changed the user's directory (through the links of their
    folders: one may have read what the other wrote), or they ended differently (a
    crash or a timeout in one only may come from the other run, such as a port both
    wanted)."""
    if any(r.touched or r.through for r in runs):
        return "they changed files in your directory, where each could see the other's"
    if diverged:
        return None
    a, b = (r.info for r in runs)
    if (a.returncode, a.timed_out, a.error) != (b.returncode, b.timed_out, b.error):
        return "they ended differently, which may come from running side by side"
    return None


def _how(found: Divergence) -> str:
    """How the runs ran to ``found``, for the early stop's note."""
    if found.after:
        return "run 2 ran after run 1 and was stopped"
    if found.lockstep:
        return "run 1 and run 2 ran in lock step (one training step at a time, in turn) and were stopped"
    return "run 1 and run 2 ran side by side and were stopped"


#: tensors named per group in the finding's detail; the rest are counted

_LISTED = 8


def early_result(
    display: str,
    runs: list[_Run],
    found: Divergence,
    source: str | None,
    argv: list[str] | None = None,
    env: dict[str, str] | None = None,
    hash_seed_set: bool = True,
):
    """The :class:`~fwd9m.check.CheckResult` (a draft, frozen by the caller) of runs stopped at ``found``: one ``step``
    finding naming the step, the tensors and the process; the next steps and catalog
    entries as for any difference."""
    from ._hints import _catalog_hints, _debug_args, _debug_can_record, fix_step
    from ._result import CheckResult, Difference, Draft

    groups: dict[str, list[str]] = {}
    for g, name, ma, mb in found.differ:
        groups.setdefault(g, []).append(name if ma == mb else f"{name} ({ma} vs {mb})")
    detail = [f"in {found.process}"]
    for g, names in groups.items():
        more = f", ... and {len(names) - _LISTED} more" if len(names) > _LISTED else ""
        detail.append(f"{g}: {', '.join(names[:_LISTED])}{more}")
    if found.other:
        detail.append(f"also differ there (do not decide the result alone): {', '.join(found.other[:_LISTED])}")
    earlier = f"steps before it agree ({found.index} compared)" if found.index else "the first step recorded"
    summary = (
        f"training step {found.step}: {len(found.differ)} of {found.compared} step digests differ, "
        f"earliest {found.differ[0][0]}/{found.differ[0][1]}; {earlier}"
    )
    result = Draft(
        CheckResult,
        display,
        [r.info for r in runs],
        [Difference("step", "run 2", summary, detail="\n".join(detail))],
        {"training steps": found.index + 1},
        environment=found.environment,
    )
    result.notes.append(
        f"early stop: {_how(found)} at step {found.step}, the first "
        f"step whose {', '.join(groups)} differ; their printed output, files and final state were not "
        f"compared. To run both to the end: fwd9m check --no-early-stop {display}"
    )
    if not hash_seed_set:
        result.notes.append(
            "PYTHONHASHSEED was unset, so the string-hash seed differed between the runs too; "
            f"fwd9m check --no-early-stop {display} tests whether it is the cause"
        )
    result.verify = fix_step(display, False)
    result.coverage = [
        f"training steps: the step digests (weights, gradients, optimizer state, batches) of "
        f"{found.index + 1} step(s), up to the first that differs",
        f"not compared (the early stop ended {'run 2' if found.after else 'both runs'} there): printed output, "
        "files, final state",
    ]
    if _debug_can_record(found.environment):
        result.next_steps.append(f"find the first op that differs: fwd9m debug {_debug_args(display, False)}")
    device = "gpu" if (found.environment or {}).get("gpus") else "cpu"
    result.catalog = _catalog_hints(found.environment, device, source=source, argv=argv, env=env)
    return result
