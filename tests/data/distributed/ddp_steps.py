"""Two ranks on gloo, each training its own copy of a model on its own batches, the loss
averaged across ranks every step (a collective each step, as in any data-parallel job);
with PERTURB=1, rank 1's batches differ from step 3 on. With EXITS=DIR, each rank writes
DIR/rank<r> (its pid and the time) as it exits on its own (atexit: not when a signal
kills it). Run: torchrun --nproc-per-node 2"""

import atexit
import os
import time

import torch
import torch.distributed as dist
from torch import nn


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    if os.environ.get("EXITS"):
        path = os.path.join(os.environ["EXITS"], f"rank{rank}")
        atexit.register(lambda: open(path, "w").write(f"{os.getpid()} {time.time()}"))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(100 + rank)
    for step in range(8):
        x = torch.randn(8, 8, generator=g)
        if os.environ.get("PERTURB") and rank == 1 and step >= 3:
            x = x + 1e-3
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), x.sum(1, keepdim=True))
        loss.backward()
        opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)  # the job's own collective, every step
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
