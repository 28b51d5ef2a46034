"""``fwd9m.debug.debug_script``: record a script twice, each run in a fresh interpreter and
a working folder of its own, compare the two traces and explain the first divergence
(what ``fwd9m debug SCRIPT`` does; the command line only parses and prints).

>>> from fwd9m.debug import DebugOptions, debug_script           # doctest: +SKIP
>>> report = debug_script("train.py", ["--epochs", "1"], DebugOptions(timeout=600))  # doctest: +SKIP
>>> print(report.render())                                       # doctest: +SKIP

Each run is ``python -m fwd9m.debug._child``, in its own session (process group), so that
a timeout or Ctrl-C ends the children the script started too. ``--fast`` records a cheap
module-level pass first and then the ops of the first diverging step only. When the
first divergence is a value made in Python (or the data) and ``PYTHONHASHSEED`` was
unset, the hash-seed experiment of :mod:`fwd9m._hashseed` (shared with ``fwd9m check``)
tells whether string hashing is the cause.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .._frameworks import FRAMEWORKS  # what a run can be recorded for (Keras on its active backend)
from .._log import logger
from .._recording._common import LEVELS, CaptureSpec
from .._runtime.launch import check_output_path
from ..errors import ConfigurationError, RunError
from . import _early
from ._compare import PYTHON_OPS, DebugReport

__all__ = [
    "DebugOptions",
    "debug_script",
    "record_script",
    "parse_steps",
    "check_output_path",
    "kept_traces",
    "cut_traces",
    "FRAMEWORKS",
    "CWD_MODES",
    "RUN_FOLDER",
    "RUN_MARK",
]

#: each run's working folder: links to the current directory's entries, or empty
CWD_MODES = ("isolate", "link", "empty")
#: suffix of the working folder of a run ``fwd9m debug`` records (beside its trace)
RUN_FOLDER = ".files"
#: a file in each such folder, so that a later --keep into the same DIR may replace it
RUN_MARK = ".fwd9m-debug-run"

Say = Callable[[str], None]


def _one_of(name: str, value: object, valid: Sequence[str]) -> None:
    if value not in valid:
        raise ConfigurationError(f"invalid {name} {value!r}; valid values are: {', '.join(valid)}")


def parse_steps(text: str | None) -> tuple[int, int] | None:
    """``"3"`` or ``"0:2"`` (``--steps``) -> ``(first, last)`` optimizer steps; None -> None.

    Raises:
        ConfigurationError: empty, not ``A`` or ``A:B``, or not ``0 <= A <= B`` (an empty
            range records no op: a vacuous "reproducible").
    """
    if text is None:
        return None
    if not text.strip():
        raise ConfigurationError(
            "--steps is empty: give optimizer steps as N or FIRST:LAST, e.g. --steps 3 or --steps 0:2"
        )
    a, _, b = text.partition(":")
    try:
        lo, hi = int(a), int(b or a)
    except ValueError:
        lo = hi = -1
    if not 0 <= lo <= hi:
        raise ConfigurationError(
            f"--steps {text!r}: use A:B with 0 <= A <= B (optimizer steps, counted from 0), e.g. --steps 3:3"
        )
    return lo, hi


@dataclass(frozen=True)
class DebugOptions:
    """How :func:`debug_script` and :func:`record_script` record; validated once, here,
    before any run starts (a mistake found by the child costs a framework import; one
    found at the end, two runs). Each field is the ``fwd9m debug`` option of that name.

    Raises:
        ConfigurationError: a value outside its valid values (the message lists them).
    """

    level: str = "digests"  #: one of :data:`fwd9m.debug.LEVELS`
    #: PyTorch: record ops only in optimizer steps ``(first, last)``; ``"A:B"`` is parsed
    steps: tuple[int, int] | str | None = None
    fast: bool = False  #: a module-level pass first, then op-level runs of its first diverging step
    capture: str | None = None  #: ops whose full tensors are stored: ``"index_put_,MatMul"``, ``"1200:5"``
    frameworks: tuple[str, ...] = ()  #: of :data:`FRAMEWORKS`; empty: from the script's imports
    module: bool = False  #: the target is a module (``python -m``)
    keep: str | None = None  #: a folder to keep the traces in (without it they are deleted)
    force: bool = False  #: replace an existing file that is not a fwd9m trace
    timeout: float | None = None  #: seconds per run; the whole process group is killed after it
    #: one of :data:`CWD_MODES`; an :class:`~fwd9m._runtime.isolation.Isolation` once chosen
    cwd: Any = "isolate"
    hashseed_check: bool = True  #: run the hash-seed experiment when it can explain the divergence
    #: prove a culprit op: a third run captures its call, replayed alone (:mod:`._replay`)
    replay: bool = True
    #: the script's output passes through to stderr as it runs (``fwd9m -v debug``); by
    #: default it goes to a log beside each trace, whose end is shown when a run fails
    show_output: bool = False
    #: PyTorch: find the first diverging optimizer step with step digests first, then
    #: record that step only (:mod:`._early`)
    early_stop: bool = True

    def __post_init__(self) -> None:
        _one_of("level", self.level, LEVELS)
        if isinstance(self.cwd, str):  # else the Isolation chosen for the session
            _one_of("cwd", self.cwd, CWD_MODES)
        names = (self.frameworks,) if isinstance(self.frameworks, str) else tuple(self.frameworks)
        for name in names:
            _one_of("framework", name, tuple(FRAMEWORKS))
        object.__setattr__(self, "frameworks", names)
        steps = parse_steps(self.steps) if isinstance(self.steps, str) or self.steps is None else self.steps
        if steps is not None and not (len(steps) == 2 and 0 <= steps[0] <= steps[1]):
            raise ConfigurationError(
                f"steps {self.steps!r}: use (A, B) with 0 <= A <= B (optimizer steps, "
                f"counted from 0), e.g. (3, 3) or --steps 3:3"
            )
        object.__setattr__(self, "steps", None if steps is None else (int(steps[0]), int(steps[1])))
        if self.timeout is not None and not self.timeout > 0:  # nan too
            raise ConfigurationError(f"--timeout must be a positive number of seconds, got {self.timeout}")
        if self.capture is not None and not CaptureSpec(self.capture):
            raise ConfigurationError(
                f"--capture {self.capture!r} selects no op; name ops (index_put_,MatMul) or SEQ:RADIUS windows (1200:5)"
            )


@dataclass
class _Session:
    """One ``fwd9m debug`` invocation: what is recorded, where the traces go, and what
    the user's directory looked like before (``guard``)."""

    target: str
    args: tuple[str, ...]
    options: DebugOptions
    say: Say
    show: Say
    in_place: bool = False  #: ``debug record``: the run works in the current directory
    guard: Any = None  #: :class:`fwd9m._runtime.workdir.Guard` with ``--cwd link``
    #: the optimizer steps recorded: ``options.steps``, or with ``fast`` the step the
    #: module-level pass found (for the op-level runs and the hash-seed runs alike)
    steps: tuple[int, int] | None = None
    #: the op-level runs end after the last step of ``steps`` (the early stop found it)
    stop_after: bool = False
    #: the early stop's op-level runs, started beside its digest runs (:class:`_Ahead`)
    ahead: Any = None
    #: the traces of the differing step that the digest runs' rings wrote (:mod:`._early`)
    ring: list[str] | None = None
    #: no step differs: the whole runs' traces the rings wrote, and the runs' exit statuses
    whole: tuple[list[str], list[int]] | None = None

    def __post_init__(self) -> None:
        if self.steps is None and isinstance(self.options.steps, tuple):
            self.steps = self.options.steps

    @property
    def steps_text(self) -> str:
        return f"{self.steps[0]}:{self.steps[1]}" if self.steps else ""


