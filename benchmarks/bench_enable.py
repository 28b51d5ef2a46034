"""Cost of determinism: `fwd9m run` start-up against plain `python`, and torch's
deterministic index_put_ (accumulate) against the default kernel, same run."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from _harness import Case


def cases(quick: bool):
    out = []
    script = os.path.join(tempfile.mkdtemp(prefix="fwd9m-bench-"), "noop.py")
    with open(script, "w") as fh:
        fh.write("import random\nrandom.random()\n")

    def plain():
        subprocess.run([sys.executable, script], check=True)

    def under_run():
        subprocess.run([sys.executable, "-m", "fwd9m", "run", "--seed", "0", script], check=True)

    out.append(
        Case(
            "fwd9m run start-up (no framework)",
            plain,
            under_run,
            baseline_name="python script.py",
            repeat=3 if quick else 5,
            note="parent CLI + exec'd child with the start-up hook; compare the "
            "absolute overhead with a framework import (seconds)",
        )
    )
    try:
        import torch
    except ImportError:
        return out
    n = 200_000 if quick else 1_000_000
    g = torch.Generator().manual_seed(0)
    idx, vals = torch.randint(0, 10, (n,), generator=g), torch.randn(n, generator=g)

    def kernel(deterministic: bool):
        def run():
            saved = torch.are_deterministic_algorithms_enabled()
            torch.use_deterministic_algorithms(deterministic)
            try:
                torch.zeros(10).index_put_((idx,), vals, accumulate=True)
            finally:
                torch.use_deterministic_algorithms(saved)

        return run

    out.append(
        Case(
            f"torch index_put_ accumulate, {n} values into 10 (CPU)",
            kernel(False),
            kernel(True),
            baseline_name="default kernel",
            repeat=3 if quick else 7,
            note="what use_deterministic_algorithms costs for this op",
        )
    )
    return out
