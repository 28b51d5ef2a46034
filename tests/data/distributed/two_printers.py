"""A stand-in launcher for tests: starts ranks 0 and 1 (RANK/WORLD_SIZE set, as torchrun
does), each printing one line and holding an array; which rank prints first alternates
between launches (a counter file in $ORDER_FILE), as concurrent ranks' output does.
"""

import os
import subprocess
import sys

if os.environ.get("RANK") is None:
    path = os.environ["ORDER_FILE"]
    n = int(open(path).read()) if os.path.exists(path) else 0
    open(path, "w").write(str(n + 1))
    for rank in ((0, 1) if n % 2 == 0 else (1, 0)):
        env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": "2"}
        subprocess.run([sys.executable, __file__], env=env, check=True)
else:
    import numpy as np

    weights = np.arange(3.0) * int(os.environ["RANK"])
    print(f"rank {os.environ['RANK']} says hello", flush=True)
