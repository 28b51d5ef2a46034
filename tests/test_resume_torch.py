"""Done-when: PyTorch with dropout and a DataLoader(shuffle, num_workers=2, random
augmentation from a NumPy Generator on the dataset), 4 epochs == stopped (process
killed) and resumed from a torch checkpoint in a new process, bit for bit: at an epoch
boundary (plain DataLoader + registered loader generator) and in the middle of an
epoch (ResumableSampler + SampleSeeded)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")

SCRIPT = r"""
import hashlib, os, sys
import numpy as np
import torch
import fwd9m
from fwd9m import data, rng

mode, crash_at, ckpt, restore = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
crash_epoch, crash_batch = (int(v) for v in crash_at.split("."))  # "0.0": never
torch.set_num_threads(1)
fwd9m.seed_everything(7)


class Noisy(torch.utils.data.Dataset):
    def __init__(self):
        rs = np.random.RandomState(0)
        self.x = rs.rand(48, 8).astype("float32")
        self.y = rs.rand(48, 1).astype("float32")
        self.rng = np.random.default_rng(0)  # augmentation generator held by the dataset

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        noise = self.rng.standard_normal(8).astype("float32")
        return torch.from_numpy(self.x[i] + 0.1 * noise), torch.from_numpy(self.y[i])


model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Dropout(0.5),
                            torch.nn.Linear(16, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
common = dict(batch_size=8, num_workers=2, worker_init_fn=data.worker_init_fn,
              generator=data.torch_generator(7))
if mode == "epoch":
    ds = Noisy()
    loader = torch.utils.data.DataLoader(ds, shuffle=True, **common)
    rng.register(loader, "loader")
    sampler = None
else:
    ds = data.SampleSeeded(Noisy(), seed=7)
    sampler = data.ResumableSampler(ds, seed=7)
    loader = torch.utils.data.DataLoader(ds, sampler=sampler, **common)

start = 0
if os.path.exists(ckpt):
    ck = torch.load(ckpt, weights_only=True)
    model.load_state_dict(ck["model"])
    opt.load_state_dict(ck["opt"])
    if restore:
        rng.load_state_dict(ck["rng"])
    if sampler is not None:
        sampler.load_state_dict(ck["sampler"])
    start = ck["epoch"]


def save(epoch):
    ck = {"model": model.state_dict(), "opt": opt.state_dict(), "rng": rng.state_dict(),
          "epoch": epoch}
    if sampler is not None:
        ck["sampler"] = sampler.state_dict()
    torch.save(ck, ckpt)


for epoch in range(start, 4):
    if sampler is not None:
        sampler.set_epoch(epoch)
        ds.set_epoch(epoch)
    for b, (xb, yb) in enumerate(loader):
        loss = torch.nn.functional.mse_loss(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if sampler is not None:
            sampler.advance(len(yb))
        if (epoch, b + 1) == (crash_epoch, crash_batch):
            save(epoch)
            os._exit(3)
    if (epoch + 1, 0) == (crash_epoch, crash_batch):
        save(epoch + 1)
        os._exit(3)
h = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters()))
print("DIGEST:" + h.hexdigest())
"""


def _start(script, *args):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    return subprocess.Popen(
        [sys.executable, str(script), *map(str, args)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait(proc, expect=0):
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == expect, err[-3000:]
    return [ln for ln in out.splitlines() if ln.startswith("DIGEST:")][-1] if not expect else None


@pytest.mark.slow  # five fresh interpreters
@pytest.mark.parametrize("mode,crash_at", [("epoch", "2.0"), ("mid", "2.3")])
def test_torch_resume_is_bitwise(tmp_path, mode, crash_at):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    ck, ctrl = tmp_path / "ck.pt", tmp_path / "ctrl.pt"
    procs = [
        _start(script, mode, "0.0", tmp_path / "none.pt", 1),
        _start(script, mode, crash_at, ck, 1),
        _start(script, mode, crash_at, ctrl, 1),
    ]
    ref = _wait(procs[0])
    _wait(procs[1], expect=3)
    _wait(procs[2], expect=3)
    resumed = _start(script, mode, "0.0", ck, 1)
    unrestored = _start(script, mode, "0.0", ctrl, 0)  # control: RNG state not restored
    assert _wait(resumed) == ref
    assert _wait(unrestored) != ref, "control run matched: the test has no teeth"
