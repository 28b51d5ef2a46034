"""``fwd9m check --resume``: does a run that was interrupted and resumed end as the
uninterrupted run does, and if not, which state was lost at the resume point?

Three runs of the same command, each in a fresh interpreter:

- run B is interrupted (:class:`Interruption`): at a step or epoch boundary, or at the
  first boundary after a checkpoint file appeared in its folder, the child pauses
  (:mod:`fwd9m.check._resume_child`) and fwd9m sends it SIGTERM (and SIGKILL to its
  process group when it has not exited after ``grace`` seconds, as a scheduler does) or
  SIGKILL;
- run A runs uninterrupted in a folder of its own;
- run C runs the same command plus the resume arguments in run B's folder, so that it
  resumes from what B saved.

C is compared with A as ``fwd9m check`` compares two runs (:func:`._runs._compare_runs`):
the files A wrote (in C's folder: what B and C wrote), the printed output after the first
resumed step, the final state. The resume point is the step of A whose weights C starts
from; at it, the digest of each state component (RNG streams, optimizer, LR scheduler,
gradient scaler, sampler position, Keras seed generators) before that step of A is
compared with C's before its first step, and each one that differs is named with its fix.
Runs A and B are also compared step by step up to the interruption: if they differ,
the script is not reproducible even without an interruption, and that is said first.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._log import logger
from .._runtime import isolation, lease
from ..errors import ConfigurationError, RunError
from . import _resume_child as child
from ._process import Guard, _execute, _Run, _run_notes
from ._result import CheckResult, Draft, Finding, RunInfo
from ._runs import _compare_runs

#: seconds between SIGTERM and SIGKILL by default (SLURM's KillWait defaults to 30 s:
#: https://slurm.schedmd.com/slurm.conf.html#OPT_KillWait)
DEFAULT_GRACE_S = 30.0
SIGNALS = {"TERM": signal.SIGTERM, "KILL": signal.SIGKILL}


@dataclass(frozen=True)
class Interruption:
    """Where and how run B is interrupted: ``at`` is ``"step"``, ``"epoch"`` or
    ``"checkpoint"``, ``n`` which one (1-based); ``signal`` ``"TERM"`` or ``"KILL"``;
    ``grace``: seconds between SIGTERM and SIGKILL."""

    at: str
    n: int
    signal: str = "TERM"
    grace: float = DEFAULT_GRACE_S

    @classmethod
    def parse(cls, spec: str, sig: str = "TERM", grace: float = DEFAULT_GRACE_S) -> Interruption:
        """``"5"`` (after step 5), ``"epoch:1"``, ``"checkpoint"`` or ``"checkpoint:2"``.

        Raises:
            ConfigurationError: another form, a count below 1, an unknown signal or a
                grace that is not positive.
        """
        kind, sep, count = spec.strip().partition(":")
        if not sep and kind.isdigit():
            kind, count = "step", kind
        elif not sep and kind == "checkpoint":
            count = "1"
        usage = (
            "expected STEPS (after that many optimizer steps), epoch:N (at the end of epoch N) or "
            "checkpoint[:N] (after the N-th checkpoint the run writes), for example --interrupt-after 5"
        )
        if kind not in ("step", "epoch", "checkpoint") or not count.isdigit() or int(count) < 1:
            raise ConfigurationError(f"--interrupt-after {spec!r}: {usage}")
        name = sig.upper().removeprefix("SIG")
        if name not in SIGNALS:
            raise ConfigurationError(
                f"--signal {sig!r}: expected TERM (a scheduler's preemption, then KILL "
                f"after --grace) or KILL (a crash or a lost node)"
            )
        if not grace > 0:  # nan too
            raise ConfigurationError(f"--grace must be positive, got {grace}")
        return cls(kind, int(count), name, float(grace))

    @property
    def env(self) -> str:
        return f"{self.at}:{self.n}"

    def describe(self) -> str:
        where = {
            "step": f"after step {self.n}",
            "epoch": f"at the end of epoch {self.n}",
            "checkpoint": "after its first checkpoint" if self.n == 1 else f"after checkpoint {self.n}",
        }
        return f"{where[self.at]} with SIG{self.signal}"


@dataclass
class LostState:
    """A state component that differs at the resume point, and how to save it."""

    component: str
    what: str
    fix: str

    def to_dict(self) -> dict[str, str]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class ResumeResult(CheckResult):
    """The outcome of :func:`check_resume`: truthy when run C (resumed) agrees with run
    A (uninterrupted) bit for bit and did resume (it did not start from scratch)."""

    interruption: str = ""
    interrupted_at: int | None = None  #: run B's last step when it was signalled
    resume_step: int | None = None  #: steps done before run C's first step (None: not found)
    from_scratch: bool = False
    lost: list[LostState] = field(default_factory=list)
    diverged_before: str | None = None  #: runs A and B differ before the interruption

    @property
    def reproducible(self) -> bool:
        return not self.findings and not self.from_scratch and self.diverged_before is None

    def verdict(self) -> str:
        what = (
            ", ".join(f"{v} {k[:-1] if v == 1 and k.endswith('s') else k}" for k, v in self.compared.items() if v)
            or "no values"
        )
        at = f" from step {self.resume_step}" if self.resume_step is not None else ""
        if self.diverged_before:
            return (
                f"NOT REPRODUCIBLE EVEN WITHOUT AN INTERRUPTION: runs A and B of {self.target} differ "
                f"before B was interrupted ({self.diverged_before}); fix that first (fwd9m check "
                f"{self.target}), then check the resume."
            )
        if self.from_scratch:
            return (
                f"RESUME STARTED FROM SCRATCH: run C of {self.target} did not load what run B saved "
                f"(B was interrupted {self.interruption}, after {self.interrupted_at} step(s)): its first "
                f"step starts from the initial weights."
            )
        if self.reproducible:
            return (
                f"RESUMES EXACTLY: run C of {self.target} (resumed{at}, after run B was interrupted "
                f"{self.interruption}) agrees with run A (uninterrupted) bit for bit ({what})."
            )
        lost = f"; lost at the resume point: {', '.join(s.component for s in self.lost)}" if self.lost else ""
        return (
            f"RESUME NOT EXACT: run C of {self.target} (resumed{at}, after run B was interrupted "
            f"{self.interruption}) differs from run A (uninterrupted): {len(self.findings)} difference(s)"
            f"{lost} (compared {what})."
        )

    def report(self, max_findings: int | None = 5) -> str:
        from ..compare import escape_control

        runs = self.runs  # listed below, with what each run did; the base report without them
        lines = super(ResumeResult, dataclasses.replace(self, runs=[])).report(max_findings).split("\n")
        lines = ["Compared (run C with run A):" if x == "Compared (each run with run 1):" else x for x in lines]
        extra = []
        if self.lost:
            point = (
                f"run A before step {self.resume_step + 1} vs run C just after loading, before its first step"
                if self.resume_step is not None
                else "run C just after loading"
            )
            extra += ["", f"Lost at the resume point ({point}):"]
            extra += [escape_control(f"  - {s.component}: {s.what}") for s in self.lost]
        extra += ["", "Runs:"]
        extra += [escape_control(f"  {r.label}: {_status(r)}, {r.seconds:.1f} s") for r in runs]
        return "\n".join(lines[:1] + extra + lines[1:])

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["resume"] = {
            "interruption": self.interruption,
            "interrupted_at": self.interrupted_at,
            "resume_step": self.resume_step,
            "from_scratch": self.from_scratch,
            "lost": [s.to_dict() for s in self.lost],
            "diverged_before": self.diverged_before,
        }
        return out


def _status(r: RunInfo) -> str:
    return "timed out" if r.timed_out else f"exit {r.returncode}" if r.returncode is not None else r.error or "not run"


# --------------------------------------------------------------------------- the fixes

_RNG = {
    "python": "Python's random",
    "numpy": "NumPy's global RNG",
    "torch": "torch's CPU generator",
    "torch.cuda": "torch's CUDA generators",
    "tensorflow": "TensorFlow's global seed and op-seed counter",
    "tensorflow.global_generator": "TensorFlow's global tf.random.Generator",
    "keras": "Keras' global SeedGenerator",
}
_TORCH_RNG_FIX = (
    "save it in the checkpoint: ckpt['rng'] = fwd9m.rng.state_dict(), and after loading "
    "fwd9m.rng.load_state_dict(ckpt['rng'])"
)
_KERAS_RNG_FIX = (
    "add fwd9m.callbacks.RngStateCheckpoint(backup_dir + '/rng.npz') to fit's callbacks next "
    "to BackupAndRestore (it saves the RNG streams and the layers' SeedGenerators at each epoch end)"
)
# pytorch_lightning/trainer/connectors/checkpoint_connector.py (2.6.6) saves no RNG state
_LIGHTNING_RNG_FIX = (
    "a Callback whose on_save_checkpoint sets checkpoint['rng'] = fwd9m.rng.state_dict() and "
    "whose on_load_checkpoint calls fwd9m.rng.load_state_dict(checkpoint['rng']) (Lightning's "
    "checkpoints hold no RNG state)"
)
# transformers/trainer.py _save_rng_state / _load_rng_state: Python, NumPy, torch CPU and CUDA only
# (rng_state.pth), and inside an epoch only after fetching the first resumed batch (rng_to_sync)
_HF_RNG_FIX = (
    "Trainer saves Python's, NumPy's and torch's global generators with each checkpoint, but when "
    "it resumes inside an epoch it restores them only after it has fetched (collated) the first "
    "batch, so a collator or dataset drawing from them gets other numbers: checkpoint at epoch ends "
    "(save_strategy='epoch'), or give the collator a generator of its own registered with "
    "fwd9m.rng.register(gen, 'name') and saved with fwd9m.save_rng_state next to each checkpoint"
)
_FIXES = {
    "optimizer": (
        "the optimizer's state (moments, step counts, learning rate)",
        ("save optimizer.state_dict() in the checkpoint and optimizer.load_state_dict(...) after building it"),
    ),
    "lr scheduler": (
        "the learning-rate scheduler's position",
        "save scheduler.state_dict() in the checkpoint and scheduler.load_state_dict(...)",
    ),
    "grad scaler": (
        "the gradient scaler's scale and growth tracker",
        "save scaler.state_dict() in the checkpoint and scaler.load_state_dict(...)",
    ),
    "sampler position": (
        "the data order: the sampler's epoch and position in it",
        (
            "save sampler.state_dict() of the fwd9m.data.ResumableSampler in the checkpoint, "
            "load it, and call sampler.advance(batch_size) after each step"
        ),
    ),
    "data loader generator": (
        "the DataLoader's generator, from which each iter(loader) draws the workers' "
        "base seed (torch/utils/data/dataloader.py) and a RandomSampler its order",
        (
            "at an epoch boundary: fwd9m.rng.register(loader, 'loader') so that "
            "fwd9m.rng.state_dict() saves it; inside an epoch a resumed run draws from it once "
            "more than the uninterrupted one (a new iter), so take the order from "
            "fwd9m.data.ResumableSampler and the samples' randomness from "
            "fwd9m.data.SampleSeeded instead"
        ),
    ),
    "keras seed generators": ("the layers' SeedGenerators (dropout masks, random augmentation)", _KERAS_RNG_FIX),
    "model weights": (
        "the weights before run C's first step match no step of run A up to the interruption",
        (
            "save model.state_dict() (or the weights) in the checkpoint and load them before training; "
            "save them in full precision"
        ),
    ),
}


_JAX_KEY_FIX = (
    "save the key in the checkpoint with the weights (jax.random.key_data(key) for a typed key, "
    "the uint32 array itself for jax.random.PRNGKey) and restore it when resuming "
    "(jax.random.wrap_key_data(...)), or derive it from the step: jax.random.fold_in(key, step)"
)


def _lost_jax(name: str) -> LostState:
    """An argument of the jitted training step that differs at the resume point."""
    if any(w in name.lower() for w in ("key", "rng", "seed")):
        what = f"the PRNG key passed to the jitted step as {name!r} (dropout masks, sampling)"
        fix = _JAX_KEY_FIX
    elif "opt" in name.lower():
        what = f"the optimizer state passed to the jitted step as {name!r}"
        fix = "save the optax state (opt_state) in the checkpoint with the weights and restore it"
    else:
        what = f"the argument {name!r} of the jitted training step (a batch: the data order or position)"
        fix = "save what it is made from (the data position, the step, a key) in the checkpoint and restore it"
    return LostState(f"JAX step argument {name}", f"{what}: not the same. Fix: {fix}", fix)


def _lost(component: str, hook: str) -> LostState:
    if component.startswith("jax argument "):
        return _lost_jax(component.removeprefix("jax argument "))
    if component.startswith("generator:"):
        where = component.split(":", 1)[1]
        fix = (
            f"fwd9m.rng.register(<the DataLoader's {where}>, 'name') so that fwd9m.rng.state_dict() "
            f"(or fwd9m.save_rng_state) saves it with each checkpoint, restored when resuming"
        )
        if where.startswith("dataset."):
            fix = "seed each sample from (seed, epoch, index) with fwd9m.data.SampleSeeded, or " + fix
        return LostState(
            f"generator {where}", f"the generator {where} of the DataLoader: not the same. Fix: {fix}", fix
        )
    if component.startswith("rng:"):
        source = component[4:]
        if source.startswith("user."):
            what = f"the registered generator {source[5:]!r}"
        else:
            what = _RNG.get(source, source)
        fix = {"keras": _KERAS_RNG_FIX, "lightning": _LIGHTNING_RNG_FIX, "transformers": _HF_RNG_FIX}.get(
            hook, _TORCH_RNG_FIX
        )
        if source == "torch" and hook == "torch":  # a shuffling DataLoader draws its order from it
            fix += (
                "; for a stop inside an epoch take the data order from fwd9m.data.ResumableSampler "
                "(its state_dict() in the checkpoint too)"
            )
        return LostState(f"RNG {source}", f"{what}: not the same. Fix: {fix}", fix)
    what, fix = _FIXES.get(component, (component, "save it in the checkpoint and restore it"))
    return LostState(component, f"{what}: not the same. Fix: {fix}", fix)


# --------------------------------------------------------------------------- runs


class _Deferred:
    """A guard for runs B and C: the user's files are put back after run C, not after
    run B (C resumes from what B wrote through the links)."""

    def __init__(self) -> None:
        self.changed: list[str] = []

    def restore(self, changed: list[str]) -> None:
        self.changed += changed


class _Interrupter:
    """``_execute``'s control callback for run B: signal the run once the child says it
    reached the boundary, and kill its process group after ``grace`` if it is still there."""

    def __init__(self, folder: Path, how: Interruption, say: Callable[[str], None]) -> None:
        self.folder, self.how, self.say = folder, how, say
        self.info: dict[str, Any] | None = None
        self.sent: float | None = None
        self.killed = False

    def __call__(self, proc) -> None:
        if self.sent is None:
            path = self.folder / "interrupt.json"
            if not path.exists():
                return
            try:
                info = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return
            self.info = info if isinstance(info, dict) else {}
            try:
                if self.how.signal == "KILL":  # a lost node: every process of the job at once
                    os.killpg(proc.pid, signal.SIGKILL)
                else:  # a scheduler's preemption notice, to the main process
                    os.kill(proc.pid, signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                pass
            (self.folder / "signalled").touch()
            self.sent = time.monotonic()
            self.say(f"run B: sent SIG{self.how.signal} at step {self.info.get('step')}")
        elif self.how.signal == "TERM" and not self.killed and time.monotonic() - self.sent > self.how.grace:
            self.killed = True
            self.say(f"run B: still running {self.how.grace:g} s after SIGTERM: SIGKILL to its process group")
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def _events(folder: Path) -> list[dict[str, Any]]:
    try:
        text = (folder / "events.jsonl").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if isinstance(e, dict):
            out.append(e)
    return out


def _pre_states(events: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {
        e["step"]: e
        for e in events
        if e.get("e") == "pre" and isinstance(e.get("step"), int) and isinstance(e.get("state"), dict)
    }


def _post_offsets(events: list[dict[str, Any]]) -> dict[int, int]:
    return {
        e["step"]: e["stdout"]
        for e in events
        if e.get("e") == "post" and isinstance(e.get("step"), int) and isinstance(e.get("stdout"), int)
    }


def _segment(src: Path, offset: int | None, dst: Path, end: int | None = None) -> Path:
    """The part of ``src`` from ``offset`` (the start when None) to ``end`` (the end when
    None) in ``dst``."""
    with open(src, "rb") as f, open(dst, "wb") as out:
        f.seek(offset or 0)
        if end is None:
            shutil.copyfileobj(f, out)
        else:
            out.write(f.read(max(0, end - (offset or 0))))
    return dst


def _compare_tails(result: Draft[ResumeResult], tails: tuple[Path, Path], a: _Run, c: _Run, strict: bool) -> None:
    """What runs A and C printed after their last step. A summary there may be an average
    over the steps the process itself ran (HF Trainer's ``train_loss``: C ran only the steps
    after the resume), so when the final state or files were compared and agree on their
    own, a difference there is a note; with nothing else compared it is a finding."""
    from ..compare import compare_text
    from ._runs import _text_finding

    d = compare_text("stdout after the last step", tails[0], tails[1], a.replacements, c.replacements, strict=strict)
    if d is None:
        return
    finding = _text_finding("stdout", c.info.label, d, a.info.label)
    if result.compared.get("state tensors") or result.compared.get("files"):
        first = "; ".join(line.strip() for line in (finding.detail or "").splitlines())
        result.notes.append(
            f"what was printed after the last step differs ({finding.summary}; {first}), and the "
            f"final state and files were compared: such a line is often a summary over the steps "
            f"each process ran (run C ran only those after the resume), as HF Trainer's "
            f"train_loss is, so it is not counted as a difference"
        )
    else:
        result.findings.append(finding)


def check_resume(
    target: str,
    args: Sequence[str] = (),
    *,
    how: Interruption,
    resume_args: Sequence[str] = (),
    module: bool = False,
    timeout: float | None = None,
    env: dict[str, str] | None = None,
    cwd: str = "isolate",
    keep: bool = False,
    progress: Callable[[str], None] | None = None,
    python: str | None = None,
    strict: bool = False,
    checkpoint: str | None = None,
) -> ResumeResult:
    """Run ``target`` interrupted (B), uninterrupted (A), and resumed in B's folder with
    ``resume_args`` appended (C); compare C with A and name the state lost at the resume
    point.

    Raises:
        RunError: no verdict: run B finished, crashed or wrote nothing before the
            interruption, or ignored SIGTERM past ``how.grace``; the resumed run
            failed; nothing left running in any case.
    """
    say = progress or (lambda msg: logger.info(msg))
    invocation = Path.cwd()
    display, source, cmd = _command(target, args, module, python or sys.executable)
    lease.recover(say)
    root, guard = Path(tempfile.mkdtemp(prefix="fwd9m-resume-")), None
    deferred = _Deferred()
    env = dict(env or {})
    if checkpoint:  # what --interrupt-after checkpoint waits for
        env[child.ENV_CHECKPOINT] = checkpoint
    if "PYTHONHASHSEED" not in env and "PYTHONHASHSEED" not in os.environ:
        env["PYTHONHASHSEED"] = "0"  # the same string hashing in A, B and C: a resume is what is tested
    try:  # from here on, every way out (SIGTERM too) goes through lease.finish
        lease.claim(root)
        cwd = isolation.choose(cwd, invocation, source, str(root), say)
        guard = Guard.make(invocation, root / "backup") if cwd == "link" else None
        b = _run_b(cmd, root, invocation, cwd, env, timeout, how, say, deferred, display)
        a, c = _runs_a_and_c(cmd, resume_args, root, invocation, cwd, env, timeout, say, guard, deferred, b)
        result = _compare(display, a, b, c, source, strict, root, how)
        _add_run_notes(result, [a, b, c], display, guard, env, root if keep else None)
        return result.freeze()
    finally:
        lease.finish(root, guard, keep, say)


def _command(target: str, args: Sequence[str], module: bool, python: str) -> tuple[str, str | None, list[str]]:
    """How the report names the script, its source file (None for a module), and the
    command of each run (the resume child running it)."""
    from .._runtime.launch import resolve_target

    display = " ".join([*(["-m"] if module else []), target, *args])
    source = None
    if not module:
        target = source = str(Path(resolve_target(target)).resolve())
    return display, source, [python, "-m", "fwd9m.check._resume_child", *(["-m"] if module else []), target, *args]


def _runs_a_and_c(cmd, resume_args, root, invocation, cwd, env, timeout, say, guard, deferred, b) -> tuple[_Run, _Run]:
    """Run A through (recording the state before the steps B did, and one more), then run
    C, the command plus ``resume_args``, in run B's folder."""
    n_b = b.info.settings["interrupted at step"]
    a = _one_run(
        "run A (uninterrupted)",
        cmd,
        root / "runA",
        invocation,
        cwd,
        env,
        timeout,
        say,
        guard,
        record=int(n_b) + 1,
        which="2/3",
    )
    c = _one_run(
        "run C (resumed)",
        cmd + list(resume_args),
        root / "runC",
        invocation,
        cwd,
        env,
        timeout,
        say,
        deferred,
        record=1,
        which="3/3",
        work=b.cwd,
    )
    if c.info.returncode != 0:
        raise RunError(
            f"the resume command failed (run C: {_status(c.info)}), so there is no verdict: "
            f"{shlex.join(cmd[3:] + list(resume_args))} in run B's folder. End of its error "
            f"output:\n{c.info.stderr_tail}\nFix: pass the arguments that make the script load "
            f'its checkpoint with --resume-args "..." (or none, if it resumes by itself)'
        )
    return a, c


