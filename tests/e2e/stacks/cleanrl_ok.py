"""A CleanRL-style single-file script: argparse, seeds set by hand, a TensorBoard
SummaryWriter under runs/<exp>__<seed>__<time>, the SPS printed and logged as charts/SPS."""

import argparse
import random
import time

import numpy as np
import torch
from torch.utils.tensorboard import SummaryWriter

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=1)
parser.add_argument("--total-timesteps", type=int, default=200)
args = parser.parse_args()
run_name = f"cleanrl__{args.seed}__{int(time.time())}"
writer = SummaryWriter(f"runs/{run_name}")
random.seed(args.seed)
np.random.seed(args.seed)
torch.manual_seed(args.seed)
torch.backends.cudnn.deterministic = True

q = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
opt = torch.optim.Adam(q.parameters(), lr=1e-3)
start_time = time.time()
obs = torch.tensor(np.random.randn(4), dtype=torch.float32)
for global_step in range(args.total_timesteps):
    action = random.randint(0, 1)
    reward = float(np.random.rand())
    target = torch.tensor(reward)
    loss = (q(obs)[action] - target) ** 2
    opt.zero_grad()
    loss.backward()
    opt.step()
    obs = torch.tensor(np.random.randn(4), dtype=torch.float32)
    if global_step % 50 == 0:
        writer.add_scalar("losses/td_loss", loss.item(), global_step)
        print("SPS:", int(global_step / (time.time() - start_time + 1e-9)))
        writer.add_scalar("charts/SPS", int(global_step / (time.time() - start_time + 1e-9)), global_step)
writer.close()
torch.save(q.state_dict(), f"runs/{run_name}/q.pt")
