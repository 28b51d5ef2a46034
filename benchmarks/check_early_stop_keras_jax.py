#!/usr/bin/env python
"""Time to a NOT REPRODUCIBLE verdict for a Keras ``fit`` script and JAX loops that
differ at step 0 (issue 28), and ``fwd9m fix`` on them, each as a ratio to one plain run
of the same script timed in the same run of this benchmark.

    python benchmarks/check_early_stop_keras_jax.py [SCRIPT ...] [--before]

The scripts are the broken ones of ``tests/data/fix_scripts/`` (run from a copy of that
folder, so its ``helpers/`` are there): by default ``keras_fit_dropout_noseed.py`` (Keras
``fit``, no seed: the initial weights differ), ``flax_clock_prngkey.py`` (a jitted
Flax/optax step, a clock seed), ``jax_numpy_shuffle_unseeded.py`` (a jitted step without
optax, the batch order from an unseeded NumPy permutation), and two plain JAX loops without
optax of ``benchmarks/early_stop_scripts/`` that train a few seconds, the update a
``tree_map`` inside the jitted step (``jax_treemap_step_unseeded.py``) or outside a jitted
gradient (``jax_grad_outside_unseeded.py``), their batches shuffled without a seed. For each, in this order: one plain
``python SCRIPT``, ``fwd9m check -q SCRIPT`` (exit 1 expected) and ``fwd9m fix -q SCRIPT``
(exit 0 expected: a patch verified by a check of the patched copy). ``--before`` adds
``fwd9m check -q --no-early-stop SCRIPT``: both runs to the end one after the other, and
then the hash-seed runs, as Keras and JAX scripts were checked before their early stop.

The issue's targets: check <= 1.5x and fix <= 4x one plain run. Most of a plain run of
these small scripts is the framework import, so the ratios are those of start-up-bound
scripts; a longer training makes the early stop's ratio smaller, not larger.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "data" / "fix_scripts"
#: plain JAX loops without optax, of a few seconds of training (this folder's, copied beside the corpus)
LOOPS = Path(__file__).resolve().parent / "early_stop_scripts"
DEFAULT = [
    "keras_fit_dropout_noseed.py",
    "flax_clock_prngkey.py",
    "jax_numpy_shuffle_unseeded.py",
    "jax_treemap_step_unseeded.py",
    "jax_grad_outside_unseeded.py",
]


def timed(cwd: Path, *argv: str) -> tuple[float, int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FWD9M_") and k != "PYTHONHASHSEED"}
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, *argv], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    return time.perf_counter() - t0, r.returncode


def one(cwd: Path, script: str, before: bool) -> str:
    plain, code = timed(cwd, script)
    assert code == 0, f"{script}: plain run exit {code}"
    check, check_code = timed(cwd, "-m", "fwd9m", "check", "-q", script)
    fix, fix_code = timed(cwd, "-m", "fwd9m", "fix", "-q", script)
    line = (
        f"{script:<34} plain {plain:6.1f} s  check {check:6.1f} s (exit {check_code}) {check / plain:4.2f}x  "
        f"fix {fix:6.1f} s (exit {fix_code}) {fix / plain:4.2f}x"
    )
    if before:
        old, old_code = timed(cwd, "-m", "fwd9m", "check", "-q", "--no-early-stop", script)
        line += f"  check --no-early-stop {old:6.1f} s (exit {old_code}) {old / plain:4.2f}x"
    return line


def main() -> int:
    scripts = [a for a in sys.argv[1:] if not a.startswith("--")] or DEFAULT
    cwd = Path(tempfile.mkdtemp(prefix="fwd9m-bench-keras-jax-")) / "scripts"
    shutil.copytree(CORPUS, cwd)
    for loop in LOOPS.glob("*.py"):
        shutil.copy(loop, cwd / loop.name)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; targets: check <= 1.5x, fix <= 4x")
    for script in scripts:
        print(one(cwd, script, "--before" in sys.argv), flush=True)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    shutil.rmtree(cwd.parent, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
