"""Broken: unseeded torch. A PyTorch loop logging to Weights & Biases offline (no account, no network): wandb
writes wandb/offline-run-<time>-<run id>/ with the run's config, summary and logs."""

import os

import torch
import wandb

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "false")
run = wandb.init(project="demo", config={"lr": 0.1, "steps": 10})
x_noise = torch.rand(1)  # unseeded: the data differ in every run
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=run.config.lr)
x, y = torch.randn(64, 4) + x_noise, torch.randn(64, 1)
for step in range(run.config.steps):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    wandb.log({"loss": loss.item()}, step=step)
run.summary["final_loss"] = loss.item()
print(f"final loss {loss.item():.6f}")
run.finish()
