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

    def long_line(size: int, shape: str) -> tuple[Path, Path]:
        """Two files of one printed line of ``size`` bytes that differ at its end."""
        unit = {"log": "loss={:.5f}|time={:.2f}s ", "digits": "1", "exp": "1e", "clock": "1:"}[shape]
        r = np.random.default_rng(size)
        text = "".join(unit.format(r.random(), r.random()) for _ in range(size // len(unit.format(0.5, 0.5))))
        a, b = tmp / f"{shape}{size}a.txt", tmp / f"{shape}{size}b.txt"
        a.write_text(text + "s,\n")
        b.write_text(text + "x,\n")
        return a, b

    def times(k: int, files: tuple[Path, Path]):
        return lambda: [compare_text("stdout", *files) for _ in range(k)]

    linear = []
    for shape in ("log", "digits", "exp", "clock"):  # the last three: lines that once took minutes
        small, large = (1 << 10, 1 << 16) if quick else (1 << 16, 1 << 20)
        linear.append(
            Case(
                f"compare_text one {large >> 10} KiB {shape} line vs {large // small} x {small >> 10} KiB",
                times(large // small, long_line(small, shape)),
                times(1, long_line(large, shape)),
                baseline_name=f"{large // small} x a {small >> 10} KiB line",
                target=2.0,
                repeat=3,
                note="masking and comparing a printed line is linear in its length",
            )
        )

    return [
        *linear,
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
