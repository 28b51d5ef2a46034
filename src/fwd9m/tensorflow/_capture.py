"""The TensorFlow part of ``fwd9m check``'s final state
(:mod:`fwd9m._runtime.capture`): every live ``tf.Variable`` that no Keras model saved
already, under one label, by variable name. Variables local to a function that has
returned are gone at the end and are not captured."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

__all__ = ["state_types", "final_state"]


def state_types() -> tuple[type, ...]:
    tf = sys.modules.get("tensorflow")
    variable = getattr(tf, "Variable", None) if tf is not None else None
    return (variable,) if variable is not None else ()


def final_state(
    found: list[Any], name_of: Callable[[Any], str | None], label: Callable[[str, Any], str], taken: set[int]
) -> dict[str, Any]:
    loose = [v for v in found if id(v) not in taken]
    if not loose:
        return {}
    taken.update(id(v) for v in loose)
    return {"tf.variables": {v.name: v for v in sorted(loose, key=lambda v: v.name)}}
