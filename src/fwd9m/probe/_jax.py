"""JAX side of the probe child (:mod:`fwd9m.probe._child`).

JAX has no op-level switch; XLA's GPU flag ``--xla_gpu_deterministic_ops=true``
(https://docs.jax.dev/en/latest/faq.html, section on GPU determinism) is the switch,
set through ``XLA_FLAGS`` before the backend starts. It has no effect on CPU. Threads:
``--xla_cpu_multi_thread_eigen`` and ``intra_op_parallelism_threads`` (also XLA_FLAGS).
"""

from __future__ import annotations

import os
from typing import Any

_jax: Any = None
_JITTED: dict = {}


def child_env(switch: bool, threads: int) -> dict[str, str]:
    flags = os.environ.get("XLA_FLAGS", "")
    flags += f" --xla_cpu_multi_thread_eigen={'true' if threads > 1 else 'false'}"
    flags += f" intra_op_parallelism_threads={threads}"
    if switch:
        flags += " --xla_gpu_deterministic_ops=true"
    return {"XLA_FLAGS": flags.strip(), "OMP_NUM_THREADS": str(threads)}


def setup(device: str, switch: bool, threads: int) -> list[str]:
    global _jax
    import jax

    _jax = jax
    found = ["cpu"]
    try:
        found += [f"cuda:{i}" for i, _ in enumerate(jax.devices("gpu"))]
    except RuntimeError:  # no GPU backend
        pass
    return found


def _device(device: str):
    jax = _jax
    if device == "cpu":
        return jax.devices("cpu")[0]
    return jax.devices("gpu")[int(device.split(":", 1)[1])]


def namespace(device: str) -> dict:
    jax = _jax
    import jax.numpy as jnp
    import numpy as np
    from jax import lax

    def grad(fn, x, *rest):
        """vjp of ``fn(x, *rest)`` with respect to ``x``, jitted once per probe code (a
        lambda is new in every repeat); ``rest`` are arguments, not constants baked into
        the program (XLA folding a large constant takes minutes)."""
        key = (fn.__code__, x.shape, str(x.dtype))
        f = _JITTED.get(key)
        if f is None:
            y = jax.eval_shape(fn, x, *rest)
            gy = np.random.default_rng(1234).standard_normal(y.shape).astype(y.dtype)
            f = _JITTED[key] = jax.jit(lambda x, *rest: jax.vjp(lambda x: fn(x, *rest), x)[1](gy)[0])
        return f(x, *rest)

    def jit(fn):
        """``jax.jit(fn)``, once per probe code (a lambda is new in every repeat)."""
        key = getattr(fn, "__code__", fn)
        if key not in _JITTED:
            _JITTED[key] = jax.jit(fn)
        return _JITTED[key]

    return {"jax": jax, "jnp": jnp, "lax": lax, "grad": grad, "jit": jit, "device": device}


def convert(arrays: dict, device: str) -> dict:
    dev = _device(device)
    return {n: _jax.device_put(a, dev) for n, a in arrays.items()}


def placement(device: str):
    return _jax.default_device(_device(device))


def to_numpy(value) -> list:
    import numpy as np

    if isinstance(value, (tuple, list)):
        return [a for v in value for a in to_numpy(v)]
    return [np.asarray(value)]


def wait(value, device: str) -> None:
    """JAX dispatches asynchronously: the op's time ends when its results are ready."""
    _jax.block_until_ready(value)


def is_switch_error(exc: BaseException) -> bool:
    return False
