"""A plain PyTorch loop, reproducible, whose output and files follow the clock: nested
tqdm bars on stdout (the inner one, leave=False, redraws its own row), logging to stdout
with the time, a rate that flips between it/s and s/it, and a run folder and a log file
named by the start time."""
import logging
import os
import sys
import time
from datetime import datetime

import torch
from torch import nn
from tqdm import tqdm, trange

logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
run = datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
os.makedirs(f"checkpoints/{run}")
log = open(f"train_{time.strftime('%Y%m%d-%H%M%S')}.log", "w")
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
x = torch.randn(256, 8)
y = x.sum(dim=1, keepdim=True)
for epoch in trange(2, desc="epochs", file=sys.stdout):
    for i in tqdm(range(0, 256, 8), desc=f"epoch {epoch}", leave=False, file=sys.stdout, mininterval=0.005):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x[i : i + 8]), y[i : i + 8])
        loss.backward()
        optimizer.step()
        time.sleep(0.001 * (os.getpid() % 4))  # how often the bar redraws follows the clock
    logging.info("epoch %d loss %.6f", epoch, loss.item())
    print(f"epoch {epoch} loss {loss.item():.6f}", file=log, flush=True)
    torch.save(model.state_dict(), f"checkpoints/{run}/epoch{epoch}.pt")
print(f"final loss {loss.item():.7f}")
