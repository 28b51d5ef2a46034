"""Prove a culprit: replay the op alone, many times, with and without the switch.

``fwd9m debug`` infers a culprit (its inputs agree bit for bit between the runs, its
outputs do not). Replay is the proof: a targeted run records the script again with
the culprit's whole call captured (:func:`fwd9m._recording._capture.take_call`: every argument, the full input
tensors with dtype, shape, strides and device, into ``TRACE.op<SEQ>.npz`` beside the
trace; no pickle, read with ``allow_pickle=False``), then a fresh process rebuilds the
op from the capture and runs it ``repeat`` times on the same device, dtype, layout and
thread count, then a second process does the same under the framework's determinism
switch. The user's script is not imported again for the replay.

>>> from fwd9m import debug                                      # doctest: +SKIP
>>> print(debug.replay("run1.trace", op=1234).render())         # doctest: +SKIP
confirmed: 7 distinct outputs in 20 replays (max 50 ULP) ...
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from .._files import shown
from .._recording._capture import backend_module, capture_path
from ..errors import ConfigurationError, FileFormatError, RunError

__all__ = ["DEFAULT_REPEAT", "Phase", "ReplayResult", "capture_path", "confirm", "replay"]

DEFAULT_REPEAT = 20
CHILD_TIMEOUT_S = 600.0


def load_capture(path: str) -> tuple[dict, dict]:
    """(call, arrays) of a capture file; FileNotFoundError when there is none,
    FileFormatError when it is not one: a named pipe or a device (refused before it is
    opened: reading either may never end), an ``.npy`` array, a damaged or empty archive,
    a call description nested too deep."""
    import numpy as np

    from .._files import open_regular_file

    hint = "it is written by: fwd9m debug record --capture SEQ:0"
    if not os.path.lexists(path):
        raise FileNotFoundError(path)
    try:
        with open_regular_file(path, "replay capture", hint) as f, np.load(f, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        call = json.loads(arrays.pop("call").tobytes().decode("utf-8"))
    except FileFormatError:
        raise
    except Exception as exc:  # noqa: BLE001 - any parser failure: not a capture (zipfile.BadZipFile, EOFError, ...)
        raise FileFormatError(
            f"{shown(path)} is not a replay capture ({type(exc).__name__}: {str(exc)[:200]}); {hint}"
        ) from None
    if not isinstance(call, dict) or "framework" not in call:
        raise FileFormatError(f"{shown(path)} is not a replay capture (no call description)")
    return call, arrays


@dataclass
class Phase:
    """The replays of one setting (switch off or on)."""

    switch: bool
    status: str  #: deterministic, nondeterministic, raises, error
    distinct: int = 0
    repeats: int = 0
    max_ulp: int | None = None
    error: str | None = None


@dataclass
class ReplayResult:
    trace: str
    seq: int
    op: str
    framework: str
    device: str
    threads: int | None
    repeat: int
    off: Phase
    on: Phase | None = None
    switch_code: str = ""
    notes: list[str] = field(default_factory=list)
    #: a jitted call narrowed to one equation: its primitive and location
    inside: dict = field(default_factory=dict)

    def _threads_text(self) -> str:
        # None: the framework's default (TensorFlow's intra-op setting 0: it picks)
        return f"{self.threads} thread(s)" if self.threads else "the default thread count"

    @property
    def confirmed(self) -> bool:
        return self.off.status == "nondeterministic"

    def verdict(self) -> str:
        """One line: confirmed / not reproduced in isolation."""
        o = self.off
        if o.status == "nondeterministic":
            ulp = f" (max {o.max_ulp} ULP)" if o.max_ulp is not None else ""
            return f"confirmed: {o.distinct} distinct outputs in {o.repeats} replays{ulp}"
        if o.status == "deterministic":
            return (
                f"not reproduced in isolation: 1 output in {o.repeats} replays. The op alone, on these "
                f"inputs, device ({self.device}) and {self._threads_text()}, is deterministic here; what "
                f"made it differ in the runs is around it: concurrency with other work (other threads "
                f"or streams busy at the time), state the op reads that is not an input (an "
                f"allocator's memory layout, a cache, a global setting), or a different kernel choice "
                f"under load. Try more replays (--repeat), or the debug run's thread count."
            )
        return f"replay failed: {_one_line(o.error)}"

    def switch_verdict(self) -> str | None:
        p = self.on
        if p is None:
            return None
        head = f"with {self.switch_code}:" if self.switch_code else "with the determinism switch:"
        if p.status == "deterministic" and self.off.status == "deterministic":  # nothing to fix alone
            return f"{head} deterministic too (1 output in {p.repeats} replays)"
        if p.status == "deterministic":
            return f"{head} deterministic (1 output in {p.repeats} replays): the switch fixes it"
        if p.status == "raises":
            return f"{head} raises ({p.error}): no deterministic implementation; avoid the op"
        if p.status == "nondeterministic":
            ulp = f" (max {p.max_ulp} ULP)" if p.max_ulp is not None else ""
            return (
                f"{head} STAYS NONDETERMINISTIC: {p.distinct} distinct outputs in {p.repeats} "
                f"replays{ulp}; a silent gap in the switch"
            )
        return f"{head} replay failed: {_one_line(p.error)}"

    def render(self) -> str:
        from ..compare._escape import printable

        head = (
            f"replay of op #{self.seq} {self.op} ({self.framework}, {self.device}, "
            f"{self._threads_text()}), {self.repeat} times alone:"
        )
        lines = [head, f"  {self.verdict()}"]
        sv = self.switch_verdict()
        if sv:
            lines.append(f"  {sv}")
        lines += [f"  note: {n}" for n in self.notes]
        return printable("\n".join(lines))

    def to_dict(self) -> dict:
        return asdict(self) | {
            "confirmed": self.confirmed,
            "verdict": self.verdict(),
            "switch_verdict": self.switch_verdict(),
        }


def _one_line(error: str | None, limit: int = 300) -> str:
    """A replay's error for the report: its last line (a framework's exception carries
    the traceback of where it was raised, which is not the user's), cut at ``limit``."""
    lines = [s.strip() for s in (error or "").splitlines() if s.strip()]
    last = lines[-1] if lines else "unknown error"
    return last if len(last) <= limit else last[: limit - 3] + "..."


