"""Training script whose data order changes between runs: the batches are shuffled with
an unseeded numpy Generator, while torch itself is seeded."""
import numpy as np
import torch
from torch import nn

torch.manual_seed(0)
data = np.linspace(-1, 1, 64 * 3, dtype=np.float32).reshape(64, 3)
target = data.sum(1, keepdims=True)
order = np.random.default_rng().permutation(len(data))  # unseeded: differs per run  # noqa: FWD103
model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(4):
    idx = order[step * 16:(step + 1) * 16]
    xb, yb = torch.from_numpy(data[idx]), torch.from_numpy(target[idx])
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(xb), yb)
    loss.backward()
    opt.step()
print(loss.item())
