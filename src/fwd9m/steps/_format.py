"""The step digest file: one small record per training step, streamed, never pickled.

Layout (little-endian)::

    b"FWD9MSTP"  u16 format version  u16 flags(0)
    frame*       u32 payload length | payload | u32 crc32(payload)

Each frame is one record; its first byte says which:

* ``H`` UTF-8 JSON header (first frame only): ``{"format": "fwd9m.steps", "version",
  "program", "created", "environment"}`` (the fingerprint of
  :func:`fwd9m.environment.collect`).
* ``N`` UTF-8 JSON list of ``[group, name, meta]``: defines tensor ids 0, 1, 2, ... in
  order (``meta`` is dtype and shape, ``"float32[16,8]"``). A tensor whose shape changes
  gets a new id.
* ``D`` i64 step, u32 count, then count times (u32 id, u64 digest): one step's digests
  (:mod:`fwd9m.fingerprint`), in the order the source gave them.
* ``E`` UTF-8 JSON end record (``{"steps": N, ...}``); absent when the process died.

A frame is written whole with one ``os.write``, so a crash leaves whole records. The
reader refuses (:class:`~fwd9m.errors.FileFormatError`) a foreign file, another format
version, a damaged header, a frame cut off or with a wrong checksum, and records that
do not parse; a file that ends on a record boundary without an end record is read, and
says so (``complete`` is False: the writing process stopped early).
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .._files import open_regular_file, shown, starts_with
from ..errors import ConfigurationError, FileFormatError

__all__ = [
    "FORMAT_VERSION",
    "GROUPS",
    "MAGIC",
    "StepReader",
    "StepRecord",
    "StepWriter",
    "is_step_digest_file",
]

MAGIC = b"FWD9MSTP"
FORMAT_VERSION = 1
FORMAT_NAME = "fwd9m.steps"
#: the groups a record's tensors belong to, in the order a step computes them (a report
#: names the earliest group that differs first)
GROUPS = ("initial", "batch", "rng", "loss", "grads", "params", "buffers", "optimizer", "values")
#: no record fwd9m writes comes near this; a larger frame length is damage, not data
MAX_FRAME_BYTES = 64 << 20

_U32 = struct.Struct("<I")
_STEP = struct.Struct("<cqI")
_ENTRY = struct.Struct("<IQ")
_HINT = "write one with: fwd9m run --digests run.steps train.py"


@dataclass(frozen=True)
class StepRecord:
    """One step: ``digests`` maps ``(group, name)`` to ``(meta, digest)``."""

    step: int
    digests: dict[tuple[str, str], tuple[str, int]]


def is_step_digest_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a regular file that starts with the step digest signature
    (never blocks: a pipe or a device is not one)."""
    try:
        with open_regular_file(path, "step digest", "") as f:
            return f.read(len(MAGIC)) == MAGIC
    except Exception:  # noqa: BLE001 - unreadable: not recognisably a digest file
        return False


def _may_replace(path: str) -> bool:
    """An existing file the writer may replace: an empty one or a step digest file."""
    return starts_with(path, (MAGIC,), within=len(MAGIC))


def check_replaceable(path: str) -> None:
    """Refuse to write ``path`` when it exists and is not an empty or step digest file.

    Raises:
        ConfigurationError: what the file is, and the fix.
    """
    if os.path.lexists(path) and not (os.path.isfile(path) and _may_replace(path)):
        raise ConfigurationError(
            f"{shown(path)} exists and is not a step digest file fwd9m wrote; fwd9m "
            f"does not overwrite it: name another file, e.g. run.steps"
        )


