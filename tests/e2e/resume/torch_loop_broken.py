"""A plain PyTorch loop whose resume is not exact: the checkpoint (every 3 steps) holds the
model and the optimizer only, so the shuffle order and the dropout masks after a resume
come from a torch generator that was not restored."""
import argparse
import os

import torch
from torch.utils.data import DataLoader, TensorDataset

p = argparse.ArgumentParser()
p.add_argument("--resume", action="store_true")
p.add_argument("--steps", type=int, default=10)
args = p.parse_args()

torch.manual_seed(0)
ds = TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Dropout(0.5), torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
loader = DataLoader(ds, batch_size=8, shuffle=True, num_workers=2)

step = 0
if args.resume and os.path.exists("ckpt.pt"):
    ckpt = torch.load("ckpt.pt")
    model.load_state_dict(ckpt["model"])
    opt.load_state_dict(ckpt["opt"])
    step = ckpt["step"]
    print(f"resumed from step {step}")

while step < args.steps:
    for x, y in loader:
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        print(f"step {step} loss {loss.item():.8f}")
        if step % 3 == 0:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step}, "ckpt.pt")
        if step == args.steps:
            break
torch.save(model.state_dict(), "model.pt")
