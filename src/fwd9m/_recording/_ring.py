"""The op-level ring of ``fwd9m debug``'s digest runs: while a digest run of the early
stop trains, PyTorch's recorder records every op, but the records of a step are held in
memory, and dropped once the digest runs agree on that step (the step gate file the
parent writes, :class:`~fwd9m._recording._common.StepGate`'s format); the steps not yet
agreed are written out, one trace file each (``OUT.step<N>``), when the run is stopped
(SIGTERM: the parent stops both runs at the first differing step) or ends; a run that
ended also writes its whole trace (``OUT``) when no step was dropped. The parent then
compares the traces of that step, or of the whole runs when no step differs, without
running the script again (:mod:`fwd9m.debug._early`).

A step's records are a few bytes per tensor (digests, no tensor data); the ring holds
at most :data:`RING_BYTES` of them, the oldest step dropped first (the parent then runs
the op-level runs, or records the whole runs, as without the ring).
"""

from __future__ import annotations

import json
import os
import signal
import struct
import sys
import zlib
from collections import OrderedDict
from typing import Any

from ._store import _FRAME_HEAD, _STR, FORMAT_VERSION, MAGIC, TraceWriter

__all__ = ["ENV_RING", "ENV_RING_GATE", "ENV_RING_PROGRAM", "RING_BYTES", "RingWriter", "ring_path", "start"]

#: set by ``fwd9m debug`` in each digest run: the trace path whose ``.step<N>`` files it writes
ENV_RING = "FWD9M_DEBUG_RING"
#: the file that says which steps the digest runs agree on (``N``: the steps below N)
ENV_RING_GATE = "FWD9M_DEBUG_RING_GATE"
#: the trace header's ``program`` (JSON: script, argv, module), as the op-level runs write it
ENV_RING_PROGRAM = "FWD9M_DEBUG_RING_PROGRAM"
#: the records of steps not yet agreed that one run holds at most
RING_BYTES = 64 << 20
_HEAD = struct.Struct("<HH")  # the format version and flags after the magic
#: step files one run writes at most, the oldest steps not agreed first (a run that
#: ended before the other began agrees on none yet; each file holds every string)
MAX_STEP_FILES = 256


def ring_path(out: str, step: int) -> str:
    return f"{out}.step{int(step)}"


