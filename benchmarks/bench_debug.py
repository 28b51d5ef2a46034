"""Cost of ``fwd9m.debug.record`` (digests of every op's inputs and outputs).

Cases (ratios of the same workload timed in the same run, interleaved; ``_harness``):

* recording overhead: N training steps inside ``record()`` vs the same N steps
  uninstrumented, for a small CNN and a small transformer block, in PyTorch and in
  Keras 3 (TF backend, compiled ``train_on_batch``), and JAX (a jitted MLP step:
  target <= 1.5x; the same step eagerly, every primitive recorded). Target <= 1.5x.
* against the frameworks' own tools on the same workloads: PyTorch's
  ``torch.utils._debug_mode.DebugMode`` with ``log_tensor_hashes(hash_inputs=True)``
  and TF's ``tf.debugging.experimental.enable_dump_debug_info(...,
  tensor_debug_mode="FULL_TENSOR")``. Reported as their time / ours; target >= 10x.

Keras graphs stay instrumented once traced under a recorder (as with tfdbg), so the
uninstrumented baseline uses a separate, identical model traced outside any recording.
"""

from __future__ import annotations

import os
import tempfile

from _harness import Case
from _models import torch_models, torch_train

TMP = tempfile.mkdtemp(prefix="fwd9m-bench-debug-")


def _torch_cases(quick: bool):
    import torch

    import fwd9m.debug as dbg

    torch.manual_seed(0)
    torch.set_num_threads(1)  # a shared 2-core machine: keep the measurement stable
    steps = 3 if quick else 10
    repeat = 3 if quick else 5

    out = []
    for name, make in torch_models():
        model, x, y = make()
        opt = torch.optim.SGD(model.parameters(), lr=0.01)

        train = torch_train(model, x, y, opt, steps)

        def recorded(train=train, name=name):
            with dbg.record(os.path.join(TMP, f"torch-{name}.trace"), framework="torch"):
                train()

        def debug_mode(train=train):
            from torch.utils._debug_mode import DebugMode

            with DebugMode() as dm, DebugMode.log_tensor_hashes(hash_inputs=True):
                train()
            return dm

        def modules(train=train, name=name):
            with dbg.record(os.path.join(TMP, f"torch-m-{name}.trace"), framework="torch", level="modules"):
                train()

        def one_step(train=train, name=name):
            with dbg.record(os.path.join(TMP, f"torch-w-{name}.trace"), framework="torch", steps=(1, 1)):
                train()

        out.append(
            Case(
                f"torch record {name} ({steps} steps)",
                train,
                recorded,
                baseline_name="uninstrumented",
                target=1.5,
                repeat=repeat,
                note="every op: includes opening the trace and the environment fingerprint",
            )
        )
        out.append(
            Case(
                f"torch record level=modules {name} ({steps} steps)",
                train,
                modules,
                baseline_name="uninstrumented",
                target=1.5,
                repeat=repeat,
                note="--fast first pass: module calls, grads, params",
            )
        )
        out.append(
            Case(
                f"torch record steps=1:1 {name} ({steps} steps)",
                train,
                one_step,
                baseline_name="uninstrumented",
                repeat=repeat,
                note="--fast second pass: every op of one step",
            )
        )
        out.append(
            Case(
                f"torch DebugMode(hash_inputs) / record, {name}",
                recorded,
                debug_mode,
                baseline_name="fwd9m record",
                target=10.0,
                higher_is_better=True,
                repeat=repeat,
            )
        )
        out.append(
            Case(
                f"torch DebugMode(hash_inputs) / record modules, {name}",
                modules,
                debug_mode,
                baseline_name="fwd9m record level=modules",
                target=10.0,
                higher_is_better=True,
                repeat=repeat,
                note="total times; compare overheads via the uninstrumented case",
            )
        )
    return out