class StepWriter:
    """Streams step records to ``path``; :meth:`close` writes the end record.

    An existing file is replaced only when it is empty or a step digest file (fwd9m
    never overwrites another file). With ``keep_old``, an existing file is replaced only
    at :meth:`close` of a completed run (written beside it as ``PATH.partial`` until
    then, an atomic rename): a run killed or failed early keeps the reference it would
    have replaced, and leaves its own digests in ``partial``.

    Raises:
        ConfigurationError: ``path`` exists and is not a step digest file.
        OSError: the file cannot be created or written.
    """

    def __init__(self, path: str | os.PathLike[str], header: dict[str, Any], keep_old: bool = False):
        self.path = os.fspath(path)
        check_replaceable(self.path)
        #: where the records go until close: beside an existing file with ``keep_old``
        self.partial = self.path + ".partial" if keep_old and os.path.lexists(self.path) else self.path
        self.kept_old = False  #: close left the old file and the new digests in ``partial``
        if self.partial != self.path:
            check_replaceable(self.partial)
        self._fd: int | None = os.open(
            self.partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o644
        )
        self._ids: dict[tuple[str, str, str], int] = {}
        self.steps = 0
        self.bytes_written = 0
        os.write(self._fd, MAGIC + struct.pack("<HH", FORMAT_VERSION, 0))
        self.bytes_written = 12
        self._frame(
            b"H" + json.dumps({"format": FORMAT_NAME, "version": FORMAT_VERSION, **header}, default=str).encode()
        )

    def _frame(self, payload: bytes) -> None:
        assert self._fd is not None
        frame = _U32.pack(len(payload)) + payload + _U32.pack(zlib.crc32(payload))
        os.write(self._fd, frame)
        self.bytes_written += len(frame)

    def step(self, step: int, entries: list[tuple[str, str, str, int]]) -> None:
        """Append one step: ``entries`` are ``(group, name, meta, digest)``."""
        if self._fd is None:
            return
        new = []
        ids = []
        for group, name, meta, _ in entries:
            key = (group, name, meta)
            i = self._ids.get(key)
            if i is None:
                i = self._ids[key] = len(self._ids)
                new.append(list(key))
            ids.append(i)
        if new:
            self._frame(b"N" + json.dumps(new).encode())
        body = bytearray(_STEP.pack(b"D", step, len(entries)))
        for i, (_, _, _, dig) in zip(ids, entries):
            body += _ENTRY.pack(i, dig)
        self._frame(bytes(body))
        self.steps += 1

    def close(self, end: dict[str, Any] | None = None) -> None:
        if self._fd is None:
            return
        try:
            self._frame(b"E" + json.dumps({"steps": self.steps, **(end or {})}, default=str).encode())
        finally:
            os.close(self._fd)
            self._fd = None
        if self.partial != self.path:
            if (end or {}).get("completed", True) is False:
                self.kept_old = True
            else:
                os.replace(self.partial, self.path)


