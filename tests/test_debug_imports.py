"""Frameworks found from what the script imports, transitively (issue 27, case 6): a
script that imports only a library training through a framework (``transformers``,
``lightning``, ``flax``) is recorded with that framework, and one that imports none
itself is read through the modules beside it that it imports."""

from __future__ import annotations

import pytest
from conftest import debug_script as _debug

from fwd9m.debug._child import detect_frameworks


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from transformers import Trainer\n", ["torch"]),
        ("import lightning as L\n", ["torch"]),
        ("import pytorch_lightning as pl\n", ["torch"]),
        ("import flax.linen as nn\nimport optax\n", ["jax"]),
        ("import keras\n", ["keras"]),
        ("import tf_keras\n", ["tensorflow"]),
        ("import os\n", []),
    ],
)
def test_a_library_counts_as_the_framework_it_trains_through(tmp_path, source, expected):
    (tmp_path / "s.py").write_text(source)
    assert detect_frameworks(str(tmp_path / "s.py"), False) == expected


NET = """\
import torch


def build():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    return model, torch.optim.SGD(model.parameters(), lr=0.1), torch.ones(3, 4)
"""

TRAIN = """\
from net import build

model, opt, batch = build()
loss = model(batch).pow(2).mean()
loss.backward()
opt.step()
print(loss.item())
"""


def test_a_script_whose_own_module_imports_torch_is_recorded(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "net.py").write_text(NET)
    (tmp_path / "train.py").write_text(TRAIN)
    assert detect_frameworks(str(tmp_path / "train.py"), False) == ["torch"]
    code, lines = _debug(tmp_path, "train.py", TRAIN)
    report = "\n".join(lines)
    assert code == 0, report
    assert lines[0].startswith("reproducible: all "), report
