"""Checkpoints every step, and ignores SIGTERM (a handler that only logs); its pid goes to
the file named by PID_FILE so that the test can see that nothing is left running."""
import os
import signal
import time

import torch

signal.signal(signal.SIGTERM, lambda signum, frame: print("SIGTERM ignored", flush=True))
with open(os.environ["PID_FILE"], "a") as f:
    f.write(f"{os.getpid()}\n")
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(400):
    loss = model(torch.ones(2, 4)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    torch.save(model.state_dict(), "ckpt.pt")
    time.sleep(0.05)
