"""fwd9m.compare against the plainest NumPy that answers the same question, and the
text comparison of ``fwd9m check`` against a byte-for-byte file comparison."""

from __future__ import annotations

import tempfile
from pathlib import Path

from _harness import Case


def cases(quick: bool):
    import numpy as np

    from fwd9m.compare import compare, compare_text

    n = 4_000_000 if quick else 16_000_000
    rng = np.random.default_rng(0)
    a = rng.standard_normal(n, dtype=np.float32)
    same = a.copy()
    moved = a.copy()
    moved[::2] = np.nextafter(moved[::2], np.float32(np.inf))  # half the elements, 1 ULP each

    def details_baseline():  # what a user writes by hand: count, max abs diff, first index
        ne = a != moved
        return int(ne.sum()), float(np.abs(a - moved).max()), int(np.argmax(ne))

    def lines_equal(x, y):  # the plainest streaming line comparison in Python
        with open(x) as fx, open(y) as fy:
            return all(lx == ly for lx, ly in zip(fx, fy))

    tmp = Path(tempfile.mkdtemp(prefix="fwd9m-bench-"))
    lines = "".join(
        f"step {i} loss {1.0 / (i + 1):.6f} acc {i % 97 / 97:.4f}\n" for i in range(100_000 if quick else 400_000)
    )
    (tmp / "a.txt").write_text(lines)
    (tmp / "b.txt").write_text(lines)
    (tmp / "c.txt").write_text(lines.replace("loss", "loss ", 1))  # differs in the first line only

    return [
        Case(
            f"compare equal float32 x{n:,}",
            lambda: np.array_equal(a, same),
            lambda: compare(a, same),
            baseline_name="np.array_equal",
            target=1.5,
            repeat=3 if quick else 5,
            note="bitwise equality (NaN-aware) costs about as much as value equality",
        ),
        Case(
            f"compare differing float32 x{n:,}",
            details_baseline,
            lambda: compare(a, moved),
            baseline_name="count+max|a-b|+argmax",
            target=6.0,
            repeat=3,
            note="adds exact ULP distances and NaN handling on the differing elements",
        ),
        Case(
            "compare_text identical stdout",
            lambda: lines_equal(tmp / "a.txt", tmp / "b.txt"),
            lambda: compare_text("stdout", tmp / "a.txt", tmp / "b.txt"),
            baseline_name="zip(lines) ==",
            target=1.5,
            repeat=3,
            note="identical bytes are recognised block by block first",
        ),
        Case(
            "compare_text almost identical stdout",
            lambda: lines_equal(tmp / "a.txt", tmp / "b.txt"),
            lambda: compare_text("stdout", tmp / "a.txt", tmp / "c.txt"),
            baseline_name="zip(lines) ==",
            target=3.0,
            repeat=3,
            note="streams line by line, bounded memory; only differing lines are normalised and parsed",
        ),
    ]
