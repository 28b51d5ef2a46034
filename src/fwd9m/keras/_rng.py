"""RNG adapters for Keras 3 (:meth:`fwd9m._backend.Backend.rng_adapter`): a
``keras.random.SeedGenerator`` (its state is a variable) and a Keras layer or model
(every ``SeedGenerator`` inside it, keyed by its state variable's path). Keras is
imported only when it is loaded."""

from __future__ import annotations

import sys
from typing import Any

from .._backend import Adapter
from . import _private

__all__ = [
    "adapter",
    "generator_state",
    "set_generator_state",
    "layer_generators",
    "layer_state",
    "set_layer_state",
]


def _np():
    import numpy

    return numpy


def generator_state(sg) -> dict:
    return {"state": _np().asarray(sg.state.value)}


def set_generator_state(sg, s) -> None:
    sg.state.assign(_np().asarray(s["state"]).astype(_np().asarray(sg.state.value).dtype))


def _reseed_generator(sg, seed) -> None:
    dtype = _np().asarray(sg.state.value).dtype
    sg.state.assign(_np().array([seed % 2**31, 0], dtype=dtype))


def layer_generators(layer) -> dict:
    """Every keras.random.SeedGenerator under ``layer``, keyed by its state's path."""
    return {sg.state.path: sg for sg in _private.layer_seed_generators(layer)}


def layer_state(layer) -> dict:
    return {path: generator_state(sg) for path, sg in layer_generators(layer).items()}


def set_layer_state(layer, s) -> None:
    from ..errors import ConfigurationError

    gens = layer_generators(layer)
    missing = sorted(set(s) - set(gens))
    if missing:
        raise ConfigurationError(
            f"seed generators {missing} are in the saved state but not in the model; "
            f"it has {sorted(gens)}. Build the same model before restoring."
        )
    for path, sub in s.items():
        set_generator_state(gens[path], sub)


def _reseed_layer(layer, seed) -> None:
    from ..seed import derive_seed

    for path, sg in layer_generators(layer).items():
        _reseed_generator(sg, derive_seed(seed, path, bits=31))


def adapter(obj: Any) -> Adapter | None:
    keras = sys.modules.get("keras")
    if keras is None:
        return None
    if isinstance(obj, keras.random.SeedGenerator):
        return Adapter("keras.random.SeedGenerator", generator_state, set_generator_state, _reseed_generator)
    if isinstance(obj, keras.layers.Layer):
        return Adapter("keras.Layer", layer_state, set_layer_state, _reseed_layer)
    return None
