"""Exact, order-sensitive tensor digests, shared by ``fwd9m check`` and ``fwd9m debug``.

The digest of a tensor is a 64-bit integer computed from its bytes only (dtype and
shape are recorded next to it, never mixed in), with integer arithmetic that wraps
modulo 2**64. Integer addition is associative, so the result does not depend on the
order in which a device reduces, which makes the digest itself deterministic; a float
sum or norm (as in ``torch.utils._debug_mode.norm_hash_fn``) is not.

Algorithm (identical in every implementation, for identical bytes):

1. Take the tensor's bytes in row-major (C) order, native little-endian layout, and
   zero-pad them to a multiple of 4. Read them as signed 32-bit words ``w[0..N-1]``,
   sign-extended to 64 bits.
2. Cut the words into rows of :data:`ROW_WORDS` words (the last row may be short).
   Row ``j`` sums ``w[j*R + i] * M[i]`` mod 2**64, where ``M`` are fixed odd 64-bit
   constants (:func:`word_multipliers`); a permutation of words within a row changes
   the sum unless the two words are equal (up to a ~2**-32 chance).
3. The rows are combined as ``S = sum_j row_j * K[j]`` mod 2**64 with
   ``K[j] = (j * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E5D) | 1``, so moving data
   between rows changes ``S`` too.
4. ``digest = fmix64(S ^ (nbytes * 0xC2B2AE3D27D4EB4F))`` (the MurmurHash3 finaliser),
   done on the host with Python integers after ``S`` (8 bytes) comes back.

The NumPy implementation (also used for CPU tensors of torch and TF through zero-copy
views) and the torch and TensorFlow implementations (for tensors on an accelerator)
give the same digest for the same bytes (``tests/test_fingerprint.py``). Steps 1-3 run
on the tensor's device; only the 8-byte partial sum ``S`` travels to the host, and
callers can batch those transfers (:func:`torch_partial`, :func:`finalize`).

Collision bound: two different byte strings of the same length collide with a chance
of about 2**-32 or less for a change confined to one row (the multipliers are random
odd constants); the digest is for detecting run-to-run differences, not an adversary.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ROW_WORDS",
    "digest",
    "digest_bytes",
    "numpy_digest",
    "torch_digest",
    "torch_partial",
    "tf_digest",
    "tf_partial",
    "finalize",
    "word_multipliers",
    "row_multipliers",
]

#: Words (4 bytes) per row: 4 KiB rows fit in L1 cache.
ROW_WORDS = 1024
_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_ROW_OFFSET = 0x632BE59BD9B4E5D
_LEN_MULT = 0xC2B2AE3D27D4EB4F
_K0 = _ROW_OFFSET | 1  # K[0]

_cache: dict[Any, Any] = {}


def _splitmix64(x: int) -> int:
    x = (x + _GOLDEN) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def _to_signed(x: int) -> int:
    return x - (1 << 64) if x >= 1 << 63 else x


def word_multipliers():
    """``M``: :data:`ROW_WORDS` odd 64-bit constants (splitmix64 of 0, 1, ...) as an
    int64 NumPy array (two's complement)."""
    m = _cache.get("M")
    if m is None:
        import numpy as np

        m = np.array([_to_signed(_splitmix64(i) | 1) for i in range(ROW_WORDS)], dtype=np.int64)
        m.setflags(write=False)
        _cache["M"] = m
    return m


def row_multipliers(rows: int):
    """``K[0..rows-1]`` as an int64 NumPy array (wrapping arithmetic)."""
    import numpy as np

    k = _cache.get("K")
    if k is None or len(k) < rows:
        n = max(rows, 2 * len(k) if k is not None else 4096)
        with np.errstate(over="ignore"):
            u = np.arange(n, dtype=np.uint64) * np.uint64(_GOLDEN) + np.uint64(_ROW_OFFSET)
        k = (u | np.uint64(1)).view(np.int64)
        k.setflags(write=False)
        _cache["K"] = k
    return k[:rows]


def finalize(partial: int, nbytes: int) -> int:
    """Step 4: the digest (unsigned 64-bit int) from the partial sum ``S`` and the byte
    length. ``partial`` may be signed (two's complement) or unsigned."""
    x = (partial & _MASK) ^ ((nbytes * _LEN_MULT) & _MASK)
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & _MASK
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) & _MASK
    return x ^ (x >> 33)


