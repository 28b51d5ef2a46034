"""A reproducible script that prints timings the way training loops do: a tqdm bar on
stdout redrawn thousands of times, a duration, a transformers-Trainer-style dict with
timings as quoted strings, a JSON file with a runtime, and a weight checksum in hex
and as a big integer; with --flip-checksum MARKER, the checksum changes in every run
after the first (the first creates MARKER)."""
import json
import os
import sys
import time

from tqdm import tqdm

t0 = time.perf_counter()
total = 0
for i in tqdm(range(3000), file=sys.stdout, mininterval=0):
    total += i
took = time.perf_counter() - t0
print(f"took {took}s")
print({"train_runtime": f"{took:.4g}", "train_samples_per_second": f"{3000 / took:.4g}", "train_loss": "0.6943",
       "epoch": "2"})
crc = 0x1A2B3C00
if "--flip-checksum" in sys.argv:
    marker = sys.argv[sys.argv.index("--flip-checksum") + 1]
    if os.path.exists(marker):
        crc += 2
    open(marker, "w").close()
print(f"weights crc32: {crc:#010x} checksum {2**62 + (crc & 0xff)}")
with open("metrics.json", "w") as f:
    json.dump({"train_loss": 0.6943, "train_runtime": took}, f, indent=2)
