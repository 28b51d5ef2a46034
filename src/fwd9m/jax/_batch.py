"""JAX side of :mod:`fwd9m.batch`: rows of an array (a JAX model is named with
``--entry``: it has no model class to hook)."""

from __future__ import annotations

from typing import Any

FRAMEWORK = "jax"


def take(x: Any, index: list[int], dim: int) -> Any:
    """Rows ``index`` of ``x`` along ``dim`` (``jnp.take``)."""
    import jax.numpy as jnp

    return jnp.take(x, jnp.asarray(index), axis=dim)
