"""Compare step digest streams: two files (:func:`diff_steps`), or a live run against a
reference file, one step at a time (:class:`Against`).

Steps are aligned by position. At the first step whose records differ the comparison
stops and names every tensor that differs there (group by group, in the order a step
computes them), the tensors only one run has, and the environment differences when
the two fingerprints differ. Runs of different lengths whose common steps agree are
reported as such, not as agreement.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .._files import shown
from ._format import GROUPS, StepReader, StepRecord

__all__ = [
    "RANK_INDEPENDENT",
    "Against",
    "RanksReport",
    "StepDifference",
    "StepsReport",
    "compare_records",
    "diff_step_folders",
    "diff_steps",
]

#: tensors listed per group in a report; the rest are counted
_LISTED = 8


@dataclass
class StepDifference:
    """What differs at one step. ``differ``: ``(group, name, meta_a, meta_b)`` present in
    both with another digest or shape; ``only_a``/``only_b``: ``(group, name)``."""

    index: int
    step_a: int
    step_b: int
    compared: int
    differ: list[tuple[str, str, str, str]] = field(default_factory=list)
    only_a: list[tuple[str, str]] = field(default_factory=list)
    only_b: list[tuple[str, str]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.differ or self.only_a or self.only_b or self.step_a != self.step_b)

    def names(self) -> list[str]:
        """``group/name`` of every differing tensor, earliest group first."""
        return [f"{g}/{n}" for g, n, _, _ in self.differ]


def _group_order(key: tuple[str, str]) -> tuple[int, str]:
    g = key[0]
    return (GROUPS.index(g) if g in GROUPS else len(GROUPS), g)


#: the entry of a step a hook could not digest (:meth:`StepSession.record_safely`)
NOT_RECORDED = ("error", "not recorded")

#: the groups whose values do not depend on the rank or the world size in a data-parallel
#: job (``--rank-independent``): the parameters, replicated on every rank (before the
#: first update, ``initial``, and after each), and the loss as the step recorded it (the
#: same on every rank when the script records the loss reduced over ranks). Gradients,
#: buffers (BatchNorm statistics), optimizer state (sharded by ZeRO/FSDP), RNG states and
#: batches are each rank's own.
RANK_INDEPENDENT = ("initial", "params", "loss")


def _only(record: StepRecord, groups: tuple[str, ...] | None) -> StepRecord:
    if groups is None:
        return record
    return StepRecord(record.step, {k: v for k, v in record.digests.items() if k[0] in groups})


def compare_records(index: int, a: StepRecord, b: StepRecord, groups: tuple[str, ...] | None = None) -> StepDifference:
    """The difference between two records (falsy when they agree, and when either could
    not be digested: such a step is not compared, see :data:`NOT_RECORDED`); ``groups``:
    compare only these groups' tensors (all when None)."""
    if NOT_RECORDED in a.digests or NOT_RECORDED in b.digests:
        return StepDifference(index, a.step, b.step, 0)
    a, b = _only(a, groups), _only(b, groups)
    d = StepDifference(index, a.step, b.step, len(set(a.digests) | set(b.digests)))
    keys = list(a.digests) + [k for k in b.digests if k not in a.digests]
    for key in sorted(keys, key=_group_order):  # stable: names keep the order the step gave
        if key not in b.digests:
            d.only_a.append(key)
        elif key not in a.digests:
            d.only_b.append(key)
        elif a.digests[key] != b.digests[key]:
            d.differ.append((*key, a.digests[key][0], b.digests[key][0]))
    return d


