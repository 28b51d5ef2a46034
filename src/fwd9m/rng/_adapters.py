"""Per-kind RNG adapters (read, write, reseed a generator's state) and JaxKey."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigurationError
from ..keras._hooks import layer_seed_generators as _layer_seed_generators

# --------------------------------------------------------------------------- adapters
# One adapter per kind of generator: how to read, write and reseed its state.


@dataclass(frozen=True)
class _Adapter:
    kind: str
    get: Callable[[Any], Any]
    set: Callable[[Any, Any], None]
    reseed: Callable[[Any, int], None]


def _np():
    import numpy as np

    return np


def _py_get(r):
    version, words, gauss = r.getstate()
    return {"version": version, "words": _np().asarray(words, dtype=_np().uint64), "gauss_next": gauss}


def _py_set(r, s):
    words = tuple(int(w) for w in _np().asarray(s["words"]).tolist())
    r.setstate((int(s["version"]), words, s["gauss_next"]))


def _npgen_get(g):
    return {"bit_generator_state": g.bit_generator.state}


def _npgen_set(g, s):
    g.bit_generator.state = s["bit_generator_state"]


def _npgen_reseed(g, seed):
    g.bit_generator.state = type(g.bit_generator)(seed).state


def _torchgen_get(g):
    return {"device": str(g.device), "state": g.get_state().numpy()}


def _torchgen_set(g, s):
    import torch

    g.set_state(torch.from_numpy(_np().array(s["state"], dtype=_np().uint8)))


def _tfgen_get(g):
    return {"algorithm": int(g.algorithm), "state": g.state.numpy()}


def _tfgen_set(g, s):
    g.reset(_np().asarray(s["state"]))


def _keras_sg_get(sg):
    return {"state": _np().asarray(sg.state.value)}


def _keras_sg_set(sg, s):
    sg.state.assign(_np().asarray(s["state"]).astype(_np().asarray(sg.state.value).dtype))


def _keras_sg_reseed(sg, seed):
    dtype = _np().asarray(sg.state.value).dtype
    sg.state.assign(_np().array([seed % 2**31, 0], dtype=dtype))


def _keras_layer_gens(layer) -> dict:
    """Every keras.random.SeedGenerator under ``layer``, keyed by its state's path."""
    return {sg.state.path: sg for sg in _layer_seed_generators(layer)}


def _keras_layer_get(layer):
    return {path: _keras_sg_get(sg) for path, sg in _keras_layer_gens(layer).items()}


def _keras_layer_set(layer, s):
    gens = _keras_layer_gens(layer)
    missing = sorted(set(s) - set(gens))
    if missing:
        raise ConfigurationError(
            f"seed generators {missing} are in the saved state but not in the model; "
            f"it has {sorted(gens)}. Build the same model before restoring."
        )
    for path, sub in s.items():
        _keras_sg_set(gens[path], sub)


def _keras_layer_reseed(layer, seed):
    from ..seed import derive_seed

    for path, sg in _keras_layer_gens(layer).items():
        _keras_sg_reseed(sg, derive_seed(seed, path, bits=31))


def _loader_gens(loader) -> dict:
    """The torch.Generators a DataLoader draws from (loader, sampler, batch sampler)."""
    gens = {}
    for name, owner in (
        ("generator", loader),
        ("sampler", getattr(loader, "sampler", None)),
        ("batch_sampler.sampler", getattr(getattr(loader, "batch_sampler", None), "sampler", None)),
    ):
        g = getattr(owner, "generator", None)
        if g is not None and all(g is not h for h in gens.values()):
            gens[name] = g
    return gens


def _loader_get(loader):
    return {k: _torchgen_get(g) for k, g in _loader_gens(loader).items()}


def _loader_set(loader, s):
    gens = _loader_gens(loader)
    for k, sub in s.items():
        if k not in gens:
            raise ConfigurationError(
                f"DataLoader has no {k} generator to restore; pass generator=fwd9m.data.torch_generator(seed)"
            )
        _torchgen_set(gens[k], sub)


def _loader_reseed(loader, seed):
    from ..seed import derive_seed

    for k, g in _loader_gens(loader).items():
        g.manual_seed(derive_seed(seed, k))


def _stateful_get(obj):
    return {"state": obj.state_dict()}


def _stateful_set(obj, s):
    obj.load_state_dict(s["state"])


def _no_reseed(obj, seed):
    raise ConfigurationError(f"{type(obj).__name__} cannot be reseeded in place")


