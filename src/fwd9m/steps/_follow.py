"""Follow a step digest file while its run writes it (``fwd9m check``'s early stop).

:class:`StepFollower` reads the whole records that are there now and keeps the bytes
of a record still being written for the next :meth:`~StepFollower.poll`: a file that
ends inside a record is not damaged while its writer runs. Records are parsed by
:class:`~fwd9m.steps._format.StepReader`'s own code, so a foreign or damaged file is
the same :class:`~fwd9m.errors.FileFormatError`.
"""

from __future__ import annotations

import os
import struct
import zlib
from typing import Any

from .._files import shown
from ..errors import FileFormatError
from ._format import FORMAT_NAME, FORMAT_VERSION, MAGIC, MAX_FRAME_BYTES, StepReader, StepRecord

__all__ = ["StepFollower"]

_U32 = struct.Struct("<I")


class StepFollower(StepReader):
    """The records of ``path`` as they are appended: :meth:`poll` returns the new ones.

    Raises (from :meth:`poll`):
        FileFormatError: the file is not a step digest file, or a record is damaged.
    """

    def __init__(self, path: str | os.PathLike[str]):  # noqa: D107 - no header read yet
        self.path = os.fspath(path)
        self.name = shown(self.path)
        self._f = open(self.path, "rb")  # noqa: SIM115 - kept open while the run writes
        self._buf = b""
        self._offset = 0
        self._defined: list[tuple[str, str, str]] = []
        self.header: dict[str, Any] | None = None
        self.end: dict[str, Any] | None = None
        self.steps_read = 0

    def poll(self) -> list[StepRecord]:
        """The records written since the last call (none while a record is incomplete)."""
        self._buf += self._f.read()
        out: list[StepRecord] = []
        if self._offset == 0:
            if len(self._buf) < 12:
                if self._buf and not MAGIC.startswith(self._buf[: len(MAGIC)]):
                    raise FileFormatError(f"{self.name} is not a fwd9m step digest file")
                return out
            if self._buf[: len(MAGIC)] != MAGIC or struct.unpack("<H", self._buf[8:10])[0] != FORMAT_VERSION:
                raise FileFormatError(f"{self.name} is not a fwd9m step digest file of version {FORMAT_VERSION}")
            self._buf, self._offset = self._buf[12:], 12
        while True:
            payload = self._next()
            if payload is None:
                return out
            record = self._record(payload)
            if record is not None:
                out.append(record)

    def _next(self) -> bytes | None:
        if len(self._buf) < 4:
            return None
        (n,) = _U32.unpack_from(self._buf)
        if n > MAX_FRAME_BYTES:
            raise self._damaged(f"a record of {n} bytes (its length is damaged)")
        if len(self._buf) < n + 8:
            return None  # still being written
        payload, crc = self._buf[4 : 4 + n], _U32.unpack_from(self._buf, 4 + n)[0]
        if zlib.crc32(payload) != crc:
            raise self._damaged("a record has a wrong checksum")
        self._buf, self._offset = self._buf[n + 8 :], self._offset + n + 8
        return payload

    def _record(self, payload: bytes) -> StepRecord | None:
        kind = payload[:1]
        if self.header is None:
            header = self._json(payload[1:]) if kind == b"H" else None
            if not (isinstance(header, dict) and header.get("format") == FORMAT_NAME):
                raise self._damaged("the first record is not a step digest header")
            self.header = header
            return None
        if self.end is not None:
            raise self._damaged("a record follows the end record")
        if kind == b"N":
            self._defined.extend(self._names(payload[1:]))
        elif kind == b"D":
            self.steps_read += 1
            return self._step(payload, self._defined)
        elif kind == b"E":
            end = self._json(payload[1:])
            self.end = end if isinstance(end, dict) else {}
        else:
            raise self._damaged(f"unknown record type {kind!r}")
        return None

    def close(self) -> None:
        self._f.close()
