"""Line-by-line comparison of printed output and text files: numbers compared by their
exact value, volatile parts (addresses, timestamps, durations, rates, timing values by
name) masked and listed, progress-bar redraws resolved as a terminal would.

A line is split into its text, its numbers and its masked values. Two lines agree when
their text is the same, their numbers have the same exact value and sign (``1.0`` and
``1.00`` agree; ``2**62`` and ``2**62 + 1``, ``0.1`` and ``0.1000000000000000055``,
``0.0`` and ``-0.0``, ``0x1a2b3c00`` and ``0x1a2b3c02`` do not), whatever the masked
values are, and however wide the runs of blanks between them are (a table or a progress
bar pads its columns around values of a varying width). Every masked value is counted
in an :class:`IgnoredValues` so that a report can say what was not compared;
``strict=True`` masks nothing and keeps blanks (only the per-run folder replacements
apply).
"""

from __future__ import annotations

import bisect
import csv
import decimal
import hashlib
import math
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ._bits import LeafDiff
from ._escape import clip

#: A longer stretch of a line (between carriage returns) keeps its first this many
#: characters as text; the rest is compared by its SHA-256 (memory stays bounded).
LINE_LIMIT = 1 << 20

_NUM = r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"  # unambiguous: linear on a long run of digits
MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_CLOCK = r"\d+:\d{2}(?::\d{2})?"
#: an ISO date of a real year, month and day (``1024-64-32``, a model's layer sizes, is none)
DATE = r"(?:19|20)\d{2}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])"
#: the time of day after a :data:`DATE` (``_19-12-33``, `` 19:12:33.5``)
CLOCK_AFTER_DATE = r"(?:[ T_]\d{2}[:-]\d{2}(?:[:-]\d{2}(?:[.,]\d+)?)?"
#: ``strftime("%Y%m%d")`` and ``("%H%M%S")`` of a real date and time
COMPACT_DATE = r"(?:19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])"
COMPACT_TIME = r"(?:[01]\d|2[0-3])[0-5]\d[0-5]\d"
#: TensorBoard's and transformers' default log folder: ``Dec01_07-45-28``
TB_STAMP = MONTH + r"\d{2}_\d{2}-\d{2}-\d{2}"
#: units of what progress bars and loggers count per second (``it/s``, ``samples/s``)
_COUNT_UNITS = (
    r"(?:it|its|steps?|batch(?:es)?|samples?|examples?|ex|tokens?|toks?|imgs?|images?|seqs?|"
    r"sequences?|epochs?|items?|rows?|files?|frames?|bytes|[kKMGTP]?i?B|b)"
)
_TIME_UNITS = r"(?:ns|us|µs|μs|ms|s|secs?|seconds?|mins?|minutes?|h|hrs?|hours?)"


class _Mask(NamedTuple):
    kind: str  #: "timing", "timestamp", "address", "temporary name"
    name: str  #: the name listed in the report; "{unit}" is filled from the match
    pattern: re.Pattern[str]
    #: for :data:`MASKS`, a pattern a line must contain for a match (a fast test first);
    #: for :data:`NUMBER_MASKS`, the characters that may not come just before the match
    #: (``\w``: letters, digits and ``_``), or, when it starts with "=", what the text
    #: before it must end with (blanks aside)
    before: re.Pattern[str] | str


