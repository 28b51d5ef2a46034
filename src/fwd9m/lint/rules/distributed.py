"""Distributed data parallelism: FWD310 (data order per rank), FWD220 (replica buffers)."""

from __future__ import annotations

from .._helpers import kwarg, literal
from .._rule import Rule, register

SAMPLER_SRC = "https://github.com/pytorch/pytorch/blob/main/torch/utils/data/distributed.py"
DDP_SRC = "https://github.com/pytorch/pytorch/blob/main/torch/nn/parallel/distributed.py"
_SAMPLERS = frozenset({"torch.utils.data.DistributedSampler",
                       "torch.utils.data.distributed.DistributedSampler"})
_DDP = frozenset({"torch.nn.parallel.DistributedDataParallel",
                  "torch.nn.parallel.distributed.DistributedDataParallel"})


@register
class DistributedSamplerWithoutSetEpoch(Rule):
    """Shuffles with `DistributedSampler` but never calls `set_epoch`.

    ## What it does
    Flags `DistributedSampler(...)` (shuffling, the default) in a file that never calls
    `set_epoch(...)` nor `fwd9m.distributed.epochs(...)`.

    ## Why is this bad
    `DistributedSampler` shuffles with a generator seeded by `seed + epoch`; its epoch
    stays 0 until `set_epoch` changes it, so every epoch repeats the first epoch's order
    on every rank. A run resumed at epoch k then does not see the data order the
    uninterrupted run would have seen if the fix is added later.

    ## Example
    ```python
    sampler = DistributedSampler(dataset)
    for epoch in range(10):
        for batch in DataLoader(dataset, sampler=sampler): ...
    ```

    ## Fix
    Call `sampler.set_epoch(epoch)` at the start of every epoch, before iterating the
    loader (or iterate `fwd9m.distributed.epochs(n, sampler)`).
    """

    code, name = "FWD310", "distributed-sampler-set-epoch"
    triggers = ("DistributedSampler",)
    fix_code = "sampler.set_epoch(epoch)"
    references = (SAMPLER_SRC,)
    invalid = ("from torch.utils.data import DistributedSampler\nsampler = DistributedSampler(ds)\n",)
    valid = ("from torch.utils.data import DistributedSampler\nsampler = DistributedSampler(ds)\n"
             "for epoch in range(3):\n    sampler.set_epoch(epoch)\n",
             "from torch.utils.data import DistributedSampler\ns = DistributedSampler(ds, shuffle=False)\n")

    def visit_Call(self, node, qn):
        if qn not in _SAMPLERS or literal(kwarg(node, "shuffle"), True) is False:
            return
        text = self.ctx.text
        if "set_epoch(" not in text and "epochs(" not in text:
            self.report(node, "DistributedSampler without set_epoch: every epoch repeats the first epoch's "
                        "order; call sampler.set_epoch(epoch) before each epoch")


@register
class DdpBuffersNotSynchronised(Rule):
    """Turns off DDP's buffer synchronisation.

    ## What it does
    Flags `DistributedDataParallel(..., broadcast_buffers=False)` and
    `forward_sync_buffers=False`.

    ## Why is this bad
    DDP all-reduces gradients, not buffers. Buffers updated in `forward` (BatchNorm
    running statistics) follow each rank's own data; with buffer synchronisation off,
    rank 0's buffers are never copied to the other ranks again, so the replicas drift
    apart for good and a checkpoint or evaluation depends on the rank it comes from.

    ## Example
    ```python
    model = DistributedDataParallel(net, broadcast_buffers=False)
    ```

    ## Fix
    Keep buffer synchronisation on (the default), use `torch.nn.SyncBatchNorm` on GPU,
    and check replicas with `fwd9m run --check-replicas N -- torchrun ...`.
    """

    code, name = "FWD220", "ddp-buffers-not-synchronised"
    triggers = ("DistributedDataParallel",)
    references = (DDP_SRC,)
    invalid = ("from torch.nn.parallel import DistributedDataParallel as DDP\n"
               "m = DDP(net, broadcast_buffers=False)\n",)
    valid = ("from torch.nn.parallel import DistributedDataParallel as DDP\nm = DDP(net)\n",)

    def visit_Call(self, node, qn):
        if qn not in _DDP:
            return
        for name in ("broadcast_buffers", "forward_sync_buffers"):
            if literal(kwarg(node, name), None) is False:
                self.report(node, f"{name}=False: buffers (BatchNorm running statistics) are never "
                            f"synchronised again and the replicas drift apart")
