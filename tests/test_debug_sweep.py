"""Recorder sweep: each recorder over a broad, programmatically generated set of ops.

For every framework the op list is generated, not written by hand: each public function
of a namespace (``torch.nn.functional``, the catalog's aten ops through their schemas,
``tf.math`` / ``tf.nn`` / ``tf.image`` / ``tf.linalg`` / ``tf.signal``, ``jax.numpy`` /
``jax.nn`` / ``jax.lax``) is tried once unrecorded with simple float inputs; those that
run (the others need special arguments and are skipped, counted) are run again in one
block without recording and in one block under ``fwd9m.debug.record``, forward and
backward (eager and inside ``tf.function`` / ``jax.jit``). The sweep asserts that
(a) no exception escapes the recorder, (b) every result is bit-identical with and
without recording, (c) no op was "not recorded" (the trace's end record counts them).
"""

from __future__ import annotations

import inspect
import math

import pytest

import fwd9m.debug as dbg
from fwd9m._recording._store import NOT_RECORDED, TraceReader

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::UserWarning"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

#: functions that are not ops on their input (dispatch helpers, constructors of other
#: objects, functions that print or warn by design): never called
SKIP = {
    "handle_torch_function",
    "has_torch_function",
    "has_torch_function_unary",
    "has_torch_function_variadic",
    "boolean_dispatch",
    "assert_int_or_pair",
    "print",
    "Print",
    "py_function",
    "numpy_function",
    "no_op",
    "executing_eagerly",
}
MIN_SWEPT = {"torch": 60, "tensorflow": 150, "jax": 120}


def _not_recorded(path) -> tuple[dict, list[str]]:
    r = TraceReader(path)
    nodes = [op.node for op in r if op.node.startswith(NOT_RECORDED)]
    return (r.end or {}).get("not_recorded", {}), nodes


def _candidates(module, names=None):
    for name in sorted(names if names is not None else dir(module)):
        if name.startswith("_") or name in SKIP:
            continue
        fn = getattr(module, name, None)
        if callable(fn) and not inspect.isclass(fn) and not inspect.ismodule(fn):
            yield name, fn


def _usable(calls):
    """The (name, thunk) pairs that run without raising (unrecorded); the rest need
    special arguments."""
    ok = []
    for name, thunk in calls:
        try:
            thunk()
        except Exception:  # noqa: BLE001 - needs other arguments: skipped
            continue
        ok.append((name, thunk))
    return ok


# ----------------------------------------------------------------------------- torch


def _torch_arg(torch, arg, x, idx):
    """A simple value for one schema argument, or raise LookupError."""
    t = str(arg.type)
    if arg.name in ("index", "indices"):
        return idx
    if t.startswith("Tensor"):
        return x.clone()
    if t.startswith("Optional") or t.endswith("?"):
        return None
    if arg.has_default_value():
        return arg.default_value
    if t in ("int", "SymInt"):
        return 0
    if t in ("float", "Scalar"):
        return 0.5
    if t == "bool":
        return False
    if t.startswith(("int[", "SymInt[")):
        return [1]
    raise LookupError(t)


def _torch_calls(torch):
    import torch.nn.functional as F

    calls = []
    for name, fn in _candidates(F):
        for shape in ((2, 3, 4, 5), (4, 4)):
            for arity in (1, 2, 3):

                def thunk(fn=fn, arity=arity, shape=shape):
                    x = torch.linspace(-2, 2, math.prod(shape), dtype=torch.float64).reshape(shape)
                    x.requires_grad_(True)
                    return x, fn(*([x] * arity))

                calls.append((f"F.{name}{list(shape)}/{arity}", thunk))
    from fwd9m import catalog

    names = sorted({o for e in catalog.entries("torch") for o in e.ops if o.startswith("aten::")})
    for qual in names:
        base = qual.split("::", 1)[1]
        if "empty" in base or "resize" in base:
            continue  # uninitialized memory by design (catalog torch.fill-uninitialized-memory): no result to compare
        packet = getattr(torch.ops.aten, base, None)
        if packet is None:
            continue
        for overload in packet.overloads():
            op = getattr(packet, overload)

            def thunk(op=op):
                x = torch.linspace(-2, 2, 12, dtype=torch.float64).reshape(3, 4)
                idx = torch.zeros(3, dtype=torch.long)
                args = [_torch_arg(torch, a, x, idx) for a in op._schema.arguments if not a.kwarg_only]
                return x, op(*args)

            calls.append((f"{qual}.{overload}", thunk))
    return calls


def _torch_values(torch, results):
    out = []
    for x, y in results:
        ys = y if isinstance(y, (tuple, list)) else [y]
        ts = [t for t in ys if isinstance(t, torch.Tensor)]
        for t in ts:
            out.append(
                t.detach().cpu().contiguous().view(-1).numpy().tobytes() if t.layout == torch.strided else repr(t)
            )
        floats = [t for t in ts if t.requires_grad and t.is_floating_point()]
        if floats and x.requires_grad:
            grads = torch.autograd.grad([t.sum() for t in floats], x, allow_unused=True)
            out.append(None if grads[0] is None else grads[0].numpy().tobytes())
    return out


def test_torch_recorder_sweep(tmp_path):
    torch = pytest.importorskip("torch")

    calls = _usable(_torch_calls(torch))
    assert len(calls) >= MIN_SWEPT["torch"], [n for n, _ in calls]
    assert sum(n.startswith("aten::") for n, _ in calls) >= 10, [n for n, _ in calls]

    def block():
        torch.manual_seed(0)
        return _torch_values(torch, [thunk() for _, thunk in calls])

    plain = block()
    path = tmp_path / "torch.trace"
    with dbg.record(path, framework="torch") as trace:
        recorded = block()
    assert recorded == plain
    assert trace.ops > len(calls)
    assert _not_recorded(path) == ({}, [])


