"""Who am I in a distributed run: the rank and world size of this process, from an
initialised ``torch.distributed`` (only if torch is already imported) or the launcher's
variables. Imports nothing of fwd9m but its errors: ``environment``, ``steps`` and
``distributed`` (the seeds and samplers that follow from a rank) read it.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from .errors import ConfigurationError

__all__ = ["ENV_SOURCES", "RankInfo", "rank_info"]

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
