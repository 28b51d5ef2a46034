"""Prints argv[1] lines (default 200000); with --timed each line carries a timing,
which fwd9m check masks."""
import sys
import time

n = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
timed = "--timed" in sys.argv
t0 = time.perf_counter()
for i in range(n):
    print(f"step {i} loss {1.0 / (i + 1):.6f}" + (f" took {time.perf_counter() - t0:.4f}s" if timed else ""))
