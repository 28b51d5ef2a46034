"""Who am I in a distributed run, and the seeds and samplers that follow from it.

Nothing here imports a framework: torch is consulted only when it is already imported.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .._log import logger
from ..errors import ConfigurationError

__all__ = ["RankInfo", "rank_info", "seeder", "sampler", "set_epoch", "epochs"]

#: (source, rank, world size, local rank, local world size) environment variables,
#: tried in this order after an initialised ``torch.distributed``:
#:
#: - ``torchrun`` / ``python -m torch.distributed.run`` set ``RANK``, ``WORLD_SIZE``,
#:   ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE`` for every worker
#:   (``_start_workers`` in
#:   https://github.com/pytorch/pytorch/blob/main/torch/distributed/elastic/agent/server/local_elastic_agent.py);
#: - ``horovodrun`` (Gloo launcher) sets ``HOROVOD_RANK``, ``HOROVOD_SIZE``,
#:   ``HOROVOD_LOCAL_RANK``, ``HOROVOD_LOCAL_SIZE``
#:   (``create_slot_env_vars`` in https://github.com/horovod/horovod/blob/master/horovod/runner/gloo_run.py);
#: - Open MPI's ``mpirun`` (also behind ``horovodrun --mpi``) sets
#:   ``OMPI_COMM_WORLD_RANK``, ``OMPI_COMM_WORLD_SIZE``, ``OMPI_COMM_WORLD_LOCAL_RANK``,
#:   ``OMPI_COMM_WORLD_LOCAL_SIZE`` (https://docs.open-mpi.org/en/main/tuning-apps/environment-var.html).
ENV_SOURCES = (
    ("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"),
    ("horovod", "HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE"),
    ("mpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
    # SLURM's srun, last: a launcher started under srun (torchrun) sets RANK of its own.
    # SLURM_PROCID "the MPI rank (or relative process ID) of the current process",
    # SLURM_NTASKS, SLURM_LOCALID "node local task ID" (OUTPUT ENVIRONMENT VARIABLES,
    # https://slurm.schedmd.com/srun.html); no plain count of tasks on this node
    # (SLURM_NTASKS_PER_NODE may read "2(x3)")
    ("slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", ""),
)


@dataclass(frozen=True)
class RankInfo:
    """This process's place in a distributed run.

    ``rank`` in ``[0, world_size)``; ``local_rank`` on this machine (None when the
    launcher does not say); ``source``: where it came from (``"torch.distributed"``,
    ``"torchrun"``, ``"horovod"``, ``"mpi"``, ``"TF_CONFIG"`` or ``"single"``);
    ``role``: the TF_CONFIG task type (``"chief"``, ``"worker"``, ``"ps"``,
    ``"evaluator"``), else None.
    """

    rank: int = 0
    world_size: int = 1
    local_rank: int | None = None
    local_world_size: int | None = None
    source: str = "single"
    role: str | None = None

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """True on rank 0 (the process that should write checkpoints and logs)."""
        return self.rank == 0


def _int(env: Mapping[str, str], name: str) -> int | None:
    raw = env.get(name)
    if raw in (None, ""):
        return None
    try:
        return int(raw)
    except ValueError:
        raise ConfigurationError(
            f"environment variable {name}={raw!r} is not an integer; the launcher that set it is misconfigured"
        ) from None


def _from_tf_config(raw: str) -> RankInfo:
    """TF_CONFIG's task -> a rank, as ``multi_worker_util.id_in_cluster`` numbers tasks:
    the chief is 0 and workers follow it (``task_id + len(chief)``); ps and evaluator
    tasks are numbered within their own job
    (https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/distribute/multi_worker_util.py).
    """
    try:
        cfg = json.loads(raw)
        cluster, task = cfg.get("cluster") or {}, cfg.get("task") or {}
        kind, index = task.get("type"), int(task.get("index", 0))
    except (ValueError, TypeError, AttributeError) as exc:
        raise ConfigurationError(
            f"TF_CONFIG is not valid JSON with 'cluster' and 'task' ({exc}); "
            f"see https://www.tensorflow.org/guide/distributed_training"
            f"#setting_up_the_tf_config_environment_variable"
        ) from None
    if kind in ("chief", "worker"):
        chiefs = len(cluster.get("chief", []))
        rank = 0 if kind == "chief" else index + chiefs
        return RankInfo(rank, chiefs + len(cluster.get("worker", [])), None, None, "TF_CONFIG", kind)
    size = max(len(cluster.get(kind, [])), index + 1) if kind else 1
    return RankInfo(index, size, None, None, "TF_CONFIG", kind)


def rank_info(environ: Mapping[str, str] | None = None) -> RankInfo:
    """Rank and world size of this process.

    Looks, in order, at an initialised ``torch.distributed`` process group (only if
    torch is already imported), the variables of :data:`ENV_SOURCES` (torchrun,
    Horovod, Open MPI), then ``TF_CONFIG`` (MultiWorkerMirroredStrategy); otherwise a
    single process (rank 0 of 1). Imports nothing.

    Args:
        environ: variables to read instead of ``os.environ`` (then an initialised
            ``torch.distributed`` is not consulted either).

    Raises:
        ConfigurationError: a variable is not an integer, TF_CONFIG is malformed, or
            the rank is outside ``[0, world_size)``.
    """
    env = os.environ if environ is None else environ
    info = None
    dist = getattr(sys.modules.get("torch"), "distributed", None) if environ is None else None
    if dist is not None and dist.is_available() and dist.is_initialized():
        local = _int(env, "LOCAL_RANK")
        info = RankInfo(
            dist.get_rank(), dist.get_world_size(), local, _int(env, "LOCAL_WORLD_SIZE"), "torch.distributed"
        )
    if info is None:
        for source, r, w, lr, lw in ENV_SOURCES:
            rank, world = _int(env, r), _int(env, w)
            if rank is not None and world is not None:
                info = RankInfo(rank, world, _int(env, lr), _int(env, lw), source)
                break
    if info is None and env.get("TF_CONFIG"):
        info = _from_tf_config(env["TF_CONFIG"])
    info = info or RankInfo()
    if not 0 <= info.rank < info.world_size:
        raise ConfigurationError(
            f"rank {info.rank} is outside [0, world_size={info.world_size}) "
            f"(from {info.source}); check the launcher's settings"
        )
    return info


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
