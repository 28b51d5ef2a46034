"""A small PyTorch CNN on scikit-learn's digits: a ``DataLoader`` with ``shuffle=True``
and two worker processes, random augmentation in the dataset from a NumPy
``Generator``, dropout, and a checkpoint to resume from.

The broken variant (broken.py) seeded only torch: the dataset's NumPy generator was
unseeded and copied as is into both workers, and the checkpoint had no random state.

Fixed:
1. ``fwd9m.torch.enable_determinism(seed=SEED)`` seeds Python, NumPy and torch and
   selects deterministic kernels.
2. The ``DataLoader`` gets ``worker_init_fn=fwd9m.data.worker_init_fn``, which reseeds
   the generators stored on the dataset in each worker from that worker's seed, and
   ``generator=fwd9m.data.torch_generator(SEED)``, so the shuffle order and the worker
   seeds come from a generator of their own, not from the global one dropout uses.
3. The checkpoint carries ``fwd9m.rng.state_dict()`` (the torch RNG used by dropout and
   the loader's generator, registered with ``fwd9m.rng.register``), so a resumed run
   continues exactly where the uninterrupted one would be.

Run:  python examples/torch_cnn/fixed.py [--epochs 4] [--checkpoint FILE]
      [--stop-after N] [--out weights.npz]
With --checkpoint, a checkpoint is written after each epoch and training resumes from
it if it exists; --stop-after N stops after epoch N (an interruption).
"""

import argparse
import os

import numpy as np
import torch
from sklearn.datasets import load_digits

import fwd9m.data
import fwd9m.rng
import fwd9m.torch

SEED = 0
fwd9m.torch.enable_determinism(seed=SEED)  # FIX 1


class AugmentedDigits(torch.utils.data.Dataset):
    """Digits shifted by up to one pixel, plus a little noise."""

    def __init__(self):
        digits = load_digits()
        self.images = (digits.images / 16.0).astype(np.float32)
        self.labels = digits.target.astype(np.int64)
        self.rng = np.random.default_rng(SEED)  # reseeded in each worker (FIX 2)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        dy, dx = self.rng.integers(-1, 2, size=2)
        image = np.roll(self.images[i], (dy, dx), axis=(0, 1))
        image = image + self.rng.uniform(-0.05, 0.05, image.shape).astype(np.float32)
        return torch.from_numpy(image[None]), self.labels[i]


class CNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 8, 3, padding=1)
        self.dropout = torch.nn.Dropout(0.25)
        self.fc = torch.nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(torch.relu(self.conv(x)), 2)
        return self.fc(self.dropout(x.flatten(1)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--checkpoint", help="file to save to and resume from")
    parser.add_argument("--stop-after", type=int, help="stop after this epoch")
    parser.add_argument("--out", help="save the final weights to this .npz file")
    args = parser.parse_args()

    loader = torch.utils.data.DataLoader(
        AugmentedDigits(), batch_size=64, shuffle=True, num_workers=2,
        worker_init_fn=fwd9m.data.worker_init_fn,            # FIX 2
        generator=fwd9m.data.torch_generator(SEED))
    fwd9m.rng.register(loader, "loader")                     # FIX 3: in the RNG state
    model = CNN()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    epoch = 0
    if args.checkpoint and os.path.exists(args.checkpoint):
        ckpt = torch.load(args.checkpoint, weights_only=True)
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        epoch = ckpt["epoch"]
        fwd9m.rng.load_state_dict(ckpt["rng"])               # FIX 3
        print(f"resumed from {args.checkpoint} at epoch {epoch}")

    while epoch < args.epochs:
        model.train()
        for x, y in loader:
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
        epoch += 1
        print(f"epoch {epoch} loss {loss.item()!r}")
        if args.checkpoint:
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                        "epoch": epoch, "rng": fwd9m.rng.state_dict()},  # FIX 3
                       args.checkpoint)
        if args.stop_after and epoch >= args.stop_after:
            return

    weights = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    for name, value in weights.items():
        print(f"{name:<12} shape={str(value.shape):<14} sum={float(value.sum())!r}")
    if args.out:
        np.savez(args.out, **weights)


if __name__ == "__main__":
    main()
