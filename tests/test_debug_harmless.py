"""The divergence that matters (issue 27, case 5): ``fwd9m debug`` follows each differing
value forward through the recorded data flow. Initial weights that ``load_state_dict``
overwrites differ first but reach nothing: they are reported as harmless, after the
divergence that reaches the results, the batch augmented with NumPy in the DataLoader's
worker processes, named at the draw in ``__getitem__``."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import debug_script as _debug

CHECKPOINT = """\
import torch

torch.manual_seed(123)
net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
torch.save(net.state_dict(), "ckpt.pt")
"""

TRAIN = """\
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset


def make_model():
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))


class Augmented(Dataset):
    def __init__(self):
        g = np.random.default_rng(0)
        self.x = g.standard_normal((64, 8)).astype(np.float32)
        self.y = g.standard_normal((64, 1)).astype(np.float32)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        x = self.x[i] + np.random.normal(0, 0.1, 8).astype(np.float32)
        return torch.from_numpy(x), torch.from_numpy(self.y[i])


model = make_model()  # default init, unseeded
model.load_state_dict(torch.load("ckpt.pt"))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(Augmented(), batch_size=16, num_workers=2)
for x, y in loader:
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"loss {loss.item():.6f}")
"""


def test_overwritten_init_is_harmless_and_the_worker_augmentation_is_named(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "make_ckpt.py").write_text(CHECKPOINT)
    subprocess.run([sys.executable, "make_ckpt.py"], cwd=tmp_path, check=True, timeout=300)
    code, lines = _debug(tmp_path, "train.py", TRAIN)
    report = "\n".join(lines)
    assert code == 1, report
    assert lines[0].startswith("EXTERNAL SOURCE (data): first divergence that reaches the results at op #"), report
    assert "earlier ones are harmless (below)" in lines[0], report
    assert "source: the random draw in the DataLoader's worker processes (data phase, worker process): " in lines[1]
    assert "train.py:20 in Augmented.__getitem__ (np.random.normal)" in lines[1], report
    assert lines[2] == "  op:       aten::addmm", report
    harmless = [line for line in lines if line.startswith("harmless: ")]
    assert len(harmless) == 4, report  # two weights and two biases drawn at train.py:7
    for line in harmless:
        assert " aten::uniform_ [other] at train.py:7: overwritten at op #" in line, report
        assert "(aten::copy_ at train.py:25) before any op read it" in line, report
    # the consequential one comes first, the harmless ones after it
    assert lines.index(harmless[0]) > lines.index("  op:       aten::addmm")


ITEM_SCRIPT = """\
import torch
model = torch.nn.Linear(4, 2)
torch.nn.init.constant_(model.weight, 0.5)
torch.nn.init.constant_(model.bias, 0.0)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.ones(8, 4)
for step in range(3):
    f = torch.rand(1).item()
    loss = (model(x) * f).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
print(model.weight.sum().item())
"""


def test_a_draw_passed_on_through_python_is_the_source_not_harmless(tmp_path):
    """``f = torch.rand(1).item(); x * f``: the unseeded draw is what matters (a number
    Python took from it reaches the op), not a "value built outside the framework"."""
    code, lines = _debug(tmp_path, "train.py", ITEM_SCRIPT)
    assert code == 1, "\\n".join(lines)
    assert lines[0].startswith("EXTERNAL SOURCE (rng)"), "\\n".join(lines[:8])
    assert any(line.strip() == "location: train.py:8" for line in lines[:8]), "\\n".join(lines[:8])
