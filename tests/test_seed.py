"""seed_everything and derive_seed: real frameworks, fresh interpreters where the
point is what a new process sees."""

from __future__ import annotations

import os
import random
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fwd9m
from fwd9m.errors import ConfigurationError
from fwd9m.seed import ENV_VAR, derive_seed, seed_everything

# Golden values: derive_seed must never change (it would silently change every
# user's derived streams). Recompute only with a format-version bump.
GOLDEN = {
    (0,): 14356553846755894629,
    (42, "worker", 3): 12496570261991234707,
    (42, "epoch", 0, "rank", 1): 15912249210625786078,
    (2**40, b"x", -5, None, True, ("a", 1)): 1567906783234388216,
}


def test_seed_everything_python_numpy_and_env(monkeypatch):
    np = pytest.importorskip("numpy")
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert seed_everything(123, frameworks=[]) == 123
    a = (random.random(), np.random.rand())
    assert os.environ[ENV_VAR] == "123"
    seed_everything(123, frameworks=[])  # noqa: FWD102  (reseeding on purpose)
    assert (random.random(), np.random.rand()) == a
    # no argument: reuses the exported seed (what a child process does)
    assert seed_everything(frameworks=[]) == 123  # noqa: FWD102  (reseeding on purpose)
    assert (random.random(), np.random.rand()) == a


def test_seed_everything_fresh_seed_is_returned(monkeypatch, caplog):
    monkeypatch.delenv(ENV_VAR, raising=False)
    with caplog.at_level("WARNING", logger="fwd9m"):
        s = seed_everything(frameworks=[])
    assert 0 <= s < 2**32 and os.environ[ENV_VAR] == str(s)
    assert (
        f"seed_everything: no seed given and {ENV_VAR} unset; using fresh random "
        f"seed {s}. Pass seed={s} to repeat this run." in caplog.text
    )


@pytest.mark.parametrize("bad", [-1, 2**32, 10**30])
def test_seed_range_checked(bad):
    with pytest.raises(ConfigurationError, match="out of range"):
        seed_everything(bad, frameworks=[])


@pytest.mark.parametrize("bad", [1.5, "3", True, None.__class__])
def test_seed_type_checked(bad):
    with pytest.raises(TypeError):
        seed_everything(bad, frameworks=[])


def test_bad_env_and_unknown_framework(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "abc")
    with pytest.raises(ConfigurationError, match=ENV_VAR):
        seed_everything(frameworks=[])
    with pytest.raises(ConfigurationError, match="unknown framework"):
        seed_everything(1, frameworks=["caffe"])


def test_named_framework_not_installed(monkeypatch):
    """Simulated absence (installed_version patched): the error comes before any seeding."""
    import fwd9m.seed._everything as seed_mod

    name = "keras"
    # hidden for the duration of the test (restored by monkeypatch); the error is raised
    # before any import, so nothing re-imports it
    monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setattr(seed_mod, "installed_version", lambda n: None)
    with pytest.raises(ConfigurationError, match="not installed"):
        seed_everything(1, frameworks=[name])
    assert ENV_VAR not in os.environ


_CHILD = r"""
import sys, json, random
import fwd9m
names = sys.argv[1].split(",") if sys.argv[1] else []
for n in names:
    __import__(n)
s = fwd9m.seed_everything(7)
out = {"seed": s, "python": random.random(),
       "imported": sorted(m for m in ("tensorflow", "torch", "jax", "keras") if m in sys.modules)}
if "torch" in names:
    import torch
    out["torch"] = torch.rand(3).tolist()
if "tensorflow" in names:
    import tensorflow as tf
    out["tf"] = tf.random.uniform([3]).numpy().tolist()
if "keras" in names:
    import keras
    out["keras"] = keras.random.uniform([3]).numpy().tolist()
print("OUT:" + json.dumps(out))
"""


def _children(names: str, n: int = 1, env=None) -> list[dict]:
    """Run the probe in ``n`` fresh interpreters at once; their JSON outputs."""
    import json

    full = dict(os.environ, **(env or {}))
    full.pop(ENV_VAR, None)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, names], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full
        )
        for _ in range(n)
    ]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        line = [ln for ln in out.splitlines() if ln.startswith("OUT:")]
        assert line, err[-3000:]
        outs.append(json.loads(line[-1][4:]))
    return outs


