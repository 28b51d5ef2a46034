"""A tiny ratio-benchmark harness.

A benchmark module ``benchmarks/bench_*.py`` defines ``cases(quick: bool) -> list[Case]``.
Each case times a baseline and a candidate in the same run, interleaved, and reports
candidate/baseline (best of ``repeat``), so the figure survives a slower or busier
machine. Absolute seconds are printed for context only.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Case:
    name: str
    baseline: Callable[[], object]
    candidate: Callable[[], object]
    baseline_name: str = "baseline"
    target: float | None = None  #: pass when ratio <= target (or >= when higher_is_better)
    higher_is_better: bool = False
    repeat: int = 5
    note: str = ""
    setup: Callable[[], object] | None = None
    results: dict = field(default_factory=dict)
    #: what is timed: wall-clock seconds, or e.g. the CPU seconds of child processes,
    #: which a busy shared machine does not inflate
    clock: Callable[[], float] = time.perf_counter


def best_time(fn: Callable[[], object], clock: Callable[[], float] = time.perf_counter) -> float:
    t0 = clock()
    fn()
    return clock() - t0


def run_case(case: Case) -> dict:
    if case.setup:
        case.setup()
    case.baseline()  # warm-up: caches, lazy imports, compilation
    case.candidate()
    base, cand = [], []
    for _ in range(case.repeat):
        base.append(best_time(case.baseline, case.clock))
        cand.append(best_time(case.candidate, case.clock))
    b, c = min(base), min(cand)
    ratio = c / b if b > 0 else float("inf")
    ok = None
    if case.target is not None:
        ok = ratio >= case.target if case.higher_is_better else ratio <= case.target
    return {
        "name": case.name,
        "baseline": case.baseline_name,
        "baseline_s": b,
        "candidate_s": c,
        "ratio": ratio,
        "target": case.target,
        "higher_is_better": case.higher_is_better,
        "meets_target": ok,
        "note": case.note,
    }
