"""accelerate on 2 CPU processes (gloo), the model prepared for DDP; with PERTURB=1
rank 1's batches differ from step 3 on."""
import os
import torch
from accelerate import Accelerator
from torch import nn

acc = Accelerator(cpu=True)
torch.manual_seed(0)
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
model, opt = acc.prepare(model, opt)
g = torch.Generator().manual_seed(acc.process_index)
for step in range(5):
    x = torch.randn(8, 4, generator=g)
    if os.environ.get("PERTURB") and acc.process_index == 1 and step >= 3:
        x = x + 1e-3
    opt.zero_grad()
    acc.backward(model(x).pow(2).mean())
    opt.step()