# ------------------------------------------------------------------ one recorded run


def _check_target(target: str, options: DebugOptions) -> None:
    """Refuse a target that does not exist, or a script that imports no framework
    recorded (read from its import statements) when none is named."""
    from .._runtime.launch import resolve_target
    from ._child import detect_frameworks

    resolve_target(target, options.module)
    if not options.frameworks and not options.module and not detect_frameworks(target, False):
        raise ConfigurationError(
            f"{target} imports neither torch nor tensorflow/keras nor jax (read "
            f"from its import statements); name the framework it uses: fwd9m debug "
            f"--framework torch|tensorflow|jax ..."
        )


def _child_frameworks(options: DebugOptions) -> str:
    """The recorders the child starts: ``--framework`` (Keras on its active backend, which
    the child asks once the script imported Keras), or ``-``: from the script's imports."""
    return ",".join(options.frameworks) or "-"


def _child_command(s: _Session, out: str, level: str | None) -> list[str]:
    o, steps = s.options, s.steps
    return [
        sys.executable,
        "-m",
        "fwd9m.debug._child",
        os.path.abspath(out),
        level or o.level,
        o.capture or "-",
        f"{steps[0]},{steps[1]}" if steps else "-",
        _child_frameworks(o),
        "1" if o.module else "0",
        s.target if o.module else os.path.abspath(s.target),
        *s.args,
    ]


def _isolated(s: _Session, cmd: list[str], cwd: str | None) -> list[str]:
    """``cmd`` run in the user's directory seen copy-on-write, its writes landing in
    ``cwd`` (the run's folder), when the session isolates its runs."""
    from .._runtime import isolation

    if cwd is None:
        return cmd
    if not isinstance(s.options.cwd, isolation.Isolation):  # --cwd link or empty: dies with fwd9m all the same
        return isolation.wrap_plain(cmd, Path(cwd).parent)
    return isolation.wrap(cmd, s.options.cwd, Path(cwd))


def _start(cmd: list[str], env: dict[str, str] | None, cwd: str | None, log: str | None) -> subprocess.Popen:
    """Start the child in its own session (process group). Its standard output goes to
    our stderr, so that stdout carries the report only, or with ``log`` both its streams
    go to that file."""
    sink = open(log, "wb") if log else None
    try:
        to_stderr: Any = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # no real stderr (embedded use)
        to_stderr = subprocess.DEVNULL
    try:
        return subprocess.Popen(
            cmd,
            env={**os.environ, **(env or {})},
            start_new_session=True,
            stdout=sink or to_stderr,
            stderr=sink,
            cwd=cwd,
        )
    finally:
        if sink:
            sink.close()


def _show_log(s: _Session, log: str | None, why: str) -> None:
    """The end of a run's log (the script's own output), escaped."""
    from .._runtime.process import tail
    from ..compare import printable

    text = tail(log) if log else ""
    if text:
        s.say(f"  {why}; the end of its output" + (f" ({log})" if s.options.keep else "") + ":")
        s.show("\n".join(f"    | {line}" for line in printable(text).splitlines()))