def _add_run_notes(
    result: Draft[ResumeResult], runs: list[_Run], display: str, guard, env: dict, kept: Path | None
) -> None:
    """The notes about the runs themselves: the watch and the guard of your directory, the
    hash seed they ran with, where they were kept."""
    result.notes[:0] = _run_notes(runs, display, guard)
    if env.get("PYTHONHASHSEED") == "0" and "PYTHONHASHSEED" not in os.environ:
        result.notes.append(
            "the three runs ran with PYTHONHASHSEED=0, so that string hashing is the same in "
            "each (whether the script depends on it is fwd9m check's question)"
        )
    if kept is not None:
        result.notes.append(f"run directories kept in {kept} (runA, runB: B's folder, where C ran too)")


def _one_run(
    label: str,
    cmd: list[str],
    folder: Path,
    invocation: Path,
    cwd: str,
    env: dict[str, str] | None,
    timeout: float | None,
    say,
    guard,
    *,
    record: int,
    which: str,
    at: str = "",
    work: Path | None = None,
    control=None,
) -> _Run:
    """One run in ``folder`` (its working directory: ``work``, default a new one there),
    recording the state before its first ``record`` steps."""
    run = _Run(RunInfo(label, list(cmd)), folder, work or folder / "cwd", folder / "stdout")
    folder.mkdir(parents=True)
    (folder / "resume").mkdir()
    extra = {**(env or {}), child.ENV_DIR: str(folder / "resume"), child.ENV_RECORD: str(record)}
    if at:
        extra[child.ENV_AT] = at
    _execute(run, invocation, cwd, extra, False, timeout, which, say, guard, control=control)
    return run