def _device_of(call: dict) -> str:
    for t in call.get("tensors", []):
        if t.get("device", "cpu") != "cpu":
            return t["device"]
    return call.get("device", "cpu")


def replay(
    trace: str | os.PathLike[str],
    op: int,
    *,
    repeat: int = DEFAULT_REPEAT,
    switch: bool = True,
    capture: str | os.PathLike[str] | None = None,
    here: bool = False,
) -> ReplayResult:
    """Replay op ``op`` of ``trace`` alone from its capture (default
    ``TRACE.op<SEQ>.npz``), ``repeat`` times, then (``switch``) under the framework's
    determinism switch, each in a fresh process (``here``: the phases the targeted run
    replayed in its own process, :func:`replay_here`, where it did).

    Raises:
        FileFormatError: no capture for that op (the trace was recorded without
            ``--capture SEQ:0``), or the file is not one.
        ConfigurationError: the op cannot be rebuilt, the device it ran on is not here,
            or ``repeat`` < 2.
        RunError: a replay process died.
    """
    trace = os.fspath(trace)
    if not isinstance(repeat, int) or repeat < 2:
        raise ConfigurationError(f"repeat must be a whole number >= 2, got {repeat!r}")
    path = os.fspath(capture) if capture is not None else capture_path(trace, op)
    if capture is None and not os.path.exists(trace):
        raise FileFormatError(f"no trace {trace}: give a trace written by fwd9m debug record (or --keep)")
    if not os.path.exists(path):
        raise FileFormatError(
            f"no capture of op #{op} for {trace} (looked for {path}): replay needs the op's inputs, "
            f"which a trace holds only when it was recorded with them. Record it again with: "
            f"fwd9m debug record --capture {op}:0 -o RUN.trace SCRIPT ..."
        )
    call, _ = load_capture(path)
    if call.get("error"):
        raise ConfigurationError(
            f"op #{op} of {trace} cannot be rebuilt for replay: {call['error']}; "
            f"replay works on ops whose arguments are tensors, numbers, strings, "
            f"dtypes and lists of them"
        )
    backend = backend_module(call["framework"])
    op_name = call.get("op", "?")
    if "narrowed" in call:  # a jitted / compiled call, narrowed in the targeted run
        return _narrowed(trace, int(op), call)
    phases = (_replayed_here(path, switch) if here else None) or [_phase(path, False, repeat)]
    if switch and len(phases) < 2:
        phases.append(_phase(path, True, repeat))
    return ReplayResult(
        trace,
        int(op),
        op_name,
        call["framework"],
        _device_of(call),
        call.get("threads"),
        repeat,
        phases[0],
        phases[1] if switch else None,
        getattr(backend, "SWITCH", ""),
    )


