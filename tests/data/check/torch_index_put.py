"""Sum many values into few buckets with ``index_put_(accumulate=True)`` on 2 threads.

On CPU, PyTorch accumulates float32 values in parallel when the problem is large and
more than one thread runs, so the rounding depends on thread timing. ``--deterministic``
calls ``torch.use_deterministic_algorithms(True)``, which selects a serial path.
Nothing is printed: ``fwd9m check`` compares the global tensor ``out`` it captures.
The size and the 10 calls make a race likely even on a busy 2-core machine (measured:
8 distinct results in 8 runs beside two busy loops; with 100,000 rows and 3 calls, 7 of 8
agreed, which made a test of `fwd9m check` flaky in CI).
"""
import sys

import torch

torch.set_num_threads(2)
if "--deterministic" in sys.argv:
    torch.use_deterministic_algorithms(True)
torch.manual_seed(0)
index = torch.randint(0, 10, (400_000,))
values = torch.randn(400_000, 16)
out = torch.zeros(10, 16)
for _ in range(10):
    out.index_put_((index,), values, accumulate=True)

if "--save" in sys.argv:
    torch.save({"sums": out, "step": 10}, "sums.pt")
