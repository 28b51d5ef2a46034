"""Sum the per-test lines that FWD9M_TEST_CPU=FILE writes (tests/conftest.py) by test file:
``python tests/cpu_report.py FILE [FILE...]`` prints CPU and wall seconds per file, heaviest
first, and the totals. CPU seconds (user + system, children included) hardly depend on the
machine's load; wall seconds do."""

from __future__ import annotations

import sys
from collections import defaultdict


def main(paths: list[str]) -> None:
    cpu: dict[str, float] = defaultdict(float)
    wall: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for path in paths:
        with open(path) as f:
            for line in f:
                nodeid, w, c = line.rstrip("\n").rsplit("\t", 2)
                name = nodeid.split("::")[0]
                cpu[name] += float(c)
                wall[name] += float(w)
                count[name] += 1
    print(f"{'cpu s':>8} {'wall s':>8} {'tests':>5}  file")
    for name in sorted(cpu, key=cpu.get, reverse=True):
        print(f"{cpu[name]:8.1f} {wall[name]:8.1f} {count[name]:5d}  {name}")
    print(f"{sum(cpu.values()):8.1f} {sum(wall.values()):8.1f} {sum(count.values()):5d}  total")


if __name__ == "__main__":
    main(sys.argv[1:])