def replay_kept(
    trace: str, seq: int, say: Callable[[str], None] | None = None, *, repeat: int = DEFAULT_REPEAT
) -> ReplayResult:
    """Replay op ``seq`` from the whole call an op-level run kept beside ``trace``
    (:func:`fwd9m._recording._capture.keep_call`): no targeted run; both settings (switch
    off, then on) in one fresh process, the replays with the switch off ending once two
    outputs differ after :data:`ENOUGH` of them.

    Raises:
        ConfigurationError, RunError: as :func:`replay`.
    """
    path = capture_path(trace, seq)
    call, _ = load_capture(path)
    t0 = time.perf_counter()
    phases = _phases(path, repeat)
    if say is not None:
        say(f"  replay: no targeted run; the replays in one fresh process {time.perf_counter() - t0:.1f} s")
    backend = backend_module(call["framework"])
    return ReplayResult(
        trace,
        int(seq),
        call.get("op", "?"),
        call["framework"],
        _device_of(call),
        call.get("threads"),
        repeat,
        phases[0],
        phases[1] if len(phases) > 1 else None,
        getattr(backend, "SWITCH", ""),
    )


def _replayed_here(path: str, switch: bool) -> list[Phase] | None:
    """The phases the targeted run replayed in its own process (:func:`replay_here`),
    or None when it made none."""
    try:
        with open(here_path(path), encoding="utf-8") as f:
            events = json.load(f)["phases"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    phases = [_to_phase(ev, s) for ev, s in zip(events, (False, True))]
    if not phases or any(p is None for p in phases):
        return None
    return [p for p in phases if p is not None][: 2 if switch else 1]


def confirm(
    report,
    target: str,
    args: list[str] | tuple = (),
    *,
    module: bool = False,
    frameworks: list[str] | None = None,
    trace: str | None = None,
    cwd: str | None = None,
    wrap: Callable[[list[str]], list[str]] | None = None,
    env: dict | None = None,
    repeat: int = DEFAULT_REPEAT,
    switch: bool = True,
    timeout: float | None = None,
    steps: tuple[int, int] | None = None,
    say: Callable[[str], None] | None = None,
) -> ReplayResult | None:
    """For a culprit verdict of ``fwd9m debug``: a third, targeted run of ``target``
    captures the culprit's call, then :func:`replay`. None when ``report`` names no
    culprit. This is the function the debug report assembly calls.

    ``trace``: where the third run's trace goes (default: a new temporary folder); its
    capture lands beside it. ``cwd``: the folder the run works in (default: a new empty
    one, so that the user's files are not touched; give the folder the other runs used).
    ``steps``: the optimizer steps the traces recorded (``--steps``), so that op numbers match.
    ``say``: told what the targeted run and the replays each cost. A PyTorch op is
    replayed by the targeted run itself once the script has ended (:func:`replay_here`);
    others, and one it could not replay, in two fresh processes.

    Raises:
        RunError: the targeted run failed, or took another path (op #SEQ is not the
            culprit's op: the program's control flow differs run to run).
    """
    first = getattr(report, "first", None)
    if getattr(report, "kind", None) != "culprit" or first is None:
        return None
    from .._recording._store import TraceReader

    seq = int(first.seq)
    if trace is None or cwd is None:  # a folder of its own only for what the caller did not give
        folder = tempfile.mkdtemp(prefix="fwd9m-replay-")
        trace = trace or os.path.join(folder, "targeted.trace")
        cwd = cwd or tempfile.mkdtemp(prefix="cwd-", dir=folder)
    cmd = _targeted_command(trace, seq, target, args, module, frameworks, steps)
    t0 = time.perf_counter()
    env = {**(env or {}), ENV_REPLAY_HERE: f"{repeat},{int(switch)}"}
    returncode, tail = _run_logged(wrap(cmd) if wrap else cmd, target, seq, cwd, env, timeout)
    t1 = time.perf_counter()
    if returncode != 0 or not os.path.exists(capture_path(trace, seq)):
        raise RunError(
            f"the targeted run of {target} (to capture op #{seq}) failed (exit {returncode}) "
            f"or never reached op #{seq}; its last output:\n{tail}"
        )
    got = next((o for o in TraceReader(trace) if o.seq == seq), None)
    if got is None or got.name != first.op:
        raise RunError(
            f"the targeted run took another path: its op #{seq} is "
            f"{got.name if got else 'missing'}, not {first.op}; the program's control flow "
            f"differs between runs, so the culprit cannot be replayed by position"
        )
    result = replay(trace, seq, repeat=repeat, switch=switch, here=True)
    if say is not None:
        say(_cost(capture_path(trace, seq), t1 - t0, time.perf_counter() - t1))
    return result


def _cost(capture: str, run_s: float, after_s: float) -> str:
    """The progress line of what the proof cost: the targeted run (and its own replays),
    and the replays in fresh processes where it made none."""
    try:
        with open(here_path(capture), encoding="utf-8") as f:
            here_s = float(json.load(f)["seconds"])
    except (OSError, ValueError, KeyError, TypeError):
        return f"  replay: the targeted run {run_s:.1f} s, the replays in two fresh processes {after_s:.1f} s"
    return f"  replay: the targeted run {run_s:.1f} s, of which its replays of the op alone {here_s:.2f} s"


def _targeted_command(
    trace: str, seq: int, target: str, args, module: bool, frameworks: list[str] | None, steps=None
) -> list[str]:
    """The child command of the targeted run: record ``target`` into ``trace`` and
    capture op ``seq``'s call."""
    fws = ",".join(frameworks) if frameworks else "-"
    return [
        sys.executable,
        "-m",
        "fwd9m.debug._child",
        os.path.abspath(trace),
        "digests",
        f"{seq}:0",
        f"{steps[0]},{steps[1]}" if steps else "-",
        fws,
        "1" if module else "0",
        target if module else os.path.abspath(target),
        *args,
    ]


def _run_logged(
    cmd: list[str], target: str, seq: int, cwd: str, env: dict | None, timeout: float | None
) -> tuple[int, str]:
    """Run the targeted run ``cmd`` in ``cwd``, in a process group of its own (so that
    nothing it started outlives it); its exit status and last 1500 bytes of output.

    Raises:
        RunError: it ran over ``timeout`` seconds (its whole process group is killed).
    """
    from .._runtime.process import kill_group, kill_leftovers

    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            cmd, cwd=cwd, env={**os.environ, **(env or {})}, stdout=log, stderr=log, start_new_session=True
        )
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            raise RunError(f"the targeted run of {target} (to capture op #{seq}) took over {timeout} s") from None
        finally:
            kill_leftovers(proc)
        log.seek(0)
        tail = log.read()[-1500:].decode("utf-8", "replace")
    return proc.returncode, tail


