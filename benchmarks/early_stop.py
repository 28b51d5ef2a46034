#!/usr/bin/env python
"""Time to diagnosis with a reference stream: a 300-step PyTorch training whose run 2
diverges at step k (one gradient element one ulp off), for k = 0, 150, 299.

    python benchmarks/early_stop.py [--debug [--overlap]]     # EARLY_STOP_KS=150: that k only

Prints, in seconds: the start-up (``fwd9m run`` of zero steps: interpreter and torch
import), the plain run of k + 1 steps and of all 300, run 1 writing its digests
(``--digests``), and run 2 against them (``--against``), which stops at step k. Then
the same diagnosis by ``fwd9m check`` (its runs side by side, stopped at step k; the
divergence is a value of ``os.urandom``, so that two runs of one command differ) and,
with ``--debug``, by ``fwd9m debug`` (digest runs side by side, then op-level runs of
step k) and once by ``fwd9m debug --no-early-stop`` (both whole runs recorded op by op,
as before the early stop). ``--overlap`` adds ``fwd9m debug`` with
``FWD9M_DEBUG_OVERLAP=1``: its op-level runs start beside the digest runs, each waiting
at its steps for their verdict (automatic with 4 cores and no GPU; forced here, where it
may have fewer). The issue's target for the whole diagnosis is
<= 2 x plain(k + 1) + the start-ups.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCRIPT = """
import os, torch
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
x, y = torch.randn(128, 256), torch.randint(0, 10, (128,))
k = int(os.environ.get("DIVERGE_AT", "-1"))
for step in range(int(os.environ.get("STEPS", "300"))):
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    if step == k:
        g = model[2].bias.grad
        g.copy_(torch.nextafter(g, torch.full_like(g, 1.0)))
    if step == int(os.environ.get("URANDOM_AT", "-1")):  # differs between any two runs
        model[2].bias.grad.add_(1e-9 + int.from_bytes(os.urandom(4), "little") * 1e-12)
    opt.step()
"""


def timed(cwd: Path, *args: str, command: str = "run", **env: str) -> tuple[float, int]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("FWD9M_")}
    full.update(env)
    t0 = time.perf_counter()
    r = subprocess.run(
        [sys.executable, "-m", "fwd9m", command, *args], cwd=cwd, env=full, capture_output=True, text=True, check=False
    )
    return time.perf_counter() - t0, r.returncode


def main() -> int:
    cwd = Path(tempfile.mkdtemp(prefix="fwd9m-early-stop-"))
    (cwd / "train.py").write_text(SCRIPT)
    startup, _ = timed(cwd, "train.py", STEPS="0")
    plain, _ = timed(cwd, "train.py")
    ref, code = timed(cwd, "--digests", "ref.steps", "train.py")
    assert code == 0, code
    print(
        f"start-up {startup:.2f}  plain 300 steps {plain:.2f}  run 1 with --digests {ref:.2f} "
        f"({(ref - startup) / max(plain - startup, 1e-9):.2f}x the plain steps)"
    )
    for k in [int(x) for x in os.environ.get("EARLY_STOP_KS", "0,150,299").split(",")]:
        part, _ = timed(cwd, "train.py", STEPS=str(k + 1))
        against, code = timed(cwd, "--against", "ref.steps", "train.py", DIVERGE_AT=str(k))
        print(
            f"k={k:<3}  plain {k + 1} steps {part:.2f}  run 2 --against {against:.2f} (exit {code})  "
            f"diagnosis (run 1 + run 2) {ref + against:.2f}  target 2 x plain(k+1) + start-ups "
            f"{2 * part:.2f}"
        )
        check, code = timed(cwd, "-q", "train.py", command="check", URANDOM_AT=str(k))
        line = f"k={k:<3}  fwd9m check {check:.2f} (exit {code}, {check / part:.2f}x plain(k+1))"
        if "--debug" in sys.argv:  # PYTHONHASHSEED=0: no hash-seed runs (the divergence is a Python value)
            debug, code = timed(cwd, "train.py", command="debug", URANDOM_AT=str(k), PYTHONHASHSEED="0")
            line += f"  fwd9m debug {debug:.2f} (exit {code}, {debug / part:.2f}x plain(k+1))"
        if "--overlap" in sys.argv:
            debug, code = timed(
                cwd, "train.py", command="debug", URANDOM_AT=str(k), PYTHONHASHSEED="0", FWD9M_DEBUG_OVERLAP="1"
            )
            line += f"  with the overlap {debug:.2f} (exit {code}, {debug / part:.2f}x plain(k+1))"
        print(line, flush=True)
    if "--debug" in sys.argv:
        today, code = timed(cwd, "--no-early-stop", "train.py", command="debug", URANDOM_AT="150", PYTHONHASHSEED="0")
        print(f"k=150  fwd9m debug --no-early-stop (today) {today:.2f} (exit {code}, {today / plain:.2f}x plain 300)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
