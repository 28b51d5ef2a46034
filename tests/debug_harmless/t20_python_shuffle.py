import random

import torch

model = torch.nn.Linear(4, 1)  # HARMLESS: unseeded init, replaced
torch.manual_seed(0)
model.load_state_dict(torch.nn.Linear(4, 1).state_dict())
data = torch.arange(32, dtype=torch.float32).reshape(8, 4)
order = list(range(8))
random.shuffle(order)
batch = data[torch.tensor(order[:4])]  # MATTERS: a batch chosen by Python's random
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loss = model(batch).pow(2).mean()
opt.zero_grad()
loss.backward()
opt.step()