def _narrowed(trace: str, seq: int, call: dict) -> ReplayResult:
    n = call["narrowed"]
    if isinstance(n, dict) and n.get("kind") == "torch.compile":
        from ._compiled import compiled_result

        return compiled_result(ReplayResult, Phase, trace, seq, call)
    if isinstance(n, dict) and n.get("kind") == "tf.xla":
        from ._compiled import xla_result

        return xla_result(ReplayResult, Phase, trace, seq, call)
    runs = n.get("runs", 2)
    how = (
        f"evaluated equation by equation {runs} times ({n.get('equations')} equations; each run alone, "
        f"not the fused program XLA compiled)"
    )
    if n.get("found"):
        off = Phase(False, "nondeterministic", 2, runs)
        note = (
            f"narrowed inside the jitted call to equation {'/'.join(map(str, n['path']))}: "
            f"{n['primitive']} at {n['location'] or '?'}: its inputs agree between the evaluations, "
            f"its outputs differ; {how}"
        )
    else:
        off = Phase(False, "deterministic", 1, runs)
        note = (
            f"not narrowed: every equation agreed when {how}; the difference may come from the "
            f"compiled program as a whole (fusion, a different kernel), or need more runs"
        )
    r = ReplayResult(trace, seq, call.get("op", "jit"), "jax", "cpu", None, runs, off, None, "", [note])
    if n.get("found"):
        r.op = f"jit: {n['primitive']} at {n['location']}"
        r.inside = {"primitive": n["primitive"], "location": n["location"] or ""}
    return r


