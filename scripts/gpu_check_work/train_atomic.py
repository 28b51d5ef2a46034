"""gpu-check workload: a small training whose pooling sums 200,000 rows into 8 slots.

On CUDA the pooling is ``Tensor.index_add_``, whose kernel adds with float atomics: the
order of the additions, hence the low bits of the sums, changes from run to run unless
the determinism switch picks the sorted kernel (catalog ``torch.index-add``).

The device is ``$FWD9M_GPU_CHECK_DEVICE`` (default ``cuda:0``). On ``cpu`` (the dry run
and the tests) the one CUDA call is replaced by CPU_STAND_IN_FOR_CUDA_ATOMICS:
``index_put_(accumulate=True)`` on a CPU tensor, which accumulates in a thread-dependent
order with 2+ threads and is deterministic under the switch (catalog
``torch.index-put-accumulate``). Nothing else differs between the two.
"""

from __future__ import annotations

import os

import torch

DEVICE = os.environ.get("FWD9M_GPU_CHECK_DEVICE", "cuda:0")
ROWS, SLOTS, WIDTH, STEPS = 200_000, 8, 16, 6


def pool(rows: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Sum ``rows`` into ``SLOTS`` slots by ``index``."""
    out = torch.zeros(SLOTS, WIDTH, device=rows.device)
    if rows.device.type == "cuda":
        return out.index_add_(0, index, rows)  # float atomicAdd on CUDA
    return CPU_STAND_IN_FOR_CUDA_ATOMICS(out, index, rows)


def CPU_STAND_IN_FOR_CUDA_ATOMICS(out, index, rows):  # noqa: N802 - named to be seen
    """Accumulation whose order depends on thread timing, as atomics' order does on a GPU:
    at least two threads (a one-core machine would otherwise run it in order)."""
    torch.set_num_threads(max(2, torch.get_num_threads()))
    return out.index_put_((index,), rows, accumulate=True)


def main() -> None:
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    index = torch.randint(0, SLOTS, (ROWS,), generator=gen).to(DEVICE)
    data = torch.randn(ROWS, WIDTH, generator=gen).to(DEVICE)
    model = torch.nn.Linear(WIDTH, WIDTH).to(DEVICE)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(STEPS):
        opt.zero_grad()
        loss = pool(model(data), index).square().mean()
        loss.backward()
        opt.step()
        print(f"step {step} loss {loss.item():.9e}")
    torch.save(model.state_dict(), "model.pt")


if __name__ == "__main__":
    main()
