"""PyTorch, reproducible in a fresh folder: the tutorial idiom "resume from the checkpoint
if there is one" (a crashed or preempted job picks up where it stopped), 3 steps, then
the checkpoint is saved for the next resume."""
import os

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
start = 0
if os.path.exists("checkpoint.pt"):
    ckpt = torch.load("checkpoint.pt")
    model.load_state_dict(ckpt["model"])
    optimizer.load_state_dict(ckpt["optimizer"])
    start = ckpt["step"]
    print(f"resumed at step {start}")
x = torch.randn(32, 8)
y = x.sum(dim=1, keepdim=True)
for step in range(start, start + 3):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.6f}")
torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": start + 3}, "checkpoint.pt")