# ----------------------------------------------------------------------------- tensorflow


def test_tensorflow_recorder_sweep(tmp_path):
    tf = pytest.importorskip("tensorflow")

    x0 = tf.reshape(tf.linspace(0.05, 0.95, 2 * 8 * 8 * 3), [2, 8, 8, 3])
    calls = []
    for ns_name in ("math", "nn", "image", "linalg", "signal"):
        ns = getattr(tf, ns_name)
        for name, fn in _candidates(ns):
            for arity in (1, 2):
                calls.append(
                    (
                        f"tf.{ns_name}.{name}/{arity}",
                        lambda fn=fn, arity=arity, x=None: fn(*([x0 if x is None else x] * arity)),
                    )
                )
    usable = _usable(calls)
    assert len(usable) >= MIN_SWEPT["tensorflow"], [n for n, _ in usable]

    def run_all(x, tolerant=False):
        outs = []
        for _, thunk in usable:
            try:
                y = thunk(x=x)
            except Exception:  # noqa: BLE001 - traced: some eager-only functions cannot be
                if not tolerant:
                    raise
                continue
            outs.extend(t for t in tf.nest.flatten(y) if isinstance(t, tf.Tensor))
        return outs

    def block():
        tf.random.set_seed(0)
        x = tf.Variable(x0)
        with tf.GradientTape(persistent=True) as tape:
            eager = run_all(x)
        floats = [t for t in eager if t.dtype.is_floating]
        grads = tape.gradient([tf.reduce_sum(t) for t in floats], x, unconnected_gradients=tf.UnconnectedGradients.ZERO)

        @tf.function(jit_compile=False)
        def graph(v):
            ys, gs = [], []
            for _, thunk in usable:
                with tf.GradientTape() as t2:
                    t2.watch(v)
                    try:
                        y = [t for t in tf.nest.flatten(thunk(x=v)) if isinstance(t, tf.Tensor)]
                    except Exception:  # noqa: BLE001 - eager-only: cannot be traced
                        continue
                ys += y
                floats = [tf.reduce_sum(t) for t in y if t.dtype.is_floating]
                try:  # some ops have no registered gradient (DenseBincount)
                    g = t2.gradient(floats, v) if floats else None
                except LookupError:
                    g = None
                if g is not None:
                    gs.append(g)
            return ys, gs

        ys, g2 = graph(tf.constant(x0))
        return [t.numpy().tobytes() for t in (*eager, grads, *ys, *g2)]

    plain = block()
    path = tmp_path / "tf.trace"
    with dbg.record(path, framework="tensorflow") as trace:
        recorded = block()
    assert recorded == plain
    assert trace.ops > len(usable)
    assert _not_recorded(path) == ({}, [])


# ----------------------------------------------------------------------------- jax


def test_jax_recorder_sweep(tmp_path):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    import numpy as np

    x0 = np.linspace(0.05, 0.95, 4 * 6, dtype=np.float32).reshape(4, 6)
    calls = []
    # unary for jnp / jax.nn (a binary jnp call compiles as often as a unary one and
    # adds little: the same jit path), unary and binary for lax primitives
    for prefix, ns, arities in (("jnp", jnp, (1,)), ("jax.nn", jax.nn, (1,)), ("lax", jax.lax, (1, 2))):
        for name, fn in _candidates(ns):
            for arity in arities:
                calls.append(
                    (
                        f"{prefix}.{name}/{arity}",
                        lambda fn=fn, arity=arity, x=None: fn(*([jnp.asarray(x0) if x is None else x] * arity)),
                    )
                )
    usable = calls  # narrowed by the first (unrecorded) eager pass: each call compiles

    def tolerant(v, prefix=""):  # traced: functions that only run eagerly are left out
        out = []
        for name, thunk in usable:
            if not name.startswith(prefix):
                continue
            try:
                out.append(thunk(x=v))
            except Exception:  # noqa: BLE001
                continue
        return [t for t in jax.tree_util.tree_leaves(out) if hasattr(t, "dtype")]

    def leaves(y):
        return [np.asarray(t).tobytes() for t in jax.tree_util.tree_leaves(y) if isinstance(t, (jax.Array, np.ndarray))]

    def block():
        nonlocal usable
        x = jnp.asarray(x0)
        eager, ok = [], []
        for name, thunk in usable:
            try:
                eager += leaves(thunk(x=x))
            except Exception:  # noqa: BLE001 - needs other arguments: skipped
                if usable is calls:
                    continue
                raise
            ok.append((name, thunk))
        usable = ok
        jitted = jax.jit(tolerant)(x)

        def loss(v):  # backward through jax.nn (some jnp functions loop: no reverse mode)
            return sum(
                jnp.sum(t.astype(jnp.float32)) for t in tolerant(v, "jax.nn.") if jnp.issubdtype(t.dtype, jnp.floating)
            )

        grad = jax.jit(jax.grad(loss))(x)
        return eager + leaves(jitted) + leaves(grad)

    plain = block()
    assert len(usable) >= MIN_SWEPT["jax"], [n for n, _ in usable]
    path = tmp_path / "jax.trace"
    with dbg.record(path, framework="jax") as trace:
        recorded = block()
    assert recorded == plain
    assert trace.ops > len(usable)
    assert _not_recorded(path) == ({}, [])
