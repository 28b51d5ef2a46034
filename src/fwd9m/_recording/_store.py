"""The trace file: streamed, compact, crash-safe, versioned, never pickled.

Layout::

    b"FWD9MTRC"  u16 format version  u16 flags(0)
    frame*       u32 payload length | payload | u32 crc32(payload)

The first frame's payload is the UTF-8 JSON header (framework, versions, detail level,
program, the environment fingerprint of :func:`fwd9m.environment.collect`). Every later
frame holds a run of records; a frame is written whole (``os.write`` of at most
:data:`FRAME_BYTES` plus 8 bytes), so a trace cut off by a crash is readable up to its
last complete frame, and a flipped bit is caught by the checksum. Memory while writing
is one frame buffer plus the string table.

Records (little-endian, fixed width; strings are interned once in an ``S`` record):

* ``S`` u32 length, UTF-8 bytes: defines string id 0, 1, 2, ... in order.
* ``O`` u32 op-name id, u32 context id, u32 step, u8 n_in, u8 n_out, then n_in+n_out
  tensors: u32 meta id (``"float32[3,4]"``), u8 flags (:data:`HAS_DIGEST`,
  :data:`IS_PARAM`, :data:`IS_MODEL_INPUT`, :data:`HAS_SAMPLE`, :data:`IS_REF`),
  u64 digest if HAS_DIGEST, ``u8 n`` + n bytes of sampled values if HAS_SAMPLE,
  u32 producer op + u8 output index if IS_REF (graph inputs by reference).
  The op's sequence index is its position among ``O`` records.
  An op's non-tensor arguments (Python scalars, shapes, dtypes, strings, TF attrs, JAX
  params) are one more input, last, of dtype :data:`ARGS_DTYPE` (meta ``args[]``): its
  digest covers their canonical text ``name=value`` joined by ``\x1f``, and its sample
  holds that text (UTF-8, cut at 255 bytes), so a report can name the argument that
  differs. Ops without such arguments have no ``args`` input.
  An op a recorder failed on has no tensors and the node ``not recorded: REASON``
  (:data:`NOT_RECORDED`); the end record counts them by op name (``not_recorded``).
* ``C`` u32 op seq, u8 0=input/1=output, u8 index, u32 meta id, u64 nbytes, raw bytes:
  a captured full tensor (``--capture``).
* ``E`` u32 JSON length, JSON: the end record (op count, exit status). Absent when
  the recorded process died.

The context string joins module path, phase, file:line, autograd node and device with
``\\x1f``. About 15 bytes per op plus 13 per tensor (21 with a 4-value float32 sample).
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from typing import Any

from .._files import open_regular_file, shown, starts_with
from ..errors import FileFormatError

__all__ = [
    "MAGIC",
    "FORMAT_VERSION",
    "TraceWriter",
    "TraceReader",
    "Op",
    "TensorRecord",
    "Tensor",
    "HAS_DIGEST",
    "IS_PARAM",
    "IS_MODEL_INPUT",
    "HAS_SAMPLE",
    "IS_REF",
    "NO_STRING",
    "ARGS_DTYPE",
    "NOT_RECORDED",
]

MAGIC = b"FWD9MTRC"
FORMAT_VERSION = 1
FRAME_BYTES = 1 << 16

HAS_DIGEST, IS_PARAM, IS_MODEL_INPUT, HAS_SAMPLE, IS_REF = 1, 2, 4, 8, 16
NO_STRING = 0xFFFFFFFF
SEP = "\x1f"
#: dtype of the input record holding an op's non-tensor arguments (see the layout)
ARGS_DTYPE = "args"
#: node prefix of an op the recorder could not record (its hook failed)
NOT_RECORDED = "not recorded: "

_FRAME_HEAD = struct.Struct("<I")
_OP = struct.Struct("<cIIIBB")
_T = struct.Struct("<IB")
_T_DIGEST = struct.Struct("<IBQ")
_U64 = struct.Struct("<Q")
_REF = struct.Struct("<IB")
_CAPTURE = struct.Struct("<cIBBIQ")
_STR = struct.Struct("<cI")


@dataclass(frozen=True)
class TensorRecord:
    """One input or output of a recorded op, as the trace holds it."""

    meta: str  #: dtype and shape, e.g. ``"float32[32,16]"``
    flags: int
    digest: int | None
    sample: bytes | None = None
    ref: tuple[int, int] | None = None  #: (producer seq, output index) for graph inputs

    @property
    def dtype(self) -> str:
        return self.meta.split("[", 1)[0]


#: the name it had before (``fwd9m.compare.Tensor`` is a captured array, another thing)
Tensor = TensorRecord


@dataclass
class Op:
    seq: int
    name: str
    module: str
    phase: str
    location: str
    node: str
    device: str
    step: int
    inputs: list[TensorRecord]
    outputs: list[TensorRecord]
    captures: dict[tuple[int, int], tuple[str, bytes]] = field(default_factory=dict)

    def signature(self) -> tuple:
        """What must match for two runs to be executing the same op."""
        return (
            self.name,
            self.module,
            self.phase,
            tuple(t.meta for t in self.inputs),
            tuple(t.meta for t in self.outputs),
        )

    def describe(self) -> str:
        where = f" in {self.module}" if self.module else ""
        node = f" ({self.node})" if self.node else ""
        return f"#{self.seq} {self.name}{node}{where} [{self.phase}, step {self.step}] at {self.location or '?'}"


#: Bytes per value of the dtypes whose sampled or captured values a report reads as numbers.
_ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}

#: Tensors per op side (inputs, outputs): the count is one byte in an op record.
MAX_TENSORS = 255


def fold(recs: list[tuple], limit: int, meta_id: int) -> list[tuple]:
    """At most ``limit`` tensor records: the ones from ``limit - 1`` on become one record
    (meta ``meta_id``, e.g. the string ``"leaves[N]"``) whose digest covers theirs in
    order (None when one is missing), and which is flagged as model input if any of them
    was. An optimizer's ``_foreach_*`` op over every parameter, or a JAX pytree, can
    have more tensors than an op record holds."""
    if len(recs) <= limit:
        return recs
    from ..fingerprint import digest_bytes

    keep, rest = recs[: limit - 1], recs[limit - 1 :]
    digs = [t[2] for t in rest]
    dig = None if None in digs else digest_bytes(struct.pack(f"<{len(digs)}Q", *digs))
    flags = 0
    for t in rest:
        flags |= t[1] & IS_MODEL_INPUT
    return keep + [(meta_id, flags, dig, None, None)]


class TraceWriter:
    """Streams records to ``path``. Use as a context manager or call :meth:`close`.

    Raises:
        OSError: the file cannot be created or written.
    """

    def __init__(self, path: str | os.PathLike[str], header: dict[str, Any]):
        self.path = os.fspath(path)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        #: a forked child (a DataLoader worker) shares the file: only this process writes
        self._pid = os.getpid()
        os.write(self._fd, MAGIC + struct.pack("<HH", FORMAT_VERSION, 0))
        self._buf = bytearray()
        self._strings: dict[str, int] = {}
        self.ops = 0
        self.tensors = 0
        self.bytes_written = 8 + 4
        self._write_frame(
            json.dumps({"format": "fwd9m.trace", "version": FORMAT_VERSION, **header}, default=str).encode()
        )

    # -- low level
    def _write_frame(self, payload: bytes | bytearray) -> None:
        if os.getpid() != self._pid:  # a forked child's records would interleave with ours
            return
        frame = _FRAME_HEAD.pack(len(payload)) + bytes(payload) + _FRAME_HEAD.pack(zlib.crc32(payload))
        os.write(self._fd, frame)
        self.bytes_written += len(frame)

    def flush(self) -> None:
        if self._buf and self._fd is not None:
            self._write_frame(self._buf)
            self._buf = bytearray()

    def string(self, s: str) -> int:
        i = self._strings.get(s)
        if i is None:
            i = len(self._strings)
            self._strings[s] = i
            data = s.encode("utf-8", "replace")
            self._buf += _STR.pack(b"S", len(data))
            self._buf += data
        return i

    # -- records
    def op(self, name_id: int, ctx_id: int, step: int, inputs: list[tuple], outputs: list[tuple]) -> int:
        """Append one op. Each tensor is ``(meta_id, flags, digest or None, sample bytes
        or None, ref or None)``; more than :data:`MAX_TENSORS` on a side are folded
        (:func:`fold`). Returns the op's sequence index."""
        if len(inputs) > MAX_TENSORS:
            inputs = fold(inputs, MAX_TENSORS, self.string(f"leaves[{len(inputs) - MAX_TENSORS + 1}]"))
        if len(outputs) > MAX_TENSORS:
            outputs = fold(outputs, MAX_TENSORS, self.string(f"leaves[{len(outputs) - MAX_TENSORS + 1}]"))
        buf = self._buf
        buf += _OP.pack(b"O", name_id, ctx_id, step, len(inputs), len(outputs))
        for t in (*inputs, *outputs):
            meta, flags, dig, sample, ref = t
            if dig is not None:
                buf += _T_DIGEST.pack(meta, flags | HAS_DIGEST, dig)
            else:
                buf += _T.pack(meta, flags & ~HAS_DIGEST)
            if flags & HAS_SAMPLE:
                buf.append(len(sample))
                buf += sample
            if flags & IS_REF:
                buf += _REF.pack(*ref)
        self.tensors += len(inputs) + len(outputs)
        seq = self.ops
        self.ops += 1
        if len(buf) >= FRAME_BYTES:
            self.flush()
        return seq

    def capture(self, seq: int, is_output: bool, index: int, meta_id: int, data: bytes) -> None:
        self._buf += _CAPTURE.pack(b"C", seq, int(is_output), index, meta_id, len(data))
        self._buf += data
        if len(self._buf) >= FRAME_BYTES:
            self.flush()

    def close(self, end: dict[str, Any] | None = None) -> None:
        if self._fd is None:
            return
        if os.getpid() != self._pid:  # a forked child: the file is the parent's to end
            os.close(self._fd)
            self._fd = None
            return
        info = {"ops": self.ops, "tensors": self.tensors, **(end or {})}
        data = json.dumps(info, default=str).encode()
        self._buf += _STR.pack(b"E", len(data)) + data
        self.flush()
        os.close(self._fd)
        self._fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _Parsed:
    """What :meth:`TraceReader._records` has read so far across frames: the string
    table, the op whose captures may still follow, and the next op's number."""

    __slots__ = ("strings", "pending", "seq")

    def __init__(self) -> None:
        self.strings: list[str] = []
        self.pending: Op | None = None
        self.seq = 0


