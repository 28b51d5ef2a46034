"""RNG adapters for torch's generator objects (:meth:`fwd9m._backend.Backend.rng_adapter`):
a ``torch.Generator`` and a ``torch.utils.data.DataLoader`` (the generators it, its
sampler and its batch sampler draw from). torch is imported only when it is loaded."""

from __future__ import annotations

import sys
from typing import Any

from .._backend import Adapter

__all__ = ["adapter"]


def _np():
    import numpy

    return numpy


def generator_state(g) -> dict:
    return {"device": str(g.device), "state": g.get_state().numpy()}


def set_generator_state(g, s) -> None:
    import torch

    g.set_state(torch.from_numpy(_np().array(s["state"], dtype=_np().uint8)))


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
    return {k: generator_state(g) for k, g in _loader_gens(loader).items()}


def _loader_set(loader, s):
    from ..errors import ConfigurationError

    gens = _loader_gens(loader)
    for k, sub in s.items():
        if k not in gens:
            raise ConfigurationError(
                f"DataLoader has no {k} generator to restore; pass generator=fwd9m.data.torch_generator(seed)"
            )
        set_generator_state(gens[k], sub)


def _loader_reseed(loader, seed):
    from ..seed import derive_seed

    for k, g in _loader_gens(loader).items():
        g.manual_seed(derive_seed(seed, k))


def _loader_warning(loader) -> str | None:
    if _loader_gens(loader):
        return None
    return (
        "register: this DataLoader has no torch.Generator (generator=None), so its "
        "shuffle order and worker seeds come from the global torch RNG, which also "
        "feeds dropout. Fix: DataLoader(..., generator=fwd9m.data.torch_generator(seed))"
    )


def adapter(obj: Any) -> Adapter | None:
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    if isinstance(obj, torch.Generator):
        return Adapter("torch.Generator", generator_state, set_generator_state, lambda g, s: g.manual_seed(s))
    if isinstance(obj, torch.utils.data.DataLoader):
        return Adapter("torch.utils.data.DataLoader", _loader_get, _loader_set, _loader_reseed, _loader_warning)
    return None