def _run_b(cmd, root, invocation, cwd, env, timeout, how: Interruption, say, deferred, display) -> _Run:
    """Run B, interrupted; its step count is ``settings["interrupted at step"]``."""
    control = _Interrupter(root / "runB" / "resume", how, say)
    b = _one_run(
        f"run B (interrupted {how.describe()})",
        cmd,
        root / "runB",
        invocation,
        cwd,
        env,
        timeout,
        say,
        deferred,
        record=how.n + 1 if how.at == "step" else 10**9,
        which="1/3",
        at=how.env,
        control=control,
    )
    events = _events(root / "runB" / "resume")
    steps = max((e["step"] for e in events if e.get("e") == "post" and isinstance(e.get("step"), int)), default=0)
    if b.info.timed_out:
        raise RunError(f"run B of {display} timed out (--timeout) before it was interrupted; raise --timeout")
    if control.info is None:
        raise _not_interrupted(b, how, steps, display)
    if control.killed:
        raise RunError(
            f"run B of {display} did not exit within {how.grace:g} s of SIGTERM (at step "
            f"{control.info.get('step')}): it ignores SIGTERM, or its handler does not end the run. "
            f"fwd9m killed its process group with SIGKILL; nothing is left running. A scheduler does "
            f"the same, so the job loses the work since its last checkpoint. Fix: on SIGTERM save a "
            f"checkpoint and exit, or raise --grace; to test a hard kill use --signal KILL"
        )
    if not b.files and not deferred.changed:
        raise RunError(
            f"run B of {display} wrote no file before it was interrupted at step "
            f"{control.info.get('step')}, so there is nothing to resume from. Fix: save a checkpoint "
            f"(torch.save, BackupAndRestore, ModelCheckpoint) before step {control.info.get('step')}, "
            f"or interrupt later (--interrupt-after checkpoint waits for the first one)"
        )
    if deferred.changed:  # run A, next, would see them (they are put back once run C is done)
        names = ", ".join(sorted(deferred.changed)[:5])
        raise RunError(
            f"run B of {display} wrote into {names} in your directory, through the links of its working "
            f"folder (a file or folder that existed before the check), so run A would start from what "
            f"B saved there. Your files are put back. Fix: fwd9m check --resume --cwd empty ..., or "
            f"move that folder away first"
        )
    b.info.settings["interrupted at step"] = str(control.info.get("step"))
    return b


