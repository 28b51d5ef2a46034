"""Where along the run the outputs differ: a bounded grid of module (or layer) by
training step, filled while :func:`~fwd9m.debug._compare.compare` streams the traces,
for the HTML report's heat map.

Memory stays bounded for any trace: at most :data:`MAX_MODULES` distinct rows (later
modules share one "(other modules)" row) and :data:`MAX_COLUMNS` step columns (when a
run has more steps, neighbouring steps merge, as in the op series of the plot).
:meth:`Timeline.to_dict` then shortens module paths to their parents until at most
:data:`MAX_ROWS` rows are left, so the page stays small and quick to draw.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["Timeline", "row_key"]

MAX_MODULES = 256
MAX_COLUMNS = 64
MAX_ROWS = 40
OTHER = "(other modules)"

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
    return name if depth > len(cuts) else name[:cuts[depth - 1]]


def _merge(into: dict[int, list], bucket: int, cell: list) -> None:
    m = into.get(bucket)
    if m is None:
        into[bucket] = list(cell)
        return
    m[0] += cell[0]
    m[1] += cell[1]
    m[2] = max(m[2], cell[2])
    m[3] = max(m[3], cell[3])


class Timeline:
    """Counts per (row, step bucket): ops compared, ops whose outputs differ, and the
    largest difference seen (abs, ULP) from sampled or captured values."""

    def __init__(self) -> None:
        self.width = 1  #: steps per column
        self.rows: dict[str, dict[int, list]] = {}  # row -> bucket -> [ops, differ, abs, ulp]
        self.order: list[str] = []  # rows in order of first appearance
        self.columns: set[int] = set()  # buckets seen

    def add(self, module: str, phase: str, step: int, differs: bool, mag: tuple | None) -> None:
        key = row_key(module, phase)
        if key not in self.rows:
            if len(self.rows) >= MAX_MODULES - 1:
                key = OTHER
            if key not in self.rows:
                self.rows[key] = {}
                self.order.append(key)
        if step // self.width not in self.columns:
            self.columns.add(step // self.width)
            if len(self.columns) > MAX_COLUMNS:
                self._widen()
        mag = mag if differs and mag else (0.0, 0)
        _merge(self.rows[key], step // self.width, [1, int(differs), mag[0], mag[1]])

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

    def _grouped(self) -> tuple[list[str], dict[str, dict[int, list]], int]:
        """Rows shortened to their parent modules until at most MAX_ROWS remain, and
        the depth kept (0: full paths)."""
        if len(self.order) <= MAX_ROWS:
            return self.order, self.rows, 0
        depth = max(1, *(len(_SEP.findall(n)) for n in self.order))
        while depth > 1 and len({_prefix(n, depth) for n in self.order}) > MAX_ROWS:
            depth -= 1
        order: list[str] = []
        rows: dict[str, dict[int, list]] = {}
        for n in self.order:
            key = _prefix(n, depth)
            if key not in rows:
                rows[key] = {}
                order.append(key)
            for b, c in self.rows[n].items():
                _merge(rows[key], b, c)
        if len(order) > MAX_ROWS:  # still too many at depth 1: keep the rows that differ most
            differ = {k: sum(c[1] for c in rows[k].values()) for k in order}
            keep = set(sorted(order, key=lambda k: -differ[k])[:MAX_ROWS - 1])  # stable sort
            rest: dict[int, list] = rows.pop(OTHER, {})
            for k in order:
                if k not in keep and k != OTHER:
                    for b, c in rows.pop(k).items():
                        _merge(rest, b, c)
            order = [k for k in order if k in keep and k != OTHER] + [OTHER]
            rows[OTHER] = rest
        return order, rows, depth

    def to_dict(self) -> dict[str, Any]:
        """``{"step_width", "columns": [first step of each column], "depth", "rows":
        [{"name", "cells": [[column, ops, ops differing, max abs, max ULP], ...]}]}``."""
        order, rows, depth = self._grouped()
        buckets = sorted(self.columns)
        col = {b: i for i, b in enumerate(buckets)}
        return {"step_width": self.width, "columns": [b * self.width for b in buckets],
                "depth": depth,
                "rows": [{"name": k, "cells": [[col[b], *c] for b, c in sorted(rows[k].items())]}
                         for k in order]}
