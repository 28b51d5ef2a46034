"""Where along the run the outputs differ: a bounded grid of module (or layer) by
training step, filled while :func:`~fwd9m.debug._compare.compare` streams the traces,
for the HTML report's heat map.

Memory stays bounded for any trace: at most :data:`MAX_MODULES` distinct rows (past
that, module paths lose their last component, ``Net.layer1.0.conv1`` becoming
``Net.layer1.0``, and at one component the later ones share one "(other modules)"
row) and :data:`MAX_COLUMNS` step columns (when a run has more steps, neighbouring
steps merge, as in the op series of the plot).
:meth:`Timeline.to_dict` then shortens module paths to their parents until at most
:data:`MAX_ROWS` rows are left, so the page stays small and quick to draw.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["Timeline", "row_key"]

MAX_MODULES = 1024
MAX_COLUMNS = 64
MAX_ROWS = 40
OTHER = "(other modules)"
_MAX_ALIASES = 1 << 16

_SEP = re.compile(r"[./]")


def row_key(module: str, phase: str) -> str:
    """The heat map row of an op: its module path, or for an op outside any module
    (a loss, the optimizer, the data pipeline) its phase in parentheses."""
    return module or f"({phase or 'no module'})"


def _prefix(name: str, depth: int) -> str:
    """``name`` cut after ``depth`` path components (``Net.layer1.0`` at depth 2 is
    ``Net.layer1``; Keras paths use ``/``). Rows in parentheses are kept whole."""
    if name.startswith("("):
        return name
    cuts = [m.start() for m in _SEP.finditer(name)]
    return name if depth > len(cuts) else name[: cuts[depth - 1]]


def _merge(into: dict[int, list], bucket: int, cell: list) -> None:
    m = into.get(bucket)
    if m is None:
        into[bucket] = list(cell)
        return
    m[0] += cell[0]
    m[1] += cell[1]
    m[2] = max(m[2], cell[2])
    m[3] = max(m[3], cell[3])


def _regroup(
    names: list[str], rows: dict[str, dict[int, list]], depth: int
) -> tuple[list[str], dict[str, dict[int, list]]]:
    """The rows with their names cut to ``depth`` components, merged, in first order."""
    order: list[str] = []
    out: dict[str, dict[int, list]] = {}
    for n in names:
        key = _prefix(n, depth)
        if key not in out:
            out[key] = {}
            order.append(key)
        for b, c in rows[n].items():
            _merge(out[key], b, c)
    return order, out


class Timeline:
    """Counts per (row, step bucket): ops compared, ops whose outputs differ, and the
    largest difference seen (abs, ULP) from sampled or captured values."""

    def __init__(self) -> None:
        self.width = 1  #: steps per column
        self.rows: dict[str, dict[int, list]] = {}  # row -> bucket -> [ops, differ, abs, ulp]
        self.order: list[str] = []  # rows in order of first appearance
        self.columns: set[int] = set()  # buckets seen
        self.depth = 0  #: module path components kept (0: all)
        self.first: tuple[str, int] | None = None  #: (row, step) of the first op that differs
        self._alias: dict[tuple[str, str], str] = {}  # (module, phase) -> row, a cache

    def add(self, module: str, phase: str, step: int, differs: bool, mag: tuple | None) -> None:
        key = self._alias.get((module, phase))
        if key is None:
            key = self._row((module, phase))
        bucket = step // self.width
        if bucket not in self.columns:
            self.columns.add(bucket)
            if len(self.columns) > MAX_COLUMNS:
                self._widen()
                bucket = step // self.width
        row = self.rows[key]
        cell = row.get(bucket)
        if cell is None:
            cell = row[bucket] = [0, 0, 0.0, 0]
        cell[0] += 1
        if differs:
            cell[1] += 1
            if self.first is None:
                self.first = (key, step)
            if mag:
                cell[2] = max(cell[2], mag[0])
                cell[3] = max(cell[3], mag[1])

    def _row(self, raw: tuple[str, str]) -> str:
        """The row of an op of (module, phase) not seen before: made (or shortened, or
        "(other modules)") so that at most MAX_MODULES rows exist."""
        key = row_key(*raw)
        if self.depth:
            key = _prefix(key, self.depth)
        if key not in self.rows:
            if len(self.rows) >= MAX_MODULES:
                self._shorten()
                if self.depth:
                    key = _prefix(key, self.depth)
            if key not in self.rows and len(self.rows) >= MAX_MODULES - 1:
                key = OTHER
            if key not in self.rows:
                self.rows[key] = {}
                self.order.append(key)
        if len(self._alias) > _MAX_ALIASES:
            self._alias.clear()
        self._alias[raw] = key
        return key

    def _widen(self) -> None:
        """Double the steps per column until the columns fit, merging cells."""
        while len(self.columns) > MAX_COLUMNS:
            self.width *= 2
            self.columns = {b // 2 for b in self.columns}
            for key, row in self.rows.items():
                merged: dict[int, list] = {}
                for b, c in row.items():
                    _merge(merged, b // 2, c)
                self.rows[key] = merged

    def _shorten(self) -> None:
        """Too many modules: keep one path component less (down to one), merging rows."""
        depth = self.depth or max(len(_SEP.findall(n)) + 1 for n in self.order)
        if depth <= 1:
            return
        self.depth = depth - 1
        self.order, self.rows = _regroup(self.order, self.rows, self.depth)
        self._alias.clear()
        if self.first is not None:
            self.first = (_prefix(self.first[0], self.depth), self.first[1])

    def _grouped(self) -> tuple[list[str], dict[str, str]]:
        """At most MAX_ROWS rows: module paths cut to their top component, then groups
        split into their children level by level, the one with the most differing ops
        (then the most ops) first, while the rows fit; while fewer than half the rows
        are used, a group whose children do not all fit gives rows to the heaviest and
        one ``NAME (rest)`` row to the others. Rows in order of first appearance.
        Returns the rows and which row each module went to."""
        if len(self.order) <= MAX_ROWS:
            return self.order, {n: n for n in self.order}
        ops = {
            n: (sum(c[1] for c in self.rows[n].values()), sum(c[0] for c in self.rows[n].values())) for n in self.order
        }
        groups: dict[str, tuple[int, list[str]]] = {}  # row name -> (depth, module names)
        for n in self.order:
            groups.setdefault(_prefix(n, 1), (1, []))[1].append(n)

        def weight(members):
            return tuple(map(sum, zip(*(ops[m] for m in members))))

        while True:
            best = None
            for name, (depth, members) in groups.items():
                children = {_prefix(m, depth + 1) for m in members} if depth else {name}
                if children != {name} and (len(groups) - 1 + len(children) <= MAX_ROWS or len(groups) < MAX_ROWS // 2):
                    w = (-depth, *weight(members))  # level by level, the heaviest first
                    if best is None or w > best[0]:
                        best = (w, name, depth, members)
            if best is None:
                break
            _, name, depth, members = best
            kids: dict[str, list[str]] = {}
            for m in members:
                kids.setdefault(_prefix(m, depth + 1), []).append(m)
            del groups[name]
            room = MAX_ROWS - len(groups)
            if len(kids) > room:  # not all fit: the heaviest children get rows, the rest one row
                top = sorted(kids, key=lambda k: weight(kids[k]), reverse=True)[: room - 1]
                groups[f"{name} (rest)"] = (0, [m for k in kids if k not in top for m in kids[k]])
                kids = {k: kids[k] for k in top}
            for k, ms in kids.items():
                groups[k] = (depth + 1, ms)
        where = {m: name for name, (_, members) in groups.items() for m in members}
        first = {name: min(self.order.index(m) for m in members) for name, (_, members) in groups.items()}
        order = sorted(groups, key=first.__getitem__)
        if len(order) > MAX_ROWS:  # too many even at one component: keep the rows that differ most
            differ = {k: sum(ops[m][0] for m in groups[k][1]) for k in order}
            keep = set(sorted(order, key=lambda k: -differ[k])[: MAX_ROWS - 1])  # stable sort
            where = {m: (k if k in keep and k != OTHER else OTHER) for m, k in where.items()}
            order = [k for k in order if k in keep and k != OTHER] + [OTHER]
        return order, where

    def to_dict(self) -> dict[str, Any]:
        """``{"step_width", "columns": [first step of each column], "rows": [{"name",
        "cells": [[column, ops, ops differing, max abs (3 digits), max ULP], ...]}], "first": [row,
        column] of the first op that differs (or None), "grouped": whether module
        paths were shortened to fit}``."""
        order, where = self._grouped()
        rows: dict[str, dict[int, list]] = {k: {} for k in order}
        for n in self.order:
            for b, c in self.rows[n].items():
                _merge(rows[where[n]], b, c)
        buckets = sorted(self.columns)
        col = {b: i for i, b in enumerate(buckets)}
        first = None
        if self.first is not None:
            first = [order.index(where[self.first[0]]), col[self.first[1] // self.width]]
        return {
            "step_width": self.width,
            "columns": [b * self.width for b in buckets],
            "rows": [
                {
                    "name": k,
                    "cells": [[col[b], c[0], c[1], float(f"{c[2]:.3g}"), c[3]] for b, c in sorted(rows[k].items())],
                }
                for k in order
            ],
            "first": first,
            "grouped": bool(self.depth) or len(order) < len(self.order),
        }