@dataclass
class StepsReport:
    """The verdict of a step comparison. ``first``: the first differing step (None when
    every common step agrees); ``steps``: steps compared; ``length``: a sentence when the
    runs have different numbers of steps; ``environment``: fingerprint differences."""

    label_a: str
    label_b: str
    steps: int
    first: StepDifference | None = None
    length: str | None = None
    environment: list[Any] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unverified: int = 0  #: steps not compared: one run could not digest them

    @property
    def reproducible(self) -> bool:
        return self.first is None and self.length is None

    @property
    def exit_code(self) -> int:
        return 0 if self.reproducible else 1

    def render(self) -> str:
        from ..compare import escape_control

        lines = self._verdict()
        if self.first is not None:
            lines += _difference_lines(self.first, self.label_a, self.label_b)
        if self.environment:
            from ..environment import render_diff

            head = (
                "The environments differ (a likely cause):"
                if not self.reproducible
                else "Note: the environments differ, yet every step agrees:"
            )
            lines += ["", head, *("  " + ln for ln in render_diff(self.environment[:10]).splitlines())]
            if len(self.environment) > 10:
                lines.append(f"  ... and {len(self.environment) - 10} more")
        lines += [f"Note: {n}" for n in self.notes]
        return "\n".join(escape_control(ln) for ln in lines)

    def _verdict(self) -> list[str]:
        a, b = self.label_a, self.label_b
        if self.first is not None:
            d = self.first
            agree = f"steps 0..{d.index - 1} agree" if d.index else "no earlier step"
            where = (
                f"step {d.step_b}"
                if d.step_a == d.step_b
                else f"record {d.index} ({a}: step {d.step_a}, {b}: step {d.step_b})"
            )
            return [f"NOT REPRODUCIBLE: first difference at {where} ({agree}) between {a} and {b}."]
        if self.length is not None:
            return [f"NOT REPRODUCIBLE: {self.length}"]
        if self.unverified:
            return [
                (
                    f"REPRODUCIBLE where compared: {self.steps - self.unverified} of {self.steps} steps agree "
                    f"between {a} and {b}; {self.unverified} could not be digested in one of the runs, so "
                    f"they were not compared (see the warning the run logged)."
                )
            ]
        return [f"REPRODUCIBLE: all {self.steps} steps agree between {a} and {b}."]


def _difference_lines(d: StepDifference, label_a: str, label_b: str) -> list[str]:
    lines = [
        f"  {len(d.differ)} of {d.compared} digests differ" + (f"; earliest: {d.differ[0][0]}" if d.differ else "")
    ]
    by_group: dict[str, list[str]] = {}
    for g, n, ma, mb in d.differ:
        by_group.setdefault(g, []).append(f"{n} ({ma})" if ma == mb else f"{n} ({ma} vs {mb})")
    for g, items in by_group.items():
        more = f", ... and {len(items) - _LISTED} more" if len(items) > _LISTED else ""
        lines.append(f"  {g}: {', '.join(items[:_LISTED])}{more}")
    for label, only in ((label_a, d.only_a), (label_b, d.only_b)):
        if only:
            names = [f"{g}/{n}" for g, n in only]
            more = f", ... and {len(names) - _LISTED} more" if len(names) > _LISTED else ""
            lines.append(f"  only in {label}: {', '.join(names[:_LISTED])}{more}")
    if d.step_a != d.step_b:
        lines.append(f"  step numbers differ: {label_a} step {d.step_a}, {label_b} step {d.step_b}")
    return lines


def _environment(header_a: dict, header_b: dict) -> list[Any]:
    from .. import environment

    ea, eb = header_a.get("environment"), header_b.get("environment")
    if not (isinstance(ea, dict) and isinstance(eb, dict)):
        return []
    return environment.diff(ea, eb)


def _length(label_a: str, steps_a: int, complete_a: bool, label_b: str, steps_b: int) -> str | None:
    if steps_a == steps_b:
        return None
    return (
        f"the first {min(steps_a, steps_b)} steps agree, but {label_a} has {steps_a} steps"
        f"{'' if complete_a else ' (its run did not finish)'} and {label_b} {steps_b}."
    )


