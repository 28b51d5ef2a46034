"""debug replay on TensorFlow: the gradient of tf.image.crop_and_resize on CPU."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from fwd9m import debug
from fwd9m.debug import _replay

pytest.importorskip("tensorflow")

SCRIPT = """
    import tensorflow as tf
    tf.random.set_seed(0)
    img = tf.Variable(tf.random.normal([2, 16, 16, 3]))
    g = tf.random.Generator.from_seed(1)
    b = g.uniform([20000, 4])
    boxes = tf.concat([tf.minimum(b[:, :2], b[:, 2:]), tf.maximum(b[:, :2], b[:, 2:])], 1)
    ids = g.uniform([20000], 0, 2, dtype=tf.int32)
    w = g.normal([20000, 8, 8, 3])
    opt = tf.keras.optimizers.SGD(0.1)
    for step in range(2):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.image.crop_and_resize(img, boxes, ids, [8, 8]) * w)
        opt.apply_gradients([(tape.gradient(loss, img), img)])
"""


@pytest.mark.slow
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="the CPU kernel races only with 2+ threads")
def test_crop_and_resize_gradient_culprit_is_confirmed_and_the_switch_fixes_it(tmp_path, monkeypatch):
    # CropAndResizeGradImage on CPU: boxes are sharded over threads that add into the same
    # image rows. Measured here with 20000 boxes: 20 of 20 replays distinct (2,000 boxes:
    # 1 to 8 of 20, depending on load), so the script uses 20000.
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(SCRIPT))
    monkeypatch.chdir(tmp_path)
    runs = []
    for k in (1, 2):
        p = tmp_path / f"run{k}.trace"
        runs.append(p)
        assert (
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "fwd9m.debug._child",
                    str(p),
                    "digests",
                    "-",
                    "-",
                    "tensorflow",
                    "0",
                    str(script),
                ],
                check=False,
            ).returncode
            == 0
        )
    report = debug.diff(*runs)
    assert report.kind == "culprit" and report.first.op == "CropAndResizeGradImage"
    result = _replay.confirm(report, str(script), trace=str(tmp_path / "run3.trace"))
    assert result.confirmed, result.render()
    assert result.on.status == "deterministic", result.render()
    assert "enable_op_determinism" in result.switch_verdict()
