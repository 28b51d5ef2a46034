"""Done-when: Keras (TF backend) with dropout and a shuffled, randomly augmented
tf.data pipeline, 4 epochs in one process == 2 epochs, a crash, and a resume in a new
process from BackupAndRestore + RngStateCheckpoint, bit for bit."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("tensorflow")
pytest.importorskip("keras")

SCRIPT = r'''
import hashlib, os, sys
os.environ["KERAS_BACKEND"] = "tensorflow"
import numpy as np
import tensorflow as tf
import keras
import fwd9m
from fwd9m import data
from fwd9m.callbacks import RngStateCheckpoint

crash_after, ckdir, restore = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
fwd9m.seed_everything(7)
rs = np.random.RandomState(0)
x = rs.rand(64, 8).astype("float32")
y = rs.rand(64, 1).astype("float32")

model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                          keras.layers.Dropout(0.5), keras.layers.Dense(1)])
model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse")
cb = RngStateCheckpoint(os.path.join(ckdir, "rng.npz"), restore=restore)


def build(epoch, seed):
    idx = tf.random.experimental.stateless_shuffle(tf.range(64, dtype=tf.int64), seed=seed)

    def get(i):
        noise = tf.random.stateless_normal([8], seed=tf.random.fold_in(seed, i))
        return tf.gather(x, i) + 0.1 * noise, tf.gather(y, i)

    return tf.data.Dataset.from_tensor_slices(idx).map(get, num_parallel_calls=2).batch(16)


ds = data.tf_epochs(build, seed=7, epochs=4, first_epoch=cb.epoch_variable)


class Crash(keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        if epoch + 1 == crash_after:
            os._exit(3)


model.fit(ds, epochs=4, steps_per_epoch=4, verbose=0,
          callbacks=[keras.callbacks.BackupAndRestore(ckdir, delete_checkpoint=False),
                     cb, Crash()])
h = hashlib.sha256(b"".join(np.asarray(w).tobytes() for w in model.get_weights()))
print("DIGEST:" + h.hexdigest())
'''


def _run(script, *args, expect=0):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    return subprocess.Popen([sys.executable, str(script), *map(str, args)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _digest(proc, expect=0):
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == expect, err[-3000:]
    if expect:
        return None
    return [ln for ln in out.splitlines() if ln.startswith("DIGEST:")][-1]


def test_keras_resume_is_bitwise(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    for d in ("full", "part", "ctrl"):
        (tmp_path / d).mkdir()
    full = _run(script, 0, tmp_path / "full", 1)
    part = _run(script, 2, tmp_path / "part", 1)
    ctrl = _run(script, 2, tmp_path / "ctrl", 1)
    ref = _digest(full)
    _digest(part, expect=3)
    _digest(ctrl, expect=3)
    assert (tmp_path / "part" / "rng.npz").exists()
    resumed = _run(script, 0, tmp_path / "part", 1)
    # control: same checkpoint, but the RNG state is not restored
    unrestored = _run(script, 0, tmp_path / "ctrl", 0)
    assert _digest(resumed) == ref
    assert _digest(unrestored) != ref, "control run matched: the test has no teeth"
