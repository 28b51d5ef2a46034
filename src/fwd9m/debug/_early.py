"""``fwd9m debug``'s early stop: before anything is recorded op by op, two cheap runs
side by side with step digests only (``fwd9m check``'s early stop,
:mod:`fwd9m.check._lockstep`) find the first training step whose loss, parameters,
gradients, buffers or optimizer state differ; the op-level runs then record that step
only and end right after it (:data:`~fwd9m._recording._common.ENV_STOP_AFTER`).

Steps are PyTorch optimizer steps here: the digest runs number them as the PyTorch
recorder's step window does (one per ``optimizer.step()``, from 0), so it is used for
scripts that import PyTorch and no other framework recorded, only when the automatic
optimizer hook recorded the steps (a callback's step may hold several optimizer steps,
with gradient accumulation), and not when the steps are named (``--steps``). Where no
step differs (no optimizer step, a script that differs only after training, runs that
changed your files) nothing is narrowed and ``fwd9m debug`` records the whole runs, as
without it. Digest runs that end differently (one exits with another status, crashes or
times out) and differ in no step are reported as they are (:class:`Ended`,
:func:`ended_report`): their exit statuses and the end of each run's stderr, without
recording anything op by op.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Ended", "applies", "ended_report", "first_step", "note", "overlap"]


@dataclass(frozen=True)
class Ended:
    """Digest runs that differ in no step but ended differently: the
    :class:`~fwd9m.check._result.RunInfo` of each (status, timeout, stderr tail)."""

    infos: tuple[Any, Any]


#: the op-level runs start beside the digest runs (:func:`overlap`) where at least this
#: many cores are there for the four runs at once
OVERLAP_CPUS = 4
#: ``1``: start the op-level runs beside the digest runs; ``0``: after them; unset: :func:`overlap` decides
ENV_OVERLAP = "FWD9M_DEBUG_OVERLAP"
#: device files of GPUs (NVIDIA, AMD): where one exists the op-level runs wait for the
#: digest runs, so that no more than two runs hold accelerator memory at once
_ACCELERATORS = ("/dev/nvidiactl", "/dev/kfd")


def overlap() -> bool:
    """Whether the op-level runs start with the digest runs, each waiting at its steps for
    their verdict (their start-up and the steps before the one that differs then overlap
    the digest runs): on a machine without a GPU and with :data:`OVERLAP_CPUS` cores for
    this process (fewer: four runs would share them, and take as long as two after two),
    or as :data:`ENV_OVERLAP` says."""
    forced = os.environ.get(ENV_OVERLAP)
    if forced in ("0", "1"):
        return forced == "1"
    if any(os.path.exists(p) for p in _ACCELERATORS):
        return False
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return cpus >= OVERLAP_CPUS


def applies(s: Any) -> bool:
    """Whether the early stop runs for this session: on, no ``--steps``, PyTorch only."""
    from ._child import detect_frameworks

    o = s.options
    if not o.early_stop or s.steps is not None:
        return False
    names = list(o.frameworks) or detect_frameworks(s.target, o.module)
    return names == ["torch"]


def first_step(s: Any, directory: str, compared: Any = None) -> Any:
    """Runs 1 and 2 side by side with step digests; the
    :class:`~fwd9m.check._lockstep.Divergence` of their first differing step, an
    :class:`Ended` when no step differs but the runs ended differently, or None.
    ``compared``: told as they go how many steps agree, and the divergence
    (:func:`fwd9m.check._lockstep.run_pair`)."""
    from ..check._lockstep import doubt, run_pair
    from ..check._parallel import for_runs
    from ..check._process import _Run
    from ..check._result import RunInfo

    o = s.options
    target = s.target if o.module else os.path.abspath(s.target)
    cmd = [sys.executable, "-m", "fwd9m._runtime.capture", *(["-m"] if o.module else []), target, *s.args]
    root = _own_folder(Path(directory) / "steps")
    runs = []
    for i in (1, 2):
        d = root / f"run{i}"
        runs.append(_Run(RunInfo(f"digest run {i}", cmd), d, d / "cwd", d / "stdout"))
    env: dict[str, str] = {}
    if o.module and o.cwd == "empty":  # the module is found from your directory, as python -m finds it
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(Path.cwd()), os.environ.get("PYTHONPATH", "")) if p)
    order = for_runs(["torch"], {**os.environ, **env})  # applies(): the script trains with PyTorch only
    program = {"script": target, "argv": list(s.args), "module": bool(o.module)}  # as the op-level runs' header
    ring = _Ring(root, compared, program) if ring_on() else None
    envs = ring.envs(env) if ring else [env, env]
    how = {
        "side by side": "two runs side by side",
        "in lock step": "two runs in lock step (one training step at a time, in turn)",
    }.get(order.how, "two runs one after the other (run 2 stops there)")
    s.say(f"step digests first: {how}, to find the first training step that differs")
    found, _ = run_pair(
        runs,
        Path.cwd(),
        o.cwd,
        envs,
        False,
        o.timeout,
        ["1/2", "2/2"],
        s.say,
        s.guard,
        s.target,
        True,
        ring.compared if ring else compared,
        parallel=lambda _module: order,
    )
    if found is None:
        return _no_step_differs(s, runs, ring)
    reason = doubt(runs, True)
    if found.source != "auto":  # a callback's step need not be an optimizer step (accumulation)
        reason = f"its steps were recorded by {found.source or 'an unknown source'}, not counted as optimizer steps"
    if reason is not None:
        s.say(f"step digests: the runs differ at step {found.step}, but {reason}; recording the whole runs")
        return None
    s.ring = ring.traces(found.index) if ring else None
    then = "its ops, from the digest runs' rings" if s.ring else "op-level runs of that step only"
    s.say(f"step digests: first difference at step {found.index}; {then}")
    return found


#: ``0``: no op-level ring in the digest runs (the op-level runs record the step instead)
ENV_RING_ON = "FWD9M_DEBUG_RING_ON"


def ring_on() -> bool:
    """Whether the digest runs record their ops into a ring
    (:mod:`fwd9m._recording._ring`): unless :data:`ENV_RING_ON` is ``0``."""
    return os.environ.get(ENV_RING_ON) != "0"


class _Ring:
    """The op-level rings of the two digest runs: where each writes its steps, and the
    gate file that tells them which steps agree (their records then dropped)."""

    def __init__(self, root: Path, compared: Any, program: dict):
        from .._recording._common import StepGate

        self.root, self.then, self.program = root, compared, program
        self.gate = str(root / "ring.gate")
        self.outs = [str(root / f"run{i}" / "ring.trace") for i in (1, 2)]
        StepGate.write(self.gate, 0)

    def envs(self, env: dict[str, str]) -> list[dict[str, str]]:
        import json

        from .._recording._ring import ENV_RING, ENV_RING_GATE, ENV_RING_PROGRAM

        program = json.dumps(self.program)
        return [{**env, ENV_RING: out, ENV_RING_GATE: self.gate, ENV_RING_PROGRAM: program} for out in self.outs]

    def compared(self, agree: int, found: Any) -> None:
        from .._recording._common import StepGate

        if found is None:
            StepGate.write(self.gate, agree)
        if self.then is not None:
            self.then(agree, found)

    def traces(self, step: int | None) -> list[str] | None:
        """Both runs' traces of ``step`` (None: of the whole runs), complete with their
        end record, or None."""
        from .._recording._ring import ring_path
        from .._recording._store import TraceReader

        paths = [ring_path(out, step) if step is not None else out for out in self.outs]
        for p in paths:
            try:
                reader = TraceReader(p)
                for _ in reader:
                    pass
            except Exception:  # noqa: BLE001 - missing or damaged: the op-level runs then
                return None
            if reader.end is None:
                return None
        return paths


def _no_step_differs(s: Any, runs: list, ring: Any = None) -> Ended | None:
    """Digest runs in which no step differs: an :class:`Ended` when they ended differently
    (unless they changed your files, where each could see the other's: then, as when
    they ended alike, None: the whole runs are recorded, or taken from the rings,
    ``s.whole``, when both exited with status 0, wrote the whole run and changed none
    of your files)."""
    a, b = (r.info for r in runs)
    mixed = any(r.touched or r.through for r in runs)
    if _status(a) != _status(b) and not mixed:
        s.say(f"step digests: no training step differs, but run 1 {_status(a)} and run 2 {_status(b)}")
        _show_tails(s, (a, b))
        return Ended((a, b))
    # runs that failed are recorded again, as without the ring: their logs are shown
    usable = ring is not None and not mixed and a.returncode == 0 and b.returncode == 0 and not s.options.fast
    whole = ring.traces(None) if usable else None
    if whole:
        s.whole = (whole, [a.returncode or 0, b.returncode or 0])
        s.say("step digests: no training step differs; the whole runs, op by op, from the digest runs' rings")
        return None
    s.say("step digests: no training step differs; recording the whole runs")
    return None


#: marks a digest-runs folder as fwd9m's, so that a later ``--keep`` into the same folder replaces it
_MARK = ".fwd9m-digest-runs"


def _own_folder(root: Path) -> Path:
    """``root``, new and marked as fwd9m's: one left by an earlier ``debug --keep`` into the
    same folder is replaced (it failed with FileExistsError); one fwd9m did not make is
    refused."""
    import shutil

    from ..errors import ConfigurationError

    if root.exists():
        if not (root / _MARK).exists():
            raise ConfigurationError(
                f"{root} exists and fwd9m did not make it; --keep a folder without it, or remove it"
            )
        shutil.rmtree(root)
    root.mkdir(parents=True)
    (root / _MARK).write_text("the step-digest runs of fwd9m debug's early stop\n")
    return root


def _status(info: Any) -> str:
    """How a digest run ended: ``exited with status N`` or ``timed out``."""
    return "timed out" if info.timed_out else f"exited with status {info.returncode}"


def _show_tails(s: Any, infos: tuple[Any, Any]) -> None:
    """The end of each digest run's stderr, escaped, as a failed recorded run's log is shown."""
    from ..compare import printable

    for i, info in enumerate(infos, 1):
        if info.stderr_tail:
            s.say(f"  digest run {i} {_status(info)}; the end of its stderr:")
            s.show("\n".join(f"    | {line}" for line in printable(info.stderr_tail).splitlines()[-_TAIL_LINES:]))


def ended_report(ended: Ended) -> Any:
    """The report of digest runs that ended differently: NOT REPRODUCIBLE (kind
    ``exit``), with each run's exit status and the end of its stderr (escaped when the
    report is rendered); no op was recorded."""
    from ._compare import DebugReport

    a, b = ended.infos
    notes = [
        f"NOT REPRODUCIBLE: run 1 {_status(a)}, run 2 {_status(b)}; no training step differs in "
        f"their step digests (two runs, nothing recorded op by op; fwd9m debug "
        f"--no-early-stop records the whole runs, one after the other)"
    ]
    for i, info in enumerate(ended.infos, 1):
        lines = info.stderr_tail.splitlines()[-_TAIL_LINES:]
        end = " | ".join(line.strip() for line in lines if line.strip())
        notes.append(f"run {i} {_status(info)}; " + (f"the end of its stderr: {end}" if end else "its stderr is empty"))
    return DebugReport(a.label, b.label, "torch", False, "exit", 0, 0, notes=notes)


#: the last lines of each run's stderr in the report of runs that ended differently
_TAIL_LINES = 12


def note(found: Any, ring: bool = False) -> str:
    """The report's note on the early stop (``ring``: the step's ops came from the
    digest runs' rings, :mod:`fwd9m._recording._ring`)."""
    names = ", ".join(f"{g}/{n}" for g, n, _, _ in found.differ[:5])
    more = f" and {len(found.differ) - 5} more" if len(found.differ) > 5 else ""
    how = (
        "the digest runs recorded the ops of their steps too, and kept that step's"
        if ring
        else "ops were recorded for that step only, each run ending after it"
    )
    return (
        f"early stop: step digests of two runs {'one after the other' if found.after else 'side by side'} first "
        f"differ at optimizer step {found.index} "
        f"({names}{more}); {how} "
        f"(fwd9m debug --no-early-stop records the whole runs)"
    )
