"""fwd9m.fingerprint: exact, order-sensitive digests; identical across NumPy, torch, TF."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwd9m import fingerprint as fp
from fwd9m.tensorflow import _digest as tf_dg
from fwd9m.torch import _digest as torch_dg

SIZES = [0, 1, 3, 4, 5, 1023, 1024, 1025, 4096 + 7, 3 * 1024 * 4 + 2]


def _arrays():
    rng = np.random.default_rng(0)
    out = []
    for n in SIZES:
        out.append(rng.standard_normal(n).astype(np.float32))
        out.append(rng.integers(0, 255, n, dtype=np.uint8))
        out.append(rng.standard_normal(n).astype(np.float64))
        out.append(rng.standard_normal(n).astype(np.float16))
    return out


def test_reference_values_are_stable():
    # pinned: a change here breaks every stored trace (bump the trace format version)
    assert fp.digest_bytes(b"") == fp.finalize(0, 0)
    assert fp.digest_bytes(b"\x01\x00\x00\x00") == fp.numpy_digest(np.array([1], np.int32))
    assert fp.digest_bytes(b"abc") != fp.digest_bytes(b"abc\x00")  # length is mixed in


def test_order_sensitive_and_exact():
    a = np.arange(5000, dtype=np.float32)
    b = a.copy()
    b[[10, 11]] = b[[11, 10]]
    assert fp.numpy_digest(a) != fp.numpy_digest(b)
    c = a.copy()
    c[[5, 3000]] = c[[3000, 5]]  # across rows
    assert fp.numpy_digest(a) != fp.numpy_digest(c)
    d = a.copy()
    d[7] = np.nextafter(d[7], np.float32(1e9))  # one ULP
    assert fp.numpy_digest(a) != fp.numpy_digest(d)
    x = np.array([1.5, -1.5, 2.0], np.float64)  # sign-only swap of 64-bit words
    assert fp.numpy_digest(x) != fp.numpy_digest(x[[1, 0, 2]])


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=9000))
def test_bytes_and_array_agree(data):
    assert fp.digest_bytes(data) == fp.numpy_digest(np.frombuffer(data, np.uint8))
    if len(data) % 4 == 0:
        assert fp.digest_bytes(data) == fp.numpy_digest(np.frombuffer(data, np.float32))


def test_torch_matches_numpy():
    torch = pytest.importorskip("torch")
    for a in _arrays():
        t = torch.from_numpy(a.copy())
        want = fp.numpy_digest(a)
        assert torch_dg.digest(t) == want
        s, nbytes = torch_dg.partial(t)  # the device path, run on CPU here
        assert fp.finalize(int(s), nbytes) == want
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    assert torch_dg.digest(t.t()) == fp.numpy_digest(t.t().contiguous().numpy())
    assert torch_dg.digest(torch.tensor([True, False, True])) == fp.numpy_digest(np.array([1, 0, 1], np.uint8))
    bf = torch.randn(77).to(torch.bfloat16)
    assert torch_dg.digest(bf) == fp.numpy_digest(bf.view(torch.int16).numpy())


def test_tensorflow_matches_numpy():
    tf = pytest.importorskip("tensorflow")
    for a in _arrays():
        want = fp.numpy_digest(a)
        t = tf.constant(a)
        assert tf_dg.digest(t) == want
        s, nbytes = tf_dg.partial(t)  # the device path, run on CPU here
        assert fp.finalize(int(s.numpy()), int(nbytes)) == want

    @tf.function
    def in_graph(x):
        return tf_dg.partial(x)

    a = np.random.default_rng(1).standard_normal(3000).astype(np.float32)
    s, nbytes = in_graph(tf.constant(a))
    assert fp.finalize(int(s.numpy()), int(nbytes)) == fp.numpy_digest(a)


def test_digest_dispatch():
    assert fp.digest(np.float32(1.0)) == fp.numpy_digest(np.array(1.0, np.float32))
    assert fp.digest(b"xyz") == fp.digest_bytes(b"xyz")
    with pytest.raises(TypeError):
        fp.numpy_digest(np.array([object()]))


@pytest.mark.gpu
def test_torch_cuda_partial_matches_numpy():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    for a in _arrays():
        t = torch.from_numpy(a.copy()).cuda()
        s, nbytes = torch_dg.partial(t)
        assert s.device.type == "cuda"  # reduced on the device, 8 bytes come back
        assert fp.finalize(int(s), nbytes) == fp.numpy_digest(a)


def test_moved_device_digests_still_import_from_fingerprint():
    # issue 20 moved the torch and TF implementations into their framework packages;
    # the old names of fwd9m.fingerprint keep working
    from fwd9m.fingerprint import tf_digest, tf_partial, torch_digest, torch_partial

    assert (torch_digest, torch_partial) == (torch_dg.digest, torch_dg.partial)
    assert (tf_digest, tf_partial) == (tf_dg.digest, tf_dg.partial)
    with pytest.raises(AttributeError):
        fp.no_such_digest  # noqa: B018


def _reference_partial(data: bytes) -> int:
    """Steps 1-3 of the module docstring in plain Python: the spec every
    implementation must match (slow; small inputs only)."""
    mask = (1 << 64) - 1
    data = data + b"\0" * (-len(data) % 4)
    words = [int.from_bytes(data[i : i + 4], "little", signed=True) for i in range(0, len(data), 4)]
    m = [int(x) & mask for x in fp.word_multipliers()]
    total = 0
    for j in range(0, len(words), fp.ROW_WORDS):
        row = sum(w * m[i] for i, w in enumerate(words[j : j + fp.ROW_WORDS])) & mask
        k = ((j // fp.ROW_WORDS) * fp.GOLDEN + fp.ROW_OFFSET) & mask | 1
        total = (total + row * k) & mask
    return total


@pytest.fixture
def no_kernel(monkeypatch):
    """The NumPy path, as on a machine without a C compiler."""
    from fwd9m import _ckernel

    monkeypatch.setitem(_ckernel._state, "lib", None)


def test_compiled_kernel_agrees_with_numpy_and_the_spec():
    from fwd9m import _ckernel

    if _ckernel.kernel() is None:
        pytest.skip("no C compiler here: the NumPy path is the only one")
    rng = np.random.default_rng(3)
    for n in SIZES + [4095, 4097, 2 * 4096 + 1, 2 * 4096 + 3]:
        data = rng.integers(0, 256, n, dtype=np.uint8)
        want = _reference_partial(data.tobytes())
        padded = fp._bytes_to_words(data)
        assert fp._numpy_only_partial(padded) == want, n
        assert _ckernel.partial(data.ctypes.data, n) == want, n  # a ragged tail read in place
        shifted = np.zeros(n + 1, np.uint8)
        shifted[1:] = data
        assert _ckernel.partial(shifted.ctypes.data + 1, n) == want, n  # an unaligned address
        assert fp.u8_digest(shifted[1:]) == fp.finalize(want, n)
        assert _ckernel.digests([shifted.ctypes.data + 1], [n]) == [fp.finalize(want, n)]
    big = rng.integers(-(2**31), 2**31, 5 * fp._PARALLEL_ROWS * fp.ROW_WORDS // 4 + 5, dtype=np.int32)
    assert fp._numpy_partial(big) == fp._numpy_only_partial(big)  # rows split between threads


def test_without_the_kernel_digests_are_the_same(no_kernel):
    from fwd9m import _ckernel

    assert _ckernel.kernel() is None
    for a in _arrays()[:12]:
        assert fp.numpy_digest(a) == fp.finalize(_reference_partial(a.tobytes()), a.nbytes)


def test_a_failed_build_falls_back_to_numpy(monkeypatch, tmp_path):
    from fwd9m import _ckernel

    monkeypatch.setitem(_ckernel._state, "lib", None)
    del _ckernel._state["lib"]
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(_ckernel, "_compiler", lambda: "false")  # a compiler that always fails
    assert _ckernel.kernel() is None
    assert fp.digest_bytes(b"abcde") == fp.finalize(_reference_partial(b"abcde"), 5)
    assert not list(tmp_path.rglob("*.so"))


def test_a_compiler_without_the_avx512_level_builds_the_avx2_clones(monkeypatch, tmp_path):
    """A compiler that rejects the x86-64-v4 clone (before GCC 12) still gives a kernel,
    with the same digests (a real compiler behind a wrapper that refuses that flag)."""
    import os
    import platform

    from fwd9m import _ckernel

    cc = _ckernel._compiler()
    if cc is None or platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip("needs a C compiler on x86-64")
    wrapper = tmp_path / "cc"
    wrapper.write_text(f'#!/bin/sh\ncase "$*" in *FWD9M_CLONES_V4*) exit 1;; esac\nexec {cc} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setitem(_ckernel._state, "lib", None)
    del _ckernel._state["lib"]
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(_ckernel, "_compiler", lambda: str(wrapper))
    assert _ckernel.kernel() is not None
    (so,) = (tmp_path / "cache").rglob("*.so")
    assert b"arch_x86_64_v4" not in so.read_bytes() and os.path.getsize(so)
    data = np.random.default_rng(3).integers(0, 256, 3 * fp.ROW_WORDS * 4 + 7, dtype=np.uint8)
    assert fp.u8_digest(data) == fp.finalize(_reference_partial(data.tobytes()), data.size)


@pytest.mark.parametrize("kernel", [True, False], ids=["kernel", "numpy"])
def test_digests_of_many_values_equal_one_by_one(kernel, monkeypatch):
    torch = pytest.importorskip("torch")
    from fwd9m import _ckernel

    if not kernel:
        monkeypatch.setitem(_ckernel._state, "lib", None)
    values = [a for a in _arrays()[:16]]
    values += [np.arange(12, dtype=np.int16).reshape(3, 4).T, np.float32(2.5), 3, b"abc", torch.arange(5)]
    values += [np.array(True), np.zeros((0, 2))]
    assert fp.digests(values) == [fp.digest(v) for v in values]
    with pytest.raises(TypeError):
        fp.digests([np.ones(3), np.array([object()])])
