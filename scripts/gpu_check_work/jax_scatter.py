"""gpu-check workload: JAX's scatter-add, repeated, with or without enable_determinism.

``jax_scatter.py [--enable]``: with ``--enable``, ``fwd9m.enable_determinism(seed=0)`` is
called after ``import jax`` and before the first computation (which starts the
backend), so ``--xla_gpu_deterministic_ops=true`` must be in ``XLA_FLAGS`` when XLA
reads it. Then a jitted scatter-add of 200,000 rows into 8 slots runs REPEATS times on
the device; on a GPU XLA's scatter adds with atomics unless the flag makes it sort
first (catalog ``jax.xla-gpu-scatter``). Prints one JSON object: the flags, the device
and the number of distinct outputs.

The device is ``$FWD9M_GPU_CHECK_DEVICE`` (default ``cuda:0``); on ``cpu`` (dry run and
tests) the one CUDA call, ``jax.devices("gpu")``, is replaced by ``jax.devices("cpu")``
(CPU_STAND_IN_FOR_CUDA_DEVICE): XLA's CPU scatter is serial, so no difference is
expected there, only the flag's timing is checked.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np

DEVICE = os.environ.get("FWD9M_GPU_CHECK_DEVICE", "cuda:0")
REPEATS, ROWS, SLOTS, WIDTH = 10, 200_000, 8, 16


def device():
    if DEVICE.startswith("cuda"):
        index = int(DEVICE.split(":", 1)[1] or 0) if ":" in DEVICE else 0
        try:
            return jax.devices("cuda")[index]
        except RuntimeError:  # a JAX that knows only the platform group's name
            return jax.devices("gpu")[index]
    return CPU_STAND_IN_FOR_CUDA_DEVICE()


def CPU_STAND_IN_FOR_CUDA_DEVICE():  # noqa: N802 - named to be seen
    return jax.devices("cpu")[0]


def main() -> None:
    state = {"changes": None}
    if "--enable" in sys.argv:
        import fwd9m

        with warnings.catch_warnings(record=True) as seen:  # a TooLateWarning: the backend was up
            warnings.simplefilter("always")
            state["changes"] = [str(getattr(c, "what", c)) for c in fwd9m.enable_determinism(seed=0)]
        state["warnings"] = [str(w.message).splitlines()[0] for w in seen]
    state["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "")
    dev = device()  # the backend starts here, reading XLA_FLAGS
    rng = np.random.default_rng(0)
    index = jax.device_put(rng.integers(0, SLOTS, ROWS), dev)
    rows = jax.device_put(rng.standard_normal((ROWS, WIDTH), dtype=np.float32), dev)
    scatter = jax.jit(lambda i, v: jnp.zeros((SLOTS, WIDTH), jnp.float32).at[i].add(v))
    outs = {hashlib.sha256(np.asarray(scatter(index, rows)).tobytes()).hexdigest() for _ in range(REPEATS)}
    state.update(device=str(dev), platform=dev.platform, repeats=REPEATS, distinct=len(outs), jax=jax.__version__)
    json.dump(state, sys.stdout)
    print()


if __name__ == "__main__":
    main()