def _phase(path: str, switch: bool, repeat: int) -> Phase:
    return _phases(path, repeat, "on" if switch else "off")[0]


def _phases(path: str, repeat: int, which: str = "both") -> list[Phase]:
    """The replays of the capture at ``path`` in one fresh process: ``which`` ``off``,
    ``on``, or ``both`` (off, ending once two outputs differ after :data:`ENOUGH`
    replays, then on unless off could not run)."""
    cmd = [sys.executable, "-m", "fwd9m.debug._replay", path, which, str(repeat)]
    with tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, timeout=CHILD_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise RunError(f"replay of {path} took over {CHILD_TIMEOUT_S:.0f} s") from None
        events = []
        for line in proc.stdout.splitlines():
            try:
                events.append(json.loads(line))
            except ValueError:
                continue
        err.seek(0)
        tail = err.read()[-1500:].decode("utf-8", "replace")
    switches = [which == "on"] if which != "both" else [False, True]
    phases = [p for p in (_to_phase(ev, sw) for ev, sw in zip(events, switches)) if p is not None]
    if phases:
        return phases
    raise RunError(f"the replay process died (exit {proc.returncode}); its last output:\n{tail}")


def _to_phase(ev: dict, switch: bool) -> Phase | None:
    """The :class:`Phase` of one measurement event (:func:`_measure`); None for another event.

    Raises:
        ConfigurationError: the op ran on a device that is not here, or cannot be rebuilt.
    """
    if ev.get("fatal") == "device":
        raise ConfigurationError(ev["error"])
    if ev.get("fatal") == "rebuild":
        raise ConfigurationError(f"the op cannot be rebuilt for replay: {ev['error']}")
    if "status" in ev:
        return Phase(
            switch, ev["status"], ev.get("distinct", 0), ev.get("repeats", 0), ev.get("max_ulp"), ev.get("error")
        )
    return None


def _child(path: str, switch: str, repeat: int) -> int:
    """Replay process: rebuild and run the op; one JSON line with the measurement."""
    proto = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def emit(**ev):
        proto.write(json.dumps(ev) + "\n")
        proto.flush()

    call, arrays = load_capture(path)
    if switch != "both":
        ev = _measure(call, arrays, switch == "on", repeat)
        emit(**ev)
        return 2 if "fatal" in ev else 0
    ev = _measure(call, arrays, False, repeat, ENOUGH)
    emit(**ev)
    if "fatal" in ev:
        return 2
    emit(**_measure(call, arrays, True, repeat))
    return 0


