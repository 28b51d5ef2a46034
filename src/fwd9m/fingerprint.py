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

This module holds the NumPy implementation (also used for CPU tensors through
zero-copy views), which hands steps 1-3 to the same arithmetic in C
(:mod:`fwd9m._ckernel`, built on first use; about 2x faster, no temporary arrays)
when a C compiler is present; each framework package holds the implementation on its tensors
(``fwd9m/torch/_digest.py``, ``fwd9m/tensorflow/_digest.py``), and all give the same
digest for the same bytes (``tests/test_fingerprint.py``). Steps 1-3 run on the
tensor's device; only the 8-byte partial sum ``S`` travels to the host, and callers can
batch those transfers (the packages' ``partial``, then :func:`finalize`).

Collision bound: two different byte strings of the same length collide with a chance
of about 2**-32 or less for a change confined to one row (the multipliers are random
odd constants); the digest is for detecting run-to-run differences, not an adversary.
"""

from __future__ import annotations

from typing import Any

from . import _ckernel

__all__ = [
    "ROW_WORDS",
    "digest",
    "digest_bytes",
    "digests",
    "numpy_digest",
    "u8_digest",
    "finalize",
    "word_multipliers",
    "row_multipliers",
]

#: Words (4 bytes) per row: 4 KiB rows fit in L1 cache.
ROW_WORDS = 1024
_MASK = (1 << 64) - 1
#: The constants of ``K[j]`` (step 3), public for the device implementations.
GOLDEN = 0x9E3779B97F4A7C15
ROW_OFFSET = 0x632BE59BD9B4E5D
_LEN_MULT = 0xC2B2AE3D27D4EB4F
_K0 = ROW_OFFSET | 1  # K[0]

_cache: dict[Any, Any] = {}


def _splitmix64(x: int) -> int:
    x = (x + GOLDEN) & _MASK
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


_ckernel.use_multipliers(word_multipliers)


def row_multipliers(rows: int):
    """``K[0..rows-1]`` as an int64 NumPy array (wrapping arithmetic)."""
    import numpy as np

    k = _cache.get("K")
    if k is None or len(k) < rows:
        n = max(rows, 2 * len(k) if k is not None else 4096)
        with np.errstate(over="ignore"):
            u = np.arange(n, dtype=np.uint64) * np.uint64(GOLDEN) + np.uint64(ROW_OFFSET)
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
    """``S`` for a 1-D int32 NumPy array of words: by the compiled kernel
    (:mod:`fwd9m._ckernel`) when it is available, else by NumPy (the same value)."""
    if _ckernel.kernel() is not None and words.flags.c_contiguous:
        if words.size >= _PARALLEL_ROWS * ROW_WORDS:
            return _parallel_kernel(words)
        return _ckernel.partial(words.ctypes.data, words.nbytes)
    return _numpy_only_partial(words)


def _numpy_only_partial(words) -> int:
    """``S`` for a 1-D int32 NumPy array of words, with NumPy only."""
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


def _parallel_kernel(words) -> int:
    """:func:`_numpy_partial` of a large array by the compiled kernel, its rows split
    between the pool's threads (the kernel releases the GIL); each part's rows are
    numbered from where it starts, and the parts' sums add modulo 2**64 (exact)."""
    pool = _pool()
    rows = -(-words.size // ROW_WORDS)
    step = max(256, -(-rows // pool._max_workers)) * ROW_WORDS
    base, nbytes = words.ctypes.data, words.nbytes
    futures = [
        pool.submit(_ckernel.partial, base + 4 * i, min(nbytes - 4 * i, 4 * step), i // ROW_WORDS)
        for i in range(0, words.size, step)
    ]
    return sum(f.result() for f in futures) & _MASK


def _pool():
    pool = _cache.get("pool")
    if pool is None:
        import os
        from concurrent.futures import ThreadPoolExecutor

        workers = max(
            1, min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))
        )
        pool = _cache["pool"] = ThreadPoolExecutor(workers, thread_name_prefix="fwd9m-digest")
    return pool


def _parallel_rows(full, m):
    import numpy as np

    pool = _pool()
    rows = full.shape[0]
    step = max(256, -(-rows // pool._max_workers))
    futures = [pool.submit(np.einsum, "ij,j->i", full[i : i + step], m) for i in range(0, rows, step)]
    return np.concatenate([f.result() for f in futures])


def _u8_partial(u8) -> int:
    """``S`` of a contiguous 1-D uint8 array (the kernel reads a ragged tail in place;
    NumPy needs it padded, a copy)."""
    small = u8.size < _PARALLEL_ROWS * ROW_WORDS * 4
    if u8.size % 4 and small and u8.flags.c_contiguous and _ckernel.kernel() is not None:
        return _ckernel.partial(u8.ctypes.data, u8.size)
    return _numpy_partial(_bytes_to_words(u8))


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
    return finalize(_u8_partial(u8), u8.size)


def u8_digest(u8) -> int:
    """Digest of a 1-D uint8 NumPy array of bytes (no copy unless padding is needed)."""
    return finalize(_u8_partial(u8), u8.size)


def digest_bytes(data: bytes | bytearray | memoryview) -> int:
    """Digest of a byte string: the same value as the tensor holding these bytes."""
    import numpy as np

    u8 = np.frombuffer(data, dtype=np.uint8)
    return finalize(_u8_partial(u8), u8.size)


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


def digests(values: list) -> list[int]:
    """``[digest(v) for v in values]``, with the NumPy-viewable values (NumPy arrays,
    JAX CPU arrays, numbers) digested together in one call of the compiled kernel when
    it is available. Raises ``TypeError`` as :func:`digest` does."""
    import numpy as np

    if _ckernel.kernel() is None:
        return [digest(v) for v in values]
    from . import _frameworks

    backends = _frameworks.backends(list(_frameworks.FRAMEWORKS))
    out: list[Any] = []
    arrays: list[tuple[int, Any]] = []
    for v in values:
        d = None
        if isinstance(v, (bytes, bytearray, memoryview)):
            d = digest_bytes(v)
        elif not isinstance(v, np.ndarray):
            for b in backends:
                d = b.digest(v)
                if d is not None:
                    break
        if d is None:
            a = np.ascontiguousarray(v)
            if a.dtype.hasobject:
                raise TypeError("cannot digest an object array")
            arrays.append((len(out), a))
        out.append(d)
    if arrays:
        sums = _ckernel.digests([a.ctypes.data for _, a in arrays], [a.nbytes for _, a in arrays])
        for (i, _), d in zip(arrays, sums):
            out[i] = d
    return out


#: Names this module had before the framework implementations moved into the framework
#: packages (issue 20); still importable from here.
_MOVED = {
    "torch_digest": ("fwd9m.torch._digest", "digest"),
    "torch_partial": ("fwd9m.torch._digest", "partial"),
    "tf_digest": ("fwd9m.tensorflow._digest", "digest"),
    "tf_partial": ("fwd9m.tensorflow._digest", "partial"),
}


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        import importlib

        module, attr = _MOVED[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
