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

SCRIPT = r"""
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
"""


def _run(script, *args, expect=0):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    return subprocess.Popen(
        [sys.executable, str(script), *map(str, args)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _digest(proc, expect=0):
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == expect, err[-3000:]
    if expect:
        return None
    return [ln for ln in out.splitlines() if ln.startswith("DIGEST:")][-1]


@pytest.mark.slow  # five fresh interpreters
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


def _tiny_model(keras):
    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(4), keras.layers.Dropout(0.5), keras.layers.Dense(1)])
    m.compile(optimizer="sgd", loss="mse")
    return m


def test_callback_per_epoch_files_and_restore(tmp_path):
    """In-process: {epoch} file names (as ModelCheckpoint), restore_from, epoch_variable."""
    import keras
    import numpy as np

    from fwd9m import rng
    from fwd9m.callbacks import RngStateCheckpoint

    x, y = np.ones((8, 4), "float32"), np.ones((8, 1), "float32")
    m = _tiny_model(keras)
    cb = RngStateCheckpoint(tmp_path / "rng-{epoch:02d}.npz")
    m.fit(x, y, epochs=2, batch_size=4, verbose=0, callbacks=[cb])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rng-01.npz", "rng-02.npz"]
    state = rng.from_bytes((tmp_path / "rng-01.npz").read_bytes())
    assert state["fwd9m.progress"] == {"epoch": 1} and len(state["keras.model"]) == 1
    cb2 = RngStateCheckpoint(tmp_path / "rng-{epoch:02d}.npz", restore_from=tmp_path / "rng-01.npz")
    v = cb2.epoch_variable
    m.fit(x, y, epochs=2, initial_epoch=1, batch_size=4, verbose=0, callbacks=[cb2])
    assert cb2.initial_epoch == 1 and int(v.numpy()) == 1
    sg_path = next(iter(state["keras.model"]))
    # the model's dropout seed state continued from the restored one
    restored = state["keras.model"][sg_path]["state"]
    final = rng.from_bytes((tmp_path / "rng-02.npz").read_bytes())["keras.model"][sg_path]
    assert final["state"][1] > restored[1]


def test_callback_corrupt_file_fails_and_changes_nothing(tmp_path):
    import keras
    import numpy as np

    from fwd9m import rng
    from fwd9m.callbacks import RngStateCheckpoint
    from fwd9m.errors import FileFormatError

    bad = tmp_path / "rng.npz"
    good = rng.to_bytes()
    bad.write_bytes(good[: len(good) // 3])
    m = _tiny_model(keras)
    before = rng.to_bytes(rng.capture_rng_state())
    with pytest.raises(FileFormatError, match="truncated or corrupted"):
        m.fit(np.ones((4, 4)), np.ones((4, 1)), epochs=1, verbose=0, callbacks=[RngStateCheckpoint(bad)])
    assert rng.to_bytes(rng.capture_rng_state()) == before
