"""Cost of step digests (``fwd9m run --digests``, the callbacks, ``step_digest``).

Cases (ratios of the same training steps timed in the same run, interleaved; ``_harness``),
target <= 1.05x a plain step:

* PyTorch: the global optimizer hooks of ``fwd9m run --digests`` (parameters, gradients,
  buffers, Adam state, RNG states every step) on a small CNN (batch 32, 32x32 images)
  and a transformer block, vs the same steps without hooks.
* Keras 3 (TF backend): ``fit`` with :class:`fwd9m.steps.keras.StepDigests` vs ``fit``
  without it, on a small CNN.
* JAX: a jitted MLP step followed by ``step_digest(params, grads, loss, key, batch)``
  vs the jitted step alone (each waits for its result).

Digests are exact (:mod:`fwd9m.fingerprint`): their cost grows with the bytes of
state (parameters, gradients, optimizer moments), a step's with the batch too, so the
ratio is worst for a small batch on a CPU.

Each case is also timed with an option switched off, as its own ratio in the same run:
``[NumPy digest]`` without the compiled kernel (:mod:`fwd9m._ckernel`, as on a machine
without a C compiler), and for Keras ``[one by one]`` reading each variable eagerly
instead of all in one ``tf.function`` (:mod:`fwd9m.tensorflow._many`).

The clock is this process's CPU time (all its threads), which the other processes of
a shared machine do not inflate as they do wall-clock time (``FWD9M_BENCH_WALL=1`` for
wall-clock time); every case here computes on the CPU.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time

from _harness import Case
from _models import torch_models

TMP = tempfile.mkdtemp(prefix="fwd9m-bench-steps-")
TARGET = 1.05
CLOCK = time.perf_counter if os.environ.get("FWD9M_BENCH_WALL") else time.process_time


@contextlib.contextmanager
def _numpy_digests():
    """The NumPy digest path only (no compiled kernel), for the time being."""
    from fwd9m import _ckernel

    _ckernel.kernel()
    saved = _ckernel._state["lib"]
    _ckernel._state["lib"] = None
    try:
        yield
    finally:
        _ckernel._state["lib"] = saved


def _variants(name: str, baseline, candidate, baseline_name: str, repeat: int, extra=()) -> list[Case]:
    """The case with every option on, then one case per option switched off
    (``extra``: ``(label, context manager factory)``)."""

    def off(make):
        def run():
            with make():
                candidate()

        return run

    out = [Case(name, baseline, candidate, baseline_name=baseline_name, target=TARGET, repeat=repeat, clock=CLOCK)]
    for label, make in (("NumPy digest", _numpy_digests), *extra):
        out.append(
            Case(f"{name} [{label}]", baseline, off(make), baseline_name=baseline_name, repeat=repeat, clock=CLOCK)
        )
    return out


def _session(name: str):
    from fwd9m.steps._session import StepSession

    path = os.path.join(TMP, name)
    if os.path.exists(path):
        os.unlink(path)
    return StepSession(path)


def _torch_cases(quick: bool):
    import torch
    from torch import nn

    from fwd9m.steps import _torch as hooks

    torch.manual_seed(0)
    torch.set_num_threads(1)  # a shared 2-core machine: keep the measurement stable
    steps = 3 if quick else 10

    out = []
    for name, make in torch_models():
        model, x, y = make()
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)

        def train(model=model, x=x, y=y, opt=opt):
            for _ in range(steps):
                opt.zero_grad()
                nn.functional.cross_entropy(model(x), y).backward()
                opt.step()

        session = _session(f"torch-{name}.steps")  # one run's session: its start-up (the
        # environment fingerprint, finding the model) is paid once, in the warm-up

        def with_digests(train=train, session=session):
            hooks.install(session)
            try:
                train()
            finally:
                hooks.uninstall()

        out += _variants(f"steps: torch {name}, {steps} steps", train, with_digests, "plain steps", 3 if quick else 5)
    return out


def _keras_cases(quick: bool):
    import keras
    import numpy as np

    from fwd9m.steps.keras import StepDigests

    keras.utils.set_random_seed(0)
    batches = 4 if quick else 12
    x = np.random.default_rng(0).normal(size=(32 * batches, 32, 32, 3)).astype("float32")
    y = np.random.default_rng(1).integers(0, 10, size=(32 * batches,))

    def model():
        m = keras.Sequential(
            [
                keras.Input((32, 32, 3)),
                keras.layers.Conv2D(16, 3, padding="same", activation="relu"),
                keras.layers.MaxPooling2D(),
                keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
                keras.layers.GlobalAveragePooling2D(),
                keras.layers.Dense(10),
            ]
        )
        m.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        return m

    plain, digested = model(), model()

    def fit_plain():
        plain.fit(x, y, batch_size=32, epochs=1, verbose=0, shuffle=False)

    callback = StepDigests(os.path.join(TMP, "keras.steps"))  # one run's file: its start-up
    # (the environment fingerprint) is paid once, in the warm-up

    def fit_digests():
        digested.fit(x, y, batch_size=32, epochs=1, verbose=0, shuffle=False, callbacks=[callback])

    @contextlib.contextmanager
    def one_by_one():
        from fwd9m.steps import _values
        from fwd9m.steps import keras as steps_keras

        saved = steps_keras._variable_digests
        steps_keras._variable_digests = _values.digest_groups
        try:
            yield
        finally:
            steps_keras._variable_digests = saved

    name = f"steps: keras small CNN fit, {batches} batches"
    return _variants(
        name, fit_plain, fit_digests, "fit without the callback", 3 if quick else 5, [("one by one", one_by_one)]
    )


def _jax_cases(quick: bool):
    import jax
    import jax.numpy as jnp

    from fwd9m.steps import step_digest

    steps = 5 if quick else 20
    k = jax.random.PRNGKey(0)
    params = {
        "w1": jax.random.normal(k, (256, 512)) * 0.05,
        "b1": jnp.zeros(512),
        "w2": jax.random.normal(k, (512, 10)) * 0.05,
        "b2": jnp.zeros(10),
    }
    x = jax.random.normal(jax.random.PRNGKey(1), (128, 256))
    y = jax.random.randint(jax.random.PRNGKey(2), (128,), 0, 10)

    @jax.jit
    def step(p, key):
        key, _ = jax.random.split(key)

        def loss_fn(p):
            h = jax.nn.relu(x @ p["w1"] + p["b1"])
            logits = h @ p["w2"] + p["b2"]
            return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(128), y])

        loss, g = jax.value_and_grad(loss_fn)(p)
        return jax.tree_util.tree_map(lambda a, b: a - 0.01 * b, p, g), loss, g, key

    def plain():
        p, key = params, k
        for _ in range(steps):
            p, loss, _, key = step(p, key)
            loss.block_until_ready()

    path = os.path.join(TMP, "jax.steps")  # one run's file, as for Keras

    def digests():
        p, key = params, k
        for i in range(steps):
            p, loss, g, key = step(p, key)
            step_digest(i, loss=loss, params=p, grads=g, key=key, batch=x, path=path)

    return _variants(f"steps: jax jitted MLP, {steps} steps", plain, digests, "jitted steps alone", 3 if quick else 5)


def cases(quick: bool):
    out = []
    for make in (_torch_cases, _keras_cases, _jax_cases):
        try:
            out += make(quick)
        except ImportError:
            continue
    return out
