import numpy as np
import torch

model = torch.nn.Linear(4, 2)  # HARMLESS: unseeded init
torch.manual_seed(0)
model.load_state_dict(torch.nn.Linear(4, 2).state_dict())
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.from_numpy(np.random.rand(8, 4).astype(np.float32))  # MATTERS: an unseeded NumPy batch
loss = model(x).pow(2).mean()
opt.zero_grad()
loss.backward()
opt.step()