class StepReader:
    """Reads a step digest file, streaming: ``header`` after construction; iterate for
    :class:`StepRecord` objects. After iteration, ``end`` holds the end record and
    ``complete`` whether there was one.

    Raises:
        FileFormatError: missing, not a regular file, not a step digest file, another
            format version, a damaged header; while iterating: a frame cut off or with
            a wrong checksum, or a record that does not parse.
    """

    def __init__(self, path: str | os.PathLike[str]):
        self.path = os.fspath(path)
        self.name = shown(self.path)
        self._f = open_regular_file(self.path, "step digest", _HINT)
        try:
            self._size = os.fstat(self._f.fileno()).st_size
            head = self._f.read(12)
            if head[: len(MAGIC)] != MAGIC:
                raise FileFormatError(
                    f"{self.name} is not a fwd9m step digest file (no {MAGIC.decode()} signature); {_HINT}"
                )
            if len(head) < 12:
                raise FileFormatError(f"{self.name} is truncated inside its header; write it again")
            (self.version,) = struct.unpack("<H", head[8:10])
            if self.version != FORMAT_VERSION:
                raise FileFormatError(
                    f"{self.name} uses step digest format version {self.version}, but this "
                    f"fwd9m reads version {FORMAT_VERSION} only; write it again with this "
                    f"fwd9m, or read it with the fwd9m version that wrote it"
                )
            self._offset = 12
            payload = self._frame("its header")
            if payload is None or payload[:1] != b"H":
                raise FileFormatError(f"{self.name} has no header record; write it again")
            try:
                header = json.loads(payload[1:])
            except (ValueError, RecursionError):
                header = None
            if not (
                isinstance(header, dict)
                and header.get("format") == FORMAT_NAME
                and header.get("version") == FORMAT_VERSION
                and isinstance(header.get("environment"), (dict, type(None)))
                and isinstance(header.get("program"), (dict, type(None)))
            ):
                raise FileFormatError(
                    f"{self.name}: the header is not a step digest header of format "
                    f"version {FORMAT_VERSION} (damaged or edited); write it again"
                )
        except BaseException:
            self._f.close()
            raise
        self.header: dict[str, Any] = header
        self.end: dict[str, Any] | None = None
        self.steps_read = 0
        self.names: list[tuple[str, str, str]] = []  #: tensor names defined so far (``N`` records)

    @property
    def complete(self) -> bool:
        return self.end is not None

    def _damaged(self, what: str) -> FileFormatError:
        return FileFormatError(
            f"{self.name}: damaged step digest file at byte {self._offset}: {what}; "
            f"write it again (fwd9m run --digests FILE train.py)"
        )

    def _frame(self, where: str = "a record") -> bytes | None:
        """The next frame's payload; None at a clean end of file."""
        head = self._f.read(4)
        if not head:
            return None
        if len(head) < 4:
            raise self._damaged(f"cut off inside the length of {where}")
        (n,) = _U32.unpack(head)
        if n > MAX_FRAME_BYTES or n + 8 > self._size - self._offset:  # never allocate what is not there
            raise self._damaged(f"{where} of {n} bytes is cut off (the file is truncated) or its length is damaged")
        body = self._f.read(n + 4)
        if len(body) < n + 4:
            raise self._damaged(f"{where} is cut off (the file is truncated)")
        payload = body[:n]
        if zlib.crc32(payload) != _U32.unpack(body[n:])[0]:
            raise self._damaged(f"{where} has a wrong checksum (the file was changed)")
        self._offset += n + 8
        return payload

    def close(self) -> None:
        self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __iter__(self) -> Iterator[StepRecord]:
        for payload in self.raw_steps():
            yield self._step(payload, self.names)

    def raw_steps(self) -> Iterator[bytes]:
        """The step records undecoded (checksum and length verified): each ``D`` frame's
        payload; the tensor names defined so far are in ``names``. Two records with equal
        payloads under equal ``names`` are equal, without decoding either."""
        self.names = []
        try:
            while True:
                payload = self._frame()
                if payload is None:
                    return
                kind = payload[:1]
                if self.end is not None:
                    raise self._damaged("a record follows the end record")
                if kind == b"N":
                    self.names.extend(self._names(payload[1:]))
                elif kind == b"D":
                    self._check_length(payload)
                    yield payload
                    self.steps_read += 1
                elif kind == b"E":
                    end = self._json(payload[1:])
                    if not isinstance(end, dict):
                        raise self._damaged("the end record is not a JSON object")
                    self.end = end
                else:
                    raise self._damaged(f"unknown record type {kind!r}")
        finally:
            self._f.close()

    def _check_length(self, payload: bytes) -> None:
        if len(payload) < _STEP.size:
            raise self._damaged("a step record is cut short")
        _, step, count = _STEP.unpack_from(payload)
        if len(payload) != _STEP.size + count * _ENTRY.size:
            raise self._damaged(f"a step record declares {count} digests but holds {len(payload) - _STEP.size} bytes")

    def _json(self, raw: bytes) -> Any:
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):
            raise self._damaged("a record is not valid JSON") from None

    def _names(self, raw: bytes) -> list[tuple[str, str, str]]:
        value = self._json(raw)
        if not (
            isinstance(value, list)
            and all(isinstance(v, list) and len(v) == 3 and all(isinstance(s, str) for s in v) for v in value)
        ):
            raise self._damaged("a name record is not a list of [group, name, meta]")
        return [tuple(v) for v in value]  # type: ignore[misc]

    def decode(self, payload: bytes) -> StepRecord:
        """The record of a payload :meth:`raw_steps` gave, under the names defined so far."""
        return self._step(payload, self.names)

    def _step(self, payload: bytes, names: list[tuple[str, str, str]]) -> StepRecord:
        """Decode a step record (its length checked again: a follower calls this directly)."""
        self._check_length(payload)
        _, step, count = _STEP.unpack_from(payload)
        digests = {}
        for k in range(count):
            i, dig = _ENTRY.unpack_from(payload, _STEP.size + k * _ENTRY.size)
            if i >= len(names):
                raise self._damaged(f"step {step} names tensor {i}, but only {len(names)} are defined")
            group, name, meta = names[i]
            digests[(group, name)] = (meta, dig)
        return StepRecord(step, digests)
