"""A Python file's text as fixes read and write it: decoded per PEP 263 (a coding
cookie, a UTF-8 BOM, else UTF-8) with its line endings kept as they are, and encoded
back the same way (the BOM too), so a fix changes the lines it edits and no other."""

from __future__ import annotations

import io
import tokenize
from pathlib import Path

__all__ = ["decode", "read"]


def decode(data: bytes) -> tuple[str, str]:
    """``(text, encoding)`` of a source file's bytes; ``text.encode(encoding)`` gives the
    bytes back (``utf-8-sig`` keeps a BOM). Line endings are not translated.

    Raises:
        SyntaxError: a coding cookie that names no encoding.
        UnicodeDecodeError: bytes that are not text in that encoding.
    """
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return data.decode(encoding), encoding


def read(path: Path) -> tuple[str, str]:
    """``(text, encoding)`` of the file at ``path`` (:func:`decode`)."""
    return decode(path.read_bytes())