#: the name of Rich's log time mask: its value is compared as the blank Rich prints
#: in its place when the time repeats
RICH_TIME = "log time (rich)"
#: Values that change from run to run without meaning a different result and do not
#: start with a digit. The named group ``v``, where present, is the masked part.
MASKS = (
    _Mask("address", "address", re.compile(r"(?:\bat |\bid[=:] ?)(?P<v>0x[0-9a-fA-F]+)\b"), re.compile("0x")),
    _Mask("temporary name", "temporary name", re.compile(r"\b(?:tmp|pymp-)[a-z0-9_]{8}\b"), re.compile("tmp|pymp-")),
    _Mask(
        "timestamp",
        "timestamp",
        re.compile(  # time.ctime()
            r"\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) " + MONTH + r" [ \d]\d \d{2}:\d{2}:\d{2} \d{4}\b"
        ),
        re.compile(r"\d:\d\d \d{4}"),
    ),
    # TensorBoard's and transformers' default log folder: runs/Dec01_07-45-28_host
    _Mask(
        "timestamp",
        "timestamp",
        re.compile(r"\b" + TB_STAMP + r"(?!\d)"),
        re.compile(r"[a-z]\d\d_\d"),
    ),
    # Rich's console.log and RichHandler: "[13:40:01] " ("[%X]"; "[%x %X]": "[12/02/26
    # 13:40:01]") at the start of the line, left blank when it repeats the line before's
    # (rich/_log_render.py, omit_repeated_times): compared as that blank (RICH_TIME)
    _Mask(
        "timestamp",
        RICH_TIME,
        re.compile(r"^\[(?:\d{2}/\d{2}/\d{2} )?\d{1,2}:\d{2}:\d{2}(?: [AP]M)?\](?= |$)"),
        re.compile(r"^\[[\d/ ]*\d:\d\d:\d\d"),
    ),
    _Mask("timing", "{unit}", re.compile(r"(?<![\w.])\? ?(?P<unit>[^\s,\]]{1,30}/s)(?![\w/])"), re.compile(r"\?")),
    _Mask("timing", "duration", re.compile(r"-:--:--"), re.compile("-:--")),  # rich: time remaining unknown
)
#: Values that start with a digit, tried (anchored) where a number starts; ``unit``
#: names a rate or a per-step duration.
NUMBER_MASKS = (
    # ISO dates and times (a real year, month and day: 1024-64-32, a model's layer
    # sizes, is no date), and 20261201-191233 (strftime("%Y%m%d-%H%M%S"), also with a
    # blank or "_" or "T" between), also inside
    # a name (run_2026-12-01_19-12-33/, train_20261201-191233.log): not after a digit
    _Mask(
        "timestamp",
        "timestamp",
        re.compile(
            DATE + CLOCK_AFTER_DATE + r"(?:Z|[+-]\d{2}:?\d{2})?)?(?!\d)"
            r"|" + COMPACT_DATE + r"[-_T ]" + COMPACT_TIME + r"(?!\d)"
        ),
        "0123456789.",
    ),
    # the Common Log Format's time (Apache, nginx, gunicorn): 10/Oct/2026:13:55:36 -0700
    _Mask(
        "timestamp",
        "timestamp",
        re.compile(r"(?:0[1-9]|[12]\d|3[01])/" + MONTH + r"/\d{4}:\d{2}:\d{2}:\d{2}(?: [+-]\d{4})?(?!\d)"),
        "\\w.",
    ),
    # a date and time of day with slashes: 12/02/2026 13:40:01 (HF examples' logging
    # datefmt "%m/%d/%Y %H:%M:%S"), 02/12/26 13:40:01 (Rich's RichHandler "[%x %X]")
    _Mask(
        "timestamp",
        "timestamp",
        re.compile(r"\d{1,2}/\d{1,2}/\d{2}(?:\d{2})?[ T]\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?(?: ?[AP]M)?(?!\d)"),
        "\\w./",
    ),
    _Mask("timing", "elapsed (progress bar)", re.compile(_CLOCK + r"(?=[<,\]])"), "=["),
    _Mask("timing", "remaining (progress bar)", re.compile(_CLOCK + r"(?=[,\]])"), "=<"),
    # tqdm's r_bar: "| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}{postfix}]", where rate_fmt
    # is f"{rate:5.2f}" + unit + "/s" or its inverse + "s/" + unit (tqdm/std.py, format_meter)
    _Mask(
        "timing",
        "{unit} (progress bar)",
        # a unit is short and starts with no digit: linear time on any line
        re.compile(r"(?:" + _NUM + r")[kMGTPEZY]? ?(?P<unit>[^\s,\]\d.][^\s,\]]{0,30}/s|s/[^\s,\]]{1,30})(?=[,\]])"),
        "=, ",
    ),
    _Mask(
        "timing",
        "duration",
        re.compile(  # a timedelta: 0:00:00.010084, 1 day, 0:00:01
            r"(?:\d+ days?, )?\d{1,3}:\d{2}:\d{2}(?:\.\d+)?(?![\w:])"
        ),
        "\\w.:",
    ),
    _Mask(
        "timing",
        "duration",
        re.compile(  # 3m45s, 1h 2m, 2m 3.5s
            r"\d+(?:\.\d+)?(?:ms|d|h|m|s)(?: ?\d+(?:\.\d+)?(?:ms|d|h|m|s))+(?![\w/])"
        ),
        "\\w.",
    ),
    _Mask("timing", "{unit}", re.compile(_NUM + r"[kMGTPEZY]? ?(?P<unit>" + _COUNT_UNITS + r"/s)(?![\w/])"), "\\w."),
    _Mask(
        "timing",
        "{unit}",
        re.compile(  # 3.8e-06s, 0.53 minutes, 12ms/step, 1.42s/it
            _NUM + r" ?(?P<unit>" + _TIME_UNITS + r"(?:/(?:step|it|epoch|sample|batch|token))?)(?![\w/])"
        ),
        "\\w.",
    ),
)
#: kept for callers of the former API: each pattern with the text that replaces it
VOLATILE = tuple((m.pattern, f"<{m.kind}>") for m in MASKS + NUMBER_MASKS)
#: where a value of :data:`NUMBER_MASKS` may start: a number followed by "-", ":", ",",
#: "]", "<", a letter or " day" (a fast test: a number followed by a blank and a digit
#: or by nothing starts none)
_CANDIDATE = re.compile(r"(?<![\d.])(?:\.?\d[\d.]*(?:[eE][-+]?\d+)?(?:[-:,\]</]| ?[A-Za-zµμ?])|\d{8} \d{6}(?!\d))")
_NUMBER_MASKS_ALL: re.Pattern[str]  # set below, once _combined is defined
#: a line without any of these holds no timing name (a fast test before looking for keys)
_KEY_HINT = re.compile(
    r"(?:time|elapsed|duration|date|created|eta|sec|ms|us|ns|throughput|/s|per_s|timing|fps|sps)"
    r"[\w./\-]*['\"]?[ \t]*[:=]"
)  # searched in the lowercased line

#: a row of a logger's table (Stable-Baselines3's ``|    fps             | 4082  |``)
_TABLE_ROW = re.compile(r"\|\s*(?P<key>[A-Za-z_][\w./\-]*)\s*\|\s*(?P<v>[^|\s]+)\s*\|\s*$")
_KEY = re.compile(r"(?<![\w.\-'\"])(?<![A-Za-z_]/)(?P<q>['\"]?)(?P<key>[A-Za-z_][\w.\-/]*)(?P=q)[ \t]*[:=][ \t]*")
#: what a rate or a per-step time is per: ``it/s``, ``12ms/step`` (``s/loss`` is two fields)
_PER = r"(?:s|sec|step|it|iter|epoch|sample|batch|token|tok|img|image|example)s?"
#: the value after a timing name, and no further: a quoted string, a date (and time), a
#: clock or duration (``0:00:12``), a number with its time unit or rate (``3.2s``,
#: ``12ms/step``, ``1.42s/it``), else a word; it ends at any separator a log line puts
#: between fields (``|``, ``&``, ``,``, ``;``, ``/``, ``:``, ``=``, brackets, blanks), so
#: ``time=1.2|loss=0.5`` masks ``1.2`` only and the loss is still compared
_VALUE = re.compile(
    r"'[^'\n]*'|\"[^\"\n]*\""
    r"|\d{4}[-/]\d{2}[-/]\d{2}(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?)?(?:Z|[+-]\d{2}:?\d{2})?"
    r"|\d+(?::\d{2})+(?:[.,]\d+)?"
    r"|[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?(?: ?(?:[A-Za-zµμ]+/"
    + _PER
    + r"|"
    + _TIME_UNITS
    + r")(?![A-Za-z]))?"
    r"|[^\s,;|&}\])=:/]+"
)
_NUMBER = re.compile(
    r"(?<![\w.])[-+]?0[xX][0-9a-fA-F]+(?![\w.])"
    r"|(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![\w.])"
    r"|(?<![\w])[-+]?(?:nan|inf|infinity)(?![\w])",
    re.IGNORECASE,
)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|[\x08]")
_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")

