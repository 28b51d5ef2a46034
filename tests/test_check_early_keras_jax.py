"""``fwd9m check``'s early stop for Keras ``fit`` and JAX loops: real Keras (TensorFlow
backend), real JAX and optax on the CPU. The step recorders each run installs itself
(Keras' ``StepDigests`` after the user's callbacks, the JAX step boundary at
``optax.apply_updates``) stop two runs that differ at step 0, and leave the user's
program as it was: the same printed bits with and without them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# a jitted JAX step; UNSEEDED=1 draws the initial weights' seed from an unseeded NumPy
# generator (OS entropy: no two runs share it); EAGER=1 runs the same step without jax.jit; DONATE=1 donates the weights
JAX_LOOP = """
import os, jax, jax.numpy as jnp, numpy as np, optax
seed = int(np.random.default_rng().integers(1 << 16)) if os.environ.get("UNSEEDED") == "1" else 0
params = {"w": jax.random.normal(jax.random.key(seed), (8, 4)), "b": jnp.zeros(4)}
x, y = jnp.linspace(0, 1, 128).reshape(16, 8), jnp.ones((16, 4))
opt = optax.adam(0.01)
state = opt.init(params)

def loss_fn(p):
    return jnp.mean((x @ p["w"] + p["b"] - y) ** 2)

def step(p, s, key):
    loss, g = jax.value_and_grad(loss_fn)(p)
    u, s = opt.update(g, s, p)
    return optax.apply_updates(p, u), s, loss, jax.random.split(key)[0]

if os.environ.get("EAGER") != "1":
    step = jax.jit(step, donate_argnums=(0,) if os.environ.get("DONATE") == "1" else ())
key = jax.random.key(1)
for i in range(int(os.environ.get("STEPS", "30"))):
    params, state, loss, key = step(params, state, key)
print("loss", repr(float(loss)), [repr(float(v)) for v in params["w"].ravel()[:6]])
"""

KERAS_FIT = """
import os
os.environ["KERAS_BACKEND"] = "tensorflow"
import numpy as np, keras
if os.environ.get("UNSEEDED") != "1":
    keras.utils.set_random_seed(0)
calls = []

class Mine(keras.callbacks.Callback):
    def __init__(self, name):
        super().__init__()
        self.name = name

    def on_epoch_end(self, epoch, logs=None):
        calls.append(self.name)

x = np.linspace(0, 1, 512, dtype="float32").reshape(64, 8)
y = x.sum(axis=1, keepdims=True)
layers = keras.layers
model = keras.Sequential([keras.Input((8,)), layers.Dense(16, activation="relu"), layers.Dropout(0.2), layers.Dense(1)])
model.compile("adam", "mse")
epochs = int(os.environ.get("EPOCHS", "2"))
h = model.fit(x, y, epochs=epochs, batch_size=16, verbose=0, callbacks=[Mine("a"), Mine("b")])
print(calls, sorted(h.history), [repr(v) for v in h.history["loss"]])
print([repr(float(v)) for v in model.layers[0].kernel.numpy().ravel()[:6]])
"""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FWD9M_")}
    env.update(extra)
    return env


def check(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fwd9m", "check", *args],
        cwd=cwd,
        env=_env(**env),
        capture_output=True,
        text=True,
        timeout=600,
    )


def _with_and_without(tmp_path: Path, script: str, **env: str) -> tuple[str, str, list]:
    """The script's output run plainly and as a check run's process (its step recorders
    installed), and the steps that process recorded."""
    from fwd9m.steps import StepReader

    (tmp_path / "s.py").write_text(script)
    folder = tmp_path / "steps"
    folder.mkdir()
    plain = subprocess.run([sys.executable, "s.py"], cwd=tmp_path, env=_env(**env), capture_output=True, text=True)
    hooked = subprocess.run(
        [sys.executable, "-m", "fwd9m._runtime.capture", "s.py"],
        cwd=tmp_path,
        env=_env(FWD9M_STEPS_CHECK=str(folder), **env),
        capture_output=True,
        text=True,
    )
    assert plain.returncode == 0 and hooked.returncode == 0, plain.stderr[-2000:] + hooked.stderr[-2000:]
    (stream,) = folder.glob("steps-*")
    return plain.stdout, hooked.stdout, list(StepReader(stream))


@pytest.mark.parametrize("variant", [{}, {"EAGER": "1"}, {"DONATE": "1"}])
def test_jax_step_recorder_leaves_results_bit_identical(tmp_path, variant):
    pytest.importorskip("jax")
    pytest.importorskip("optax")
    plain, hooked, records = _with_and_without(tmp_path, JAX_LOOP, STEPS="5", **variant)
    assert plain == hooked
    assert len(records) == 5
    names = set(records[1].digests)
    assert ("params", "['w']" if variant.get("EAGER") else "out[0]['w']") in names
    # the weights before the first update, unless they were donated to the step (deleted)
    assert any(g == "initial" for g, _ in records[0].digests) != bool(variant.get("DONATE"))


def test_keras_fit_recorder_leaves_results_bit_identical(tmp_path):
    """The user's callbacks run in their order and the history holds what it held."""
    pytest.importorskip("tensorflow")
    pytest.importorskip("keras")
    plain, hooked, records = _with_and_without(tmp_path, KERAS_FIT)
    assert plain == hooked and plain.startswith("['a', 'b', 'a', 'b'] ['loss']")
    assert len(records) == 8  # 2 epochs of 4 batches
    assert {g for g, _ in records[0].digests} >= {"initial", "loss", "params", "optimizer"}