def diff_steps(
    a: str | os.PathLike[str], b: str | os.PathLike[str], *, rank_independent: bool = False
) -> StepsReport | RanksReport:
    """Compare two step digest files step by step, or two folders of per-rank files
    (``fwd9m run --digests DIR/ -- LAUNCHER``) rank by rank (:func:`diff_step_folders`,
    a :class:`RanksReport`); stops at the first difference. ``rank_independent``: compare
    only the :data:`RANK_INDEPENDENT` groups (the loss and the replicated parameters).

    Records whose bytes are equal under equal tensor names agree without being decoded,
    so a long agreeing stream costs about one read of each file.

    Raises:
        FileFormatError: a file is not a step digest file, is damaged or truncated.
    """
    if os.path.isdir(a) and os.path.isdir(b):
        return diff_step_folders(a, b, rank_independent=rank_independent)
    return _diff_files(a, b, RANK_INDEPENDENT if rank_independent else None)


def _diff_files(a: str | os.PathLike[str], b: str | os.PathLike[str], groups: tuple[str, ...] | None) -> StepsReport:
    """:func:`diff_steps` of two files; ``groups``: compare only these (all when None)."""
    ra, rb = StepReader(a), StepReader(b)
    label_a, label_b = f"A ({shown(a)})", f"B ({shown(b)})"
    report = StepsReport(label_a, label_b, 0, environment=_environment(ra.header, rb.header))
    if groups is not None:
        report.notes.append(_only_groups_note(groups))
    try:
        _compare_streams(ra, rb, report, groups)
    finally:
        ra.close()
        rb.close()
    for r, label in ((ra, label_a), (rb, label_b)):
        if report.first is None and report.length is None and not r.complete:
            report.notes.append(f"{label} has no end record: its run stopped before it finished")
    return report


def _only_groups_note(groups: tuple[str, ...]) -> str:
    return f"only the rank-independent values were compared (groups {', '.join(groups)}); the others were not"


def _compare_streams(ra: StepReader, rb: StepReader, report: StepsReport, groups: tuple[str, ...] | None) -> None:
    """Fill ``report`` with the first difference (or the length difference) of two readers."""
    ia, ib = ra.raw_steps(), rb.raw_steps()
    same = _SameNames(ra, rb)
    for index, (x, y) in enumerate(_pairs(ia, ib)):
        if x is None or y is None:
            rest_a = index + (x is not None) + sum(1 for _ in ia)
            rest_b = index + (y is not None) + sum(1 for _ in ib)
            report.length = _length(report.label_a, rest_a, ra.complete, report.label_b, rest_b)
            return
        if x == y and same():  # the same bytes under the same names: the same record
            report.steps = index + 1
            continue
        d = compare_records(index, ra.decode(x), rb.decode(y), groups)
        if d:
            report.first = d
            return
        report.steps = index + 1
        report.unverified += not d.compared


class _SameNames:
    """Whether two readers' tensor names are equal so far, and none is the entry of a step
    that could not be digested (such a step is decoded, to count it as not compared);
    each name is compared once."""

    def __init__(self, ra: StepReader, rb: StepReader) -> None:
        self.ra, self.rb, self.checked, self.equal = ra, rb, 0, True

    def __call__(self) -> bool:
        na, nb = self.ra.names, self.rb.names
        if len(na) != len(nb):
            return False
        while self.equal and self.checked < len(na):
            name = na[self.checked]
            self.equal = name == nb[self.checked] and name[:2] != NOT_RECORDED
            self.checked += 1
        return self.equal


def _pairs(ia: Iterator[StepRecord], ib: Iterator[StepRecord]) -> Iterator[tuple[Any, Any]]:
    while True:
        x, y = next(ia, None), next(ib, None)
        if x is None and y is None:
            return
        yield x, y