# names of timing and bookkeeping values: any word of the name, its last word, or a
# per-second tail (train_samples_per_second); "timesteps" or "epoch" are not timing words
_TIMING_WORDS = {
    "runtime",
    "elapsed",
    "duration",
    "durations",
    "timestamp",
    "timestamps",
    "walltime",
    "datetime",
    "eta",  # written ETA: a lower-case eta is a step size (XGBoost's, DDIM's), a result
    "created",
    "throughput",
    "timing",
    "timings",
    "fps",  # frames per second: Stable-Baselines3's time/fps
    "sps",  # steps per second: CleanRL's SPS (stdout and charts/SPS)
}
#: words that make a name a result whatever timing word it holds: FastSpeech's
#: ``duration_loss``, an arrival-time model's ``eta_mae``, ``runtime_error_rate``
_RESULT_WORDS = {
    "loss",
    "losses",
    "error",
    "errors",
    "err",
    "mae",
    "mse",
    "rmse",
    "mape",
    "nll",
    "acc",
    "accuracy",
    "score",
    "pred",
    "preds",
    "prediction",
    "predictions",
    "target",
    "targets",
    "f1",
    "auc",
    "output",
    "outputs",
    "reward",
    "rewards",
    "return",
    "returns",
    "metric",
    "metrics",
    "survival",
    "arrival",
    "predicted",
    "hazard",
    "perplexity",
    "ppl",
    "bleu",
    "precision",
    "recall",
    "logits",
}
_TIMING_LAST = {"time", "times", "date", "seconds", "secs", "sec", "ms", "us", "ns"}
_TIME_UNIT_WORDS = {"s", "ms", "us", "ns", "sec", "secs", "seconds", "min", "mins", "minutes", "h"}


def timing_name(key: str) -> bool:
    """Whether ``key`` names a timing or bookkeeping value (``train_runtime``,
    ``eval_samples_per_second``, ``time``, ``wall_time``, ``elapsed``, ``timestamp``,
    ``created_at``, ``it/s``), by its words: ``timesteps``, ``num_timesteps``,
    ``time_step``, ``epoch``, ``learning_rate`` are not, nor is a name with a result's
    word (``duration_loss``, ``eta_mae``: :data:`_RESULT_WORDS`)."""
    raw = _WORDS.findall(key)
    words = [w.lower() if w != "eta" else "eta (a step size)" for w in raw]
    parts = re.split(r"[^a-z0-9]+", key.lower())  # f1_us: "f1", which _WORDS splits
    if not words or _RESULT_WORDS.intersection(words) or _RESULT_WORDS.intersection(parts):
        return False
    if _TIMING_WORDS.intersection(words) or words[-1] in _TIMING_LAST:
        return True
    if len(words) >= 2 and words[-2] == "per" and words[-1] in ("second", "sec", "s"):
        return True
    if key.endswith("/s") or key.lower().endswith(("persec", "per_sec")):
        return True
    if "time" in words:  # time_s, time_per_step
        i = words.index("time")
        return i + 1 < len(words) and (words[i + 1] in _TIME_UNIT_WORDS or words[i + 1] == "per")
    return False


@dataclass
class Ignored:
    """Values of one name and kind that were masked in one output, not compared."""

    source: str
    kind: str
    name: str
    where: str  #: the first occurrence: ``stdout line 12``
    a: str  #: its value there in each run (escaped, clipped)
    b: str
    count: int = 0  #: how many values of this name were masked
    differed: int = 0  #: how many of them differed between the runs

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "kind": self.kind,
            "name": self.name,
            "where": self.where,
            "a": self.a,
            "b": self.b,
            "count": self.count,
            "differed": self.differed,
        }


@dataclass
class IgnoredValues:
    """What :func:`compare_text` masked, by (output, kind, name)."""

    entries: dict[tuple[str, str, str], Ignored] = field(default_factory=dict)

    def add(self, source: str, kind: str, name: str, line: int | str, a: str, b: str) -> None:
        """Count one masked value at ``line`` of ``source`` (or at the leaf path ``line``
        of a file read leaf by leaf: ``train/train_runtime/step 24``)."""
        a, b = a.strip(), b.strip()  # tqdm's padding
        key = (source, kind, name)
        where = f"{source} line {line}" if isinstance(line, int) else f"{source}:{line}"
        e = self.entries.get(key)
        if e is None:
            e = self.entries[key] = Ignored(source, kind, name, where, clip(a, 40), clip(b, 40))
        e.count += 1
        if a != b:
            if not e.differed:  # show an example that differed
                e.where, e.a, e.b = where, clip(a, 40), clip(b, 40)
            e.differed += 1

    def merge(self, other: IgnoredValues) -> None:
        """Add ``other`` (another pair of runs): counts are the larger of the two."""
        for key, e in other.entries.items():
            mine = self.entries.get(key)
            if mine is None:
                self.entries[key] = Ignored(**e.to_dict())
            else:
                if e.differed and not mine.differed:
                    mine.where, mine.a, mine.b = e.where, e.a, e.b
                mine.count, mine.differed = max(mine.count, e.count), max(mine.differed, e.differed)

    def to_list(self) -> list[dict[str, Any]]:
        """Entries, those that differed first, then stdout's first."""
        return [
            e.to_dict()
            for e in sorted(
                self.entries.values(), key=lambda e: (not e.differed, e.source != "stdout", e.source, e.kind, e.name)
            )
        ]


