import numpy as np
import torch

torch.seed()
model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5), torch.nn.Linear(4, 1))  # HARMLESS
model.eval()  # dropout in eval mode draws nothing
print("before loading", model(torch.ones(2, 4)).sum().item())
torch.manual_seed(0)
ref = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5), torch.nn.Linear(4, 1))
model.load_state_dict(ref.state_dict())
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.from_numpy(np.random.rand(8, 4).astype(np.float32))  # MATTERS: an unseeded NumPy batch
loss = model(x).pow(2).mean()
opt.zero_grad()
loss.backward()
opt.step()
