"""The reference-run flow, for real: ``fwd9m run --digests REF train.py`` once, then
``fwd9m run --against REF train.py`` after nothing changed (exit 0), after a change to
one layer's numerics (exit 1 at step 0, naming that layer), with another thread count,
and with each integration (PyTorch's automatic optimizer hooks, Lightning, HF Trainer,
Keras fit, a custom JAX loop with step_digest). CPU builds of every framework."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from conftest import REPO

TORCH_LOOP = textwrap.dedent("""
    import os, sys, torch
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 4))
    if os.environ.get("CHANGE"):  # a code change in one layer's numerics
        with torch.no_grad():
            model[2].weight.mul_(1.0001)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = torch.randn(256, 64), torch.randn(256, 4)
    for i in range(int(os.environ.get("STEPS", "6"))):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    print("threads", torch.get_num_threads())
""")

LIGHTNING = textwrap.dedent("""
    import os, pytorch_lightning as pl, torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset
    from fwd9m.steps.lightning import StepDigests

    class Lit(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 1))
        def training_step(self, batch, batch_idx):
            x, y = batch
            return nn.functional.mse_loss(self.net(x), y)
        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=float(os.environ.get("LR", "0.05")))

    pl.seed_everything(42, workers=True)
    x = torch.randn(64, 8)
    loader = DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=16, shuffle=True)
    trainer = pl.Trainer(max_epochs=1, deterministic=True, accelerator="cpu", devices=1, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                         callbacks=[StepDigests()])
    trainer.fit(Lit(), loader)
""")

HF = textwrap.dedent("""
    import os
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments, set_seed
    from fwd9m.steps.transformers import StepDigestCallback

    class Data(torch.utils.data.Dataset):
        def __init__(self, n=16):
            g = torch.Generator().manual_seed(0)
            self.ids = torch.randint(1, 50, (n, 12), generator=g)
        def __len__(self):
            return len(self.ids)
        def __getitem__(self, i):
            return {"input_ids": self.ids[i], "labels": (self.ids[i, 0] > 25).long()}

    config = BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=12, num_labels=2)
    args = TrainingArguments(output_dir="hf_out", num_train_epochs=1, per_device_train_batch_size=8,
                             learning_rate=float(os.environ.get("LR", "1e-3")), seed=42, full_determinism=True,
                             save_strategy="no", report_to="none", use_cpu=True, dataloader_num_workers=0)
    set_seed(42)
    trainer = Trainer(model=BertForSequenceClassification(config), args=args, train_dataset=Data(),
                      callbacks=[StepDigestCallback()])
    trainer.train()
""")

KERAS = textwrap.dedent("""
    import os, keras, numpy as np
    from fwd9m.steps.keras import StepDigests
    keras.utils.set_random_seed(42)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(48, 8)).astype("float32")
    y = (x[:, 0] > 0).astype("float32")
    model = keras.Sequential([keras.Input(shape=(8,)), keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dropout(0.2), keras.layers.Dense(1, activation="sigmoid", name="out")])
    if os.environ.get("CHANGE"):
        model.get_layer("out").kernel.assign(model.get_layer("out").kernel * 1.001)
    model.compile(optimizer="adam", loss="binary_crossentropy")
    model.fit(x, y, epochs=1, batch_size=16, callbacks=[StepDigests()], verbose=0)
""")

JAX = textwrap.dedent("""
    import os, jax, jax.numpy as jnp
    import fwd9m.debug as dbg
    key = jax.random.PRNGKey(0)
    params = {"w": jax.random.normal(key, (8, 4)), "b": jnp.zeros(4)}
    x = jax.random.normal(jax.random.PRNGKey(1), (32, 8))
    scale = 1.0001 if os.environ.get("CHANGE") else 1.0

    @jax.jit
    def step(params, key):
        key, sub = jax.random.split(key)
        def loss_fn(p):
            h = (x @ p["w"] + p["b"]) * scale
            return jnp.mean((h - jax.random.normal(sub, h.shape)) ** 2)
        loss, grads = jax.value_and_grad(loss_fn)(params)
        return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads), loss, grads, key

    for i in range(4):
        params, loss, grads, key = step(params, key)
        dbg.step_digest(i, loss=loss, params=params, grads=grads, key=key, batch=x)
