"""``fwd9m debug`` on Keras 3 scripts whose backend is not TensorFlow (issue 20).

Keras picks its backend when it is imported, from ``KERAS_BACKEND`` (set in the
environment, or by the script before ``import keras``):
https://github.com/keras-team/keras/blob/master/keras/src/backend/config.py. The
recorder must import nothing before the script does, and must record the ops with the
recorder of the backend Keras chose. Before the fix the child imported Keras itself
(so a script's ``os.environ.setdefault("KERAS_BACKEND", "torch")`` came too late and
Keras ran on TensorFlow) and recorded TF ops.

Each script also checks, on that backend, that ``fwd9m.rng`` saves and restores the
RNG state of Keras' global seed generator and of a registered ``SeedGenerator``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = """
import json, os, sys
{choose}
import keras
import numpy as np
import fwd9m.rng

keras.utils.set_random_seed(0)
sg = keras.random.SeedGenerator(7)
fwd9m.rng.register(sg, "sg")
keras.random.normal((2,))                              # creates the global SeedGenerator
path = os.path.join(os.path.dirname(sys.argv[1]), "rng.state")
fwd9m.rng.save_rng_state(path, overwrite=True)
a = [np.asarray(keras.random.normal((3,), seed=sg)), np.asarray(keras.random.normal((3,)))]
fwd9m.rng.load_rng_state(path, strict=True)
b = [np.asarray(keras.random.normal((3,), seed=sg)), np.asarray(keras.random.normal((3,)))]
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3), keras.layers.Dense(1)])
model.compile("sgd", "mse")
model.fit(np.ones((8, 4), "float32"), np.ones((8, 1), "float32"), epochs=1, verbose=0)
with open(sys.argv[1], "w") as f:
    json.dump({{"backend": keras.backend.backend(),
               "round_trip": all(np.array_equal(x, y) for x, y in zip(a, b)),
               "draws_differ": not np.array_equal(a[0], a[1])}}, f)
"""


def _record(tmp_path, backend: str, by: str):
    choose = f'os.environ.setdefault("KERAS_BACKEND", "{backend}")' if by == "script" else ""
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(SCRIPT.format(choose=choose)))
    env = dict(os.environ)
    env.pop("KERAS_BACKEND", None)
    if by == "environment":
        env["KERAS_BACKEND"] = backend
    trace, facts = tmp_path / "run.trace", tmp_path / "facts.json"
    # run_fwd9m can only add variables; this run needs KERAS_BACKEND unset for "script"
    p = subprocess.run(
        [sys.executable, "-m", "fwd9m", "debug", "record", "-o", str(trace), str(script), str(facts)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    from fwd9m.debug import TraceReader

    reader = TraceReader(trace)
    return json.loads(facts.read_text()), reader.header, [o.name for o in reader]


@pytest.mark.slow
@pytest.mark.parametrize("by", ["environment", "script"])
def test_keras_on_torch_is_recorded_by_the_torch_recorder(tmp_path, by):
    pytest.importorskip("keras")
    pytest.importorskip("torch")
    facts, header, names = _record(tmp_path, "torch", by)
    assert facts == {"backend": "torch", "round_trip": True, "draws_differ": True}
    assert header["frameworks"] == ["torch"]
    assert any(n.startswith("aten::") for n in names), names[:20]
    assert not any(n in ("MatMul", "BiasAdd", "Cast") for n in names)  # no TF ops


@pytest.mark.slow
@pytest.mark.parametrize("by", ["environment", "script"])
def test_keras_on_jax_is_recorded_by_the_jax_recorder(tmp_path, by):
    pytest.importorskip("keras")
    pytest.importorskip("jax")
    facts, header, names = _record(tmp_path, "jax", by)
    assert facts == {"backend": "jax", "round_trip": True, "draws_differ": True}
    assert header["frameworks"] == ["jax"]
    # jax primitives run eagerly and Keras' jitted train step as one op
    assert "jit(train_step)" in names and "convert_element_type" in names, names[:20]
    assert not any(n.startswith("aten::") for n in names)


def test_debug_child_imports_no_framework_before_the_script(tmp_path):
    """The child of ``fwd9m debug`` hooks imports instead of importing: a script that
    imports nothing framework-related until its last line sees no framework loaded."""
    script = tmp_path / "s.py"
    script.write_text(
        "import sys\n"
        "print(sorted(m for m in ('torch', 'tensorflow', 'jax', 'keras') if m in sys.modules))\n"
        "if False:\n    import torch, keras\n"
    )
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "fwd9m.debug._child",
            str(tmp_path / "t.trace"),
            "digests",
            "-",
            "-",
            "-",
            "0",
            str(script),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"
    from fwd9m.debug import TraceReader

    assert TraceReader(tmp_path / "t.trace").header["frameworks"] == ["keras", "torch"]
