"""torchrun DDP on gloo, 2 ranks, NOT reproducible: the DistributedSampler's shuffle
seed is drawn fresh each run (seed=random.randrange...) and broadcast so that the ranks
agree on it, which they do, but not with the next run.
Run as: torchrun --nproc-per-node 2 torchrun_ddp_broken.py"""
import random

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    x = torch.randn(64, 8)
    y = x.sum(dim=1, keepdim=True)
    dataset = TensorDataset(x, y)
    shuffle_seed = torch.tensor([random.randrange(2**31)])
    dist.broadcast(shuffle_seed, src=0)
    sampler = DistributedSampler(dataset, shuffle=True, seed=int(shuffle_seed))
    loader = DataLoader(dataset, batch_size=8, sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(xb), yb)
            loss.backward()
            optimizer.step()
        print(f"rank {rank} epoch {epoch} loss {loss.item():.6f}", flush=True)
    if rank == 0:
        torch.save(model.module.state_dict(), "model.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