def _measure(call: dict, arrays: dict, switch: bool, repeat: int, enough: int | None = None) -> dict:
    """Rebuild the captured op and run it ``repeat`` times (switch on or off); the
    measurement as one event: ``status`` (with ``distinct``, ``repeats``, ``max_ulp``,
    ``error``) or ``fatal`` (``device``, ``rebuild``). ``enough``: stop once two outputs
    differ after at least that many replays (the proof is made)."""
    import numpy as np

    from ..probe._child import _digest, max_ulp

    backend = backend_module(call["framework"])
    device = _device_of(call)
    if device not in backend.devices():
        return {
            "fatal": "device",
            "error": f"the op ran on {device}, which is not there; {call['framework']} sees "
            f"{', '.join(backend.devices())}: replay it on the machine that recorded it",
        }
    try:
        r = backend.Replayer(call, arrays, switch)
    except backend.Unrebuildable as exc:
        return {"fatal": "rebuild", "error": str(exc)}
    seen: dict[str, int] = {}
    first, ulp, done = None, None, repeat
    for i in range(repeat):
        try:
            outs = r.run()
        except Exception as exc:  # noqa: BLE001 - the op's failure is the measurement
            status = "raises" if r.is_switch_error(exc) else "error"
            return {"status": status, "error": f"{type(exc).__name__}: {exc}"[:400], "repeats": i}
        key = _digest(outs)
        if key not in seen:
            seen[key] = i
            if first is None:
                first = outs
            elif len(seen) <= 8:
                for a, b in zip(first, outs):
                    u = max_ulp(np, a, b)
                    ulp = u if u is not None and (ulp is None or u > ulp) else ulp
        if enough is not None and len(seen) > 1 and i + 1 >= enough:
            done = i + 1
            break
    status = "nondeterministic" if len(seen) > 1 else "deterministic"
    return {"status": status, "distinct": len(seen), "repeats": done, "max_ulp": ulp}


#: set by :func:`confirm` in the targeted run: ``REPEAT,SWITCH`` (SWITCH 1 or 0); the run
#: replays the op it captured itself, in its own process once the script has ended
#: (:func:`replay_here`), instead of two fresh processes that import the framework again
ENV_REPLAY_HERE = "FWD9M_DEBUG_REPLAY_HERE"
#: frameworks whose ops the targeted run replays in its own process: PyTorch sets the
#: thread count and the determinism switch at any time; TensorFlow fixes its thread pools
#: once started, and a jitted call is narrowed instead
HERE_FRAMEWORKS = ("torch",)
#: replays (switch off) after which two differing outputs end the replays: the proof is made
ENOUGH = 5


def here_path(capture: str) -> str:
    """The file the targeted run writes its own replays to, beside the capture."""
    return f"{capture}.replay.json"


def replay_here(trace: str) -> None:
    """In the targeted run, at its end (:data:`ENV_REPLAY_HERE` set): replay each op it
    captured, switch off then on, and write the measurements to :func:`here_path`. A
    replay that cannot run here writes nothing (the parent replays in fresh processes)."""
    spec = os.environ.get(ENV_REPLAY_HERE)
    if not spec:
        return
    import glob

    repeat, switch = (int(x) for x in spec.split(","))
    for path in glob.glob(f"{glob.escape(trace)}.op*.npz"):
        try:
            call, arrays = load_capture(path)
            if call.get("framework") not in HERE_FRAMEWORKS or call.get("error") or "narrowed" in call:
                continue
            t0 = time.perf_counter()
            phases = [_measure(call, arrays, False, repeat, ENOUGH)]
            if switch and "fatal" not in phases[0]:
                phases.append(_measure(call, arrays, True, repeat))
            with open(here_path(path), "w", encoding="utf-8") as f:
                json.dump({"phases": phases, "seconds": time.perf_counter() - t0}, f)
        except Exception:  # noqa: BLE001 - the parent replays it in fresh processes then
            continue


if __name__ == "__main__":
    raise SystemExit(_child(sys.argv[1], sys.argv[2], int(sys.argv[3])))