def _not_interrupted(b: _Run, how: Interruption, steps: int, display: str) -> RunError:
    """Run B ended before its interruption: why (no step seen, too few steps, no epoch end)."""
    why = (
        "fwd9m saw no training step: no torch.optim optimizer stepped, no Keras fit batch ran "
        "and no jax.jit-compiled function called optax.apply_updates"
        if not steps
        else f"it did {steps} step(s)"
    )
    if how.at == "epoch" and steps:
        why += (
            " and fwd9m saw no epoch end (it sees those of Keras fit, Lightning and the HF Trainer; "
            "for a plain PyTorch or JAX loop give a step count)"
        )
    return RunError(
        f"run B of {display} ended ({_status(b.info)}) before it could be interrupted "
        f"{how.describe()}: {why}. Fix: interrupt it earlier (--interrupt-after N with N below "
        f"the number of steps it trains), or make sure it checkpoints (--interrupt-after checkpoint "
        f"waits for a new file in its folder). End of its error output:\n{b.info.stderr_tail}"
    )


# --------------------------------------------------------------------------- compare


def _resume_point(pre_a: dict, first_c: dict | None, unstable: set) -> tuple[int | None, list, str]:
    """Where run C resumed (the step of run A whose weights C starts from, None if none
    matches), the state components that differ there, and the hook that saw the steps."""
    resume_step, lost, hook = None, [], (first_c or {}).get("hook", "torch")
    if first_c is None:
        return resume_step, lost, hook
    weights = first_c["state"].get("model weights")
    match = [j for j, e in sorted(pre_a.items()) if e["state"].get("model weights") == weights]
    if not match:
        return resume_step, [_lost("model weights", hook)], hook
    j = match[-1]
    sa, sc = pre_a[j]["state"], first_c["state"]
    lost = [
        _lost(k, hook)
        for k in sorted(set(sa) | set(sc), key=_order)
        if k != "model weights" and k not in unstable and sa.get(k) != sc.get(k)
    ]
    return j - 1, lost, hook


