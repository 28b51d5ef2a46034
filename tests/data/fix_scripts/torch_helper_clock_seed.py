"""Broken: the seed comes from the clock, inside a helper module the script imports
(helpers/seeding.py: set_seed() uses time.time()), so the model's initial weights and
the data differ between runs."""
import torch
from torch import nn

from helpers.seeding import set_seed

set_seed()

model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
x = torch.randn(128, 4)
y = x.sum(dim=1, keepdim=True)
for step in range(20):
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
print("final loss", loss.item())