def _wait(s: _Session, proc: subprocess.Popen, out: str, name: str, log: str | None) -> None:
    from .._runtime.process import kill_group

    try:
        proc.wait(timeout=s.options.timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        _show_log(s, log, f"{name} timed out")
        kept = s.in_place or s.options.keep
        raise RunError(
            f"{s.target} did not finish within {s.options.timeout:g} s (its whole process group "
            f"was killed); " + (f"the partial trace is in {out}" if kept else "--keep DIR keeps the partial trace")
        ) from None
    except BaseException:  # Ctrl-C: leave nothing running
        kill_group(proc)
        raise


def _record(
    s: _Session,
    out: str,
    env: dict[str, str] | None = None,
    label: str = "",
    level: str | None = None,
    quiet: bool = False,
) -> int:
    """Record one run into ``out``; returns the script's exit status.

    With ``quiet`` (the runs ``fwd9m debug`` starts on its own; not with ``show_output``),
    the script's stdout and stderr go to a log file beside the trace instead and are
    shown, their last lines, only when the run fails. TensorFlow's C++ runtime logs
    start-up lines (oneDNN, CPU features, "All log messages before absl::InitializeLog()")
    to stderr. TF_CPP_MIN_LOG_LEVEL only filters messages of TF's own logger
    (https://github.com/tensorflow/tensorflow/blob/master/third_party/xla/xla/tsl/platform/default/logging.cc,
    ``LogMessage::~LogMessage``), and TF 2.21 prints the oneDNN and absl lines even with
    TF_CPP_MIN_LOG_LEVEL=3 (checked here; abseil logs before ``InitializeLog`` whatever the
    threshold: https://github.com/abseil/abseil-cpp/pull/1718), so setting it would not
    make the report readable. The child's environment stays the user's: nothing is added.

    Raises:
        RunError: the run timed out, or it failed before the trace was opened.
    """
    from .._runtime.process import kill_leftovers

    name = label or s.target
    if s.stop_after:
        from .._recording._common import ENV_STOP_AFTER

        env = {**(env or {}), ENV_STOP_AFTER: "1"}
    cwd, watch, env = _run_folder(s, out, env)
    s.say(f"recording {name}" + (f" -> {out}" if s.in_place or s.options.keep else ""))
    t0 = time.perf_counter()
    log = os.path.splitext(out)[0] + ".log" if quiet and not s.options.show_output else None
    proc = _start(_isolated(s, _child_command(s, out, level), cwd), env, cwd, log)
    _wait(s, proc, out, name, log)
    kill_leftovers(proc)
    _note_writes_through_links(s, watch, os.path.dirname(os.path.abspath(out)), name)
    size = os.path.getsize(out) if os.path.exists(out) else 0
    s.say(f"  done in {time.perf_counter() - t0:.1f} s, exit status {proc.returncode}, trace {size / 1024:.0f} KiB")
    if proc.returncode or size == 0:
        _show_log(s, log, f"{name} exited with status {proc.returncode}")
    if size == 0:
        raise RunError(
            f"recording {s.target} failed before the trace was opened "
            f"(exit status {proc.returncode}); see the messages above"
        )
    return proc.returncode


#: bytes of input tensors op-level run 1 of the early stop may write as whole calls
#: (:data:`fwd9m._recording._capture.ENV_KEEP_CALLS`); the ops after them need a targeted run
KEEP_CALL_BYTES = 128 << 20


def _start_pair(s: _Session, paths: list[str], env: dict[str, str] | None = None, how: str = "side by side") -> list:
    """Start the early stop's two op-level runs side by side: (trace, watch, log, process)
    each. Run 1 writes every op's whole call while :data:`KEEP_CALL_BYTES` last, so that a
    culprit among them is replayed without a targeted run (:func:`_replayed`)."""
    from .._recording._capture import ENV_KEEP_CALLS
    from .._recording._common import ENV_STOP_AFTER
    from .._runtime.process import kill_group

    runs: list = []
    try:
        for i, out in enumerate(paths, 1):
            keep = {ENV_KEEP_CALLS: str(KEEP_CALL_BYTES)} if i == 1 and s.options.replay else {}
            cwd, watch, run_env = _run_folder(s, out, {ENV_STOP_AFTER: "1", **keep, **(env or {})})
            log = os.path.splitext(out)[0] + ".log" if not s.options.show_output else None
            s.say(f"recording run {i}/2 ({how})")
            runs.append((out, watch, log, _start(_isolated(s, _child_command(s, out, None), cwd), run_env, cwd, log)))
    except BaseException:
        for run in runs:
            kill_group(run[3])
        raise
    return runs


def _side_by_side(s: _Session, paths: list[str], runs: list | None = None) -> list[int] | None:
    """The early stop's two op-level runs of one step, side by side (their exit
    statuses; ``runs``: already started, :class:`_Ahead`); None when one changed your
    directory through its links, where the other could read it: your files are put back
    and the caller runs them one after the other."""
    from .._runtime.process import kill_group, kill_leftovers
    from .._runtime.workdir import snapshot_tree

    runs = runs or _start_pair(s, paths)
    try:
        t0 = time.perf_counter()
        for i, (out, _, log, proc) in enumerate(runs, 1):
            _wait(s, proc, out, f"run {i}/2", log)
    except BaseException:
        for run in runs:
            kill_group(run[3])
        raise
    s.say(f"  both done in {time.perf_counter() - t0:.1f} s")
    changed = False
    for i, (out, watch, log, proc) in enumerate(runs, 1):
        kill_leftovers(proc)
        if watch is not None:
            after = snapshot_tree(Path.cwd(), own=Path(os.path.dirname(os.path.abspath(out))))
            changed |= any(watch.entries.get(k) != v for k, v in after.entries.items())
        if proc.returncode or not os.path.exists(out) or not os.path.getsize(out):
            _show_log(s, log, f"run {i}/2 exited with status {proc.returncode}")
    if changed:
        for out, watch, _, _ in runs:
            _note_writes_through_links(s, watch, os.path.dirname(os.path.abspath(out)), "a run side by side")
        s.say("the runs side by side changed your directory; recording them again one after the other")
        return None
    if any(not os.path.exists(out) or not os.path.getsize(out) for out, *_ in runs):
        raise RunError(f"recording {s.target} failed before the trace was opened; see the messages above")
    return [proc.returncode for *_, proc in runs]


def _run_folder(s: _Session, out: str, env: dict[str, str] | None) -> tuple[str | None, Any, dict | None]:
    """The working folder of one recorded run: for ``fwd9m debug`` (two runs), a folder
    of its own beside the trace (``run1.files/``), linking to the entries of the current
    directory (``--cwd link``) or empty (``--cwd empty``), as ``fwd9m check`` runs do, so
    that run 2 does not see what run 1 wrote and the user's folder is left as it was.
    ``debug record`` runs in the current directory, as the script does on its own.
    Returns (cwd for the child or None, the snapshot of the current directory to tell
    writes through the links, the environment: for ``-m`` in an empty folder, the
    current directory on PYTHONPATH so that the module is found as ``python -m`` finds it)."""
    from .._recording._common import ENV_USER_CWD
    from .._runtime.workdir import prepare_cwd

    if s.in_place:
        return None, None, env
    folder = Path(os.path.abspath(os.path.splitext(out)[0] + RUN_FOLDER))
    if folder.exists():
        if not (folder / RUN_MARK).exists():
            from .._runtime.launch import shown

            raise ConfigurationError(
                f"{shown(str(folder))} exists and fwd9m did not make it; --keep a folder without it, or remove it"
            )
        shutil.rmtree(folder)
    user = Path.cwd()
    watch = prepare_cwd(folder / "cwd", user, s.options.cwd, own=folder.parent)
    (folder / RUN_MARK).write_text("a working folder of a run recorded by fwd9m debug\n")
    env = {**(env or {}), ENV_USER_CWD: str(user)}  # file:line shown relative to this directory
    if s.options.module and s.options.cwd == "empty":
        path = os.environ.get("PYTHONPATH", "")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(user), path) if p)
    return str(folder / "cwd"), watch, env


