#!/usr/bin/env python
"""``fwd9m check``'s runs 1 and 2 in its three orders (:mod:`fwd9m.check._parallel`):
side by side (``FWD9M_SIDE_BY_SIDE=1``), one after the other (``0``) and in lock step
(``step``: both start, then one computes a training step at a time, in turn), on a
300-step PyTorch MLP with torch's default threads (one per core) whose run 2 differs at
step k (a value of ``os.urandom`` added to one gradient), for k = 0, 150, 299, and on the
same script when no step differs.

    taskset -c 0,1 python benchmarks/check_order.py [--repeat N]   # CHECK_ORDER_KS=150: that k only

Every command runs under ``taskset -c 0,1`` (two cores, as the issue's machine). Each
ratio is to plain runs timed in the same run: ``plain(k + 1)``, a ``fwd9m run`` of the
script's first k + 1 steps, and the start-up (``fwd9m run`` of zero steps). The issue's
target for NOT REPRODUCIBLE at step k is ``<= 1.5 x plain(k + 1) + one start-up``, for
REPRODUCIBLE ``<= 2.1 x`` one plain run. The orders alternate, ``--repeat`` times
(default 2); the best of each is printed, with every time (CHECK_ORDERS=step,1: those).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCRIPT = """
import os, torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
x, y = torch.randn(128, 256), torch.randint(0, 10, (128,))
for step in range(int(os.environ.get("STEPS", "300"))):
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    if step == int(os.environ.get("URANDOM_AT", "-1")):  # differs between any two runs
        model[2].bias.grad.add_(1e-9 + int.from_bytes(os.urandom(4), "little") * 1e-12)
    opt.step()
print("done")
"""
CPUS = os.environ.get("CHECK_ORDER_CPUS", "0,1")
#: the orders: FWD9M_SIDE_BY_SIDE's value and a name
ORDERS = {"1": "side by side", "0": "one after the other", "step": "lock step"}


#: CPU seconds (user + system) of the commands timed so far, with their children
CPU: list[float] = []


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cwd: Path, *args: str, command: str = "run", **env: str) -> tuple[float, int, str]:
    """Wall seconds, exit status and stderr of ``fwd9m COMMAND ARGS``; its CPU seconds
    (the whole process tree's, as waited for) are appended to :data:`CPU`."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("FWD9M_")}
    full.update(env)
    c0 = _cpu()
    t0 = time.perf_counter()
    r = subprocess.run(
        ["taskset", "-c", CPUS, sys.executable, "-m", "fwd9m", command, *args],
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - t0
    CPU.append(_cpu() - c0)
    return wall, r.returncode, r.stderr


def uptime() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def interleaved(cwd: Path, repeat: int, orders: list[str], steps: int, *args: str, **env: str) -> dict[str, tuple]:
    """For each order: the best wall time of ``repeat`` checks, every wall time, the last
    exit status, and the least CPU seconds of one; the orders alternate (``plain``: a
    plain run of ``steps`` steps)."""
    got: dict[str, tuple[list[float], list[float], int]] = {o: ([], [], 0) for o in orders}
    for _ in range(repeat):
        for o in orders:
            if o == "plain":  # a plain run of STEPS steps, in the same rotation
                t, code, _ = timed(cwd, "train.py", **env, STEPS=str(steps))
            else:
                t, code, _ = timed(cwd, *args, command="check", FWD9M_SIDE_BY_SIDE=o, **env)
            got[o][0].append(t)
            got[o][1].append(CPU[-1])
            got[o] = (got[o][0], got[o][1], code)
    return {o: (min(ts), ts, code, min(cs)) for o, (ts, cs, code) in got.items()}


def plain_runs(cwd: Path, steps: int) -> tuple[float, float]:
    """Best wall and CPU seconds of two plain runs of ``steps`` steps."""
    walls, cpus = [], []
    for _ in range(2):
        walls.append(timed(cwd, "train.py", STEPS=str(steps))[0])
        cpus.append(CPU[-1])
    return min(walls), min(cpus)


def main() -> int:
    repeat = int(sys.argv[sys.argv.index("--repeat") + 1]) if "--repeat" in sys.argv else 2
    cwd = Path(tempfile.mkdtemp(prefix="fwd9m-check-order-"))
    (cwd / "train.py").write_text(SCRIPT)
    print(f"load average (1, 5, 15 min) at the start: {uptime()}; cores {CPUS}", flush=True)
    startup, startup_cpu = plain_runs(cwd, 0)
    print(f"start-up {startup:.2f} s ({startup_cpu:.1f} CPU s)", flush=True)
    orders = os.environ.get("CHECK_ORDERS", ",".join(ORDERS)).split(",")
    for k in [int(x) for x in os.environ.get("CHECK_ORDER_KS", "0,150,299").split(",")]:
        got = interleaved(cwd, repeat, ["plain", *orders], k + 1, "train.py", URANDOM_AT=str(k))
        part, times, _, part_cpu = got.pop("plain")
        target = 1.5 * part + startup
        row = [f"k={k:<3} plain({k + 1}) {part:.2f} [{' '.join(f'{t:.1f}' for t in times)}] ({part_cpu:.1f} CPU s)"]
        row[0] += f"  target {target:.2f}"
        for o, (best, times, code, cpu) in got.items():
            row.append(
                f"{ORDERS[o]}: {best:.2f} = {best / part:.2f}x plain(k+1) [{' '.join(f'{t:.1f}' for t in times)}]"
                f" {cpu:.1f} CPU s = {cpu / part_cpu:.2f}x, exit {code}"
            )
        print("\n    ".join(row), flush=True)
    got = interleaved(cwd, repeat, ["plain", *orders], 300, "-q", "train.py")
    plain, times, _, plain_cpu = got.pop("plain")
    row = [f"no step differs: plain {plain:.2f} [{' '.join(f'{t:.1f}' for t in times)}] ({plain_cpu:.1f} CPU s)"]
    row[0] += f"  target {2.1 * plain:.2f}"
    for o, (best, times, code, cpu) in got.items():
        row.append(
            f"{ORDERS[o]}: {best:.2f} = {best / plain:.2f}x plain [{' '.join(f'{t:.1f}' for t in times)}] "
            f"{cpu:.1f} CPU s = {cpu / plain_cpu:.2f}x, exit {code}"
        )
    print("\n    ".join(row), flush=True)
    print(f"load average at the end: {uptime()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
