"""Broken: a scatter-sum with index_put_(accumulate=True) over many duplicate indices
runs in parallel on CPU (2+ threads, float32, >= 32768 elements) with atomic adds, so
the sums' rounding, and the trained embedding, can differ between runs although every
seed is set."""
import torch

torch.manual_seed(3)
torch.set_num_threads(2)


def main():
    table = torch.nn.Parameter(torch.zeros(64, 16))
    opt = torch.optim.SGD([table], lr=0.5)
    for step in range(5):
        idx = torch.randint(0, 64, (200_000,))
        vals = torch.randn(200_000, 16)
        acc = torch.zeros(64, 16)
        acc.index_put_((idx,), vals, accumulate=True)  # duplicate indices: atomic adds
        loss = ((table - acc / 1000) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"step {step} acc-sum {acc.sum().item()!r} loss {loss.item()!r}")
    return table


if __name__ == "__main__":
    main()
