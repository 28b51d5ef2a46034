"""The faster reads of a step's values (issue 17) give what the plain reads give:
NumPy's global key read in place, Python's RNG state as uint64, cached metadata."""

from __future__ import annotations

import random

import numpy as np
import pytest

from fwd9m import fingerprint
from fwd9m.steps import _values


def _same_as_get_state():
    key, want = _values._numpy_key(np), np.random.get_state()[1]
    assert key.dtype == want.dtype and key.shape == want.shape
    assert fingerprint.digest(key) == fingerprint.digest(want)


def test_numpy_key_in_place_follows_the_generator():
    _same_as_get_state()
    _same_as_get_state()  # now the in-place view
    np.random.random(1000)  # the generator moves on: the view sees it
    _same_as_get_state()
    np.random.seed(5)
    _same_as_get_state()
    saved = np.random.get_bit_generator()
    try:
        np.random.set_bit_generator(np.random.MT19937(7))  # another generator: checked again
        _same_as_get_state()
        _same_as_get_state()
        assert _values._KEY_VIEW[0] is np.random.get_bit_generator()
    finally:
        np.random.set_bit_generator(saved)
    _same_as_get_state()


def test_python_rng_leaf_is_its_state_as_uint64():
    random.seed(3)
    leaf = dict(_values.global_rng_leaves())["python"]
    want = np.asarray(random.getstate()[1], dtype=np.uint64)
    assert leaf.dtype == want.dtype and np.array_equal(leaf, want)


def test_meta_of_cached_equals_uncached():
    jnp = pytest.importorskip("jax.numpy")
    values = [np.zeros((2, 3), np.float32), np.zeros((2, 3), np.int8), jnp.zeros((4,)), jnp.zeros((2, 3))]
    values += [np.float64(1.5), np.zeros((2, 3), ">f4")]
    for v in values * 2:
        assert _values.meta_of(v) == _values._meta(v.dtype, v.shape)
    assert _values.meta_of(jnp.zeros((2, 3))) == "float32[2,3]"
    assert _values.meta_of(3) == "int"