class _Tokens(NamedTuple):
    #: the line with each number as \0N\0 and each masked value as \0M:kind\0: by its
    #: kind, not its name, since a timing's unit follows the speed (Keras prints
    #: ``987us/step`` or ``1ms/step``, tqdm ``1.52it/s`` or ``1.42s/it``); safe, as a
    #: masked value is not compared whatever its unit, and a timing never stands for a
    #: timestamp or an address
    template: str
    numbers: list[str]
    masked: list[tuple[str, str, str]]  #: (kind, name, text)


def _mask_spans(line: str, columns: dict[int, str] | None, delimiter: str) -> list[tuple[int, int, str, str]]:
    """The stretches of ``line`` to mask, in order: (start, end, kind, name). The first
    to claim a stretch wins: CSV timing columns, timing names, then :data:`MASKS`, then
    :data:`NUMBER_MASKS` where a number starts."""
    spans: list[tuple[int, int, str, str]] = []  # sorted, not overlapping

    def claim(start: int, end: int, kind: str, name: str) -> bool:
        i = bisect.bisect_left(spans, (start,))
        if start >= end or i < len(spans) and spans[i][0] < end or i and spans[i - 1][1] > start:
            return False
        spans.insert(i, (start, end, kind, name))
        return True

    if columns:  # a CSV row: the timing columns named by its header (quoted cells too)
        for i, (start, end) in enumerate(_cells(line, delimiter)):
            if i in columns:
                claim(start, end, "timing", columns[i])
    if line.startswith("|") and line.count("|") >= 3:  # a logger's table row: | time/fps | 4082 |
        m = _TABLE_ROW.match(line)
        if m and timing_name(m.group("key")):
            claim(m.start("v"), m.end("v"), "timing", m.group("key"))
    if ("=" in line or ":" in line) and _KEY_HINT.search(line.lower()):
        for m in _KEY.finditer(line):
            if timing_name(m.group("key")):
                end = _braced(line, m.end())  # "time": {"data": 0.1, "step": 0.3}: all of it
                v = _VALUE.match(line, m.end())
                if end > m.end() or v:
                    claim(m.end(), end if end > m.end() else v.end(), "timing", m.group("key"))
    for mask in MASKS:
        if mask.before.search(line):
            for m in mask.pattern.finditer(line):
                g = "v" if "v" in mask.pattern.groupindex else 0
                claim(m.start(g), m.end(g), mask.kind, _mask_name(mask, m))
    until = 0
    for d in _CANDIDATE.finditer(line):
        p = d.start()
        if p < until:
            continue
        m = _NUMBER_MASKS_ALL.match(line, p)  # one anchored try of every mask, then check the one that matched
        first = int(m.lastgroup[1:]) if m else len(NUMBER_MASKS)
        for i in range(first, len(NUMBER_MASKS)):
            mask = NUMBER_MASKS[i]
            start = _start(mask.before, line, p)
            if start < 0:
                continue
            mm = m if i == first else mask.pattern.match(line, p)
            if mm and claim(start, mm.end(), mask.kind, _mask_name(mask, mm)):
                until = mm.end()
                break
    return spans


def _cells(line: str, delimiter: str) -> list[tuple[int, int]]:
    """(start, end) of each cell of a CSV row, quoted cells (``csv.QUOTE_ALL``) whole."""
    out, start, quoted = [], 0, False
    for i, c in enumerate(line):
        if c == '"':
            quoted = not quoted
        elif c == delimiter and not quoted:
            out.append((start, i))
            start = i + 1
    out.append((start, len(line)))
    return out


def _braced(line: str, p: int, limit: int = 4096) -> int:
    """The end of the ``{...}`` or ``[...]`` that starts at ``line[p]`` (a timing's value
    that is a dict of timings), or ``p`` when none does or it does not close within ``limit``."""
    if p >= len(line) or line[p] not in "{[":
        return p
    depth = 0
    for i in range(p, min(len(line), p + limit)):
        if line[i] in "{[":
            depth += 1
        elif line[i] in "}]":
            depth -= 1
            if not depth:
                return i + 1
    return p


def _start(before: str, line: str, p: int) -> int:
    """Where a :data:`NUMBER_MASKS` value starting with the number at ``line[p]`` starts
    (the blanks tqdm pads a rate with, ",  1.42s/it", included), or -1 when what precedes
    the number rules it out."""
    if before.startswith("="):
        q = p
        while q and line[q - 1] == " ":
            q -= 1
        sep = before[1:].rstrip(" ")
        return q if line.endswith(sep, 0, q) else -1
    if not p:
        return p
    prev = line[p - 1]
    return -1 if prev in before or before.startswith("\\w") and (prev.isalnum() or prev == "_") else p


def _combined(masks: tuple[_Mask, ...]) -> re.Pattern[str]:
    """The masks' patterns as one: group ``n{i}`` is mask ``i`` (``unit`` groups renamed
    ``unit{i}``; :func:`_mask_name` reads either)."""
    return re.compile(
        "|".join(f"(?P<n{i}>{m.pattern.pattern.replace('(?P<unit>', f'(?P<unit{i}>')})" for i, m in enumerate(masks))
    )