class Against:
    """A live comparison with the reference file ``path``: :meth:`step` takes this run's
    record and returns the report of the first difference (None while they agree);
    :meth:`finish` the report at the end of the run (a reference with more steps)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        header: dict[str, Any] | None = None,
        groups: tuple[str, ...] | None = None,
    ):
        self.groups = groups  #: compare only these groups (``--rank-independent``), or all
        self.reader = StepReader(path)
        self.label_a, self.label_b = f"REF ({shown(path)})", "this run"
        self._records = iter(self.reader)
        self.index = 0
        self.environment: list[Any] = []
        self.header = header
        self.unverified = 0

    def set_header(self, header: dict[str, Any]) -> None:
        self.environment = _environment(self.reader.header, header)

    def _report(self, **kw) -> StepsReport:
        report = StepsReport(
            self.label_a, self.label_b, self.index, environment=self.environment, unverified=self.unverified, **kw
        )
        if self.groups is not None:
            report.notes.append(_only_groups_note(self.groups))
        return report

    def step(self, record: StepRecord) -> StepsReport | None:
        ref = next(self._records, None)
        if ref is None:
            return self._report(
                length=f"{self.label_a} ends after {self.index} steps"
                f"{'' if self.reader.complete else ' (its run did not finish)'}, but this run "
                f"has more (the first {self.index} agree); stopped here."
            )
        d = compare_records(self.index, ref, record, self.groups)
        if d:
            return self._report(first=d)
        self.index += 1
        self.unverified += not d.compared
        return None

    def finish(self) -> StepsReport:
        rest = sum(1 for _ in self._records)
        self.reader.close()
        if rest:
            return self._report(
                length=f"this run ended after {self.index} steps, but {self.label_a} has "
                f"{self.index + rest} (the first {self.index} agree)."
            )
        return self._report()


#: a rank's file in a folder of per-rank step digests (``fwd9m run --digests DIR/``)
_RANK_FILE = re.compile(r"rank(\d+)\.steps")


def rank_files(folder: str | os.PathLike[str]) -> dict[int, str]:
    """``{rank: path}`` of the per-rank step digest files in ``folder``."""
    out = {}
    for name in os.listdir(folder):
        m = _RANK_FILE.fullmatch(name)
        if m:
            out[int(m.group(1))] = os.path.join(folder, name)
    return dict(sorted(out.items()))


@dataclass
class RanksReport:
    """Two folders of per-rank step digests compared rank by rank: each rank's
    :class:`StepsReport`, and the ranks only one folder has (another world size)."""

    a: str
    b: str
    ranks: dict[int, StepsReport] = field(default_factory=dict)
    only_a: list[int] = field(default_factory=list)
    only_b: list[int] = field(default_factory=list)
    #: ``--rank-independent``: each rank of B was compared with A's rank of that number, or
    #: A's rank 0, on :data:`RANK_INDEPENDENT` groups only (A and B may differ in size)
    rank_independent: bool = False
    #: at the first differing step: whether B's ranks hold the same parameters (a sentence)
    replicas: str | None = None

    @property
    def reproducible(self) -> bool:
        return not (self.only_a or self.only_b) and all(r.reproducible for r in self.ranks.values())

    @property
    def exit_code(self) -> int:
        return 0 if self.reproducible else 1

    def first(self) -> tuple[int | None, list[int]]:
        """The first step at which any rank differs, and the ranks that differ there."""
        steps = {r: rep.first.step_a for r, rep in self.ranks.items() if rep.first is not None}
        if not steps:
            return None, [r for r, rep in self.ranks.items() if not rep.reproducible]
        first = min(steps.values())
        return first, [r for r, s in steps.items() if s == first]

    def render(self) -> str:
        step, ranks = self.first()
        n = len(self.ranks)
        if self.only_a or self.only_b:
            head = (
                f"NOT COMPARABLE: the folders hold different ranks (only in A: {self.only_a or 'none'}, only in "
                f"B: {self.only_b or 'none'}): another world size; the ranks both hold are compared below. "
                f"To compare only the loss and the replicated parameters: fwd9m debug diff --rank-independent A B"
            )
        elif self.reproducible:
            head = f"REPRODUCIBLE: all {n} ranks agree step for step between A ({self.a}) and B ({self.b})."
            if self.rank_independent:
                head = head[:-1] + (
                    f" in their rank-independent values ({', '.join(RANK_INDEPENDENT)}; each rank of B against "
                    f"the same rank of A, or A's rank 0 when A has no such rank)."
                )
        elif step is None:
            head = f"NOT REPRODUCIBLE: rank(s) {', '.join(map(str, ranks))} of {n} differ in length (see below)."
        else:
            head = (
                f"NOT REPRODUCIBLE: first difference at step {step}, in rank(s) {', '.join(map(str, ranks))} "
                f"of {n}; all ranks agree before it."
            )
        lines = [head]
        if self.replicas:
            lines.append(self.replicas)
        for r in ranks[:4]:
            lines += ["", f"rank {r}:", *("  " + x for x in self.ranks[r].render().splitlines())]
        return "\n".join(lines)


def diff_step_folders(
    a: str | os.PathLike[str], b: str | os.PathLike[str], *, rank_independent: bool = False
) -> RanksReport:
    """Compare two folders of per-rank step digests (``fwd9m run --digests DIR/ --
    LAUNCHER``), rank ``r`` of A with rank ``r`` of B. With ``rank_independent``, only the
    :data:`RANK_INDEPENDENT` groups, each rank of B with A's rank of that number or, when A
    has none (a job of fewer ranks), A's rank 0.

    Raises:
        FileFormatError: a rank's file is not a step digest file, or is damaged.
    """
    fa, fb = rank_files(a), rank_files(b)
    report = RanksReport(os.fspath(a), os.fspath(b), rank_independent=rank_independent)
    if rank_independent and fa:
        for rank in fb:
            report.ranks[rank] = _diff_files(fa.get(rank, fa[min(fa)]), fb[rank], RANK_INDEPENDENT)
    else:
        report.only_a, report.only_b = sorted(set(fa) - set(fb)), sorted(set(fb) - set(fa))
        for rank in sorted(set(fa) & set(fb)):
            report.ranks[rank] = _diff_files(fa[rank], fb[rank], None)
    step, ranks = report.first()
    if step is not None:
        first = report.ranks[ranks[0]].first
        assert first is not None
        report.replicas = _replicas_line(fb, first.index, step)
    return report


def _params_at(path: str, index: int) -> dict[tuple[str, str], tuple[str, int]] | None:
    """The ``params`` digests of record ``index`` of a file (None when it has none)."""
    with StepReader(path) as reader:
        for i, payload in enumerate(reader.raw_steps()):
            if i == index:
                return {k: v for k, v in reader.decode(payload).digests.items() if k[0] == "params"}
    return None


def _replicas_line(files: dict[int, str], index: int, step: int) -> str | None:
    """Whether the ranks of a job hold the same parameters at record ``index`` (in a
    data-parallel job they are replicas), as a sentence; None when there is nothing to
    compare."""
    params = {rank: _params_at(path, index) for rank, path in files.items()}
    held = {rank: p for rank, p in params.items() if p}
    if len(held) < 2:
        return None
    base = min(held)
    differ = [rank for rank, p in held.items() if p != held[base]]
    if not differ:
        return f"At step {step}, B's parameters are the same on all {len(held)} ranks (the replicas agree)."
    shown = ", ".join(map(str, differ[:8])) + (f", ... ({len(differ)} ranks)" if len(differ) > 8 else "")
    return (
        f"At step {step}, B's parameters differ between ranks: rank(s) {shown} differ from rank {base} (replicas "
        f"that drifted apart, or parameters that are not replicated: each rank trains its own model or shard)."
    )


def reference_rank(pattern: str, rank: int) -> str:
    """``--against`` with ``--rank-independent``: the reference file of ``rank`` in the
    per-rank ``pattern``, or of the reference's lowest rank when it has no such rank."""
    import glob

    from ._session import RANK

    own = pattern.replace(RANK, str(rank))
    if os.path.exists(own):
        return own
    head, tail = pattern.split(RANK, 1)
    found = {}
    for path in glob.glob(glob.escape(head) + "*" + glob.escape(tail)):
        middle = path[len(head) : len(path) - len(tail)]
        if middle.isdigit():
            found[int(middle)] = path
    return found[min(found)] if found else own
