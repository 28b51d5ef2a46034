"""Data-parallel training (DDP, gloo) whose parameters are the same bit for bit under
any world size that divides 8: a global batch of 8 integer rows split across the
ranks, a loss linear in the weights, so every gradient is a sum of exact products
(integers times powers of two) and DDP's average is exact; with PERTURB=1, rank 1's
rows differ from step 3 on. Run: torchrun --nproc-per-node 1 (or 2)"""

import os

import torch
import torch.distributed as dist
from torch import nn


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(nn.Linear(4, 1, bias=False))
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    rows = 8 // world
    for step in range(8):
        batch = torch.arange(32, dtype=torch.float32).reshape(8, 4).remainder(5 + step) - 2
        x = batch[rank * rows : (rank + 1) * rows]
        if os.environ.get("PERTURB") and rank == 1 and step >= 3:
            x = x + 1
        opt.zero_grad()
        model(x).mean().backward()
        opt.step()
    dist.barrier()
    # the DDP model goes while the process group still holds its own: a Reducer that is the
    # last owner of a gloo group destroys it holding the GIL while gloo's worker thread
    # waits for the GIL to free a finished work's tensors, a deadlock (pytorch#56297)
    del model, opt
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
