"""Broken: a NumPy Generator made with np.random.default_rng() and no seed draws the
mini-batch order; it takes fresh OS entropy in every run, whatever else is seeded."""
import numpy as np
import torch
from torch import nn

torch.manual_seed(5)
np.random.seed(5)

rng = np.random.default_rng()  # no seed: OS entropy
x = torch.randn(200, 3)
y = (x[:, :1] > 0).float()
model = nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.2)
for epoch in range(3):
    order = rng.permutation(len(x))
    for start in range(0, len(x), 40):
        b = torch.from_numpy(order[start : start + 40])
        opt.zero_grad()
        loss = nn.functional.binary_cross_entropy_with_logits(model(x[b]), y[b])
        loss.backward()
        opt.step()
    print(f"epoch {epoch} loss {loss.item():.6f}")
