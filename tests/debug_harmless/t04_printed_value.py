import numpy as np
import torch

torch.seed()
print("a random number", torch.rand(1).item())  # HARMLESS: only printed
torch.manual_seed(0)
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
y = torch.from_numpy(np.random.rand(8, 2).astype(np.float32))  # MATTERS: unseeded NumPy targets
loss = (model(torch.ones(8, 4)) - y).pow(2).mean()
opt.zero_grad()
loss.backward()
opt.step()