@pytest.mark.parametrize("script", ["jax", "keras"])
def test_runs_that_differ_at_step_0_stop_there(tmp_path, script):
    pytest.importorskip("optax" if script == "jax" else "keras")
    (tmp_path / "t.py").write_text(JAX_LOOP if script == "jax" else KERAS_FIT)
    # side by side (forced: a thread per core each does not fit 2 cores twice), or run 1's 100000 steps run first
    out = check(
        tmp_path, "--format", "json", "t.py", UNSEEDED="1", STEPS="100000", EPOCHS="1000", FWD9M_SIDE_BY_SIDE="1"
    )
    assert out.returncode == 1, out.stdout + out.stderr
    result = json.loads(out.stdout)
    (finding,) = result["findings"]
    assert finding["source"] == "step" and finding["summary"].startswith("training step 0:")
    assert "initial:" in finding["detail"]
    assert all("early stop at step 0" in (r["error"] or "") for r in result["runs"])
    assert f"run 1 imports {'jax' if script == 'jax' else 'keras'}: run 2 starts beside it" in out.stderr


def test_a_datetime_seed_keeps_run_2_until_run_1_trains_and_a_time_seed_does_not(tmp_path):
    """Runs started together could read the same second of a clock seed and agree by
    chance (a false REPRODUCIBLE). ``time.time()`` is read moved by another shift in each
    run (fwd9m._runtime.clock): run 2 starts at run 1's import. ``datetime.now()`` is not
    (read in C): a script that fwd9m lint finds seeding from it (FWD104) starts run 2 only
    once run 1 has trained a step, after its seed."""
    pytest.importorskip("optax")
    unseeded = 'seed = int(np.random.default_rng().integers(1 << 16)) if os.environ.get("UNSEEDED") == "1" else 0'
    for clock, waits in (("int(time.time())", False), ("int(datetime.datetime.now().timestamp())", True)):
        script = JAX_LOOP.replace("import os,", "import os, time, datetime,").replace(unseeded, f"seed = {clock}")
        assert f"seed = {clock}" in script
        (tmp_path / "t.py").write_text(script)
        out = check(tmp_path, "--format", "json", "t.py", STEPS="100000")
        assert out.returncode == 1, out.stdout + out.stderr
        assert json.loads(out.stdout)["findings"][0]["summary"].startswith("training step 0:")
        assert ("once run 1 records its first training step (the seed comes from the clock" in out.stderr) == waits
        assert ("t.py:4 FWD104" in out.stderr) == waits, out.stderr
        assert ("run 1 imports jax: run 2 starts beside it" in out.stderr) != waits, out.stderr


# a plain JAX loop without optax: the update a tree_map inside the jitted step, or (OUTSIDE=1)
# applied eagerly to what a jitted gradient returned (NOJIT=1: a gradient not jitted); UNSEEDED=1 as in JAX_LOOP
JAX_PLAIN = """
import os, jax, jax.numpy as jnp, numpy as np
seed = int(np.random.default_rng().integers(1 << 16)) if os.environ.get("UNSEEDED") == "1" else 0
params = {"w": jax.random.normal(jax.random.key(seed), (8, 4)), "b": jnp.zeros(4)}
x, y = jnp.linspace(0, 1, 128).reshape(16, 8), jnp.ones((16, 4))

def loss_fn(p, x, y):
    return jnp.mean((x @ p["w"] + p["b"] - y) ** 2)

@jax.jit
def step(p, x, y):
    loss, g = jax.value_and_grad(loss_fn)(p, x, y)
    return jax.tree_util.tree_map(lambda a, b: a - 0.01 * b, p, g), loss

grad = jax.grad(loss_fn) if os.environ.get("NOJIT") == "1" else jax.jit(jax.grad(loss_fn))
for i in range(int(os.environ.get("STEPS", "30"))):
    if os.environ.get("OUTSIDE") == "1":
        params = jax.tree_util.tree_map(lambda a, b: a - 0.01 * b, params, grad(params, x, y))
    else:
        params, loss = step(params, x, y)
print([repr(float(v)) for v in params["w"].ravel()[:6]])
"""


@pytest.mark.parametrize("outside", ["0", "1"])
def test_a_jax_loop_without_optax_has_its_jitted_step_as_the_boundary(tmp_path, outside):
    """No optax: the jitted function that returns what one of its arguments is (the
    weights, or their gradients) is the step; two runs that differ at step 0 stop there."""
    pytest.importorskip("jax")
    plain, hooked, records = _with_and_without(tmp_path, JAX_PLAIN, STEPS="5", OUTSIDE=outside)
    assert plain == hooked and len(records) == 5
    assert ("params", "out['w']" if outside == "1" else "out[0]['w']") in set(records[1].digests)
    out = check(tmp_path, "--format", "json", "s.py", UNSEEDED="1", STEPS="1000000", OUTSIDE=outside)
    assert out.returncode == 1, out.stdout + out.stderr
    result = json.loads(out.stdout)
    assert result["findings"][0]["summary"].startswith("training step 0:"), result["findings"]
    assert all("early stop at step 0" in (r["error"] or "") for r in result["runs"])


def test_a_jax_loop_with_no_jitted_step_says_only_the_end_states_were_compared(tmp_path):
    pytest.importorskip("jax")
    (tmp_path / "s.py").write_text(JAX_PLAIN)
    out = check(tmp_path, "--no-hashseed-check", "s.py", UNSEEDED="1", STEPS="3", OUTSIDE="1", NOJIT="1")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "no JAX training step was recorded" in out.stdout and "compared at their end only" in out.stdout
