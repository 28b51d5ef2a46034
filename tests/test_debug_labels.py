"""Labels from what happened (issue 27, case 7): an op of a LightningModule's
``training_step`` is in the forward phase although Lightning runs it inside
``optimizer.step(closure)``; a JAX report speaks of keys, not of Keras or TensorFlow; a
lint hint for a GPU-only catalog entry is not printed for an op that ran on the CPU, and
a fix is printed as code on its own lines (no literal ``\\n``)."""

from __future__ import annotations

import pytest
from conftest import debug_script as _debug

from fwd9m.debug import _explain, _report

LIGHTNING = """\
import random

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

pl.seed_everything(0)


class Net(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        noise = random.SystemRandom().random()  # OS entropy: never the same
        return ((self.layer(x) - y) ** 2).mean() * noise

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


ds = TensorDataset(torch.ones(8, 4), torch.zeros(8, 1))
trainer = pl.Trainer(
    max_steps=2,
    logger=False,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
    accelerator="cpu",
)
trainer.fit(Net(), DataLoader(ds, batch_size=4))
"""

JAX_CLOCK_KEY = """\
import time

import jax
import jax.numpy as jnp

key = jax.random.key(int(time.time_ns()) % 2**31)  # seeded from the clock
x = jnp.ones((4, 8))
w = jnp.full((8, 2), 0.1)


@jax.jit
def forward(x, key):
    keep = jax.random.bernoulli(key, 0.5, x.shape)  # dropout
    return (jnp.where(keep, x / 0.5, 0.0) @ w).sum()


print(forward(x, key))
"""


def test_a_lightning_training_step_is_the_forward_phase(tmp_path):
    pytest.importorskip("pytorch_lightning")
    code, lines = _debug(tmp_path, "lit.py", LIGHTNING)
    report = "\n".join(lines)
    assert code == 1, report
    assert lines[0].startswith("EXTERNAL SOURCE (python): first divergence at op #"), report
    assert lines[2] == "  op:       aten::mul", report
    assert lines[3].startswith("  phase:    forward "), report
    assert lines[4] == "  location: lit.py:18", report
    assert lines[5].startswith("  why:      argument 'other' of aten::mul: "), report


def test_a_jax_clock_seeded_key_is_told_in_jax_words(tmp_path):
    pytest.importorskip("jax")
    code, lines = _debug(tmp_path, "drop.py", JAX_CLOCK_KEY)
    report = "\n".join(lines)
    assert code == 1, report
    assert lines[0].startswith("EXTERNAL SOURCE (seed): first divergence at op #0 "), report
    assert lines[1] == "  the seed of a JAX PRNG key differs between the runs (every draw made with that key differs)"
    assert lines[4] == "  location: drop.py:6", report
    assert "(a PRNG key)" in lines[5] and "initializer" not in report, report
    assert "jax.random.key(0)" in report
    for word in ("keras", "tf.random", "tensorflow"):
        assert word not in report.lower(), (word, report)


def test_a_gpu_only_lint_hint_is_left_out_for_a_cpu_op():
    gpu = {
        "path": "t.py",
        "line": 3,
        "code": "FWD501",
        "message": "tf.image.crop_and_resize backprop on GPU (to image and boxes): ... "
        "[catalog tensorflow.crop-and-resize-backprop-gpu]; fix: with tf.device('/CPU:0'):\n    crops = ...",
        "fix": "with tf.device('/CPU:0'):\n    crops = ...",
    }
    cpu = dict(gpu, message="... [catalog tensorflow.crop-and-resize-backprop-cpu]; fix: x", fix="x")
    other = dict(gpu, code="FWD101", message="seeds one library only", fix="fwd9m.seed_everything(0)")
    assert _explain._on_device([gpu, cpu, other], "CPU:0") == [cpu, other]
    assert _explain._on_device([gpu, cpu, other], "cpu") == [cpu, other]
    assert _explain._on_device([gpu, cpu, other], "GPU:0") == [gpu, other]


def test_a_multi_line_fix_is_printed_as_code_on_its_own_lines():
    finding = {
        "path": "t.py",
        "line": 3,
        "code": "FWD501",
        "message": "crop_and_resize backprop [catalog tensorflow.crop-and-resize-backprop-gpu]; "
        "fix: with tf.device('/CPU:0'):\n    crops = f(image)",
        "fix": "with tf.device('/CPU:0'):\n    crops = f(image)",
    }
    lines = _report._explanation_lines({"lint": [finding]})
    assert lines == [
        "  in your code (fwd9m lint):",
        "    t.py:3 FWD501 crop_and_resize backprop [catalog tensorflow.crop-and-resize-backprop-gpu]",
        "      fix:",
        "        with tf.device('/CPU:0'):",
        "            crops = f(image)",
    ]
