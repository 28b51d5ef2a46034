"""Line-by-line comparison of printed output and text files: numbers compared as
numbers, volatile parts (addresses, timestamps, durations) masked, progress-bar
redraws resolved as a terminal would."""

from __future__ import annotations

import math
import os
import re
from typing import Iterator

from ._bits import LeafDiff
from ._escape import clip

#: Parts of printed lines that change from run to run without meaning a different
#: result: memory addresses, temporary file names, wall-clock timestamps, durations and
#: rates (Keras's ``0s 12ms/step``, tqdm's ``3.2it/s``). They are masked before comparing.
VOLATILE = (
    (re.compile(r"0x[0-9a-fA-F]{6,}"), "<addr>"),
    (re.compile(r"\btmp[a-z0-9_]{8}\b"), "<tmpname>"),  # tempfile.mkdtemp()/mkstemp() names
    (re.compile(r"\b\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"), "<time>"),
    (re.compile(r"\bETA:?\s*\d+(?::\d+)*(?:\.\d+)?\s*[a-z]*"), "<eta>"),
    (re.compile(r"(?<![\w.])\d+(?:\.\d+)?\s*(?:ms|us|µs|ns|s|sec|secs|seconds|min|h)"
                r"(?:/(?:step|it|epoch|sample|batch))?(?![\w])"), "<duration>"),
    (re.compile(r"(?<![\w.])\d+(?:\.\d+)?\s*(?:it|its|step|steps|samples|examples|batches)/s(?![\w])"), "<rate>"),
)
_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![\w.])"
                     r"|(?<![\w])[-+]?(?:nan|inf|infinity)(?![\w])", re.IGNORECASE)


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|[\x08]")


def normalize_line(line: str, replacements: tuple[tuple[str, str], ...] = ()) -> str:
    """What a terminal shows once the line is finished: the text after the last
    carriage return (progress bars redraw themselves with ``\\r`` a varying number of
    times), without colour escapes, backspaces and trailing blanks, with
    ``replacements`` (such as the run's working directory) and :data:`VOLATILE` masked."""
    line = line.rstrip("\n").rstrip("\r")
    if "\r" in line:
        line = line.rsplit("\r", 1)[1]
    line = _ANSI.sub("", line).rstrip()
    for old, new in replacements:
        if old:
            line = line.replace(old, new)
    for pattern, mask in VOLATILE:
        line = pattern.sub(mask, line)
    return line


def _split_numbers(line: str) -> tuple[str, list[str]]:
    return _NUMBER.sub("\0", line), _NUMBER.findall(line)


def _number_diff(xs: list[str], ys: list[str]) -> float | None:
    """Largest |x - y| when the numbers differ only as numbers; 0.0 when equal as
    numbers (``1.0`` and ``1.00``); None when they cannot be compared numerically."""
    worst = 0.0
    for x, y in zip(xs, ys):
        if x == y:
            continue
        try:
            fx, fy = float(x), float(y)
        except ValueError:
            return None
        if fx == fy or (math.isnan(fx) and math.isnan(fy)):
            continue
        worst = max(worst, abs(fx - fy) if math.isfinite(fx) and math.isfinite(fy) else math.inf)
    return worst


def _lines(f) -> Iterator[str]:
    while True:
        line = f.readline(1 << 16)  # bounded: a line without newlines comes in pieces
        if not line:
            return
        yield line


def compare_text(path: str, file_a: str | os.PathLike[str], file_b: str | os.PathLike[str],
                 replace_a: tuple[tuple[str, str], ...] = (),
                 replace_b: tuple[tuple[str, str], ...] = ()) -> LeafDiff | None:
    """Compare two text files line by line, numbers as numbers, reading both as streams
    (memory does not grow with their length). None when they agree.

    The returned ``LeafDiff`` has kind ``"lines"``: ``n_diff`` differing lines out of
    ``size``; ``first_index``: ``(line number,)`` 1-based; ``a``/``b`` that line in each
    run as written (colour codes included), control characters escaped (``\\x1b``),
    clipped to 160 characters; ``max_abs``: the largest difference between numbers on
    lines that differ only in their numbers (None if no line does).
    """
    import itertools

    if _same_bytes(file_a, file_b):
        return None
    n_diff = total = 0
    first = None
    max_abs: float | None = None
    # lines end at "\n" only: a "\r" redraws the line, as on a terminal
    with open(file_a, encoding="utf-8", errors="replace", newline="\n") as fa, \
            open(file_b, encoding="utf-8", errors="replace", newline="\n") as fb:
        for la, lb in itertools.zip_longest(_lines(fa), _lines(fb)):
            total += 1
            if la == lb:
                continue
            if la is not None and lb is not None:
                na, nb = normalize_line(la, replace_a), normalize_line(lb, replace_b)
                if na == nb:
                    continue
                (sa, xa), (sb, xb) = _split_numbers(na), _split_numbers(nb)
                if sa == sb:
                    d = _number_diff(xa, xb)
                    if d == 0.0:
                        continue
                    if d is not None:
                        max_abs = d if max_abs is None else max(max_abs, d)
            n_diff += 1
            if first is None:
                first = (total, clip(la), clip(lb))
    if not n_diff:
        return None
    line, a, b = first
    return LeafDiff(path, "lines", "text", None, n_diff, total, max_abs, None, (line,), a, b)


def _same_bytes(file_a: str | os.PathLike[str], file_b: str | os.PathLike[str]) -> bool:
    """Byte-for-byte equality, 1 MiB at a time (the common case: identical output)."""
    if os.path.getsize(file_a) != os.path.getsize(file_b):
        return False
    with open(file_a, "rb") as fa, open(file_b, "rb") as fb:
        while True:
            ba, bb = fa.read(1 << 20), fb.read(1 << 20)
            if ba != bb:
                return False
            if not ba:
                return True
