"""JAX side of replay (:mod:`fwd9m.debug._replay`): a jitted call cannot be rebuilt
from a file (its program is the user's Python function), so the capture is the
narrowing done in the targeted run itself (:func:`fwd9m.jax._narrow.narrow`),
while the program is at hand; replay reports it."""

from __future__ import annotations

FRAMEWORK = "jax"
SWITCH = ""


class Unrebuildable(TypeError):
    """The op is not a jitted call with a jaxpr."""


def capture(rec, jaxpr, inputs) -> tuple[dict, dict]:
    from ._narrow import narrow

    if jaxpr is None:
        raise Unrebuildable("no jaxpr (an eager primitive: replay it by its inputs instead)")
    if len(inputs) != len(jaxpr.jaxpr.invars):
        raise Unrebuildable(f"{len(inputs)} recorded inputs for {len(jaxpr.jaxpr.invars)} jaxpr inputs")
    saved = rec.steps
    rec.steps = (-2, -1)  # the narrowing's own eager primitives are not the program's: not recorded
    try:
        found = narrow(jaxpr, inputs)
    finally:
        rec.steps = saved
    return {"framework": FRAMEWORK, "op": "jit", "narrowed": found, "tensors": []}, {}


def devices() -> list[str]:
    return ["cpu"]
