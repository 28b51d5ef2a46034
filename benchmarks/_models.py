"""The PyTorch models the recording and step-digest benchmarks time: a small CNN and a
transformer block, each with one batch of inputs and labels (the caller seeds torch)."""

from __future__ import annotations


def torch_models() -> list[tuple[str, object]]:
    """``[(name, make)]``; ``make()`` returns ``(model, x, y)``. Imports torch."""
    import torch
    from torch import nn

    def cnn():
        model = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(32, 10),
        )
        return model, torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,))

    def block():
        model = nn.Sequential(
            nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True), nn.Flatten(), nn.Linear(64 * 32, 10)
        )
        return model, torch.randn(16, 32, 64), torch.randint(0, 10, (16,))

    return [("small CNN", cnn), ("transformer block", block)]


def torch_train(model, x, y, opt, steps: int):
    """A plain training loop of ``steps`` cross-entropy steps on one batch, as a closure:
    the baseline every torch recording benchmark times itself against."""
    from torch import nn

    def train():
        for _ in range(steps):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()

    return train
