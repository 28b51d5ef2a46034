"""JAX side of :mod:`fwd9m.batch`: rows of an array (a JAX model is named with
``--entry``: it has no model class to hook)."""

from __future__ import annotations

from typing import Any

FRAMEWORK = "jax"


def take(x: Any, index: list[int], dim: int) -> Any:
    """Rows ``index`` of ``x`` along ``dim`` (``jnp.take``)."""
    import jax.numpy as jnp

    return jnp.take(x, jnp.asarray(index), axis=dim)


def probe_ops() -> dict:
    """Ops measured by ``fwd9m probe --batch-invariance``: name -> fn(NumPy samples) -> NumPy rows."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    r = np.random.RandomState(0)
    w, b = jnp.asarray(r.randn(512, 512).astype("float32")), jnp.asarray(r.randn(512).astype("float32"))

    def layer_norm(x):
        m = x.mean(-1, keepdims=True)
        return (x - m) * jax.lax.rsqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-5)

    def attention(x):
        q = x.reshape(-1, 8, 8, 8)
        return jax.nn.dot_product_attention(q, q, q).reshape(-1, 512)

    def run(f):
        return lambda x: np.asarray(jax.jit(f)(jnp.asarray(x)))

    return {
        "matmul": run(lambda x: x @ w),
        "linear": run(lambda x: x @ w + b),
        "sum": run(lambda x: x.sum(-1)),
        "mean": run(lambda x: x.mean(-1)),
        "softmax": run(lambda x: jax.nn.softmax(x, -1)),
        "layer_norm": run(layer_norm),
        "attention": run(attention),
    }
