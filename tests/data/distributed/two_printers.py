"""A stand-in launcher for tests: starts ranks 0 and 1 (RANK/WORLD_SIZE set, as torchrun
does, or $RANK_VAR, but not TORCHELASTIC_RUN_ID: fwd9m check sees one shared stdout, as for a launcher
it does not know), each printing and holding an array; which rank prints first
alternates between launches (a counter file in $ORDER_FILE), as concurrent ranks' output
does. $PRINT: ``prefix`` (default), each rank prints ``rank R says hello``; ``plain``,
a line without a rank prefix; ``swap``, rank 0 also prints two lines whose order
alternates between launches (a real difference within one rank).
"""

import os
import subprocess
import sys

if os.environ.get(os.environ.get("RANK_VAR", "RANK")) is None:
    path = os.environ["ORDER_FILE"]
    n = int(open(path).read()) if os.path.exists(path) else 0
    open(path, "w").write(str(n + 1))
    for rank in ((0, 1) if n % 2 == 0 else (1, 0)):
        var = os.environ.get("RANK_VAR", "RANK")  # OMPI_COMM_WORLD_RANK: as Open MPI's mpirun
        env = {**os.environ, var: str(rank), "WORLD_SIZE": "2", "ORDER_N": str(n)}
        subprocess.run([sys.executable, __file__], env=env, check=True)
else:
    import numpy as np

    rank = int(os.environ[os.environ.get("RANK_VAR", "RANK")])
    weights = np.arange(3.0) * rank
    mode = os.environ.get("PRINT", "prefix")
    if mode == "plain":
        print(f"hello, my weights sum to {weights.sum()}", flush=True)
    else:
        print(f"rank {rank} says hello", flush=True)
    if mode == "swap" and rank == 0:
        lines = ["rank 0: a", "rank 0: b"]
        print(*(lines if int(os.environ["ORDER_N"]) % 2 == 0 else lines[::-1]), sep="\n", flush=True)