def _stdout_spans(a: _Run, c: _Run, ev_a: list, ev_c: list, resume_step: int | None, seg: Path):
    """Which part of each run's printed output is compared: (start and end offsets in A,
    in C), the parts after the last step (A's, C's) or None, and the note saying so."""
    off_a, off_c = _post_offsets(ev_a), _post_offsets(ev_c)
    if resume_step is None or (resume_step + 1) not in off_a or 1 not in off_c:
        return (
            (None, None, None, None),
            None,
            "printed output compared whole (fwd9m found no step of run C to align it by)",
        )
    sa, sc = off_a[resume_step + 1], off_c[1]
    ea, ec = off_a[max(off_a)], off_c[max(off_c)]
    note = (
        f"printed output compared from the end of step {resume_step + 1} to the end of the last "
        f"step (run A) and from the end of run C's first step to the end of its last; what "
        f"followed the last step separately"
    )
    tails = (_segment(a.stdout, ea, seg / "a.tail"), _segment(c.stdout, ec, seg / "c.tail"))
    return (sa, ea, sc, ec), tails, note


def _compare(
    display: str, a: _Run, b: _Run, c: _Run, source: str | None, strict: bool, root: Path, how: Interruption
) -> Draft[ResumeResult]:
    ev_a, ev_b, ev_c = (_events(r.root / "resume") for r in (a, b, c))
    pre_a, pre_b, pre_c = _pre_states(ev_a), _pre_states(ev_b), _pre_states(ev_c)
    n_b = int(b.info.settings["interrupted at step"])
    diverged, unstable = _first_divergence(pre_a, pre_b, n_b)
    resume_step, lost, hook = _resume_point(pre_a, pre_c.get(1), unstable)
    from_scratch = resume_step == 0 and n_b >= 1
    seg = root / "segments"
    seg.mkdir()
    (sa, ea, sc, ec), tails, stdout_note = _stdout_spans(a, c, ev_a, ev_c, resume_step, seg)
    a_view = dataclasses.replace(a, stdout=_segment(a.stdout, sa, seg / "a", ea))
    # C's process ran with the resume arguments: its state is paired with A's by A's argv
    argv = next((cap.get("argv") for cap in a.captures if cap.get("flat")), None)
    captures = [{**cap, "argv": argv} for cap in c.captures] if len(c.captures) == 1 else c.captures
    captures, resume_only = _drop_resume_globals(captures, a.captures)
    c_view = dataclasses.replace(
        c,
        stdout=_segment(c.stdout, sc, seg / "c", ec),
        captures=captures,
        files={k: v for k, v in c.files.items() if k in a.files},
    )
    # stderr not compared: a resumed run warns of the checkpoint it loads, by design
    unseeded = frozenset(k.partition(":")[2] for k in unstable)
    base = _compare_runs(display, [a_view, c_view], source, strict=strict, stderr=False, unseeded=unseeded)
    fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(CheckResult)}
    fields.update(
        runs=[a.info, b.info, c.info],
        next_steps=[],
        catalog=[],
        verify="",
        hash_seed_suspect=False,
        causes=[x for x in base.causes if not x.startswith("PYTHONHASHSEED differed")],
    )
    result = Draft(
        ResumeResult,
        **fields,
        interruption=how.describe(),
        interrupted_at=n_b,
        resume_step=resume_step,
        from_scratch=from_scratch,
        lost=lost,
        diverged_before=diverged,
    )
    result.notes.append(stdout_note)
    if resume_only:
        result.notes.append(
            f"not compared: variables of the script that only run C (resumed) bound, in its resume "
            f"branch: {', '.join(resume_only[:5])}{' and more' if len(resume_only) > 5 else ''}"
        )
    if tails is not None:
        _compare_tails(result, tails, a, c, strict)
    _state_notes(result, unstable, a, c, (ev_a, ev_b, ev_c))
    _explain(result, hook, ev_c)
    return result


