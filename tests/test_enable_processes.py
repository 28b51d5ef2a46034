"""Done-when: enable_determinism(seed) makes scripts print identical weights in two
fresh processes, where the usual seeding alone does not.

One script holds all three frameworks (fresh processes with TensorFlow cost seconds,
so the two processes are shared): first every "broken" variant (the seeding users
paste), then every "fixed" one (fwd9m's one call), in the same process. The broken
lines must differ between the two processes, the fixed lines must agree.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np

    def keras_layer_weights():
        import keras

        class MyLayer(keras.layers.Layer):
            def build(self, input_shape):
                # no seed: Keras 3 draws one from Python's `random` (make_default_seed)
                self.w = self.add_weight(shape=(input_shape[-1], 3), initializer="glorot_uniform")
                self.b = self.add_weight(shape=(3,), initializer="random_normal")

            def call(self, x):
                return x @ self.w + self.b

        layer = MyLayer()
        layer(np.ones((1, 4), "float32"))
        return np.concatenate([layer.w.numpy().ravel(), layer.b.numpy()]).tobytes().hex()

    def torch_weights():
        import torch
        return torch.nn.Linear(4, 3).weight.detach().numpy().tobytes().hex()

    def jax_weights(key):
        import jax
        return np.asarray(jax.random.normal(key, (4,))).tobytes().hex()

    import tensorflow as tf
    import jax
    import torch

    # --- broken: what users paste -----------------------------------------------------
    tf.random.set_seed(1)                       # not enough for Keras 3 initializers
    print("broken keras", keras_layer_weights())
    print("broken torch", torch_weights())      # torch never seeded
    print("broken jax", jax_weights(jax.random.key(np.random.randint(2**31))))

    # --- fixed: one fwd9m call per framework --------------------------------------------
    import fwd9m.jax, fwd9m.tensorflow, fwd9m.torch
    fwd9m.tensorflow.enable_determinism(seed=1)
    print("fixed keras", keras_layer_weights())
    fwd9m.torch.enable_determinism(seed=1)
    print("fixed torch", torch_weights())
    key = fwd9m.jax.enable_determinism(seed=1).key
    print("fixed jax", jax_weights(key))
""")


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    pytest.importorskip("tensorflow")
    pytest.importorskip("keras")
    pytest.importorskip("torch")
    pytest.importorskip("jax")
    path = tmp_path_factory.mktemp("repro") / "three_frameworks.py"
    path.write_text(SCRIPT)
    # both processes at once: they are independent and each is mostly import time
    procs = [
        subprocess.Popen([sys.executable, str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    runs = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr[-3000:]
        runs.append(dict(line.rsplit(" ", 1) for line in stdout.splitlines() if line.startswith(("broken ", "fixed "))))
    return runs


@pytest.mark.parametrize("framework", ["keras", "torch", "jax"])
def test_usual_seeding_differs_across_processes(two_runs, framework):
    a, b = two_runs
    broken_a = _line(a, "broken", framework)
    broken_b = _line(b, "broken", framework)
    assert broken_a != broken_b, f"{framework}: the usual seeding was already reproducible"


@pytest.mark.parametrize("framework", ["keras", "torch", "jax"])
def test_enable_determinism_repeats_across_processes(two_runs, framework):
    a, b = two_runs
    assert _line(a, "fixed", framework) == _line(b, "fixed", framework)


def _line(run: dict, kind: str, framework: str) -> str:
    return run[f"{kind} {framework}"]
