"""fwd9m debug and Keras 3 ``fit`` with ``jit_compile=True`` on the TensorFlow backend.

Keras calls its XLA-compiled step inside the plain ``tf.function`` ``multi_step_on_iterator``;
TensorFlow passes that call to no op callback, so before the fix a recorded ``fit``
held only iterator, Optional and Placeholder ops, and a difference made inside the step
was blamed on ``OptionalGetValue`` as "a value built outside the framework" (measured
on a script whose step multiplies by a per-process constant). While recording, the
step now runs as an eager call of the XLA function (:mod:`fwd9m.keras._tf_xla`):
one op ``xla:one_step_on_data`` per step, the program's numbers unchanged.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")
if keras.backend.backend() != "tensorflow":
    pytest.skip("Keras runs on another backend here", allow_module_level=True)

import fwd9m.debug as dbg  # noqa: E402
from fwd9m.keras import _private  # noqa: E402


class Scale(keras.layers.Layer):
    """Multiplies by a Python number: traced into the XLA step as a constant."""

    def __init__(self, factor: float):
        super().__init__()
        self.factor = factor

    def call(self, t):
        return t * self.factor


def _fit(factor: float = 1.0, steps_per_execution: int = 1):
    keras.backend.clear_session()  # layer names (sequential_1, ...) as in a fresh process
    keras.utils.set_random_seed(0)
    x = np.linspace(-1, 1, 40, dtype="float32").reshape(10, 4)
    y = x.sum(axis=1, keepdims=True)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3), Scale(factor), keras.layers.Dropout(0.5)])
    model.compile(optimizer="adam", loss="mse", jit_compile=True, steps_per_execution=steps_per_execution)
    history = model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)  # 3 steps: 4, 4, 2
    return [v.numpy() for v in model.variables] + [model.predict(x, verbose=0)], history.history["loss"]


def test_each_xla_step_of_fit_is_one_op_and_the_numbers_do_not_change(tmp_path):
    plain, loss = _fit()
    cls = _private.tf_trainer_class()
    before = cls.__dict__["_make_function"]
    with dbg.record(tmp_path / "a.trace", framework="tensorflow"):
        got, got_loss = _fit(steps_per_execution=2)
    assert cls.__dict__["_make_function"] is before  # undone
    for a, b in zip(plain, got):  # weights and predictions bit for bit, steps_per_execution 1 without fwd9m, 2 with
        np.testing.assert_array_equal(a, b)
    assert got_loss == loss
    steps = [o for o in dbg.TraceReader(tmp_path / "a.trace") if o.name == "xla:one_step_on_data"]
    assert [o.step for o in steps] == [0, 1, 2, 3]  # the last one predict's (its step has the same name)
    assert [t.meta for t in steps[2].inputs[:2]] == ["float32[2,4]", "float32[2,1]"]  # the last batch
    assert len(steps[0].outputs) > 1  # the loss, and the variables after the step


def test_a_difference_inside_the_xla_step_is_found_there(tmp_path):
    paths = [tmp_path / "a.trace", tmp_path / "b.trace"]
    for path, factor in zip(paths, (1.0, 1.5)):  # as a per-process constant would
        with dbg.record(path, framework="tensorflow"):
            _fit(factor)
    report = dbg.diff(*paths)
    # the constant is traced into the compiled step: a value entering from outside (issue 27)
    assert report.kind == "external" and report.first.op == "xla:one_step_on_data", report.render()
    assert report.first.source == "python" and report.first.step == 0
    assert "argument 'constant sequential_1/scale_1/mul/y' of xla:one_step_on_data: 1 vs 1.5" in report.first.detail


def test_an_xla_call_inside_another_tf_function_is_named_as_not_recorded(tmp_path):
    v = tf.Variable(tf.ones([4]))

    @tf.function(jit_compile=True)
    def inner(x):
        v.assign_add(x)
        return tf.reduce_sum(v)

    @tf.function
    def outer_fn(x):
        return inner(x) + 1.0

    with dbg.record(tmp_path / "n.trace", framework="tensorflow"):
        outer_fn(tf.ones([4]))
    reader = dbg.TraceReader(tmp_path / "n.trace")
    list(reader)
    notes = reader.end["notes"]
    assert any(n.startswith("the tf.function outer_fn calls a function compiled by XLA") for n in notes), notes
    assert "jit_compile=False" in notes[0]


SRC = Path(__file__).resolve().parents[1] / "src"

#: a fresh process: a Keras recording at level "modules" (one ending normally, one whose
#: code raises), then an XLA ``fit`` recorded as above. Before the fix the recorder decided
#: by the Python name of any graph instrumented earlier in the process that a call needed
#: no op of its own: the first model's ``one_step_on_data`` was, so the later model's XLA
#: step of that name was never recorded (its ``[o.step ...]`` was ``[]``), and a later
#: ``evaluate`` counted each batch as a training step
AFTER_MODULES = """
import sys
import numpy as np
import keras
import tensorflow as tf
from tensorflow.python.eager import context
import fwd9m.debug as dbg
from fwd9m.keras import _private

sys.path.insert(0, sys.argv[2])
from test_debug_keras_xla import _fit

keras.utils.set_random_seed(0)
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3), keras.layers.Dense(1)])
model.compile(optimizer="sgd", loss="mse")
x = np.ones((8, 4), np.float32)
y = np.ones((8, 1), np.float32)
trainer = _private.tf_trainer_class()  # imported with Keras: patched while recording
assert trainer is not None
patched = [(keras.layers.Layer, "__call__"), (keras.optimizers.Optimizer, "apply"), (tf.GradientTape, "gradient"),
           (context.Context, "call_function"), (trainer, "_make_function"), (trainer, "make_predict_function")]
before = [getattr(c, a) for c, a in patched]
path = sys.argv[1]
with dbg.record(path + ".modules", framework="tensorflow", level="modules"):
    model.train_on_batch(x, y)
    model.train_on_batch(x, y)
assert any(o.name == "layer:Dense" for o in dbg.TraceReader(path + ".modules"))
try:
    with dbg.record(path + ".raised", framework="tensorflow", level="modules"):
        model.train_on_batch(x, y)
        raise KeyError("the user's code")
except KeyError:
    pass
assert [getattr(c, a) for c, a in patched] == before, "a patch outlived its recording"
with dbg.record(path, framework="tensorflow"):
    _fit(steps_per_execution=2)
steps = [o for o in dbg.TraceReader(path) if o.name == "xla:one_step_on_data"]
assert [o.step for o in steps] == [0, 1, 2, 3], [o.step for o in steps]
assert all(t.digest is not None for o in steps for t in o.outputs)
# a test step has the train step's Python name: no training step (before: one per batch)
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
model.compile(loss="mse", jit_compile=True)
with dbg.record(path + ".evaluate", framework="tensorflow"):
    model.evaluate(np.ones((24, 4), np.float32), np.ones((24, 1), np.float32), batch_size=8, verbose=0)
evaluated = [o.step for o in dbg.TraceReader(path + ".evaluate") if o.name == "xla:one_step_on_data"]
assert evaluated == [0, 0, 0], evaluated
print("ok")
"""


def test_an_xla_fit_after_a_modules_level_recording_in_the_same_process_is_recorded(tmp_path):
    script = tmp_path / "after_modules.py"
    script.write_text(AFTER_MODULES)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))}
    out = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "a.trace"), str(Path(__file__).parent)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]