def _mask_name(mask: _Mask, m: re.Match[str]) -> str:
    if "{unit}" not in mask.name:
        return mask.name
    # a rate by its unit (it/s, ms/step); a plain duration as such
    unit = m.group("unit") if "unit" in m.re.groupindex else m.group(f"unit{NUMBER_MASKS.index(mask)}")
    return mask.name.replace("{unit}", unit) if "/" in unit else "duration"


_NUMBER_MASKS_ALL = _combined(NUMBER_MASKS)
_DIGIT = re.compile(r"\d")


def _tokens(line: str, strict: bool, columns: dict[int, str] | None = None, delimiter: str = ",") -> _Tokens:
    spans = [] if strict or not columns and not _DIGIT.search(line) else _mask_spans(line, columns, delimiter)
    parts: list[str] = []
    numbers: list[str] = []
    masked: list[tuple[str, str, str]] = []
    pos = 0
    for start, end, kind, name in [*spans, (len(line), len(line), "", "")]:
        for m in _NUMBER.finditer(line, pos, start):
            parts += [line[pos : m.start()], "\0N\0"]
            numbers.append(m.group())
            pos = m.end()
        parts.append(line[pos:start])
        if kind:
            parts.append(" " * (end - start) if name == RICH_TIME else f"\0M:{kind}\0")
            masked.append((kind, name, line[start:end]))
        pos = end
    return _Tokens("".join(parts), numbers, masked)


def normalize_line(line: str, replacements: tuple[tuple[str, str], ...] = (), strict: bool = False) -> str:
    """What a terminal shows once the line is finished: its stretches between carriage
    returns written over one another (progress bars redraw themselves with ``\\r`` a
    varying number of times; a shorter one leaves the rest visible, :func:`_overlay`),
    without colour escapes, backspaces and trailing blanks, with
    ``replacements`` (such as the run's working directory) applied and the values of
    :data:`MASKS` and timing names replaced by ``<kind>`` (none when ``strict``)."""
    line = line.rstrip("\n").rstrip("\r")
    if "\r" in line:
        shown = ""
        for piece in line.split("\r"):
            shown = _overlay(shown, piece) if piece else shown
        line = shown
    t = _tokens(_clean(line, replacements), strict)
    it = iter(t.numbers)
    kinds = iter(t.masked)
    return re.sub(
        r"\0N\0|\0M:[^\0]*\0", lambda m: next(it) if m.group() == "\0N\0" else f"<{next(kinds)[0]}>", t.template
    )


def _clean(line: str, replacements: tuple[tuple[str, str], ...]) -> str:
    line = _ANSI.sub("", line).rstrip()
    for old, new in replacements:
        if old:
            line = line.replace(old, new)
    return line


def _number(s: str) -> tuple[str, Any]:
    """(kind, exact value) of a number as printed: hex as an int, decimals as a
    :class:`decimal.Decimal` (exact, whatever the number of digits)."""
    t = s.lstrip("+-")
    if t[:2].lower() == "0x":
        return "hex", int(s, 16)
    return "dec", decimal.Decimal(s)


_EXACT = decimal.Context(prec=40, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN, traps=[])


def _number_distance(x: str, y: str) -> float | None:
    """None when ``x`` and ``y`` print the same number (same exact value and sign; two
    NaNs of the same sign); else how far apart they are (inf when not both finite, or
    when one is hex and the other not)."""
    if x == y:
        return None
    (kx, vx), (ky, vy) = _number(x), _number(y)
    if kx != ky:
        return math.inf
    if kx == "hex":
        return None if vx == vy else float(abs(vx - vy))
    if vx.is_signed() != vy.is_signed():
        return math.inf if not (vx.is_finite() and vy.is_finite()) else float(_EXACT.subtract(vx, vy).copy_abs())
    if vx.is_nan() or vy.is_nan():
        return None if vx.is_nan() and vy.is_nan() else math.inf
    if vx == vy:
        return None
    if not (vx.is_finite() and vy.is_finite()):
        return math.inf
    return float(_EXACT.subtract(vx, vy).copy_abs())


#: spaces only: a tab is a TSV file's delimiter (``1\t\t0.5`` and ``1\t0.5\t`` put
#: 0.5 in different columns), never layout padding
_BLANKS = re.compile(r" +")
_LEAD = re.compile(r" *")
#: the glyphs progress bars draw their bar with: box drawing (Rich's and Keras's ``━``,
#: ``╸``, ``╺``) and block elements (tqdm's ``█▏▎▍▌▋▊▉``)
_BAR = re.compile(r"[\u2500-\u259f]+")
#: the lower blocks a sparkline of values draws with (``loss ▁▂▃█``), which no progress
#: bar uses (tqdm's partial blocks are the left blocks ``▏``..``▉``, U+2589..U+258F)
_SPARK = re.compile(r"[\u2581-\u2587]")
#: runs of spaces beside a masked value or a bar: a column's padding that follows the
#: masked value's width (tqdm's `` 9.98it/s``, Rich's right-aligned rate)
_NEAR_LAYOUT = re.compile(r" +(?=\0M:|[\u2500-\u259f])|(?<=[a-z]\0) +|(?<=[\u2500-\u259f]) +")