def _child(names: str, env=None) -> dict:
    return _children(names, 1, env)[0]


def test_imports_nothing_not_imported():
    out = _child("")
    assert out["imported"] == []


def test_frameworks_seeded_identically_in_fresh_processes():
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    pytest.importorskip("keras")
    a, b = _children("torch,tensorflow,keras", 2)
    assert a == b
    assert {"keras", "tensorflow", "torch"} <= set(a["imported"])


def test_keras_on_torch_backend_does_not_import_tensorflow():
    pytest.importorskip("torch")
    pytest.importorskip("keras")
    out, again = _children("torch,keras", 2, env={"KERAS_BACKEND": "torch"})
    assert "tensorflow" not in out["imported"]
    assert out == again


def test_torch_seeded_in_process():
    torch = pytest.importorskip("torch")
    seed_everything(5, frameworks=["torch"])
    a = torch.rand(4)
    seed_everything(5)
    assert torch.equal(a, torch.rand(4))


def test_jax_key():
    jax = pytest.importorskip("jax")
    k1, k2 = fwd9m.seed.jax_key(3), fwd9m.seed.jax_key(3, "w", 1)
    assert (jax.random.key_data(k1) == jax.random.key_data(jax.random.key(3))).all()
    assert (jax.random.key_data(k2) == jax.random.key_data(jax.random.key(derive_seed(3, "w", 1, bits=32)))).all()


# ---------------------------------------------------------------- derive_seed


def test_derive_seed_golden_values():
    for keys, expected in GOLDEN.items():
        assert derive_seed(*keys) == expected, keys


def test_derive_seed_stable_across_hash_seed():
    code = "from fwd9m.seed import derive_seed;print(derive_seed(42, 'worker', 3), derive_seed(1, b'a', ('x', 2)))"
    outs = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ, PYTHONHASHSEED=h)
        ).stdout
        for h in ("0", "1", "12345")
    }
    assert len(outs) == 1
    assert outs.pop().split() == [str(derive_seed(42, "worker", 3)), str(derive_seed(1, b"a", ("x", 2)))]


def test_derive_seed_types_and_bits():
    assert derive_seed(1, 1) != derive_seed(1, "1") != derive_seed(1, True)
    assert derive_seed(1, ("a", "b")) != derive_seed(1, "a", "b")
    assert derive_seed(1, "ab") != derive_seed(1, "a", "b")
    assert derive_seed(1, "x", bits=32) == derive_seed(1, "x", bits=64) >> 32
    assert 0 <= derive_seed(1, bits=1) <= 1
    with pytest.raises(ConfigurationError):
        derive_seed(1, bits=0)
    with pytest.raises(ConfigurationError):
        derive_seed(-1)
    with pytest.raises(TypeError):
        derive_seed(1, 1.5)
    # a lone surrogate (a file name from os.fsdecode) is a key, distinct from its neighbours
    assert derive_seed(1, "\udcff") != derive_seed(1, "\udcfe") != derive_seed(1, "")


_key = st.one_of(st.integers(), st.text(max_size=8), st.binary(max_size=8), st.booleans(), st.none())
_keys = st.lists(st.one_of(_key, st.tuples(_key, _key)), max_size=4).map(tuple)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**70), _keys, _keys)
def test_derive_seed_no_collisions(seed, a, b):
    def norm(keys):  # equal key tuples in Python may differ in type (1 == True)
        return tuple((type(k), norm(k) if isinstance(k, tuple) else k) for k in keys)

    if norm(a) != norm(b):
        assert derive_seed(seed, *a) != derive_seed(seed, *b)
    else:
        assert derive_seed(seed, *a) == derive_seed(seed, *b)


def test_derive_seed_no_collisions_on_a_grid():
    seen = {
        derive_seed(0, "task", e, s, r, w) for e in range(20) for s in range(50) for r in range(4) for w in range(4)
    }
    assert len(seen) == 20 * 50 * 4 * 4
