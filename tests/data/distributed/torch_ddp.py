"""2-rank DDP (gloo) training of a tiny model, for tests/test_distributed_launch.py.

Launch: python -m torch.distributed.run --nproc-per-node 2 torch_ddp.py [options]

--seed-from seeder   seeds from fwd9m.distributed.seeder() (FWD9M_SEED from `fwd9m run`):
                     shared seed for model init and the sampler, per-rank seed for dropout
--seed-from time     every rank seeds from the clock (the bug)
--drift STEP         rank 1 updates the 'norm.shift' buffer differently at STEP (planted drift)
--check-every N      fwd9m.distributed.watch_replicas(model, opt, every=N, on_mismatch="record")
--report PATH        rank 0 writes the monitor's first divergence there (JSON; null if none)
Rank 0 prints the final loss of every rank and writes rank<r>.pt (the final weights).
"""

import argparse
import json
import time

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, TensorDataset

import fwd9m.distributed as fd

p = argparse.ArgumentParser()
p.add_argument("--seed-from", choices=("seeder", "time"), default="seeder")
p.add_argument("--steps", type=int, default=6)
p.add_argument("--drift", type=int, default=None)
p.add_argument("--check-every", type=int, default=None)
p.add_argument("--report", default=None, help="rank 0 writes the first replica divergence (JSON) here")
args = p.parse_args()

dist.init_process_group("gloo")
rank = dist.get_rank()


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.drop = torch.nn.Dropout(0.2)
        self.fc2 = torch.nn.Linear(16, 1)
        self.register_buffer("shift", torch.zeros(8))  # constant unless drift is planted
        self.drift_now = False

    def forward(self, x):
        if self.drift_now:  # updated in forward, after DDP's buffer sync, like BatchNorm stats
            self.shift.add_(1e-3)
        return self.fc2(self.drop(torch.relu(self.fc1(x - self.shift))))


seeds = fd.seeder()
if args.seed_from == "time":
    torch.manual_seed(time.time_ns() + rank)  # noqa: FWD104 (the bug under test)
else:
    seeds.seed_everything(shared=True)  # same initial weights on every rank
gen = torch.Generator().manual_seed(seeds.seed("data", shared=True))
x = torch.randn(96, 8, generator=gen)
y = x.sum(1, keepdim=True)
if args.seed_from == "time":  # a dataset drawn per rank from the clock-seeded generator
    x = torch.randn(96, 8)
data = TensorDataset(x, y)
net = Net()
if args.seed_from == "time":
    with torch.no_grad():  # weights perturbed per rank and per launch (DDP re-syncs them)
        for p_ in net.parameters():
            p_.add_(torch.randn_like(p_) * 1e-3)
model = torch.nn.parallel.DistributedDataParallel(net)
if args.seed_from == "seeder":
    seeds.seed_everything()  # dropout: distinct per rank
opt = torch.optim.SGD(model.parameters(), lr=0.05)
monitor = fd.watch_replicas(model, opt, every=args.check_every, on_mismatch="record") \
    if args.check_every else None
loader = DataLoader(data, batch_size=8, sampler=fd.sampler(data, seeds))
step = 0
for _epoch in fd.epochs(100, loader):
    for xb, yb in loader:
        step += 1
        net.drift_now = args.drift == step and rank == 1  # rank 1 only: replicas drift apart
        loss = torch.nn.functional.mse_loss(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()  # the monitor checks here, after the update
        if step >= args.steps:
            break
    if step >= args.steps:
        break
losses = [None, None]  # rank 0 prints for both: lines from two processes interleave at random
dist.all_gather_object(losses, f"{loss.item():.8f}")
if rank == 0:
    print(f"final loss per rank: {losses}", flush=True)
torch.save({k: v.detach().clone() for k, v in net.state_dict().items()}, f"rank{rank}.pt")
if monitor is not None and rank == 0:
    print(monitor.first.render() if monitor.first is not None else f"replicas consistent after {monitor.checks} checks",
          flush=True)
if monitor is not None and rank == 0 and args.report:
    with open(args.report, "w") as f:
        json.dump(monitor.first.to_dict() if monitor.first is not None else None, f)
dist.destroy_process_group()
