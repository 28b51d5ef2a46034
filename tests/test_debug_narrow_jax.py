"""A jitted JAX call whose nondeterminism is inside it, narrowed to the equation."""

from __future__ import annotations

import pytest

from fwd9m import debug

jax = pytest.importorskip("jax")
np = pytest.importorskip("numpy")


def _step():
    import jax.numpy as jnp

    gen = np.random.default_rng()  # unseeded: a different draw on every call, certainly

    def noise(y):
        return (y + gen.standard_normal(y.shape)).astype(np.float32)

    @jax.jit
    def step(w, x):
        y = jnp.tanh(x @ w)
        z = jax.pure_callback(noise, jax.ShapeDtypeStruct(y.shape, y.dtype), y)  # CALLBACK LINE
        return w - 0.1 * (x.T @ z)

    return step, jnp.ones((4, 4)), jnp.arange(12.0).reshape(3, 4) / 10


def _line(marker: str) -> int:
    with open(__file__, encoding="utf-8") as f:
        return next(i for i, text in enumerate(f, 1) if marker in text and "def " not in text)


def test_pure_callback_inside_jit_is_narrowed_to_its_equation_and_line(tmp_path):
    step, w, x = _step()
    path = tmp_path / "run.trace"
    with debug.record(path, framework="jax", capture="0:0"):
        step(w, x)
    ops = list(debug.TraceReader(path))
    assert ops[0].name == "jit(step)"
    r = debug.replay(path, 0)
    assert r.confirmed
    assert r.op == f"jit: pure_callback at test_debug_narrow_jax.py:{_line('CALLBACK LINE')}" or r.op.endswith(
        f"tests/test_debug_narrow_jax.py:{_line('CALLBACK LINE')}"
    ), r.op
    assert "narrowed inside the jitted call" in r.render() and "not the fused program" in r.render()


def test_a_deterministic_jit_is_not_narrowed():
    from fwd9m.jax._narrow import narrow

    f = jax.jit(lambda a: (a * 2.0).sum())
    got = narrow(jax.make_jaxpr(f)(np.ones(3, np.float32)), [np.ones(3, np.float32)])
    assert got["found"] is False and got["equations"] >= 2