def _spacing_only(ta: _Tokens, tb: _Tokens, continued: bool = False) -> bool:
    """Whether the lines' texts differ only in layout that follows a masked timing's
    width: a progress bar lays out its columns around its rate (rich's progress bar pads
    the next lines of its wrapped metrics column by the width of ``38.44it/s`` or
    ``188.46it/s``). A blank is never added or removed between two characters: ``12``
    and ``1 2`` still differ, and tabs are compared as they are.

    On a line that holds a masked timing in both runs (a progress bar's rate or time),
    the runs of spaces beside a masked value or a bar (:data:`_NEAR_LAYOUT`) may be of
    any width, and so may runs of bar glyphs (:data:`_BAR`):
    Rich gives its bar the width the other columns leave (``━`` 16 times beside
    ``188.46it/s``, 17 times beside ``38.44it/s``). Safe: the progress the bar draws is
    printed beside it as numbers (``4/32``, ``12%``), which are compared; a line without
    a masked timing, or with a sparkline's glyphs (``loss ▁▂▃█``), keeps its glyphs
    compared one by one.

    On a line without one, only the leading spaces may differ, and only when
    ``continued`` (the line continues a timed line: the lines before it, up to a timed
    one, agreed with leading spaces in both runs) and both lines start with spaces: a
    table whose empty cell moves a value to another column (``1      0.5`` and
    ``1            0.5``), or YAML whose nesting differs, still differs. Words cut with
    ``…`` (:func:`_cut_alike`) agree on those lines only: a column's width follows the
    timing there."""
    a, b = ta.template, tb.template
    timed = _timed(ta) and _timed(tb)
    if timed:
        if not (_SPARK.search(a) or _SPARK.search(b)):
            a, b = _BAR.sub("\u2501", a), _BAR.sub("\u2501", b)
        a, b = _NEAR_LAYOUT.sub(" ", a).lstrip(" "), _NEAR_LAYOUT.sub(" ", b).lstrip(" ")
    elif continued and a[:1] == b[:1] == " ":
        a, b = a.lstrip(" "), b.lstrip(" ")
    return a == b or (timed or continued) and _cut_alike(a, b)


def _continues(ta: _Tokens, tb: _Tokens, continued: bool) -> bool:
    """Whether the line after an agreeing pair ``ta``, ``tb`` continues a timed line's
    layout (see :func:`_spacing_only`)."""
    return _timed(ta) or _timed(tb) or continued and ta.template[:1] == tb.template[:1] == " "


def _timed(t: _Tokens) -> bool:
    return any(kind == "timing" for kind, _, _ in t.masked)


def _cut_alike(a: str, b: str) -> bool:
    """Whether two lines differ only in where words cut short with ``…`` were cut: Rich
    cuts a metric's name to the width of its column, which follows a masked rate
    (``another_metric_wi…`` beside ``7.70it/s``, ``another_metric_w…`` beside
    ``11.42it/s``). Safe: what one run shows of the word is a prefix of what the other
    shows, so they never contradict; numbers are compared apart (a cut ``0.12…`` and
    ``0.1…`` still differ), and a word cut before a number in one run only (``x=…`` and
    ``x=2…``) differs: its numbers would be compared out of line."""
    wa, wb = a.split(" "), b.split(" ")
    if len(wa) != len(wb):
        return False
    for x, y in zip(wa, wb):
        if x == y:
            continue
        if not (x.endswith("\u2026") and y.endswith("\u2026")):
            return False
        x, y = x[:-1], y[:-1]
        if x.count("\0") != y.count("\0") or not (x.startswith(y) or y.startswith(x)):
            return False
    return True


def _blank_runs(line: str) -> str:
    """How a line is spaced, for the report: ``blanks 62, 1`` (the lengths of its runs),
    and ``; bar 17`` (the lengths of its runs of bar glyphs) where it has any."""
    bars = _BAR.findall(line)
    return (
        "blanks "
        + ", ".join(str(len(m)) for m in _BLANKS.findall(line))
        + ("; bar " + ", ".join(str(len(m)) for m in bars) if bars else "")
    )


def _line_distance(ta: _Tokens, tb: _Tokens, spacing: bool = False, continued: bool = False) -> float | None:
    """-1.0 when the lines agree; the largest distance between their numbers when they
    differ only in numbers; None when their text differs (unless ``spacing`` and they
    differ only in :func:`_spacing_only` layout) or they hold different counts of numbers."""
    if len(ta.numbers) != len(tb.numbers):
        return None
    if ta.template != tb.template and not (spacing and _spacing_only(ta, tb, continued)):
        return None
    worst = -1.0
    for x, y in zip(ta.numbers, tb.numbers):
        d = _number_distance(x, y)
        if d is not None:
            worst = max(worst, d)
    return worst


#: rows of the screen a cursor movement can still reach (a terminal's height): a row
#: that scrolls above them is final; memory stays bounded by this many rows
SCREEN_ROWS = 64
#: what ends a stretch of a row: a line feed, a carriage return, and the cursor
#: movements between rows (CSI n A/F up, CSI n B/E down) that tqdm's nested bars
#: (``position=``) and terminal redraws use
_SPLIT = re.compile(r"(\r|\n|\x1b\[\d*[ABEF])")
#: an escape sequence cut off at the end of a piece read (completed by the next one)
_PARTIAL_ESC = re.compile(r"\x1b(?:\[[0-9;?]*)?\Z")


class _Row:
    """One row of the screen: what its non-empty stretches written over one another
    (after a ``\r`` or a cursor movement into it) leave visible (:func:`_overlay`) and
    the stretch being written, its first
    :data:`LINE_LIMIT` characters as text and the SHA-256 of the rest."""

    def __init__(self) -> None:
        self.last = ""
        self.cur: list[str] = []
        self.size = 0
        self.rest: Any = None
        self.rest_n = 0

    def write(self, piece: str) -> None:
        room = LINE_LIMIT - self.size
        if room > 0:
            self.cur.append(piece[:room])
            self.size += min(room, len(piece))
        if len(piece) > room:
            if self.rest is None:
                self.rest = hashlib.sha256()
            tail = piece[max(room, 0) :]
            self.rest.update(tail.encode("utf-8", "surrogatepass"))
            self.rest_n += len(tail)

    def end_stretch(self) -> None:
        if self.cur or self.rest is not None:
            new = "".join(self.cur)
            if self.rest is not None:
                new += f"\u2026[+{self.rest_n} characters, sha256 x{self.rest.hexdigest()[:16]}]"
            self.last = _overlay(self.last, new)
        self.cur, self.size, self.rest, self.rest_n = [], 0, None, 0


