"""Broken: a Dataset augments with the global NumPy RNG inside DataLoader workers
(num_workers=2). The script seeds NumPy and random, but each worker reseeds NumPy from
torch's base seed, and torch is never seeded, so the augmentation (and the trained
weights) differ between runs. The model starts from zeros, so the workers are the only
source."""
import random

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

np.random.seed(7)
random.seed(7)


class NoisyPoints(Dataset):
    def __init__(self, n=256):
        self.x = torch.linspace(-1, 1, n).unsqueeze(1)
        self.y = 3 * self.x + 0.5

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        jitter = np.random.normal(0, 0.1, size=1).astype(np.float32)  # global NumPy RNG
        return self.x[i] + torch.from_numpy(jitter), self.y[i]


def main():
    model = nn.Linear(1, 1)
    nn.init.zeros_(model.weight)
    nn.init.zeros_(model.bias)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(NoisyPoints(), batch_size=32, shuffle=False, num_workers=2)
    for epoch in range(2):
        for x, y in loader:
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
        print(f"epoch {epoch} loss {loss.item():.6f}")
    print("weight", model.weight.item(), "bias", model.bias.item())


if __name__ == "__main__":
    main()
