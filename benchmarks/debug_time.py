#!/usr/bin/env python
"""Time to diagnosis of ``fwd9m debug`` (issue 33): a 300-step PyTorch MLP whose runs
first differ at step k (an unseeded NumPy draw added to a gradient), for k = 0, 150,
299, and a 50-step model whose ``index_put_(accumulate=True)`` (2 intra-op threads) is
the culprit op at step 0 (50 steps: its ``--no-early-stop`` records 400000-row tensors
op by op); ``none``: the MLP with no divergence (REPRODUCIBLE).

    python benchmarks/debug_time.py [CASE ...]     # numpy0 numpy150 numpy299 index_put none

For each case, in one run and interleaved: the plain run of k + 1 steps (``python
train.py``), ``fwd9m debug`` (the early stop, the default: the digest runs record their
ops into a ring), the same without the ring (``FWD9M_DEBUG_RING_ON=0``: op-level runs of
step k after the digest runs) and ``fwd9m debug --no-early-stop``; the ratio of each to
plain(k + 1), and what ``fwd9m -v debug`` says the replay cost. ``PYTHONHASHSEED=0``: no hash-seed runs. The issue's
target: ``fwd9m debug`` <= 2.0 x plain(k + 1) + the replay, never slower than
``--no-early-stop``. Results: benchmarks/debug_time.md.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MLP = """
import os, numpy as np, torch
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
x, y = torch.randn(128, 256), torch.randint(0, 10, (128,))
k = int(os.environ.get("DIVERGE_AT", "-1"))
for step in range(int(os.environ.get("STEPS", "300"))):
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    if step == k:  # unseeded: differs between any two runs
        model[2].bias.grad.add_(torch.from_numpy(np.random.rand(10)).float() * 1e-6)
    opt.step()
"""

INDEX_PUT = """
import os, torch
torch.manual_seed(0)
torch.set_num_threads(2)
index = torch.arange(400000) % 8
proj, head = torch.nn.Linear(4, 4), torch.nn.Linear(4, 1)
opt = torch.optim.SGD([*proj.parameters(), *head.parameters()], lr=0.01)
x, y = torch.randn(400000, 4), torch.randn(8, 1)
for step in range(int(os.environ.get("STEPS", "50"))):
    opt.zero_grad()
    pooled = torch.zeros(8, 4)
    pooled.index_put_((index,), proj(x), accumulate=True)  # nondeterministic with 2 threads
    ((head(pooled / 400000) - y) ** 2).mean().backward()
    opt.step()
"""

CASES = {
    "numpy0": ("mlp", 0),
    "numpy150": ("mlp", 150),
    "numpy299": ("mlp", 299),
    "index_put": ("index_put", 0),
    "none": ("mlp", 299),  # no step differs (DIVERGE_AT unset): plain(300)
}


def timed(cwd: Path, args: list[str], **env: str) -> tuple[float, int, str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("FWD9M_")}
    full.update(env, PYTHONHASHSEED="0")
    t0 = time.perf_counter()
    r = subprocess.run(args, cwd=cwd, env=full, capture_output=True, text=True, check=False)
    return time.perf_counter() - t0, r.returncode, r.stdout + r.stderr


def replay_seconds(out: str) -> str:
    """The replay's cost as ``fwd9m -v debug`` says it (``replay: ...``), or ``no replay``."""
    line = next((ln for ln in out.splitlines() if "  replay: " in ln), "")
    return line.split("  replay: ", 1)[1].strip() if line else "no replay"


def main() -> int:
    cwd = Path(tempfile.mkdtemp(prefix="fwd9m-debug-time-"))
    (cwd / "mlp.py").write_text(MLP)
    (cwd / "index_put.py").write_text(INDEX_PUT)
    py, fwd = sys.executable, [sys.executable, "-m", "fwd9m"]
    print(f"load before: {os.getloadavg()[0]:.2f}", flush=True)
    for name in sys.argv[1:] or list(CASES):
        script, k = CASES[name]
        env = {"DIVERGE_AT": str(k)} if script == "mlp" and name != "none" else {}
        plain, _, _ = timed(cwd, [py, f"{script}.py"], STEPS=str(k + 1))
        debug, code, out = timed(cwd, [*fwd, "-v", "debug", f"{script}.py"], **env)
        verdict = next((ln for ln in out.splitlines() if "CULPRIT" in ln or "EXTERNAL" in ln), "?").strip()
        plain2, _, _ = timed(cwd, [py, f"{script}.py"], STEPS=str(k + 1))
        noring, code3, out3 = timed(cwd, [*fwd, "-v", "debug", f"{script}.py"], FWD9M_DEBUG_RING_ON="0", **env)
        whole, code2, _ = timed(cwd, [*fwd, "debug", "--no-early-stop", f"{script}.py"], **env)
        p = (plain + plain2) / 2
        print(
            f"{name}: plain({k + 1}) {plain:.2f}/{plain2:.2f}  debug {debug:.2f} ({debug / p:.2f}x, exit {code}, "
            f"{replay_seconds(out)})  without the ring {noring:.2f} ({noring / p:.2f}x, exit {code3}, "
            f"{replay_seconds(out3)})  --no-early-stop {whole:.2f} ({whole / p:.2f}x, exit {code2})  "
            f"load {os.getloadavg()[0]:.2f}\n  {verdict[:150]}",
            flush=True,
        )
        if os.environ.get("DEBUG_TIME_LOG"):
            Path(os.environ["DEBUG_TIME_LOG"], f"{name}.log").write_text(out)
            Path(os.environ["DEBUG_TIME_LOG"], f"{name}-noring.log").write_text(out3)
    return 0


if __name__ == "__main__":
    sys.exit(main())
