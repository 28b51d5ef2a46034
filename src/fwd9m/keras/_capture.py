"""The Keras part of ``fwd9m check``'s final state (:mod:`fwd9m._runtime.capture`):
every top-level Keras 3 or tf-keras model or layer with weights (its weights and its
optimizer's variables). Keras objects local to a function that has returned are gone
at the end and are not captured (what they print or save still is)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from .._backend import outermost
from . import _private

__all__ = ["state_types", "final_state"]


def state_types() -> tuple[type, ...]:
    """The ``Layer`` classes of the Keras packages imported (Keras 3, tf-keras)."""
    mods = (sys.modules.get("keras"), sys.modules.get("tf_keras"))
    return tuple(m.layers.Layer for m in mods if m is not None and hasattr(m, "layers"))


def final_state(
    found: list[Any], name_of: Callable[[Any], str | None], label: Callable[[str, Any], str], taken: set[int]
) -> dict[str, Any]:
    """The root layers with weights not already saved with another (named ones
    first); their variables (and the values they wrap), their optimizers' included, go
    into ``taken``."""
    roots = outermost(found, _private.sublayers)
    owned: set[int] = set()
    out: dict[str, Any] = {}
    for layer in sorted(roots, key=lambda m: (name_of(m) is None, getattr(m, "name", ""))):
        if not getattr(layer, "weights", None) or all(id(v) in owned for v in layer.weights):
            continue  # Sequential's inner Functional shares the Sequential's weights
        out[label("keras", layer)] = layer
        variables = list(layer.weights)
        opt = getattr(layer, "optimizer", None)
        if opt is not None and isinstance(getattr(opt, "variables", None), list):
            variables += opt.variables
        for v in variables:
            owned.add(id(v))
            owned.add(id(getattr(v, "value", None)))
    taken.update(owned)
    return out