# ----------------------------------------------------------------------------- NumPy


def _numpy_partial(words) -> int:
    """``S`` for a 1-D int32 NumPy array of words."""
    import numpy as np

    n = words.size
    m = word_multipliers()
    if n <= ROW_WORDS:  # one row: the common case of small tensors, two NumPy calls
        return (int(np.dot(words, m[:n])) * _K0) & _MASK if n else 0
    rows = n // ROW_WORDS
    full = words[: rows * ROW_WORDS].reshape(rows, ROW_WORDS)
    # int64 multiply-accumulate (int32 words are widened); both wrap modulo 2**64
    if rows <= 64:
        row_sums = np.dot(full, m)
    elif rows < _PARALLEL_ROWS:
        row_sums = np.einsum("ij,j->i", full, m)
    else:  # large: rows in parallel (NumPy releases the GIL); integer sums are exact
        row_sums = _parallel_rows(full, m)
    total = int(np.dot(row_sums, row_multipliers(rows)))
    tail = n - rows * ROW_WORDS
    if tail:
        t = int(np.dot(words[rows * ROW_WORDS :], m[:tail]))
        total += t * int(row_multipliers(rows + 1)[rows])
    return total & _MASK


_PARALLEL_ROWS = 1024  # 4 MiB and more


def _parallel_rows(full, m):
    import numpy as np

    pool = _cache.get("pool")
    if pool is None:
        import os
        from concurrent.futures import ThreadPoolExecutor

        workers = max(
            1, min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))
        )
        pool = _cache["pool"] = ThreadPoolExecutor(workers, thread_name_prefix="fwd9m-digest")
    rows = full.shape[0]
    step = max(256, -(-rows // pool._max_workers))
    futures = [pool.submit(np.einsum, "ij,j->i", full[i : i + step], m) for i in range(0, rows, step)]
    return np.concatenate([f.result() for f in futures])


def _bytes_to_words(u8):
    """1-D uint8 array -> 1-D int32 word array (copies only when padding is needed)."""
    import numpy as np

    n = u8.size
    if n % 4 == 0 and u8.ctypes.data % 4 == 0:
        return u8.view(np.int32)
    padded = np.zeros((n + 3) // 4 * 4, dtype=np.uint8)
    padded[:n] = u8
    return padded.view(np.int32)


def numpy_digest(array) -> int:
    """Digest of a NumPy array's bytes (C order; a non-contiguous array is copied).

    Args:
        array: any ``numpy.ndarray`` of a fixed-size dtype (object arrays raise
            ``TypeError``).
    Returns:
        unsigned 64-bit int.
    """
    import numpy as np

    a = np.ascontiguousarray(array)
    if a.dtype.hasobject:
        raise TypeError("cannot digest an object array")
    u8 = a.reshape(-1).view(np.uint8)
    return finalize(_numpy_partial(_bytes_to_words(u8)), u8.size)


def digest_bytes(data: bytes | bytearray | memoryview) -> int:
    """Digest of a byte string: the same value as the tensor holding these bytes."""
    import numpy as np

    u8 = np.frombuffer(data, dtype=np.uint8)
    return finalize(_numpy_partial(_bytes_to_words(u8)), u8.size)


# ----------------------------------------------------------------------------- torch


def _torch_const(name: str, device):
    key = (name, str(device))
    t = _cache.get(key)
    if t is None:
        import torch

        t = torch.from_numpy(word_multipliers().copy()).to(device)
        _cache[key] = t
    return t


def _torch_rows(rows: int, device):
    """``K[:rows]`` as an int64 tensor on ``device``, cached (grown by doubling) so that
    repeated digests do not copy it from the host."""
    key = ("K", str(device))
    k = _cache.get(key)
    if k is None or k.numel() < rows:
        import torch

        n = max(rows, 2 * (k.numel() if k is not None else 2048))
        k = _cache[key] = torch.from_numpy(row_multipliers(n).copy()).to(device)
    return k[:rows]


def torch_partial(tensor):
    """``(S, nbytes)`` for a torch tensor, with ``S`` a 0-d int64 tensor on the tensor's
    device (no host transfer; call ``finalize(int(S), nbytes)`` later, batching the
    transfers). Must run outside any recording dispatch mode (the caller's job)."""
    import torch

    t = tensor.detach()
    if t.is_complex():
        t = torch.view_as_real(t)
    if not t.is_contiguous():
        t = t.contiguous()
    if t.numel() == 0:
        return torch.zeros((), dtype=torch.int64, device=t.device), 0
    flat = t.reshape(-1)
    if flat.dtype == torch.bool:
        flat = flat.view(torch.uint8)
    u8 = flat.view(torch.uint8)
    nbytes = u8.numel()
    if nbytes % 4:
        u8 = torch.cat([u8, u8.new_zeros(4 - nbytes % 4)])
    words = u8.view(torch.int32)
    n = words.numel()
    m = _torch_const("M", words.device)
    rows = n // ROW_WORDS
    total = torch.zeros((), dtype=torch.int64, device=words.device)
    if rows:
        full = words[: rows * ROW_WORDS].view(rows, ROW_WORDS).to(torch.int64)
        row_sums = (full * m).sum(1)
        total = (row_sums * _torch_rows(rows, words.device)).sum()
    tail = n - rows * ROW_WORDS
    if tail:
        ts = (words[rows * ROW_WORDS :].to(torch.int64) * m[:tail]).sum()
        total = total + ts * int(row_multipliers(rows + 1)[rows])
    return total, nbytes


def torch_digest(tensor) -> int:
    """Digest of a torch tensor. CPU tensors are read through a zero-copy NumPy view;
    tensors on other devices are reduced there (:func:`torch_partial`) and only 8
    bytes come back."""
    if tensor.device.type == "cpu":
        return numpy_digest(_torch_cpu_bytes(tensor))
    s, nbytes = torch_partial(tensor)
    return finalize(int(s.item()), nbytes)


def _dense_permuted(shape, stride) -> bool:
    """True when the strides are a permutation of a contiguous layout (no gaps, no
    overlap, no broadcasting)."""
    expected = 1
    for size, st in sorted((p for p in zip(shape, stride) if p[0] != 1), key=lambda p: p[1]):
        if st != expected:
            return False
        expected *= size
    return True


class _RawBytes:
    """Exposes a contiguous CPU tensor's bytes to NumPy by address; NumPy keeps this
    object, and so the tensor, alive as the array's ``base``."""

    def __init__(self, t) -> None:
        self._tensor = t
        self.__array_interface__ = {
            "shape": (t.numel() * t.element_size(),),
            "typestr": "|u1",
            "data": (t.data_ptr(), True),
            "version": 3,
        }


def _torch_cpu_bytes(tensor, memory_order: bool = False):
    """Zero-copy uint8 NumPy view of a CPU tensor's bytes in row-major order (a
    non-contiguous tensor is copied), or, with ``memory_order``, of a dense permuted
    tensor's bytes in memory order (no copy; used by ``fwd9m debug``, where both runs
    have the same layouts).

    The view goes through the data pointer, not ``Tensor.numpy()``: that call marks
    the tensor's storage non-resizable for good (``set_resizable(false)`` in
    https://github.com/pytorch/pytorch/blob/main/torch/csrc/utils/tensor_numpy.cpp),
    so a later ``resize_`` of a digested tensor (``torch.distributed.all_gather_object``
    does one) would fail with "Trying to resize storage that is not resizable"."""
    import numpy as np

    t = tensor.detach()
    if t.is_conj():
        t = t.resolve_conj()
    if t.is_neg():
        t = t.resolve_neg()
    if t.numel() == 0:
        return np.zeros(0, np.uint8)
    if not t.is_contiguous():
        if memory_order and _dense_permuted(t.shape, t.stride()):
            # a permuted layout (e.g. channels_last, a transpose): digest the bytes in
            # memory order without a copy; the same layout gives the same digest
            t = t.as_strided((t.numel(),), (1,), t.storage_offset())
        else:
            t = t.contiguous()
    return np.asarray(_RawBytes(t))


# ------------------------------------------------------------------------ TensorFlow


def tf_partial(tensor):
    """``S`` as a 0-d int64 TF tensor computed with TF ops on the tensor's device, and
    ``nbytes`` (a Python int when the shape is fully known, else an int64 tensor).
    Works eagerly and inside ``tf.function`` graphs. Strings/resources/variants raise
    ``TypeError``."""
    import numpy as np
    import tensorflow as tf

    dtype = tf.as_dtype(tensor.dtype)
    if dtype in (tf.string, tf.resource, tf.variant):
        raise TypeError(f"cannot digest a {dtype.name} tensor")
    t = tf.reshape(tensor, [-1])
    if dtype == tf.bool:
        t = tf.cast(t, tf.uint8)
    if dtype.is_complex:
        t = tf.reshape(tf.stack([tf.math.real(t), tf.math.imag(t)], axis=-1), [-1])
    u8 = tf.reshape(tf.bitcast(t, tf.uint8), [-1]) if t.dtype.size != 1 else tf.bitcast(t, tf.uint8)
    nbytes = tf.size(u8, out_type=tf.int64)
    pad = (-tf.size(u8)) % 4
    u8 = tf.pad(u8, [[0, pad]])
    words = tf.cast(tf.bitcast(tf.reshape(u8, [-1, 4]), tf.int32), tf.int64)
    n = tf.size(words)
    rows = (n + ROW_WORDS - 1) // ROW_WORDS
    words = tf.pad(words, [[0, rows * ROW_WORDS - n]])
    grid = tf.reshape(words, [rows, ROW_WORDS])
    m = tf.constant(word_multipliers())
    row_sums = tf.reduce_sum(grid * m, axis=1)
    r = tf.range(tf.cast(rows, tf.int64), dtype=tf.int64)
    # K[j] with wrapping int64 arithmetic; TF int64 mul/add wrap (two's complement)
    k = tf.bitwise.bitwise_or(
        r * tf.constant(np.uint64(_GOLDEN).view(np.int64)) + tf.constant(_ROW_OFFSET, tf.int64),
        tf.constant(1, tf.int64),
    )
    return tf.reduce_sum(row_sums * k), nbytes


def tf_digest(tensor) -> int:
    """Digest of an eager TF tensor: CPU tensors through a zero-copy NumPy view when
    possible, others with TF ops on their device (8 bytes come back)."""
    dev = getattr(tensor, "device", "") or ""
    if "GPU" not in dev.upper() and "TPU" not in dev.upper():
        try:
            import numpy as np

            # np.asarray shares the eager tensor's host buffer; .numpy() copies it
            return numpy_digest(np.asarray(tensor))
        except (TypeError, ValueError, AttributeError):
            pass
    s, nbytes = tf_partial(tensor)
    return finalize(int(s.numpy()), int(nbytes))


# ----------------------------------------------------------------------------- any


def digest(value) -> int:
    """Digest of a NumPy array, torch tensor, TF tensor/variable, JAX array, bytes, or
    Python scalar (via NumPy). Raises ``TypeError`` for anything else."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return digest_bytes(value)
    from . import _frameworks

    for b in _frameworks.backends(list(_frameworks.FRAMEWORKS)):
        d = b.digest(value)
        if d is not None:
            return d
    import numpy as np

    return numpy_digest(np.asarray(value))
