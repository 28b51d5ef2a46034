"""The program's own Python run by an op (issue 27, case 4): ``tf.py_function``,
``tf.numpy_function`` and ``jax.pure_callback`` bodies drawing unseeded Python randomness
are a value entering from outside the recorded ops (EXTERNAL), not a nondeterministic
kernel with a data-loader fix, and no replay traceback lands in the report."""

from __future__ import annotations

import pytest
from conftest import debug_script as _debug

PY_FUNCTION = """\
import random

import tensorflow as tf

tf.random.set_seed(0)


def jitter(x):
    return x + random.random()  # unseeded Python randomness


@tf.function
def step(x):
    y = tf.py_function(jitter, [x], tf.float32)
    return y * 2.0


print(step(tf.ones([4])).numpy())
"""

NUMPY_FUNCTION = PY_FUNCTION.replace("x + random.random()", "(x + random.random()).astype('float32')").replace(
    "tf.py_function(jitter, [x], tf.float32)", "tf.numpy_function(jitter, [x], tf.float32)"
)

PURE_CALLBACK = """\
import random

import jax
import jax.numpy as jnp
import numpy as np


def jitter(x):
    return (x + random.random()).astype(np.float32)  # unseeded Python randomness


@jax.jit
def step(x):
    y = jax.pure_callback(jitter, jax.ShapeDtypeStruct(x.shape, x.dtype), x)
    return y * 2.0


print(step(jnp.ones(4)))
"""


def _external_python(code: int, lines: list[str], op: str, where: str) -> str:
    report = "\n".join(lines)
    assert code == 1, report
    assert lines[0].startswith("EXTERNAL SOURCE (python): first divergence at op #"), report
    assert lines[1].startswith(f"  the Python function run by {op} ("), report
    assert lines[2] == f"  op:       {op}", report
    assert lines[4] == f"  location: {where}", report
    assert "np.random.default_rng(fwd9m.derive_seed(0" in report, report
    assert "CULPRIT" not in report and "data-loader" not in report and "worker_index" not in report
    assert "Traceback" not in report and "\\n" not in report
    return report


@pytest.mark.parametrize(
    "name, source, op",
    [("pyfunc.py", PY_FUNCTION, "EagerPyFunc"), ("npfunc.py", NUMPY_FUNCTION, "PyFunc")],
)
def test_tf_python_function_drawing_unseeded_randomness_is_external(tmp_path, name, source, op):
    pytest.importorskip("tensorflow")
    code, lines = _debug(tmp_path, name, source)
    report = _external_python(code, lines, op, f"{name}:14")
    assert f"{name}:5 FWD101" in report and "keras.utils.set_random_seed(0)" in report
    assert "replay of op" not in report  # nothing to prove about a kernel


def test_jax_pure_callback_inside_a_jit_is_external_at_the_callback(tmp_path):
    pytest.importorskip("jax")
    code, lines = _debug(tmp_path, "cb.py", PURE_CALLBACK)
    report = _external_python(code, lines, "pure_callback", "cb.py:14")
    assert "pure_callback inside jit(step) (called at cb.py:18)" in lines[5], report
    assert "narrowed inside the jitted call to equation 0: pure_callback at cb.py:14" in report
    assert "keras" not in report.lower() and "tf." not in report