#: erase to the end of the row, or the whole row (CSI K, 0 K, 2 K: Rich's redraws)
_ERASE = re.compile(r"\x1b\[[02]?K")


def _overlay(old: str, new: str) -> str:
    """The row a terminal shows once ``new`` is written over ``old`` from its first
    column: a shorter ``new`` leaves the rest of ``old`` visible (``step 9 loss
    0.51\rok`` shows ``okep 9 loss 0.51``), unless ``new`` erases the row (CSI K).
    Progress bars pad a shorter redraw with blanks (tqdm's ``print_status``, tqdm/std.py:
    ``'\\r' + s + ' ' * max(last_len - len_s, 0)``; Keras's ``Progbar.update``,
    keras/src/utils/progbar.py: ``" " * (self._prev_total_width - total_width)``) or
    erase the row (Rich's ``LiveRender.position_cursor``, rich/live_render.py: CSI 2 K),
    so their rows are ``new`` alone; text written over that is what the user never sees
    either."""
    if not old or _ERASE.search(new):
        return new
    old, cut = _ANSI.sub("", old), len(_ANSI.sub("", new))
    tail = old[cut:]
    if not tail.strip():  # a bar's redraw padded with blanks: the common case
        return new
    bar = _BAR_TIMES.search(old)
    if bar and cut >= bar.start(1):  # what is left is a piece of a bar's times and rate
        return new
    return new + tail


#: the times and rate that end a tqdm bar (its default ``bar_format``, tqdm/std.py
#: ``format_meter``: ``{n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}{postfix}]``):
#: a line written over such a bar from its first column, and longer than the bar up to
#: here, leaves visible only a piece of these timings, which follow the clock (tqdm's
#: nested bars: a ``logging`` line written into the outer bar's row shows ``loss
#: 0.055173/s]`` in one run and ``loss 0.055173it]`` in the next)
_BAR_TIMES = re.compile(r"\d/\d+ (\[[\d:]+<[\d:?]+, [^\]]*\])\s*$")


class _Screen:
    """The rows a terminal shows, fed piece by piece: ``\n`` moves down a row (a new
    one at the bottom), ``\r`` starts the row over, CSI n A/F and B/E move the cursor
    up or down n rows (no further than the top of the screen, :data:`SCREEN_ROWS` rows,
    or its last row). A row that scrolls off the top is final (:meth:`scrolled`)."""

    def __init__(self) -> None:
        self.rows = [_Row()]
        self.at = 0

    def feed(self, piece: str) -> None:
        if piece not in ("\n", "\r") and not (piece[0] == "\x1b" and _SPLIT.fullmatch(piece)):
            self.rows[self.at].write(piece)
            return
        self.rows[self.at].end_stretch()
        if piece == "\n":
            self.at += 1
            if self.at == len(self.rows):
                self.rows.append(_Row())
        elif piece != "\r":
            n = int(piece[2:-1] or 1) or 1  # CSI 0 A moves one row, as CSI A
            down = piece[-1] in "BE"
            self.at = min(self.at + n, len(self.rows) - 1) if down else max(self.at - n, 0)

    def scrolled(self) -> Iterator[str]:
        while len(self.rows) > SCREEN_ROWS:
            yield self.rows.pop(0).last
            self.at -= 1

    def end(self) -> Iterator[str]:
        """The rows left, at the end of the stream (a last row never written to is none)."""
        self.rows[self.at].end_stretch()
        if not self.rows[-1].last:
            self.rows.pop()
        for row in self.rows:
            yield row.last


def _lines(f) -> Iterator[str]:
    """The lines of a text stream as a terminal shows them once it has ended: for each
    row (lines end at ``\n``), what the stretches written to it, each after a ``\r``
    or a cursor movement into it, leave visible (:func:`_overlay`: a shorter one
    leaves the rest of the row before it) (a progress bar redraws itself any number of times,
    tqdm's nested bars move up and down between their rows), read in bounded pieces
    however long a line is (see :class:`_Screen`). Safe: what is compared is what the
    terminal would show at the end, as for ``\r``; text written over is what the user
    never sees either, and text a shorter redraw leaves is what the user still sees. A
    stretch longer than :data:`LINE_LIMIT` keeps its head and the SHA-256 of the rest."""
    screen = _Screen()
    carry = ""
    while True:
        chunk = f.read(1 << 16)
        if not chunk:
            if carry:  # an escape sequence the stream left unfinished: text
                screen.feed(carry)
            break
        chunk = carry + chunk
        m = _PARTIAL_ESC.search(chunk, max(len(chunk) - 32, 0))
        chunk, carry = (chunk[: m.start()], m.group()) if m else (chunk, "")
        for piece in _SPLIT.split(chunk):
            if piece:
                screen.feed(piece)
        yield from screen.scrolled()
    yield from screen.end()


def _timing_columns(header: str | None, delimiter: str) -> dict[int, str]:
    if not header:
        return {}
    try:
        names = next(csv.reader([header], delimiter=delimiter))
    except (csv.Error, StopIteration):
        return {}
    return {i: clip(n, 40) for i, n in enumerate(names) if timing_name(n)}  # a name for the report