""")


def _fwd9m(tmp_path, *args, env=None, timeout=600):
    full = {k: v for k, v in os.environ.items() if not k.startswith("FWD9M_")}
    full.update(env or {})
    full["PYTHONPATH"] = str(REPO / "src")
    return subprocess.run(
        [sys.executable, "-m", "fwd9m", "run", *args],
        cwd=tmp_path,
        env=full,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _flow(tmp_path, source: str, change: dict, skip: str | None = None):
    """Write the reference, rerun unchanged (exit 0), rerun changed (exit 1)."""
    if skip:
        pytest.importorskip(skip)
    script = tmp_path / "train.py"
    script.write_text(source)
    ref = _fwd9m(tmp_path, "--digests", "ref.steps", "train.py")
    assert ref.returncode == 0, ref.stderr[-3000:]
    same = _fwd9m(tmp_path, "--against", "ref.steps", "train.py")
    assert same.returncode == 0, same.stderr[-3000:]
    assert "REPRODUCIBLE: all" in same.stderr
    changed = _fwd9m(tmp_path, "--against", "ref.steps", "train.py", env=change)
    assert changed.returncode == 1, changed.stderr[-3000:]
    assert "NOT REPRODUCIBLE: first difference at step 0" in changed.stderr
    assert "Traceback" not in changed.stderr  # the stop is a clean exit 1, not a crash
    return changed.stderr


def test_torch_loop_automatic_hooks(tmp_path):
    pytest.importorskip("torch")
    err = _flow(tmp_path, TORCH_LOOP, {"CHANGE": "1"})
    # the changed layer is the one named as it was before any update
    assert "initial: 2.weight (float32[4,128])" in err
    assert "grads: " in err and "params: " in err


def test_torch_reference_with_fewer_and_more_steps(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "train.py").write_text(TORCH_LOOP)
    assert _fwd9m(tmp_path, "--digests", "ref.steps", "train.py").returncode == 0
    fewer = _fwd9m(tmp_path, "--against", "ref.steps", "train.py", env={"STEPS": "4"})
    assert fewer.returncode == 1 and "ended after 4 steps, but REF" in fewer.stderr
    more = _fwd9m(tmp_path, "--against", "ref.steps", "train.py", env={"STEPS": "8"})
    assert more.returncode == 1 and "ends after 6 steps" in more.stderr and "Traceback" not in more.stderr


def test_bad_reference_is_exit_2_before_the_run(tmp_path):
    (tmp_path / "train.py").write_text("print('ran')\n")
    (tmp_path / "foreign.steps").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 64)
    r = _fwd9m(tmp_path, "--against", "foreign.steps", "train.py")
    assert r.returncode == 2 and "not a fwd9m step digest file" in r.stderr and "ran" not in r.stdout
    (tmp_path / "model.pt").write_bytes(b"user data")
    r = _fwd9m(tmp_path, "--digests", "model.pt", "train.py")
    assert r.returncode == 2 and (tmp_path / "model.pt").read_bytes() == b"user data"
    # a missing folder: exit 2 before the run (it ran, then crashed on writing the file)
    r = _fwd9m(tmp_path, "--digests", "missing/run.steps", "train.py")
    assert r.returncode == 2 and "does not exist; create it first" in r.stderr and "ran" not in r.stdout
    assert "Traceback" not in r.stderr


def test_thread_counts(tmp_path):
    """Two machines, simulated by thread counts (OMP_NUM_THREADS through --threads): the
    fingerprints differ, and the report says so whatever the digests say."""
    pytest.importorskip("torch")
    (tmp_path / "train.py").write_text(TORCH_LOOP)
    assert _fwd9m(tmp_path, "--threads", "1", "--digests", "ref.steps", "train.py").returncode == 0
    r = _fwd9m(tmp_path, "--threads", "2", "--against", "ref.steps", "train.py")
    assert r.returncode in (0, 1), r.stderr[-3000:]
    assert "threads.OMP_NUM_THREADS" in r.stderr and "'1' -> '2'" in r.stderr


def test_lightning(tmp_path):
    err = _flow(tmp_path, LIGHTNING, {"LR": "0.06"}, skip="pytorch_lightning")
    assert "\n  loss: " not in err  # step 0's loss is computed before the update the rate changes
    assert "params: net.0.weight" in err


def test_hf_trainer(tmp_path):
    err = _flow(tmp_path, HF, {"LR": "2e-3"}, skip="transformers")
    assert "optimizer: " in err and "params: bert." in err


def test_keras_fit(tmp_path):
    err = _flow(tmp_path, KERAS, {"CHANGE": "1"}, skip="keras")
    assert "initial: sequential/out/kernel" in err


def test_jax_custom_loop(tmp_path):
    err = _flow(tmp_path, JAX, {"CHANGE": "1"}, skip="jax")
    assert "loss: loss" in err and "grads: " in err