def _state_notes(result: Draft[ResumeResult], unstable: set, a: _Run, c: _Run, events: tuple) -> None:
    """What was left out of the comparison, and what the step hooks could not read."""
    ev_a, ev_b, ev_c = events
    if unstable:
        result.notes.append(
            f"not compared at the resume point: {', '.join(sorted(unstable))} (they differ between "
            f"runs A and B before the interruption already: unseeded)"
        )
    extra = sorted(set(c.files) - set(a.files))
    if extra:
        result.notes.append(
            f"files in run C's folder that run A did not write (not compared): "
            f"{', '.join(extra[:5])}{' and more' if len(extra) > 5 else ''}"
        )
    errors = sorted(
        {f"{e.get('where')}: {e.get('error')}" for ev in (ev_a, ev_b, ev_c) for e in ev if e.get("e") == "error"}
    )
    if errors:
        result.notes.append("fwd9m's step hooks could not read everything (the runs went on): " + "; ".join(errors[:3]))


def _global_name(key: str) -> str | None:
    """``globals.restored.key`` -> ``restored``, ``locals.main().ckpt[0]`` -> ``main().ckpt``:
    the script variable a final-state leaf is in."""
    head, sep, rest = key.partition(".")
    function = ""
    if head == "locals" and "()." in rest:
        function, _, rest = rest.partition("().")
        function += "()."
    elif head != "globals" or not sep:
        return None
    name = rest.split(".", 1)[0].split("[", 1)[0]
    return function + name if name else None


