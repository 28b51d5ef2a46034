import random

import torch

torch.seed()
torch.randn(3, 3)  # HARMLESS: a draw never used
torch.manual_seed(0)
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=random.uniform(0.01, 0.1))
loss = model(torch.ones(8, 4)).pow(2).mean()
opt.zero_grad()
loss.backward()
opt.step()  # MATTERS: a learning rate drawn from Python's random
