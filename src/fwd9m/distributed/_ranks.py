"""The seeds and samplers that follow from this process's rank (:mod:`fwd9m._ranks`).

Nothing here imports a framework: torch is consulted only when it is already imported.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from typing import Any

from .._log import logger
from .._ranks import RankInfo, rank_info
from ..errors import ConfigurationError

__all__ = ["RankInfo", "rank_info", "seeder", "sampler", "set_epoch", "epochs"]


def _torch_dist():
    dist = getattr(sys.modules.get("torch"), "distributed", None)
    return dist if dist is not None and dist.is_available() and dist.is_initialized() else None


def seeder(seed: int | None = None, *, info: RankInfo | None = None):
    """A :class:`fwd9m.Seeder` for this rank: ``Seeder(seed, rank=r, world_size=n)``.

    Use ``shared=True`` seeds for what every rank must agree on (initial weights, the
    global shuffle of :func:`sampler`) and per-rank seeds for the rest (dropout,
    augmentation)::

        s = fwd9m.distributed.seeder()       # after init_process_group
        s.seed_everything(shared=True)       # model init: identical on every rank
        model = DDP(Net())
        s.seed_everything()                  # dropout/augmentation: distinct per rank

    Args:
        seed: base seed. None: ``FWD9M_SEED`` (set by ``fwd9m run``); if that is unset
            and ``torch.distributed`` is initialised, rank 0 draws a fresh seed and
            broadcasts it, so shared seeds still agree (the seed is logged).
        info: rank and world size (default :func:`rank_info`).

    Raises:
        ConfigurationError: no seed, no ``FWD9M_SEED`` and several ranks without an
            initialised ``torch.distributed`` to agree on one (each rank would draw
            its own, and "shared" seeds would differ).
    """
    import secrets

    from ..seed import MAX_SEED, Seeder, current_seed

    info = info or rank_info()
    if seed is None:
        seed = current_seed()
    if seed is None and info.distributed:
        dist = _torch_dist()
        if dist is None:
            raise ConfigurationError(
                f"rank {info.rank} of {info.world_size} has no seed: every rank would draw its "
                f"own and seeds meant to be shared would differ.\n"
                f"Fix: fwd9m.distributed.seeder(seed=1234), or launch with "
                f"`fwd9m run --seed 1234 -- ...` (exports FWD9M_SEED to every rank)"
            )
        box = [secrets.randbelow(MAX_SEED + 1) if info.rank == 0 else None]
        dist.broadcast_object_list(box, src=0)
        seed = int(box[0])
        logger.warning(
            "seeder: no seed given and FWD9M_SEED unset; rank 0 drew %d for all "
            "ranks. Pass seed=%d to repeat this run.",
            seed,
            seed,
        )
    return Seeder(seed, rank=info.rank, world_size=info.world_size)


def sampler(dataset: Any, seeds: Any = None, *, shuffle: bool = True, drop_last: bool = False):
    """A ``torch.utils.data.DistributedSampler`` for this rank, seeded from a shared
    :class:`~fwd9m.Seeder` seed (the same permutation on every rank, so shards do not
    overlap).

    ``DistributedSampler`` shuffles with ``seed + epoch``: without ``set_epoch`` each
    epoch repeats the first epoch's order (its ``set_epoch`` docstring,
    https://github.com/pytorch/pytorch/blob/main/torch/utils/data/distributed.py);
    call :func:`set_epoch` or iterate :func:`epochs`. The seed is 62 bits wide so that
    ``seed + epoch`` stays within ``torch.Generator.manual_seed``'s 64-bit range.

    Args:
        dataset: a map-style dataset (``len`` and ``__getitem__``).
        seeds: a Seeder (default :func:`seeder`); its rank and world size are used.
    """
    from torch.utils.data.distributed import DistributedSampler

    s = seeds if seeds is not None else seeder()
    return DistributedSampler(
        dataset,
        num_replicas=s.world_size,
        rank=s.rank,
        shuffle=shuffle,
        seed=s.seed("DistributedSampler", shared=True, bits=62),
        drop_last=drop_last,
    )


def _epoch_targets(obj: Any) -> list[Any]:
    """Objects with ``set_epoch`` reachable from ``obj`` (itself, or a DataLoader's
    sampler / batch sampler / dataset)."""
    out = []
    if callable(getattr(obj, "set_epoch", None)):
        out.append(obj)
    for attr in ("sampler", "batch_sampler", "dataset"):
        inner = getattr(obj, attr, None)
        if inner is not None and inner is not obj:
            for t in [inner] + [getattr(inner, "sampler", None)]:
                if t is not None and callable(getattr(t, "set_epoch", None)) and all(t is not o for o in out):
                    out.append(t)
    return out


def set_epoch(epoch: int, *objs: Any) -> list[str]:
    """Call ``set_epoch(epoch)`` on each object, or on what it holds (a DataLoader's
    sampler, batch sampler and dataset): DistributedSampler, :class:`fwd9m.Seeder`,
    :class:`fwd9m.data.SampleSeeded`, :class:`fwd9m.data.ResumableSampler`.

    Returns:
        The type names of the objects whose ``set_epoch`` was called.

    Raises:
        TypeError: an object with nothing to set the epoch on.
    """
    done = []
    for obj in objs:
        targets = _epoch_targets(obj)
        if not targets:
            raise TypeError(f"{type(obj).__name__} has no set_epoch (nor a sampler or dataset with one)")
        for t in targets:
            t.set_epoch(int(epoch))
            done.append(type(t).__name__)
    return done


def epochs(n: int | Iterable[int], *objs: Any) -> Iterator[int]:
    """``for epoch in epochs(3, loader, seeds): ...``: yields each epoch after calling
    :func:`set_epoch` on ``objs``, so no epoch is ever started with the previous
    epoch's order. ``n``: a count (epochs ``0..n-1``) or an iterable of epoch numbers
    (``range(start, stop)`` to resume)."""
    for epoch in range(n) if isinstance(n, int) else n:
        set_epoch(epoch, *objs)
        yield epoch
