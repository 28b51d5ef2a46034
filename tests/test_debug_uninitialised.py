"""Values that cannot repeat are not data (issue 27, case 6): memory an allocating op
returns (``torch.empty``, ``new_empty``) holds no value until ops write it whole, and
``set_`` does not read the tensor it repoints (``copy.deepcopy`` of a model calls
``new_empty`` then ``set_``, as Lightning does); a seeded script that does both is
reproducible, and a buffer filled row by row with unseeded NumPy values is an external
source at the line that made them."""

from __future__ import annotations

import pytest
from conftest import debug_script as _debug

SCRIPT = """\
import copy

import numpy as np
import torch

torch.manual_seed(0)
model = torch.nn.Linear(4, 2)
ema = copy.deepcopy(model)  # Tensor.__deepcopy__: new_empty, then set_ onto the copied storage
buf = torch.empty(8, 4)  # uninitialised until its rows are written
for i in range(8):
    buf[i] = ROW
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loss = (model(buf) - ema(buf)).pow(2).mean() + model(buf).pow(2).mean()
opt.zero_grad()
loss.backward()
opt.step()
print(loss.item())
"""


def test_memory_not_yet_written_is_not_compared(tmp_path):
    pytest.importorskip("torch")
    code, lines = _debug(tmp_path, "ema.py", SCRIPT.replace("ROW", "torch.randn(4)"))
    report = "\n".join(lines)
    assert code == 0, report
    assert lines[0].startswith("reproducible: all "), report


def test_a_buffer_filled_with_unseeded_values_names_the_line_that_made_them(tmp_path):
    pytest.importorskip("torch")
    row = "torch.from_numpy(np.random.rand(4).astype(np.float32))"
    code, lines = _debug(tmp_path, "ema.py", SCRIPT.replace("ROW", row))
    report = "\n".join(lines)
    assert code == 1, report
    assert lines[0].startswith("EXTERNAL SOURCE (python): first divergence at op #"), report
    assert lines[4] == "  location: ema.py:11", report
    assert "harmless" not in report
