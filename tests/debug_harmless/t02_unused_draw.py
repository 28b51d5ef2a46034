import numpy as np
import torch

torch.seed()
unused = torch.rand(5)  # HARMLESS: drawn, never used
torch.manual_seed(0)
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.from_numpy(np.random.rand(8, 4).astype(np.float32))  # MATTERS: an unseeded NumPy batch
loss = model(x).pow(2).mean()
opt.zero_grad()
loss.backward()
opt.step()