def _drop_resume_globals(captures: list[dict], of_a: list[dict]) -> tuple[list[dict], list[str]]:
    """Run C's captures without the leaves of script variables that run A did not bind (what
    the resume branch loaded: ``ckpt = torch.load(...)``, ``restored = ...restore(...)``),
    and those variables' names. A variable of run A that run C lacks is still a difference."""
    in_a = {_global_name(k) for cap in of_a for k in cap.get("flat") or {}}
    dropped: set[str] = set()
    out = []
    for cap in captures:
        flat = cap.get("flat") or {}
        keep = {}
        for k, v in flat.items():
            name = _global_name(k)
            if name is not None and name not in in_a:
                dropped.add(name)
            else:
                keep[k] = v
        out.append({**cap, "flat": keep} if len(keep) != len(flat) else cap)
    return out, sorted(dropped)


def _order(component: str) -> tuple[int, str]:
    """The report's order: what the data and updates depend on first, RNG streams last."""
    head = (
        "sampler position",
        "data loader generator",
        "optimizer",
        "lr scheduler",
        "grad scaler",
        "keras seed generators",
    )
    return (head.index(component), "") if component in head else (len(head), component)


def _first_divergence(pre_a: dict[int, dict], pre_b: dict[int, dict], n: int) -> tuple[str | None, set[str]]:
    """Where runs A and B (both from scratch) first differ in the training state
    (weights, optimizer, sampler, ...) before a step up to B's interruption
    (``"before step j: components"``, or None), and the RNG streams that differ between
    them (unseeded ones: not the resume's doing, so not compared at the resume point)."""
    unstable: set[str] = set()
    for j in range(1, n + 1):
        if j not in pre_a or j not in pre_b:
            continue
        sa, sb = pre_a[j]["state"], pre_b[j]["state"]
        diff = sorted(k for k in set(sa) | set(sb) if sa.get(k) != sb.get(k))
        unstable.update(k for k in diff if k.startswith("rng:"))
        state = [k for k in diff if not k.startswith("rng:")]
        if state:
            return f"before step {j}: {', '.join(state)}", unstable
    return None, unstable


