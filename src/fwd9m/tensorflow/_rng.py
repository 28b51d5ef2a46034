"""The RNG adapter for ``tf.random.Generator`` (:meth:`fwd9m._backend.Backend.rng_adapter`).
tensorflow is imported only when it is loaded."""

from __future__ import annotations

import sys
from typing import Any

from .._backend import Adapter

__all__ = ["adapter", "generator_state", "set_generator_state"]


def generator_state(g) -> dict:
    return {"algorithm": int(g.algorithm), "state": g.state.numpy()}


def set_generator_state(g, s) -> None:
    import numpy as np

    g.reset(np.asarray(s["state"]))


def adapter(obj: Any) -> Adapter | None:
    tf = sys.modules.get("tensorflow")
    if tf is not None and isinstance(obj, tf.random.Generator):
        return Adapter("tf.random.Generator", generator_state, set_generator_state, lambda g, s: g.reset_from_seed(s))
    return None