def _keras_cases(quick: bool):
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import keras
    import numpy as np
    import tensorflow as tf

    import fwd9m.debug as dbg

    if keras.backend.backend() != "tensorflow":
        raise ImportError("Keras benchmarks need KERAS_BACKEND=tensorflow")
    steps = 3 if quick else 10
    repeat = 3 if quick else 5
    rng = np.random.default_rng(0)

    def cnn():
        m = keras.Sequential(
            [
                keras.Input((32, 32, 3)),
                keras.layers.Conv2D(16, 3, activation="relu"),
                keras.layers.MaxPooling2D(),
                keras.layers.Conv2D(32, 3, activation="relu"),
                keras.layers.GlobalAveragePooling2D(),
                keras.layers.Dense(10),
            ]
        )
        return m, rng.standard_normal((32, 32, 32, 3)).astype("float32")

    def block():
        inp = keras.Input((32, 64))
        att = keras.layers.MultiHeadAttention(4, 16)(inp, inp)
        h = keras.layers.LayerNormalization()(inp + att)
        ff = keras.layers.Dense(64)(keras.layers.Dense(128, activation="relu")(h))
        h = keras.layers.LayerNormalization()(h + ff)
        out = keras.layers.Dense(10)(keras.layers.Flatten()(h))
        return keras.Model(inp, out), rng.standard_normal((16, 32, 64)).astype("float32")

    out, last = [], []
    for name, make in (("small CNN", cnn), ("transformer block", block)):
        models = []
        for _ in range(4):  # plain / recorded / tfdbg / layer-level: separate traces
            keras.utils.set_random_seed(0)
            m, x = make()
            m.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
            models.append(m)
        y = rng.integers(0, 10, len(x))
        plain_m, rec_m, dump_m, layer_m = models

        def train(m, x=x, y=y):
            for _ in range(steps):
                m.train_on_batch(x, y)

        def plain(train=train, m=plain_m):
            train(m)

        def recorded(train=train, m=rec_m, name=name):
            with dbg.record(os.path.join(TMP, f"keras-{name}.trace"), framework="tensorflow"):
                train(m)

        def dumped(train=train, m=dump_m):
            # enabled once for the rest of the process: in TF 2.21, enabling again after
            # disable_dump_debug_info() crashes (segfault) when a function traced under
            # the first dump runs. So these cases run last, and tfdbg's eager callback
            # also sees the eager calls of our baseline (in our disfavour).
            tf.debugging.experimental.enable_dump_debug_info(
                os.path.join(TMP, "tfdbg"), tensor_debug_mode="FULL_TENSOR", circular_buffer_size=-1
            )
            train(m)

        def layers(train=train, m=layer_m, name=name):
            with dbg.record(os.path.join(TMP, f"keras-l-{name}.trace"), framework="tensorflow", level="modules"):
                train(m)

        out.append(
            Case(
                f"keras record level=modules {name} ({steps} steps)",
                plain,
                layers,
                baseline_name="uninstrumented",
                target=1.5,
                repeat=repeat,
                note="--fast first pass: layer calls, grads, variables",
            )
        )
        out.append(
            Case(
                f"keras record {name} ({steps} steps)",
                plain,
                recorded,
                baseline_name="uninstrumented",
                target=1.5,
                repeat=repeat,
                note="graph ops instrumented with one numpy_function each",
            )
        )
        last.append(
            Case(
                f"tfdbg FULL_TENSOR / record, keras {name}",
                recorded,
                dumped,
                baseline_name="fwd9m record",
                target=10.0,
                higher_is_better=True,
                repeat=repeat,
            )
        )
        last.append(
            Case(
                f"tfdbg FULL_TENSOR / record modules, keras {name}",
                layers,
                dumped,
                baseline_name="fwd9m record level=modules",
                target=10.0,
                higher_is_better=True,
                repeat=repeat,
            )
        )
    return out + last


def _jax_cases(quick: bool):
    import jax
    import jax.numpy as jnp
    import numpy as np

    import fwd9m.debug as dbg

    steps = 10 if quick else 50
    repeat = 3 if quick else 5
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((4096, 256)), dtype=jnp.float32)
    y = jnp.asarray(rng.integers(0, 10, 4096))
    k1, k2 = jax.random.split(jax.random.key(0))
    params0 = [jax.random.normal(k1, (256, 1024)) * 0.05, jax.random.normal(k2, (1024, 10)) * 0.05]

    def loss(params, xb, yb):
        logits = jnp.tanh(xb @ params[0]) @ params[1]
        return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(len(yb)), yb])

    def step(params, xb, yb):
        grads = jax.grad(loss)(params, xb, yb)
        return [p - 0.1 * g for p, g in zip(params, grads)]

    jit_step = jax.jit(step)

    def loop(fn):
        params = params0
        for _ in range(steps):
            idx = rng.choice(4096, 512, replace=False)
            params = fn(params, x[idx], y[idx])
        jax.block_until_ready(params)

    out = []
    for name, fn, note in (
        (
            "jitted MLP step",
            jit_step,
            "each jit call one op; the first recorded call recompiles (not in the best-of time)",
        ),
        ("eager MLP step (jax.grad, no jit)", step, "every primitive recorded"),
    ):

        def plain(fn=fn):
            loop(fn)

        def recorded(fn=fn, name=name):
            with dbg.record(os.path.join(TMP, f"jax-{name[:5]}.trace"), framework="jax"):
                loop(fn)

        out.append(
            Case(
                f"jax record {name} ({steps} steps)",
                plain,
                recorded,
                baseline_name="uninstrumented",
                target=1.5 if fn is jit_step else None,
                repeat=repeat,
                note=note,
            )
        )
    return out


def cases(quick: bool):
    out = []
    try:
        out += _torch_cases(quick)
    except ImportError:
        pass
    try:
        out += _keras_cases(quick)
    except ImportError:
        pass
    try:
        out += _jax_cases(quick)
    except ImportError:
        pass
    if not out:
        raise ImportError("none of torch, keras/tensorflow, jax is installed")
    return out
