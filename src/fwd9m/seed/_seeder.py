"""``Seeder``: the seeds of every (task, epoch, step, rank, worker) of a run."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from .. import _rng_adapters as rng  # reseeding a generator object (below the rng package)
from ..errors import ConfigurationError
from ._derive import derive_seed, jax_key
from ._everything import _check_seed, _seed_or_default, seed_everything


def _env_int(names: tuple[str, ...], default: int) -> int:
    for n in names:
        raw = os.environ.get(n)
        if raw not in (None, ""):
            try:
                return int(raw)
            except ValueError:
                raise ConfigurationError(f"environment variable {n}={raw!r} is not an integer") from None
    return default


class Seeder:
    """Seeds for every (task, epoch, step, rank, worker) of a run, from one seed.

    ``Seeder(42, rank=1).seed("dropout", epoch=3)`` is
    ``derive_seed(42, "fwd9m.Seeder", "dropout", 3, None, 1, None)``: each coordinate has
    a fixed position, so ``epoch=1, step=12`` never collides with ``epoch=11, step=2``
    (the classic ``seed + epoch * 10 + step`` mistake). ``shared=True`` leaves the rank
    out, for what all ranks must agree on (initial weights, a global shuffle).

    Registered generators (:meth:`register`) are reseeded by :meth:`set_epoch` from
    ``seed(("registered", name), epoch=epoch)``, so an epoch's streams do not depend on
    how many numbers earlier epochs drew: resuming at any epoch boundary needs only the
    epoch number.

    Args:
        seed: base seed (int >= 0). ``None``: ``FWD9M_SEED`` if set, else a fresh one
            (as :func:`seed_everything`).
        rank: this process's rank; default ``$RANK`` (set by ``torchrun``), else 0.
        world_size: number of ranks; default ``$WORLD_SIZE``, else 1.

    Raises:
        ConfigurationError: negative seed, or rank not in ``[0, world_size)``.
    """

    def __init__(self, seed: int | None = None, *, rank: int | None = None, world_size: int | None = None) -> None:
        self.base_seed = _check_seed(_seed_or_default(seed, "Seeder"), maximum=None)
        self.rank = _env_int(("RANK",), 0) if rank is None else int(rank)
        self.world_size = _env_int(("WORLD_SIZE",), 1) if world_size is None else int(world_size)
        if not 0 <= self.rank < self.world_size:
            raise ConfigurationError(f"rank={self.rank} must be in [0, world_size={self.world_size})")
        self.epoch: int | None = None
        self._registered: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"Seeder({self.base_seed}, rank={self.rank}, world_size={self.world_size}, epoch={self.epoch})"

    def seed(
        self,
        task: Any = "",
        *,
        epoch: int | None = None,
        step: int | None = None,
        worker: int | None = None,
        shared: bool = False,
        bits: int = 64,
    ) -> int:
        """The seed for one coordinate of the run (see the class docstring).

        Args:
            task: any :func:`derive_seed` key naming what the seed is for ("shuffle",
                "augment", ("layer", 3)).
            epoch, step, worker: ints or None (None is a distinct value, not 0).
            shared: True for a seed identical on every rank.
            bits: output width (64 for generators, 32 for :func:`seed_everything`).

        Returns:
            int in ``[0, 2**bits - 1]``.
        """
        return derive_seed(
            self.base_seed, "fwd9m.Seeder", task, epoch, step, None if shared else self.rank, worker, bits=bits
        )

    def numpy(self, task: Any = "", **coords: Any) -> Any:
        """A fresh ``numpy.random.Generator`` (PCG64) for ``seed(task, **coords)``."""
        import numpy as np

        return np.random.default_rng(self.seed(task, **coords))

    def torch(self, task: Any = "", *, device: str = "cpu", **coords: Any) -> Any:
        """A fresh ``torch.Generator`` on ``device`` seeded with ``seed(task, **coords)``."""
        import torch

        g = torch.Generator(device=device)
        g.manual_seed(self.seed(task, **coords))
        return g

    def jax_key(self, task: Any = "", **coords: Any) -> Any:
        """A JAX key for ``seed(task, **coords, bits=32)``."""
        return jax_key(self.seed(task, bits=32, **coords))

    def seed_everything(
        self, epoch: int | None = None, *, shared: bool = False, frameworks: str | Iterable[str] | None = None
    ) -> int:
        """``seed_everything`` with this Seeder's 32-bit seed for ``("global", epoch)``."""
        return seed_everything(self.seed("global", epoch=epoch, shared=shared, bits=32), frameworks)

    def register(self, obj: Any, name: str, *, shared: bool = False) -> Any:
        """Reseed ``obj`` at every :meth:`set_epoch` (kinds: see ``fwd9m.rng.register``).

        Reseeded now if an epoch is already set. Returns ``obj``.
        """
        rng._adapter_for(obj)  # TypeError now rather than at the next epoch
        self._registered[name] = (obj, shared)
        if self.epoch is not None:
            rng.reseed(obj, self.seed(("registered", name), epoch=self.epoch, shared=shared))
        return obj

    def set_epoch(self, epoch: int) -> None:
        """Reseed every registered generator for ``epoch`` (call at each epoch start)."""
        self.epoch = int(epoch)
        for name, (obj, shared) in self._registered.items():
            rng.reseed(obj, self.seed(("registered", name), epoch=self.epoch, shared=shared))
