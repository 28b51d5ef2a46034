import numpy as np
import torch

torch.seed()
buf = torch.empty(8, 1).normal_()  # HARMLESS: zeroed before use
buf.zero_()
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
target = buf + torch.from_numpy(np.random.rand(8, 1).astype(np.float32))  # MATTERS
loss = (model(torch.ones(8, 4)) - target).pow(2).mean()
opt.zero_grad()
loss.backward()
opt.step()
