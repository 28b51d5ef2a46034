"""The process-global RNGs of imported frameworks: capture and restore functions (each
framework's from its backend, :meth:`fwd9m._backend.Backend.rng_sources`)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from .._rng_adapters import _py_get, _py_set


def _global_sources() -> dict[str, tuple[Callable[[], Any], Callable[[Any], None]]]:
    """Source name -> (capture, restore) for the globals of imported frameworks."""
    import random

    out: dict[str, tuple[Callable[[], Any], Callable[[Any], None]]] = {
        # the random module's getstate/setstate act on its hidden global Random
        "python": (lambda: _py_get(random), lambda s: _py_set(random, s)),
    }
    mods = sys.modules
    if "numpy" in mods:
        np = mods["numpy"]
        out["numpy"] = (lambda: np.random.get_state(legacy=False), lambda s: np.random.set_state(s))
    for b in _backends():
        out.update(b.rng_sources())
    return out


def _backends():
    """The imported frameworks' backends; the one that reseeds others first."""
    from .. import _frameworks

    return sorted(_frameworks.backends(), key=lambda b: not b.seeds_others)


def restore_order(names) -> list[str]:
    """Restore order: frameworks first, each in the order its backend lists its sources
    (Keras may draw from Python's random), then NumPy, Python last."""
    names = list(names)
    last = [n for n in ("numpy", "python") if n in names]
    return [n for n in names if n not in last] + last


def optional_sources() -> set[str]:
    """Sources that may have nothing to capture (CUDA not initialised, no TF global
    generator): not reported as missing from a state."""
    return {n for b in _backends() for n in b.optional_sources}
