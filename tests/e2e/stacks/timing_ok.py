"""Reproducible training that also reports how long it took: prints the wall-clock start
time and the elapsed time, writes a JSON log with a runtime field, and TensorBoard
events; only those values change between runs."""
import json
import time
from datetime import datetime

import torch
from torch import nn
from torch.utils.tensorboard import SummaryWriter

print(f"started at {datetime.now()}")
start = time.perf_counter()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
x = torch.randn(64, 8)
y = x.sum(dim=1, keepdim=True)
writer = SummaryWriter("runs/exp")
for step in range(20):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    writer.add_scalar("loss", loss.item(), step)
writer.close()
runtime = time.perf_counter() - start
print(f"final loss {loss.item():.7f}")
print(f"training took {runtime:.3f} seconds")
with open("metrics.json", "w") as f:
    json.dump({"loss": loss.item(), "steps": 20, "runtime": runtime,
               "finished": datetime.now().isoformat()}, f, indent=2)
torch.save(model.state_dict(), "model.pt")