#: an MLflow file store's metric file: mlruns/<experiment>/<run id>/metrics/<name>, one
#: "timestamp value step" line per logged value (mlflow/store/tracking/file_store.py)
_MLFLOW_METRIC = re.compile(r"(?:^|/)mlruns/[^/]+/(?:[0-9a-f]{32}|<run id>)/metrics/")


def _nesting(text: str) -> int:
    return text.count("{") + text.count("[") - text.count("}") - text.count("]")


class _TimingBlock:
    """A timing's value that spans lines: pretty-printed JSON (``"time": {`` up to its
    closing ``}``) or YAML (``time:`` then the lines indented under it). Fed one side's
    lines in order; :meth:`feed` names the timing key a line belongs to."""

    def __init__(self) -> None:
        self.name: str | None = None
        self.depth = 0
        self.indent: int | None = None  # YAML: the key's indentation

    def feed(self, line: str) -> str | None:
        """The timing key whose value ``line`` is part of (the whole line is then masked),
        or None."""
        if self.name is not None:
            name = self.name
            if self.indent is not None:
                if line.strip() and len(line) - len(line.lstrip(" ")) <= self.indent:
                    self.name = None
                    return self.feed(line)
                return name
            self.depth += _nesting(line)
            if self.depth <= 0:
                self.name = None
            return name
        if ("=" in line or ":" in line) and _KEY_HINT.search(line.lower()):
            for m in _KEY.finditer(line):
                rest = line[m.end() :].rstrip()
                if not timing_name(m.group("key")):
                    continue
                if rest[:1] in ("{", "[") and _nesting(rest) > 0:
                    self.name, self.depth, self.indent = m.group("key"), _nesting(rest), None
                elif not rest and line.rstrip().endswith(":"):
                    self.name, self.indent = m.group("key"), len(line) - len(line.lstrip(" "))
        return None


def _layout(path: str | os.PathLike[str]) -> tuple[str | None, dict[int, str] | None]:
    """A file's cell delimiter and timing columns, when it is a table: ``.csv``/``.tsv``
    (columns from the header: None, read later), MLflow's metric files (no header)."""
    if _MLFLOW_METRIC.search(os.fspath(path)):  # "<time in ms> <value> <step>" lines
        return " ", {0: "time (MLflow metric)"}
    suffix = os.fspath(path).lower().rsplit(".", 1)[-1]
    return {"csv": ",", "tsv": "\t"}.get(suffix), None


def compare_text(
    path: str,
    file_a: str | os.PathLike[str],
    file_b: str | os.PathLike[str],
    replace_a: tuple[tuple[str, str], ...] = (),
    replace_b: tuple[tuple[str, str], ...] = (),
    *,
    strict: bool = False,
    ignored: IgnoredValues | None = None,
) -> LeafDiff | None:
    """Compare two text files line by line, numbers by their exact value, reading both
    as streams (memory does not grow with their length). None when they agree.

    Values that change from run to run without meaning a different result are masked
    (:data:`MASKS`; values named like timings, ``train_runtime``, ``elapsed``, in
    ``key: value``, ``key=value``, dict reprs and JSON, and the timing columns of a
    ``.csv``/``.tsv`` header) unless ``strict``; each one is counted in ``ignored``
    (nothing is counted for byte-identical files: no mask was needed). Lines that differ
    only in how wide their runs of blanks are agree too (counted as ``spacing``) unless
    ``strict``.

    The returned ``LeafDiff`` has kind ``"lines"``: ``n_diff`` differing lines out of
    ``size``; ``first_index``: ``(line number,)`` 1-based; ``a``/``b`` that line in each
    run as written (colour codes included), control characters escaped (``\\x1b``),
    clipped to 160 characters; ``max_abs``: the largest difference between numbers on
    lines that differ only in their numbers (None if no line does).
    """
    import itertools

    if _same_bytes(file_a, file_b):
        return None
    delimiter, columns = _layout(path)
    n_diff = total = 0
    first = None
    max_abs: float | None = None
    continued = False  # the line continues a timed line's layout (see _spacing_only)
    block_a, block_b = _TimingBlock(), _TimingBlock()
    # lines end at "\n" only: a "\r" redraws the line, as on a terminal
    with (
        open(file_a, encoding="utf-8", errors="replace", newline="\n") as fa,
        open(file_b, encoding="utf-8", errors="replace", newline="\n") as fb,
    ):
        for la, lb in itertools.zip_longest(_lines(fa), _lines(fb)):
            total += 1
            if la is None or lb is None:
                d = None
            else:
                ca, cb = _clean(la, replace_a), _clean(lb, replace_b)
                ka, kb = (None, None) if strict else (block_a.feed(ca), block_b.feed(cb))
                if ka is not None and kb is not None:  # inside a timing's multi-line value in both
                    if ignored is not None and ca != cb:
                        ignored.add(path, "timing", ka, total, ca.strip(), cb.strip())
                    continue
                if delimiter and columns is None:  # the header: never masked itself
                    columns = {} if strict or ca != cb else _timing_columns(ca, delimiter)
                    d = -1.0 if ca == cb else None
                else:
                    ta = _tokens(ca, strict, columns, delimiter or ",")
                    tb = ta if cb == ca else _tokens(cb, strict, columns, delimiter or ",")
                    d = _line_distance(ta, tb, spacing=not strict, continued=continued)
                    continued = d is not None and _continues(ta, tb, continued)
                    if ignored is not None and d is not None:
                        for (kind, name, xa), (_, _, xb) in zip(ta.masked, tb.masked):
                            ignored.add(path, kind, name, total, xa, xb)
                        if ta.template != tb.template:
                            ignored.add(path, "layout", "spacing", total, _blank_runs(ca), _blank_runs(cb))
                if d == -1.0:
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