class TraceReader:
    """Reads a trace written by :class:`TraceWriter`, streaming.

    ``header`` is available after construction; iterate for :class:`Op` objects (each
    with its captures attached). After iteration, ``end`` holds the end record (None
    when the writer died) and ``truncated`` a sentence saying where reading stopped.

    Raises:
        FileFormatError: missing, unreadable, not a regular file (a named pipe or a
            device is refused before opening: it would block or never end), not a
            trace, an unknown format version, or a damaged header.
    """

    def __init__(self, path: str | os.PathLike[str]):
        self.path = os.fspath(path)
        self._name = shown(self.path)  # in messages: control characters escaped
        self._f = open_regular_file(
            self.path, "trace", "give a trace written by: fwd9m debug record -o run.trace script.py"
        )
        self._size = os.fstat(self._f.fileno()).st_size
        head = self._f.read(12)
        if head[:8] != MAGIC:
            self._f.close()
            raise FileFormatError(
                f"{self._name} is not a fwd9m trace (no {MAGIC.decode()} signature); "
                f"record one with: fwd9m debug record -o run.trace script.py"
            )
        if len(head) < 12:
            self._f.close()
            raise FileFormatError(f"{self._name} is truncated inside its header; record it again")
        (self.version,) = struct.unpack("<H", head[8:10])
        if self.version != FORMAT_VERSION:
            self._f.close()
            raise FileFormatError(
                f"{self._name} uses trace format version {self.version}, but this fwd9m reads "
                f"version {FORMAT_VERSION} only; record it again with this fwd9m, or read it "
                f"with the fwd9m version that wrote it"
            )
        self._offset = 12
        payload = self._frame()
        if payload is None:
            self._f.close()
            raise FileFormatError(f"{self._name} is truncated inside its header; record it again")
        try:
            header = json.loads(payload)
        except (ValueError, RecursionError):
            self._f.close()
            raise FileFormatError(f"{self._name}: the trace header is not valid JSON") from None
        if (
            not isinstance(header, dict)
            or header.get("format") != "fwd9m.trace"
            or header.get("version") != FORMAT_VERSION
            or not _header_shape_ok(header)
        ):
            self._f.close()
            raise FileFormatError(
                f"{self._name}: the trace header is not a fwd9m trace header of format "
                f"version {FORMAT_VERSION} (damaged or edited); record it again"
            )
        self.header = header
        self.header_bytes = self._offset  #: bytes before the first record frame
        self.end: dict[str, Any] | None = None
        self.truncated: str | None = None
        self.ops_read = 0
        self._frame_at = self._at = 0  # where the record being read is, for messages

    def _frame(self) -> bytes | None:
        head = self._f.read(4)
        if len(head) < 4:
            if head:
                self.truncated = f"cut off inside a frame header at byte {self._offset}"
            return None
        (n,) = _FRAME_HEAD.unpack(head)
        if n + 4 > self._size - self._offset - 4:  # read(n) would allocate n bytes first
            self.truncated = f"cut off mid-record at byte {self._offset} (frame of {n} bytes incomplete)"
            return None
        body = self._f.read(n + 4)
        if len(body) < n + 4:
            self.truncated = f"cut off mid-record at byte {self._offset} (frame of {n} bytes incomplete)"
            return None
        payload, crc = body[:n], _FRAME_HEAD.unpack(body[n:])[0]
        if zlib.crc32(payload) != crc:
            self.truncated = f"damaged frame at byte {self._offset} (checksum mismatch)"
            return None
        self._offset += 8 + n
        return payload

    def close(self) -> None:
        self._f.close()

    def _damaged(self, what: str, at: int) -> FileFormatError:
        """The error for a frame whose checksum is right but whose records are not
        (written by another program, or edited and re-checksummed)."""
        return FileFormatError(
            f"{self._name}: damaged trace (frame at byte {self._frame_at}, record at byte "
            f"{at} of it): {what}; the frame's checksum is right, so it was written "
            f"wrong or edited, not cut off; record it again"
        )

    def _values(self, meta: str, data: bytes | None, what: str, at: int) -> str:
        """``meta``, after checking that ``data`` (a sample or capture) holds whole
        values of its dtype: a report reads them as numbers."""
        size = _ITEMSIZE.get(meta.split("[", 1)[0])
        if data and size and len(data) % size:
            raise self._damaged(f"a {what} of {meta} values holds {len(data)} bytes, not a multiple of {size}", at)
        return meta

    def __iter__(self) -> Iterator[Op]:
        try:
            yield from self._records()
        except (struct.error, IndexError) as exc:
            raise self._damaged(f"a record is cut short or malformed ({exc})", self._at) from None

    def _records(self) -> Iterator[Op]:
        st = _Parsed()
        try:
            while True:
                self._frame_at = self._offset
                payload = self._frame()
                if payload is None:
                    break
                ended = yield from self._frame_records(payload, st)
                if ended:
                    return
            if st.pending is not None:
                yield st.pending
            if self.end is None and self.truncated is None:
                self.truncated = (
                    "has no end record: the recorded process stopped before "
                    "closing the trace (crash, kill or still running)"
                )
        finally:
            self._f.close()

    def _frame_records(self, payload: bytes, st: _Parsed) -> Generator[Op, None, bool]:
        """The records of one frame: strings, ops (each yielded once the next begins, as
        its captures follow it), captures and the end record. Returns True when the trace
        ends here: a damaged end record or an unknown record type (``truncated`` says so)."""
        mv = memoryview(payload)
        i, n = 0, len(payload)
        while i < n:
            self._at = i
            kind = payload[i : i + 1]
            if kind == b"S":
                (ln,) = struct.unpack_from("<I", payload, i + 1)
                i += 5
                st.strings.append(self._take(mv, i, ln).decode("utf-8", "replace"))
                i += ln
            elif kind == b"O":
                if st.pending is not None:
                    yield st.pending
                st.pending, i = self._op_record(payload, mv, i, st)
                st.seq += 1
                self.ops_read = st.seq
            elif kind == b"C":
                i = self._capture_record(payload, mv, i, st)
            elif kind == b"E":
                (ln,) = struct.unpack_from("<I", payload, i + 1)
                i += 5
                if not self._end_record(self._take(mv, i, ln)):  # take: outside any try (a ValueError)
                    return True
                i += ln
            else:
                self.truncated = f"unknown record type {kind!r} at byte {self._offset}"
                return True
        return False

    def _string(self, strings: list[str], k: int, at: int) -> str:
        if k >= len(strings):
            raise self._damaged(f"an op record names string {k}, but only {len(strings)} are defined before it", at)
        return strings[k]

    def _take(self, mv: memoryview, i: int, ln: int) -> bytes:
        if i + ln > len(mv):
            raise self._damaged(f"a record declares {ln} bytes of data but its frame holds {len(mv) - i}", i)
        return bytes(mv[i : i + ln])

    def _tensor(self, payload: bytes, mv: memoryview, i: int, strings: list[str]) -> tuple[TensorRecord, int]:
        meta, flags = _T.unpack_from(payload, i)
        i += 5
        dig = sample = ref = None
        if flags & HAS_DIGEST:
            (dig,) = _U64.unpack_from(payload, i)
            i += 8
        if flags & HAS_SAMPLE:
            ln = payload[i]
            i += 1
            sample = self._take(mv, i, ln)
            i += ln
        if flags & IS_REF:
            ref = _REF.unpack_from(payload, i)
            i += 5
        return TensorRecord(
            self._values(self._string(strings, meta, i), sample, "sample", i), flags, dig, sample, ref
        ), i

    def _op_record(self, payload: bytes, mv: memoryview, i: int, st: _Parsed) -> tuple[Op, int]:
        _, name, ctx, step, nin, nout = _OP.unpack_from(payload, i)
        i += _OP.size
        ts = []
        for _k in range(nin + nout):
            t, i = self._tensor(payload, mv, i, st.strings)
            ts.append(t)
        parts = self._string(st.strings, ctx, i).split(SEP)
        parts += [""] * (5 - len(parts))
        return Op(
            st.seq,
            self._string(st.strings, name, i),
            parts[0],
            parts[1],
            parts[2],
            parts[3],
            parts[4],
            step,
            ts[:nin],
            ts[nin:],
        ), i

    def _capture_record(self, payload: bytes, mv: memoryview, i: int, st: _Parsed) -> int:
        _, cseq, is_out, idx, meta, ln = _CAPTURE.unpack_from(payload, i)
        i += _CAPTURE.size
        data = self._take(mv, i, ln)
        i += ln
        if st.pending is not None and st.pending.seq == cseq:
            st.pending.captures[(is_out, idx)] = (
                self._values(self._string(st.strings, meta, i), data, "capture", i),
                data,
            )
        return i

    def _end_record(self, raw: bytes) -> bool:
        """Read the end record; False (and ``truncated`` set) when it is damaged."""
        try:
            end = json.loads(raw)
        except (ValueError, RecursionError):
            end = None
        if not isinstance(end, dict):
            self.truncated = f"damaged end record at byte {self._offset}"
            return False
        self.end = end
        return True


