"""The rules, one class each, grouped by hundreds:

FWD1xx seeding, FWD2xx configuration, FWD3xx data pipelines, FWD4xx ordering and
hashing, FWD5xx checkpoints and RNG state, FWD6xx JAX keys, FWD7xx known
nondeterministic ops (generated from :mod:`fwd9m.catalog`).
"""

from __future__ import annotations

import functools

from .. import _measured
from .._rule import REGISTRY, Rule

__all__ = ["all_rules"]


@functools.lru_cache(maxsize=1)
def all_rules() -> dict[str, type[Rule]]:
    """code -> rule class, in code order (imports the rule modules on first call)."""
    from . import catalog_ops, config, data, distributed, jax_keys, ordering, seeding, state  # noqa: F401

    catalog_ops.generate()
    rules = dict(sorted(REGISTRY.items()))
    _measured.apply(rules)  # measured precision; rules below 0.9 are opt-in
    return rules
