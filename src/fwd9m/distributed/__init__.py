"""Distributed training: ranks, rank-aware seeds, samplers and replica consistency.

Data-parallel training adds three ways to lose reproducibility: seeds (ranks must
agree on some, such as initial weights, and differ on others, such as dropout and
augmentation), data order (each rank's shard, and every epoch's shuffle), and replicas
that silently drift apart. This module covers all three without importing a framework
at import time:

>>> import fwd9m.distributed as fd                                 # doctest: +SKIP
>>> seeds = fd.seeder()                  # after init_process_group; FWD9M_SEED from `fwd9m run`
>>> seeds.seed_everything(shared=True)   # model init identical on every rank
>>> model = DDP(Net())
>>> seeds.seed_everything()              # dropout/augmentation: distinct per rank
>>> loader = DataLoader(data, sampler=fd.sampler(data, seeds))
>>> monitor = fd.watch_replicas(model, optimizer, every=10)
>>> for epoch in fd.epochs(3, loader): ...

Launch with ``fwd9m run --seed 0 -- torchrun --nproc-per-node 2 train.py`` (or inside each
rank: ``torchrun --nproc-per-node 2 -m fwd9m run --seed 0 train.py``;
``--check-replicas N`` checks every rank's replicas each ``N`` optimizer steps), and
check a launch with ``fwd9m check -- torchrun --nproc-per-node 2 train.py`` (the final
state is compared rank by rank). To find the first op where two launches diverge, record
one trace per rank (``fwd9m run --record-ranks runA -- torchrun ...``, or
:func:`record_rank`) and compare rank by rank: ``fwd9m debug diff runA runB``
(:func:`diff_ranks`); collectives appear in the traces as ops.
"""

from __future__ import annotations

from ._debug import ENV_RECORD_RANKS, RankDiff, diff_ranks, record_rank
from ._ranks import RankInfo, epochs, rank_info, sampler, seeder, set_epoch
from ._replicas import (
    ENV_CHECK_REPLICAS,
    ReplicaDiff,
    ReplicaMonitor,
    ReplicaReport,
    check_replicas,
    keras_callback,
    watch_replicas,
)

__all__ = [
    "RankInfo",
    "rank_info",
    "seeder",
    "sampler",
    "set_epoch",
    "epochs",
    "check_replicas",
    "ReplicaReport",
    "ReplicaDiff",
    "ReplicaMonitor",
    "watch_replicas",
    "keras_callback",
    "ENV_CHECK_REPLICAS",
    "record_rank",
    "diff_ranks",
    "RankDiff",
    "ENV_RECORD_RANKS",
]