def _first_five(names: list[str]) -> str:
    from .._runtime.launch import shown

    return ", ".join(shown(c) for c in names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def _note_writes_through_links(s: _Session, watch: Any, own: str, label: str) -> None:
    """Say when a run changed files in the user's directory through its links, and put
    them back as they were (``s.guard``: :class:`fwd9m._runtime.workdir.Guard`), so that
    the next run starts from the same files; ``own``: the folder of the traces, left out."""
    from .._runtime.workdir import snapshot_tree

    if watch is None:
        return
    after = snapshot_tree(Path.cwd(), own=Path(own))
    changed = sorted(k for k, v in after.entries.items() if watch.entries.get(k) != v)
    if watch.complete and after.complete:  # deleted or renamed away: put back for the next run too
        changed += sorted(k for k in watch.entries if k not in after.entries)
    # a folder whose mtime changed because a file in it did: name the file only
    changed = [k for k in changed if not any(c != k and c.startswith(k + os.sep) for c in changed)]
    if not changed:
        return
    if s.guard is None:
        s.say(
            f"  {label} changed {_first_five(changed)} in your directory, through its links to it; "
            f"--cwd empty runs it in an empty folder"
        )
        return
    s.guard.restore(changed)
    if any(c in s.guard.kept for c in changed):
        from .._runtime.workdir import kept_note

        s.say(f"  {kept_note(s.guard)}")
    kept = [c for c in changed if c in s.guard.unprotected]
    if kept:
        s.say(
            f"  {label} changed {_first_five(kept)} in your directory, through its links to it; "
            f"--cwd empty runs it in an empty folder"
        )
    else:
        s.say(
            f"  {label} wrote into {_first_five(changed)} in your directory, through its links to it; "
            f"put back as they were"
        )


# ------------------------------------------------------------------ checks before any run


def kept_traces(options: DebugOptions) -> list[str]:
    """Every trace :func:`debug_script` may write into ``options.keep`` (none without it)."""
    from .._hashseed import MAX_RUNS

    if not options.keep:
        return []
    names = ["run1", "run2", "modules1", "modules2", *(f"hashseed{k}" for k in range(1, MAX_RUNS + 1))]
    return [os.path.join(options.keep, f"{n}.trace") for n in names]


def _refuse_overwrites(options: DebugOptions, script: str | None, outputs: list[str], option: str) -> None:
    """Refuse, before any run, to write over the script or over an existing file fwd9m
    did not write (unless ``force``): the traces in ``outputs`` and the log beside each."""
    from .._recording._store import is_trace
    from .._runtime.launch import refuse_overwrite

    ins = [script] if script else []
    for out in outputs:
        refuse_overwrite(
            out, option, inputs=ins, ours=is_trace, force=options.force, what="a trace", example="run.trace"
        )
        log = os.path.splitext(out)[0] + ".log"
        refuse_overwrite(
            log,
            option,
            inputs=ins,
            force=options.force or (os.path.isfile(out) and is_trace(out)),
            ours=None,
            what="a log beside a trace",
            example="traces/",
        )


def _check_keep(options: DebugOptions, target: str) -> None:
    from .._runtime.launch import shown

    keep = options.keep
    if keep and os.path.exists(keep) and not os.path.isdir(keep):
        raise ConfigurationError(
            f"--keep {shown(keep)} is a file; --keep names a folder for the two traces, e.g. --keep traces/"
        )
    if keep:
        _refuse_overwrites(options, None if options.module else target, kept_traces(options), f"--keep {shown(keep)}:")


# ------------------------------------------------------------------ the report


def cut_traces(report: DebugReport, paths: Sequence[str | None]) -> list[str]:
    """The traces among ``paths`` (A, B) that the comparison says stop early (cut off,
    damaged, or without an end record)."""
    return [
        p
        for name, p in zip("AB", paths)
        if p is not None and any(n.startswith(f"trace {name} ({p}) ") for n in report.notes)
    ]


def _no_verdict_when_cut(s: _Session, report: DebugReport, codes: list[int], cut: list[int]) -> RunError:
    why = (
        f"{s.target} failed in both runs (exit status {codes[0]})"
        if codes[0]
        else (f"the trace of run {cut[0]} has" if len(cut) == 1 else "the traces of both runs have")
        + " no end record (the process was killed or called os._exit, and the ops of its last, "
        "unwritten frame are lost)"
    )
    n = max(report.ops_a, report.ops_b)
    return RunError(
        f"{why}, so only the {n} ops recorded before that were compared (they agree); no verdict on the whole run"
    )


def _no_verdict_when_empty(s: _Session) -> RunError:
    steps = s.steps_text
    return RunError(
        f"neither run of {s.target} recorded any op"
        + (f" in optimizer steps {steps}" if steps else "")
        + ", so nothing was compared and there is no verdict; check that it runs "
        "ops of the framework recorded (--framework torch|tensorflow|jax)"
        + (" and that --steps names steps it reaches" if steps else "")
    )


def _settle(s: _Session, report: DebugReport, codes: list[int], paths: list[str]) -> DebugReport:
    """When the recorded ops agree, whether both runs also finished alike: different exit
    statuses make the report not reproducible; failures in both runs, a trace without
    its end record, or two traces without any op give no verdict.

    Raises:
        RunError: no verdict (no report is shown: its headline would read "reproducible").
    """
    if not report.reproducible:
        return report
    cut = [i for i, p in enumerate(paths, 1) if cut_traces(report, [p] if i == 1 else [None, p])]
    if codes[0] != codes[1]:
        return replace(
            report,
            reproducible=False,
            kind="exit",
            notes=[
                f"NOT REPRODUCIBLE: run 1 exited with status {codes[0]}, run 2 with "
                f"status {codes[1]}; the ops both runs recorded agree",
                *report.notes,
            ],
        )
    if codes[0] or cut:
        raise _no_verdict_when_cut(s, report, codes, cut)
    if not (report.ops_a or report.ops_b):  # two empty traces agree: no verdict either
        raise _no_verdict_when_empty(s)
    return _outputs_settle(s, report, paths)


def _outputs_settle(s: _Session, report: DebugReport, paths: list[str]) -> DebugReport:
    """The recorded ops agree: whether what the runs printed and wrote agrees too (a
    difference that enters after, or outside, every recorded op: NumPy noise added to
    the predictions). Only for whole runs (not runs stopped after one step)."""
    from ..compare._outputs import differing_outputs

    if s.stop_after or s.in_place:
        return report
    base = [os.path.splitext(p)[0] for p in paths]
    logs = tuple(Path(b + ".log") if os.path.isfile(b + ".log") else None for b in base)
    folders = tuple(Path(b + RUN_FOLDER) / "cwd" for b in base)
    differ = differing_outputs(logs, folders, Path(os.path.dirname(paths[0])) / "outputs-compared")  # type: ignore[arg-type]
    seen = "their printed output and " if all(logs) else ""
    if not differ:
        return replace(report, notes=[*report.notes, f"compared too: {seen}the files the runs wrote; they agree"])
    n = report.spread.get("ops_compared", 0)
    target = s.target
    return replace(
        report,
        reproducible=False,
        kind="outputs",
        notes=[
            f"NOT REPRODUCIBLE: all {n} recorded ops agree, but the runs' outputs differ after them: "
            f"{'; '.join(differ[:5])}. The difference enters outside the recorded framework ops "
            f"(NumPy, Python's random, a library that is not recorded); fwd9m lint {target} names "
            f"unseeded generators, fwd9m check {target} what differs",
            *report.notes,
        ],
    )


def _agree_at(a: str, b: str, seq: int) -> bool:
    """Whether traces ``a`` and ``b`` agree up to and including op ``seq``."""
    from ._compare import compare

    again = compare(a, b)
    return again.reproducible or (again.first is not None and again.first.seq > seq)


def _hash_seed_experiment(s: _Session, directory: str, report: DebugReport, paths: list[str]) -> DebugReport:
    """Test whether the string-hash seed causes the first divergence (an external
    ``python`` or ``data`` source) with the controlled experiment ``fwd9m check`` runs
    too (:func:`fwd9m._hashseed.experiment`): runs agree when their traces agree up to
    and including that op. Confirmed or likely: the source becomes ``hashseed``. Returns
    the report with the first divergence explained again and the experiment's note."""
    from .. import _hashseed
    from .._recording import _store
    from . import _explain

    f = report.first
    assert f is not None
    seq = f.seq
    ha = _store.read_header(paths[0])

    def run(seed: int, k: int) -> str:
        out = os.path.join(directory, f"hashseed{k}.trace")
        _record(s, out, env={"PYTHONHASHSEED": str(seed)}, label=f"run {k} with PYTHONHASHSEED={seed}", quiet=True)
        return out

    outcome = _hashseed.experiment(
        run,
        lambda a, b: _agree_at(a, b, seq),
        script=_explain._script(ha),
        argv=_explain._argv(ha),
        target=" ".join([*(["-m"] if s.options.module else []), s.target]),
        progress=s.say,
    )
    notes = report.notes
    if outcome.hash_order:
        f = replace(f, source="hashseed")  # the explanation's causes say what the experiment showed
    else:
        notes = [*notes, outcome.message()]
    f = replace(
        f,
        explanation=_explain.explain(
            f, report, ha, _store.read_header(paths[1]), hashseed=outcome.verdict, hashseed_note=outcome.message()
        ),
    )
    return replace(report, first=f, notes=notes)


def _hide_deleted(report: DebugReport, directory: str | None) -> DebugReport:
    """Traces in a temporary folder are deleted on exit: name them by file name only and
    say how to keep them."""
    if not directory:
        return report
    prefix = os.path.join(directory, "")
    a, b = (os.path.basename(x) if x.startswith(prefix) else x for x in (report.a, report.b))
    notes = [n.replace(prefix, "") for n in report.notes]
    return replace(report, a=a, b=b, notes=[*notes, "the traces are deleted on exit; --keep DIR keeps the traces"])


def _with_fast_pass(report: DebugReport, first_pass: DebugReport) -> DebugReport:
    """The op-level report of the step the module-level pass found, noting that pass;
    when the op-level runs agree (a race that did not recur), the module-level finding."""
    f0 = first_pass.first
    assert f0 is not None
    notes = [
        f"module-level pass: first divergence at {f0.op} in {f0.module or '-'} (step {f0.step}); "
        f"ops recorded for step {f0.step} only",
        *report.notes,
    ]
    if not report.reproducible:
        return replace(report, notes=notes)
    notes.append("the op-level runs of that step agreed (a race that did not recur); showing the module-level finding")
    return replace(first_pass, notes=[*first_pass.notes, *notes])


# ------------------------------------------------------------------ the two runs


def _fast_pass(s: _Session, directory: str) -> tuple[DebugReport | None, DebugReport | None]:
    """``--fast``: two module-level runs. Returns (the final report when that pass
    settles it, else None; the pass's report when op-level runs of one step follow)."""
    from ._compare import compare

    mpaths = [os.path.join(directory, f"modules{i}.trace") for i in (1, 2)]
    mcodes = [
        _record(s, p, label=f"module-level run {i}/2", level="modules", quiet=True) for i, p in enumerate(mpaths, 1)
    ]
    first_pass = compare(*mpaths)
    if first_pass.reproducible or first_pass.first is None or first_pass.first.step < 0:
        return _settle(s, first_pass, mcodes, mpaths), None
    step = first_pass.first.step
    s.say(
        f"module-level pass: first divergence in step {step} "
        f"({first_pass.first.op} {first_pass.first.module}); op-level runs of step {step}"
    )
    return None, first_pass


def _two_runs(s: _Session, directory: str) -> DebugReport:
    """Record the two runs (after the module-level pass with ``fast``), compare, explain."""
    from .._runtime.launch import shown
    from ._compare import compare

    first_pass = None
    early = _early_step(s, directory)
    if isinstance(early, _early.Ended):  # no step differs, but the runs ended differently
        return _early.ended_report(early)
    if s.options.fast and early is None:
        done, first_pass = _fast_pass(s, directory)
        if done is not None:
            return done
        assert first_pass is not None and first_pass.first is not None
        s.steps = (first_pass.first.step, first_pass.first.step)
    paths = [os.path.join(directory, f"run{i}.trace") for i in (1, 2)]
    codes = _op_level(s, paths)
    s.say("comparing")
    report = compare(*paths)
    if first_pass is not None:
        report = _with_fast_pass(report, first_pass)
    if early is not None:
        if report.reproducible:  # the step's ops agree this time: the whole runs, as without it
            s.say("the op-level runs of that step agree; recording the whole runs")
            s.steps, s.stop_after, s.ring = None, False, None
            return _two_runs(replace(s, options=replace(s.options, early_stop=False)), directory)
        report = replace(report, notes=[_early.note(early, bool(s.ring)), *report.notes])
    failed = [f"run {i} exited with status {c}" for i, c in enumerate(codes, 1) if c]
    report = replace(report, notes=[*report.notes, *failed])
    f = report.first
    if (
        f is not None
        and f.kind == "external"
        and f.source in ("python", "data")
        and "PYTHONHASHSEED" not in os.environ
        and s.options.hashseed_check
    ):
        report = _hash_seed_experiment(s, directory, report, paths)
    if f is not None and f.kind == "culprit" and f.op.split(":", 1)[0] not in _COARSE:
        report = _replayed(s, directory, report) if s.options.replay else _not_replayed(report, "--no-replay")
    if s.options.keep:
        report = replace(
            report,
            notes=[
                *report.notes,
                "the files each run wrote are in its own working folder: "
                + " and ".join(shown(os.path.splitext(p)[0] + RUN_FOLDER + "/cwd") for p in paths),
            ],
        )
    return _settle(s, report, codes, paths)


def _op_level(s: _Session, paths: list[str]) -> list[int]:
    """The two op-level traces at ``paths``: the step the early stop found, from the
    digest runs' rings (nothing runs again) or recorded alone (side by side, started
    beside the digest runs or after them), else the whole runs one after the other; the
    runs' exit statuses."""
    codes: list[int] | None = None
    try:
        ready = s.ring or (s.whole[0] if s.whole else None)
        if ready:  # the digest runs' rings hold the step, or the whole runs: nothing runs again
            if s.ahead is not None:
                s.ahead.stop(s)
            for ring, path in zip(ready, paths):
                shutil.move(ring, path)
                if s.whole:
                    _take_outputs(Path(ring).parent, path)
            codes = list(s.whole[1]) if s.whole else [0, 0]
            s.whole = None
        elif s.stop_after:
            codes = _side_by_side(s, paths, s.ahead.runs if s.ahead else None)
    finally:
        if s.ahead is not None:
            s.ahead.close()  # the runs that read its gate file have ended
        s.ahead = None
    if codes is None:
        codes = [_record(s, p, label=f"run {i}/2", quiet=True) for i, p in enumerate(paths, 1)]
    return codes


def _take_outputs(run: Path, trace: str) -> None:
    """The whole run's outputs, where the comparison of outputs reads a recorded run's
    (:func:`_outputs_settle`): the digest run ``run``'s folder (what it wrote) and its
    printed output, moved beside ``trace``."""
    base = os.path.splitext(trace)[0]
    folder = Path(base + RUN_FOLDER)
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    (folder / RUN_MARK).write_text("a working folder of a run recorded by fwd9m debug\n")
    if (run / "cwd").exists():
        shutil.move(str(run / "cwd"), str(folder / "cwd"))
    else:
        (folder / "cwd").mkdir()
    if (run / "stdout").is_file():
        shutil.move(str(run / "stdout"), base + ".log")


def _early_step(s: _Session, directory: str) -> Any:
    """The early stop (:mod:`._early`): the first differing step, now the session's only
    recorded step with its runs ending after it; an :class:`~._early.Ended` when no step
    differs but the runs ended differently; None when it does not apply or no step
    differs."""
    if not _early.applies(s):
        return None
    ahead = _Ahead(s, directory) if _early.overlap() else None
    found = None
    try:
        found = _early.first_step(s, directory, ahead.compared if ahead else None)
    finally:
        if ahead is not None and (found is None or isinstance(found, _early.Ended)):  # (or an exception)
            ahead.stop(s)
    if found is not None and not isinstance(found, _early.Ended):
        s.steps, s.stop_after = (found.index, found.index), True
        s.ahead = ahead
    return found


class _Ahead:
    """The early stop's op-level runs started beside its digest runs
    (:func:`fwd9m.debug._early.overlap`): each runs the script as the op-level runs do
    and waits at each optimizer step until the digest runs have compared it
    (:class:`~fwd9m._recording._common.StepGate`): steps that agree run unrecorded, the first
    that differs is recorded and the run ends after it. When no step differs (or the
    digest runs are not trusted) they are stopped and the whole runs are recorded."""

    def __init__(self, s: _Session, directory: str):
        from .._recording._common import ENV_STEP_GATE, StepGate

        fd, self.gate = tempfile.mkstemp(prefix="fwd9m-debug-gate-")
        os.close(fd)
        self.below = 0
        paths = [os.path.join(directory, f"run{i}.trace") for i in (1, 2)]
        try:
            StepGate.write(self.gate, 0)
            self.runs = _start_pair(
                s, paths, {ENV_STEP_GATE: self.gate}, "beside the digest runs, waiting for its step"
            )
        except BaseException:
            self.close()
            raise

    def compared(self, agree: int, found: Any) -> None:
        """The digest runs agree in their first ``agree`` steps (``found``: and differ in the next)."""
        from .._recording._common import StepGate

        if found is not None:
            StepGate.write(self.gate, found.index, record=True)
        elif agree > self.below:
            self.below = agree
            StepGate.write(self.gate, agree)

    def stop(self, s: _Session) -> None:
        """Stop the runs (your files they changed through their links put back)."""
        from .._runtime.process import kill_group, kill_leftovers

        try:
            for out, watch, _, proc in self.runs:
                kill_group(proc)
                proc.wait()
                kill_leftovers(proc)
                _note_writes_through_links(s, watch, os.path.dirname(os.path.abspath(out)), "a run started ahead")
        finally:
            self.close()

    def close(self) -> None:
        for path in (self.gate, f"{self.gate}.tmp"):
            try:
                os.unlink(path)
            except OSError:
                pass


#: op names of the module-level pass (``--fast``): a module, not one op, so nothing to replay
_COARSE = ("module", "layer", "grad", "grads", "param", "params")


def _replayed(s: _Session, directory: str, report: DebugReport) -> DebugReport:
    """Prove the culprit: a third run, in a folder like the others', captures its call, and
    the op is replayed alone (:func:`fwd9m.debug._replay.confirm`). The result goes into
    the explanation (``replay``); a replay that cannot be done is a note, never an error."""
    from .._recording._common import ENV_STOP_AFTER
    from ._replay import confirm, replay_kept

    first = report.first
    assert first is not None
    kept = _kept_capture(directory, first)
    how = "from the inputs run 1 kept" if kept else "a third, targeted run"
    s.say(f"replaying the culprit op #{first.seq} {first.op} alone ({how})")
    if kept:
        try:
            return _with_proof(
                s, directory, report, replay_kept(os.path.join(directory, "run1.trace"), first.seq, s.say)
            )
        except Exception as exc:  # noqa: BLE001 - the targeted run then, as without the kept inputs
            s.say(f"  the replay from the kept inputs failed ({exc}); a third, targeted run")
    trace = os.path.join(directory, "run3.trace")
    watch = None
    try:
        cwd, watch, env = _run_folder(s, trace, None)  # as runs 1 and 2: its own folder, your files guarded
        result = confirm(
            report,
            s.target,
            list(s.args),
            module=s.options.module,
            frameworks=list(s.options.frameworks) or None,
            trace=trace,
            cwd=cwd,
            env={**(env or {}), **({ENV_STOP_AFTER: "1"} if s.stop_after else {})},
            wrap=lambda cmd: _isolated(s, cmd, cwd),
            timeout=s.options.timeout,
            steps=s.steps,
            say=s.say,
        )
    except Exception as exc:  # noqa: BLE001 - the verdict stands without its proof
        why, _, tail = str(exc).partition("\n")  # the run's last output: progress, not the report
        if tail.strip():
            s.say(f"the replay's targeted run: its last output:\n{tail.rstrip()}")
        why = why.removesuffix("; its last output:").removesuffix(": its last output:")
        report = replace(report, notes=[*report.notes, f"the culprit was not replayed: {why}"])
        return _not_replayed(report, "its replay could not run: see the notes")
    finally:
        _note_writes_through_links(s, watch, directory, "the replay run")
    return _with_proof(s, directory, report, result)


def _kept_capture(directory: str, first: Any) -> bool:
    """Whether op-level run 1 kept the culprit's whole call (:data:`KEEP_CALL_BYTES`);
    the calls of the other ops it kept are removed."""
    import glob

    from .._recording._capture import capture_path
    from ._replay import load_capture

    trace = os.path.join(directory, "run1.trace")
    path = capture_path(trace, first.seq)
    for other in glob.glob(f"{glob.escape(trace)}.op*.npz"):
        if other != path:
            os.unlink(other)
    try:
        call, _ = load_capture(path)
    except (OSError, ValueError):
        return False
    return call.get("op") == first.op and not call.get("error") and "narrowed" not in call


def _with_proof(s: _Session, directory: str, report: DebugReport, result: Any) -> DebugReport:
    """The report with the replay's ``result`` as the culprit's proof."""
    first = report.first
    assert first is not None
    if result is None:
        return _not_replayed(report, "its call could not be captured")
    off, on = result.off, result.on
    proof = {
        "distinct": off.distinct,
        "replays": off.repeats,
        "max_ulp": off.max_ulp,
        "status": off.status,
        "text": result.render(),
        "switch": None if on is None else result.switch_verdict(),
    }
    first = replace(first, explanation={**(first.explanation or {}), "replay": proof})
    if result.inside.get("primitive") in PYTHON_OPS:  # a jit's callback: the program's Python
        return _python_inside(report, replace(first, explanation={"replay": proof}), result.inside, directory)
    if off.status == "deterministic":  # not reproduced in isolation: not blamed
        from ._explain import unconfirmed

        detail = first.detail.replace(": the op is nondeterministic", " (as recorded)")
        first = replace(first, detail=detail, explanation=unconfirmed(first, report.framework))
    elif off.status != "nondeterministic":  # the replay itself failed: no proof either way
        return _not_replayed(replace(report, first=first), "its replay failed: see proof")
    return replace(report, first=first)


def _not_replayed(report: DebugReport, why: str) -> DebugReport:
    """A culprit no replay confirmed: unconfirmed unless the catalog lists the op
    (:func:`fwd9m.debug._explain.not_replayed`)."""
    from ._explain import not_replayed

    first = report.first
    assert first is not None
    explanation = not_replayed(first, report.framework, why)
    if not explanation.get("unconfirmed"):
        return report
    detail = first.detail.replace(": the op is nondeterministic", " (as recorded)")
    return replace(report, first=replace(first, detail=detail, explanation=explanation))


def _python_inside(report: DebugReport, first: Any, inside: dict, directory: str) -> DebugReport:
    """A jitted call narrowed to a host callback (``jax.pure_callback``): the Python it
    calls made the difference, a value entering from outside (EXTERNAL), named at the
    callback's line."""
    from .._recording import _store
    from . import _explain

    prim = inside["primitive"]
    f = replace(
        first,
        kind="external",
        source="python",
        op=prim,
        node="",
        location=inside.get("location") or first.location,
        detail=(
            f"{prim} inside {first.op} (called at {first.location}) runs a Python function of the "
            f"program ({PYTHON_OPS[prim]}); replayed equation by equation on the recorded inputs, its "
            f"inputs agree and its outputs differ: the Python code inside it drew values from outside "
            f"the recorded ops (Python's random, NumPy's global RNG, the clock, a file)"
        ),
    )
    ha, hb = (_store.read_header(os.path.join(directory, f"run{i}.trace")) for i in (1, 2))
    f = replace(f, explanation={**_explain.explain(f, report, ha, hb), "replay": first.explanation["replay"]})
    return replace(report, kind="external", first=f)


def _say(progress: Say | None) -> Say:
    return progress or (lambda msg: logger.info(msg))


def debug_script(
    target: str,
    args: Sequence[str] = (),
    options: DebugOptions | None = None,
    *,
    progress: Say | None = None,
    output: Say | None = None,
) -> DebugReport:
    """Record ``target`` twice, each run in a fresh interpreter and a working folder of its
    own, compare the traces and classify the first divergence (``fwd9m debug``).

    Args:
        target: a script path (a module name with ``options.module``).
        args: the script's arguments.
        options: how to record (:class:`DebugOptions`; default: its defaults).
        progress: called with one-line progress messages (which run, how long);
            default: the ``fwd9m`` logger at INFO.
        output: called with the end of a failed run's own output (escaped lines);
            default: ``progress``.

    Returns:
        The :class:`fwd9m.debug.DebugReport` of the two runs (``render()`` for text, JSON or
        HTML). Without ``options.keep`` the traces are deleted before it returns and
        the report names them by file name.

    Raises:
        ConfigurationError: a missing target, a script that imports no framework
            recorded, or ``keep`` naming a file or holding files fwd9m did not write.
        RunError: a run timed out, or there is no verdict: both runs failed, a trace
            lacks its end record, or neither run recorded an op.
    """
    from .._runtime import isolation, lease
    from .._runtime.workdir import Guard

    options = options or DebugOptions()
    _check_keep(options, target)
    _check_target(target, options)
    say = _say(progress)
    s = _Session(target, tuple(args), options, say, output or say)
    lease.recover(say)
    state = Path(tempfile.mkdtemp(prefix="fwd9m-debug-"))  # the traces (without --keep) and the guard's copies
    directory = options.keep or str(state / "traces")
    try:  # from here on, every way out (SIGTERM too) goes through lease.finish
        lease.claim(state)
        os.makedirs(directory, exist_ok=True)
        script = None if options.module else target
        s.options = options = replace(
            options, cwd=isolation.choose(options.cwd, Path.cwd(), script, os.path.abspath(directory), say)
        )
        if options.cwd == "link":  # what a run writes into your files through its links is put back
            s.guard = Guard.make(Path.cwd(), state / "backup" / "files", skip=(directory,))
        return _hide_deleted(_two_runs(s, directory), None if options.keep else directory)
    finally:
        lease.finish(state, s.guard, False, say)


def record_script(
    target: str, args: Sequence[str], output: str, options: DebugOptions | None = None, *, progress: Say | None = None
) -> int:
    """Record one run of ``target`` into the trace ``output`` (``fwd9m debug record``),
    in the current directory as the script runs on its own; its output passes through
    to stderr. Returns the script's exit status.

    Raises:
        ConfigurationError: ``output`` cannot be written (a directory, a pipe, a missing
            folder, the script itself, or a file fwd9m did not write without
            ``force``), a missing target, or a script that imports no framework recorded.
        RunError: the run timed out, or it failed before the trace was opened.
    """
    options = options or DebugOptions()
    check_output_path(output)
    _refuse_overwrites(options, target if not options.module else None, [output], "-o")
    _check_target(target, options)
    say = _say(progress)
    return _record(_Session(target, tuple(args), options, say, say, in_place=True), output)
