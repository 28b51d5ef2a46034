"""Distributed data parallelism: FWD310 (data order per rank), FWD220 (replica buffers)."""

from __future__ import annotations

import ast

from .._flow import local_callees, project_mentions, runs
from .._helpers import kwarg, literal
from .._helpers import walk as _walk
from .._rule import Rule, register

SAMPLER_SRC = "https://github.com/pytorch/pytorch/blob/main/torch/utils/data/distributed.py"
DDP_SRC = "https://github.com/pytorch/pytorch/blob/main/torch/nn/parallel/distributed.py"
_SAMPLERS = frozenset({"torch.utils.data.DistributedSampler", "torch.utils.data.distributed.DistributedSampler"})
_DDP = frozenset({"torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel"})


@register
class DistributedSamplerWithoutSetEpoch(Rule):
    """Shuffles with `DistributedSampler` but never calls `set_epoch`.

    ## What it does
    Flags `DistributedSampler(...)` (shuffling, the default) in a script that runs it
    and never calls `set_epoch(...)` nor `fwd9m.distributed.epochs(...)`, itself or in a
    function of a local module it calls (`from utils import train`, whose body calls
    `sampler.set_epoch(epoch)`). A sampler built in a library function (whose caller
    runs the epochs) is not flagged.

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
    valid = (
        "from torch.utils.data import DistributedSampler\nsampler = DistributedSampler(ds)\n"
        "for epoch in range(3):\n    sampler.set_epoch(epoch)\n",
        "from torch.utils.data import DistributedSampler\ns = DistributedSampler(ds, shuffle=False)\n",
        # a library function: the training script calls set_epoch (timm's loader.py)
        "import torch\ndef create_loader(ds):\n    return torch.utils.data.distributed.DistributedSampler(ds)\n",
    )

    def __init__(self, ctx):
        super().__init__(ctx)
        self.sites: list[ast.Call] = []

    def visit_Call(self, node, qn):
        if qn in _SAMPLERS and literal(kwarg(node, "shuffle"), True) is not False:
            self.sites.append(node)

    def finish(self):
        text = self.ctx.text
        if not self.sites or "set_epoch(" in text or "epochs(" in text:
            return
        if any(
            type(n) is ast.Attribute and n.attr in ("set_epoch", "epochs")
            for _, fn, _, _ in local_callees(self.ctx)
            for n in _walk(fn)
        ):
            return  # a helper of a local module the script calls does it (train(..., sampler))
        # a library module (timm's data/loader.py) builds the sampler; the training
        # script that iterates the epochs calls set_epoch in another file
        for node in self.sites:
            if runs(self.ctx, node):
                self.report(
                    node,
                    "DistributedSampler without set_epoch: every epoch repeats the first "
                    "epoch's order; call sampler.set_epoch(epoch) before each epoch",
                )


#: a model with buffers: normalisation with running statistics, an explicit buffer, or a
#: model from a model zoo (torchvision, timm, transformers), read in the whole project
_BUFFERS = (
    r"BatchNorm|register_buffer|running_mean|running_var|track_running_stats|torchvision\.models|"
    r"from torchvision import models|\btimm\b|\btransformers\b|\bmodel_zoo\b|torch\.hub\.load"
)


@register
class DdpBuffersNotSynchronised(Rule):
    """Turns off DDP's buffer synchronisation.

    ## What it does
    Flags `DistributedDataParallel(..., broadcast_buffers=False)` and
    `forward_sync_buffers=False`, in a project whose models can have buffers (it uses
    BatchNorm, `register_buffer` or a model zoo: a GroupNorm/LayerNorm-only model has
    none to synchronise).

    ## Why is this bad
    DDP all-reduces gradients, not buffers. Buffers updated in `forward` (BatchNorm
    running statistics) follow each rank's own data; with buffer synchronisation off,
    rank 0's buffers are never copied to the other ranks again, so the replicas drift
    apart for good and a checkpoint or evaluation depends on the rank it comes from.

    ## Example
    ```python
    net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8))
    model = DistributedDataParallel(net, broadcast_buffers=False)
    ```

    ## Fix
    Keep buffer synchronisation on (the default), use `torch.nn.SyncBatchNorm` on GPU,
    and check replicas with `fwd9m run --check-replicas N -- torchrun ...`.
    """

    code, name = "FWD220", "ddp-buffers-not-synchronised"
    triggers = ("DistributedDataParallel",)
    references = (DDP_SRC,)
    invalid = (
        "import torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
        "net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8))\n"
        "m = DDP(net, broadcast_buffers=False)\n",
    )
    valid = ("from torch.nn.parallel import DistributedDataParallel as DDP\nm = DDP(net)\n",)

    def visit_Call(self, node, qn):
        if qn not in _DDP:
            return
        for name in ("broadcast_buffers", "forward_sync_buffers"):
            if literal(kwarg(node, name), None) is False and project_mentions(self.ctx, _BUFFERS):
                self.report(
                    node,
                    f"{name}=False: buffers (BatchNorm running statistics) are never "
                    f"synchronised again and the replicas drift apart",
                )
