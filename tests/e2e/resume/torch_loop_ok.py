"""A plain PyTorch loop that resumes exactly: model, optimizer, sampler position and every
RNG stream go into the checkpoint (every 3 steps); `--resume` loads it."""
import argparse
import os

import torch
from torch.utils.data import DataLoader, TensorDataset

import fwd9m
import fwd9m.data

p = argparse.ArgumentParser()
p.add_argument("--resume", action="store_true")
p.add_argument("--steps", type=int, default=10)
args = p.parse_args()

fwd9m.seed_everything(0)
ds = TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Dropout(0.5), torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
sampler = fwd9m.data.ResumableSampler(ds, seed=0)
loader = DataLoader(ds, batch_size=8, sampler=sampler, num_workers=2, generator=fwd9m.data.torch_generator(0))

step = 0
if args.resume and os.path.exists("ckpt.pt"):
    ckpt = torch.load("ckpt.pt")
    model.load_state_dict(ckpt["model"])
    opt.load_state_dict(ckpt["opt"])
    sampler.load_state_dict(ckpt["sampler"])
    fwd9m.rng.load_state_dict(ckpt["rng"])
    step = ckpt["step"]
    print(f"resumed from step {step}")

while step < args.steps:
    sampler.set_epoch(step * 8 // len(ds))
    for x, y in loader:
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sampler.advance(len(x))
        step += 1
        print(f"step {step} loss {loss.item():.8f}")
        if step % 3 == 0:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "sampler": sampler.state_dict(),
                        "rng": fwd9m.rng.state_dict(), "step": step}, "ckpt.pt")
        if step == args.steps:
            break
torch.save(model.state_dict(), "model.pt")
