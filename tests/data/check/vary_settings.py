"""Its result depends on the MODE environment variable and on the --scale option."""
import argparse
import os

p = argparse.ArgumentParser()
p.add_argument("--scale", type=float, default=1.0)
args = p.parse_args()
value = args.scale * (1.5 if os.environ.get("MODE") == "b" else 1.0)
print(f"value {value}")
