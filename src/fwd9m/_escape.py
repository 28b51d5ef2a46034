"""Text from a user's program made safe to print in a report: control characters shown
as escapes, so a differing line that sets colours, moves the cursor, rings the bell or
clears the screen is shown, not obeyed."""

from __future__ import annotations

import re

#: C0 and C1 control characters and DEL (ANSI escape sequences start with ESC, U+001B,
#: or CSI, U+009B), the Unicode bidirectional embeddings, overrides and isolates (they
#: reorder the text around them on screen: Unicode Standard Annex #9,
#: https://www.unicode.org/reports/tr9/), the line and paragraph separators, and lone
#: surrogates (unprintable). Every other character, any script or emoji, is kept.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(ch: str) -> str:
    code = ord(ch)
    return _NAMED.get(ch) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def escape_control(text: str, keep: str = "") -> str:
    """``text`` with every control character written as an escape (``\\x1b``, ``\\t``,
    ``\\u202e``), the way Python's ``repr`` writes it; other characters unchanged.
    Characters in ``keep`` (e.g. ``"\\n\\t"`` for a multi-line block) stay as they
    are. A backslash already in ``text`` is kept as it is, so escaping twice changes
    nothing."""
    return _CONTROL.sub(lambda m: m.group() if m.group() in keep else _escape(m.group()), text)


def printable(text: str) -> str:
    """A block of a program's text (several lines) safe to print to a terminal: its
    escape sequences show as ``\\x1b``, ``\\r``, ... instead of acting on the user's
    terminal; newlines and tabs are kept; text already escaped is left as it is."""
    return escape_control(text, keep="\n\t")


def clip(line: str | None, width: int = 160) -> str:
    """One line of a program's output for a report: without its line ending, control
    characters escaped (:func:`escape_control`), at most ``width`` characters (an
    escape is never cut; ``...`` marks a cut). None (the output ended before this
    line) reads ``<no line: output ended>``."""
    if line is None:
        return "<no line: output ended>"
    pieces = [_escape(c) if _CONTROL.match(c) else c for c in line.rstrip("\r\n")[: width + 1]]
    if sum(map(len, pieces)) <= width:
        return "".join(pieces)
    out, used = [], 0
    for piece in pieces:
        if used + len(piece) > width - 3:
            break
        out.append(piece)
        used += len(piece)
    return "".join(out) + "..."