def _explain(result: Draft[ResumeResult], hook: str, ev_c: list[dict[str, Any]]) -> None:
    """Causes and next steps from what was lost."""
    if result.diverged_before:
        result.next_steps.append(f"make the script reproducible first: fwd9m check {result.target}")
        return
    if result.from_scratch:
        result.findings.insert(
            0,
            Finding(
                "exit",
                "run C (resumed)",
                "run C started from scratch: its weights before its first step are "
                "the initial weights, though run B did "
                f"{result.interrupted_at} step(s) and saved files",
            ),
        )
        result.next_steps.append(
            "pass the arguments that make the script load its checkpoint with "
            '--resume-args "...", or make it look for its checkpoint at start '
            "(Lightning: fit(ckpt_path='last'); HF: train(resume_from_checkpoint=True))"
        )
        return
    if not result.findings:
        if result.lost:
            result.notes.append(
                "state differed at the resume point ("
                + ", ".join(s.component for s in result.lost)
                + ") but did not change what was compared"
            )
        return
    for s in result.lost:
        result.next_steps.append(f"{s.component}: {s.fix}")
    if not result.lost and result.resume_step is not None:
        result.causes.append(
            f"every state component fwd9m reads agreed at the resume point (step "
            f"{result.resume_step}): what differs comes from state it does not see (a generator "
            f"held by the dataset or a worker, an EMA, a counter of the script's own); register "
            f"it with fwd9m.rng.register(obj, name) to have it compared and saved"
        )
    if not any(e.get("e") == "pre" for e in ev_c):
        result.causes.append("run C did no training step that fwd9m saw, so the resume point is unknown")
