"""A 2-rank DDP training (gloo, CPU) that is reproducible, in which every rank prints its
own loss at each step, without a rank prefix. Which rank prints first alternates from
launch to launch (a counter in $ORDER_FILE, read by rank 0 and broadcast), so the ranks'
lines in torchrun's shared stdout come in another order in each launch, for certain.
``--noisy-rank R``: rank R also prints an unseeded random number (its own output then
differs between launches; the training does not). ``--crash-rank R``: rank R raises at
start-up (its traceback goes to its own stderr).
"""

import argparse
import os
import random

import torch
import torch.distributed as dist

p = argparse.ArgumentParser()
p.add_argument("--noisy-rank", type=int, default=None)
p.add_argument("--crash-rank", type=int, default=None)
args = p.parse_args()
if args.crash_rank is not None and int(os.environ["RANK"]) == args.crash_rank:
    raise RuntimeError(f"planted crash on rank {args.crash_rank}")

dist.init_process_group("gloo")
rank = dist.get_rank()
n = torch.zeros(1, dtype=torch.int64)
if rank == 0:
    path = os.environ["ORDER_FILE"]
    n[0] = int(open(path).read()) if os.path.exists(path) else 0
    with open(path, "w") as f:
        f.write(str(int(n[0]) + 1))
dist.broadcast(n, 0)
first = int(n[0]) % 2
del n  # not part of the training state

torch.manual_seed(0)
model = torch.nn.Linear(4, 2)
ddp = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
g = torch.Generator().manual_seed(rank)
for step in range(3):
    x = torch.randn(8, 4, generator=g)
    loss = ddp(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    for turn in (first, 1 - first):  # one rank prints, then the other
        if rank == turn:
            print(f"step {step} loss {loss.item():.6f}", flush=True)
        dist.barrier()
if rank == args.noisy_rank:
    print(f"noise {random.random()}", flush=True)
dist.destroy_process_group()