def _adapter_for(obj) -> _Adapter:
    import random

    mods = sys.modules
    if isinstance(obj, random.Random):
        return _Adapter("random.Random", _py_get, _py_set, lambda r, s: r.seed(s))
    if "numpy" in mods and isinstance(obj, mods["numpy"].random.Generator):
        return _Adapter("numpy.random.Generator", _npgen_get, _npgen_set, _npgen_reseed)
    if "numpy" in mods and isinstance(obj, mods["numpy"].random.RandomState):
        return _Adapter(
            "numpy.random.RandomState",
            lambda r: {"state": r.get_state(legacy=False)},
            lambda r, s: r.set_state(s["state"]),
            lambda r, s: r.seed(s % 2**32),
        )
    if "torch" in mods:
        torch = mods["torch"]
        if isinstance(obj, torch.Generator):
            return _Adapter("torch.Generator", _torchgen_get, _torchgen_set, lambda g, s: g.manual_seed(s))
        if isinstance(obj, torch.utils.data.DataLoader):
            return _Adapter("torch.utils.data.DataLoader", _loader_get, _loader_set, _loader_reseed)
    if "tensorflow" in mods and isinstance(obj, mods["tensorflow"].random.Generator):
        return _Adapter("tf.random.Generator", _tfgen_get, _tfgen_set, lambda g, s: g.reset_from_seed(s))
    if "keras" in mods:
        keras = mods["keras"]
        if isinstance(obj, keras.random.SeedGenerator):
            return _Adapter("keras.random.SeedGenerator", _keras_sg_get, _keras_sg_set, _keras_sg_reseed)
        if isinstance(obj, keras.layers.Layer):
            return _Adapter("keras.Layer", _keras_layer_get, _keras_layer_set, _keras_layer_reseed)
    reseeder = _duck_reseed(obj)
    if hasattr(obj, "state_dict") and hasattr(obj, "load_state_dict"):
        return _Adapter("state_dict", _stateful_get, _stateful_set, reseeder)
    for get, put in (("get_state", "set_state"), ("getstate", "setstate")):
        if callable(getattr(obj, get, None)) and callable(getattr(obj, put, None)):
            return _Adapter(
                f"{get}/{put}",
                lambda o, g=get: {"state": getattr(o, g)()},
                lambda o, s, p=put: getattr(o, p)(s["state"]),
                reseeder,
            )
    raise TypeError(
        f"cannot register {type(obj).__name__}: supported are random.Random, "
        f"numpy.random.Generator/RandomState, torch.Generator, torch DataLoader, "
        f"tf.random.Generator, keras.random.SeedGenerator, Keras layers/models, "
        f"fwd9m.rng.JaxKey, and objects with state_dict()/load_state_dict(), "
        f"get_state()/set_state() or getstate()/setstate() (reseeded through "
        f"set_seed/manual_seed/seed)"
    )


def _duck_reseed(obj) -> Callable[[Any, int], None]:
    for name in ("set_seed", "manual_seed", "seed"):
        if callable(getattr(obj, name, None)):
            return lambda o, s, n=name: getattr(o, n)(s)
    return _no_reseed


def reseed(obj: Any, seed: int) -> None:
    """Reseed a supported generator in place (see :func:`register` for the kinds)."""
    _adapter_for(obj).reseed(obj, seed)


class JaxKey:
    """A mutable holder for a JAX PRNG key, so it can be registered and restored.

    JAX keys are immutable arrays and JAX has no global RNG
    (https://docs.jax.dev/en/latest/random-numbers.html); hold the key here and draw
    subkeys with :meth:`next`. State: ``jax.random.key_data(key)`` (uint32 array) and
    the key implementation name.
    """

    def __init__(self, seed_or_key: Any) -> None:
        import jax

        if isinstance(seed_or_key, int):
            seed_or_key = jax.random.key(seed_or_key)
        self.key = seed_or_key

    def next(self) -> Any:
        """Split the held key; keep one half, return the other (a fresh subkey)."""
        import jax

        self.key, sub = jax.random.split(self.key)
        return sub

    def state_dict(self) -> dict:
        import jax

        return {"impl": str(jax.random.key_impl(self.key)), "data": _np().asarray(jax.random.key_data(self.key))}

    def load_state_dict(self, s: dict) -> None:
        import jax

        self.key = jax.random.wrap_key_data(_np().asarray(s["data"]), impl=s["impl"])

    def set_seed(self, seed: int) -> None:
        import jax

        self.key = jax.random.key(seed % 2**32)
