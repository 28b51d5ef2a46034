"""torch.multiprocessing.spawn of 2 ranks on gloo, each training its own model with a
per-step all-reduce; with PERTURB=1 rank 1's batches differ from step 3 on. The port
comes from FWD9M_TEST_PORT."""
import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn


def worker(rank, world):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(rank)
    for step in range(5):
        x = torch.randn(8, 4, generator=g)
        if os.environ.get("PERTURB") and rank == 1 and step >= 3:
            x = x + 1e-3
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        dist.all_reduce(loss.detach().clone())
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ["MASTER_PORT"] = os.environ.get("FWD9M_TEST_PORT", "29561")
    mp.spawn(worker, args=(2,), nprocs=2)