def is_trace(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a regular file starting with the trace signature (or empty):
    a file that recording may replace."""
    return starts_with(path, (MAGIC,), within=len(MAGIC))


def _strings_or_none(value: Any) -> bool:
    return value is None or (isinstance(value, list) and all(isinstance(v, str) for v in value))


def _mapping_of(value: Any, types: tuple) -> bool:
    return value is None or (isinstance(value, dict) and all(isinstance(v, types) for v in value.values()))


_NONE = type(None)


def _header_shape_ok(header: dict) -> bool:
    """The header fields a comparison reads have the types the writer gives them
    (:func:`fwd9m.debug.record`'s header; the environment is a fingerprint of
    :func:`fwd9m.environment.collect`): a header edited or written by another program
    is refused here rather than failing later, mid-report."""
    program, env = header.get("program"), header.get("environment")
    if not (
        isinstance(program, (dict, _NONE))
        and isinstance(env, (dict, _NONE))
        and _strings_or_none(header.get("frameworks"))
        and isinstance(header.get("level"), (str, _NONE))
    ):
        return False
    program, env = program or {}, env or {}
    frameworks = env.get("frameworks")
    return (
        isinstance(program.get("script"), (str, _NONE))
        and _mapping_of(frameworks, (dict,))
        and all(
            isinstance(f.get("version"), (str, _NONE)) and isinstance(f.get("intra_op_threads"), (int, _NONE))
            for f in (frameworks or {}).values()
        )
        and _mapping_of(env.get("packages"), (str, _NONE))
        and _mapping_of(env.get("env"), (str, _NONE))
    )


def read_header(path: str | os.PathLike[str]) -> dict[str, Any]:
    r = TraceReader(path)
    r.close()
    return r.header
