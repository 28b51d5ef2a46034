"""The training script of bench_distributed's step digest cases: DDP on gloo, an MLP
trained with Adam on each rank's own batches; each rank writes the seconds its timed
steps took (after WARMUP untimed ones) to $BENCH_OUT/rank<r>.time: its CPU seconds (which
the other processes of a shared machine do not inflate), or with FWD9M_BENCH_WALL=1
wall-clock seconds. Run under torchrun."""

import os
import time

import torch
import torch.distributed as dist
from torch import nn

WARMUP, STEPS = 5, int(os.environ.get("BENCH_STEPS", "40"))
CLOCK = time.perf_counter if os.environ.get("FWD9M_BENCH_WALL") else time.process_time


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    width = int(os.environ.get("BENCH_WIDTH", "256"))
    layers = [nn.Linear(32, width), nn.ReLU()]
    for _ in range(3):
        layers += [nn.Linear(width, width), nn.LayerNorm(width), nn.ReLU()]
    model = nn.parallel.DistributedDataParallel(nn.Sequential(*layers, nn.Linear(width, 1)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(rank)
    batches = [torch.randn(64, 32, generator=g) for _ in range(8)]
    start = 0.0
    for step in range(WARMUP + STEPS):
        if step == WARMUP:
            start = CLOCK()
        x = batches[step % len(batches)]
        opt.zero_grad()
        nn.functional.mse_loss(model(x), x[:, :1]).backward()
        opt.step()
    seconds = CLOCK() - start
    with open(os.path.join(os.environ["BENCH_OUT"], f"rank{rank}.time"), "w") as f:
        f.write(str(seconds))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