class RingWriter(TraceWriter):
    """A :class:`TraceWriter` that holds the op records of each step in memory until
    :meth:`dump` (strings are kept whole: a step's records may use any of them)."""

    def __init__(self, path: str, header: dict[str, Any], gate: str | None, budget: int = RING_BYTES):
        self.path, self._header, self._gate, self._budget = os.fspath(path), header, gate, budget
        self._pid = os.getpid()
        self._fd = None
        self._buf = bytearray()  # the records of the current step
        self._sbuf = bytearray()  # every string record
        self._strings: dict[str, int] = {}
        self.ops = self.tensors = self.bytes_written = 0
        self._step: int | None = None
        self._counts = [0, 0]  # ops and tensors of the current step
        self._done: OrderedDict[int, tuple[bytes, int, int]] = OrderedDict()
        self._held = 0
        self._below = 0
        self.evicted = False  #: a step was dropped over the budget: no whole trace
        self.dumped = False

    def string(self, s: str) -> int:
        i = self._strings.get(s)
        if i is None:
            i = self._strings[s] = len(self._strings)
            data = s.encode("utf-8", "replace")
            self._sbuf += _STR.pack(b"S", len(data)) + data
        return i

    def flush(self) -> None:  # held in memory until dump()
        pass

    def capture(self, seq: int, is_output: bool, index: int, meta_id: int, data: bytes) -> None:
        pass  # no tensor data in the ring

    def op(self, name_id: int, ctx_id: int, step: int, inputs: list[tuple], outputs: list[tuple]) -> int:
        if step != self._step:
            self._next(step)
        before = self.tensors
        seq = super().op(name_id, ctx_id, step, inputs, outputs)
        self._counts[0] += 1
        self._counts[1] += self.tensors - before
        return seq

    def _next(self, step: int) -> None:
        """A new step begins: the one before is complete; the oldest steps are dropped
        while the ring holds more than its budget (the steps agreed on first: the whole
        run then cannot be written)."""
        if self._step is not None and self._buf:
            self._done[self._step] = (bytes(self._buf), *self._counts)
            self._held += len(self._buf)
        self._buf, self._step, self._counts = bytearray(), step, [0, 0]
        while self._done and self._held > self._budget:
            self._held -= len(self._done.popitem(last=False)[1][0])
            self.evicted = True

    def _read_gate(self) -> None:
        if not self._gate:
            return
        try:
            with open(self._gate, encoding="ascii") as f:
                words = f.read().split()
        except OSError:
            return
        if words and words[0].isdigit():
            self._below = max(self._below, int(words[0]))

    def dump(self, end: dict[str, Any] | None = None, whole: bool = False) -> None:
        """Write each step held that the gate does not say agrees (and the current one)
        to its own trace file; ``whole`` (the run ended): also the whole run to the
        ring's path, unless a step was dropped."""
        if self.dumped or os.getpid() != self._pid:
            return
        self.dumped = True
        steps = [*self._done.items()]
        if self._step is not None and self._buf:
            steps.append((self._step, (bytes(self._buf), *self._counts)))
        self._read_gate()
        undecided = [(step, x) for step, x in steps if step >= self._below][:MAX_STEP_FILES]
        for step, (records, ops, tensors) in undecided:
            self._write(ring_path(self.path, step), [records], ops, tensors, {**(end or {}), "ring_step": step})
        if whole and not self.evicted:
            ops, tensors = sum(x[1] for _, x in steps), sum(x[2] for _, x in steps)
            self._write(self.path, [x[0] for _, x in steps], ops, tensors, end or {})

    def _write(self, path: str, records: list[bytes], ops: int, tensors: int, end: dict[str, Any]) -> None:
        """One trace file: the header, every string, ``records``, the end record."""
        head = json.dumps({"format": "fwd9m.trace", "version": FORMAT_VERSION, **self._header}, default=str).encode()
        info = json.dumps({**end, "ops": ops, "tensors": tensors}, default=str).encode()
        body = b"".join([bytes(self._sbuf), *records, _STR.pack(b"E", len(info)), info])
        with open(f"{path}.tmp", "wb") as f:
            f.write(MAGIC + _HEAD.pack(FORMAT_VERSION, 0))
            for payload in (head, body):
                f.write(_FRAME_HEAD.pack(len(payload)) + payload + _FRAME_HEAD.pack(zlib.crc32(payload)))
        os.replace(f"{path}.tmp", path)

    def close(self, end: dict[str, Any] | None = None) -> None:
        self.dump(end)


def start() -> None:
    """In a digest run with :data:`ENV_RING` set: record PyTorch's ops into a
    :class:`RingWriter` from the moment the script imports torch; the ring is written
    when the run is stopped (SIGTERM) or ends."""
    out = os.environ.get(ENV_RING)
    if not out:
        return
    from .._import_hook import after_import

    after_import(["torch"], lambda _name: _start_torch(out))


def _start_torch(out: str) -> None:
    import atexit

    from .. import _frameworks as registry
    from .. import environment
    from ._common import Recording

    try:
        header = {
            "frameworks": ["torch"],
            "level": "digests",
            "program": json.loads(os.environ.get(ENV_RING_PROGRAM) or "null") or {"argv": list(sys.argv)},
            "environment": environment.collect(),
        }
        writer = RingWriter(out, header, os.environ.get(ENV_RING_GATE))
        rec = Recording(writer, level="digests")
        rec.gate = None  # the ring records every step
        recorder = registry.backend("torch").recorder(rec)
        recorder.start()
    except Exception as exc:  # noqa: BLE001 - the digest run goes on without its ring
        sys.stderr.write(f"fwd9m debug: no op-level ring: {type(exc).__name__}: {exc}\n")
        return

    def finish(whole: bool = True) -> None:
        try:  # stopped by a signal, perhaps inside an op: its records and notes so far only
            if whole:
                recorder.stop()
            else:
                recorder.flush()
                rec.notes.extend(recorder.notes())
        except Exception:  # noqa: BLE001 - the ring is written all the same
            pass
        writer.dump(rec.end_record(True), whole)

    def on_term(signum, _frame) -> None:
        finish(whole=False)  # stopped: the steps not agreed, no whole run
        os._exit(128 + signum)

    atexit.register(finish)
    signal.signal(signal.SIGTERM, on_term)
