"""Per-kind RNG adapters (read, write, reseed a generator's state) and JaxKey: Python's
and NumPy's generators and duck-typed objects here, each framework's generator objects
from its backend (:meth:`fwd9m._backend.Backend.rng_adapter`)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from ._backend import Adapter
from .errors import ConfigurationError

# --------------------------------------------------------------------------- adapters
# One adapter per kind of generator: how to read, write and reseed its state.


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


def _stateful_get(obj):
    return {"state": obj.state_dict()}


def _stateful_set(obj, s):
    obj.load_state_dict(s["state"])


def _no_reseed(obj, seed):
    raise ConfigurationError(f"{type(obj).__name__} cannot be reseeded in place")


def _adapter_for(obj) -> Adapter:
    import random

    mods = sys.modules
    if isinstance(obj, random.Random):
        return Adapter("random.Random", _py_get, _py_set, lambda r, s: r.seed(s))
    if "numpy" in mods and isinstance(obj, mods["numpy"].random.Generator):
        return Adapter("numpy.random.Generator", _npgen_get, _npgen_set, _npgen_reseed)
    if "numpy" in mods and isinstance(obj, mods["numpy"].random.RandomState):
        return Adapter(
            "numpy.random.RandomState",
            lambda r: {"state": r.get_state(legacy=False)},
            lambda r, s: r.set_state(s["state"]),
            lambda r, s: r.seed(s % 2**32),
        )
    from . import _frameworks

    for b in _frameworks.backends():
        adapter = b.rng_adapter(obj)
        if adapter is not None:
            return adapter
    return _duck_adapter(obj)


def _duck_adapter(obj) -> Adapter:
    """An object with state_dict/load_state_dict, get_state/set_state or
    getstate/setstate; TypeError listing the supported kinds otherwise."""
    reseeder = _duck_reseed(obj)
    if hasattr(obj, "state_dict") and hasattr(obj, "load_state_dict"):
        return Adapter("state_dict", _stateful_get, _stateful_set, reseeder)
    for get, put in (("get_state", "set_state"), ("getstate", "setstate")):
        if callable(getattr(obj, get, None)) and callable(getattr(obj, put, None)):
            return Adapter(
                f"{get}/{put}",
                lambda o, g=get: {"state": getattr(o, g)()},
                lambda o, s, p=put: getattr(o, p)(s["state"]),
                reseeder,
            )
    from . import _frameworks

    kinds = ", ".join(k for b in _frameworks.backends(list(_frameworks.FRAMEWORKS)) for k in b.rng_kinds)
    raise TypeError(
        f"cannot register {type(obj).__name__}: supported are random.Random, "
        f"numpy.random.Generator/RandomState, {kinds}, "
        f"and objects with state_dict()/load_state_dict(), "
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
