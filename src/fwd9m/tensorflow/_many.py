"""The digests of many TF variables on the CPU at once, for step digests.

Reading a variable eagerly (``np.asarray(variable)``: a ``ReadVariableOp``, then a copy
into a writable NumPy array) costs about as much as a small Keras training step's
share per variable; one ``tf.function`` reads them all, bitcast to bytes and joined
into one uint8 tensor, which comes to NumPy without a copy and is digested in place by
one call of the compiled kernel (:mod:`fwd9m._ckernel`). The bytes are those the
one-by-one path reads (row-major, native little-endian; a bool as one byte 0/1), so the
digests are the same (``tests/test_steps.py``).
"""

from __future__ import annotations

from typing import Any

_cache: dict[str, Any] = {}


def _joined():
    fn = _cache.get("fn")
    if fn is None:
        import tensorflow as tf

        def join(values):
            parts = []
            for v in values:
                t = tf.reshape(v, [-1])
                if t.dtype == tf.bool:
                    t = tf.cast(t, tf.uint8)
                if t.dtype != tf.uint8:
                    t = tf.reshape(tf.bitcast(t, tf.uint8), [-1])
                parts.append(t)
            return tf.concat(parts, 0)

        fn = _cache["fn"] = tf.function(join, autograph=False)
    return fn


def _plain(v) -> bool:
    """A variable this path reads: on the CPU, of a fixed-size real, integer or bool type
    with a fully known shape."""
    dtype = getattr(v, "dtype", None)
    if dtype is None or "GPU" in (v.device or "").upper() or "TPU" in (v.device or "").upper():
        return False
    if not (dtype.is_floating or dtype.is_integer or dtype.is_bool) or v.shape.num_elements() is None:
        return False
    return True


def cpu_digests(variables: list) -> list[int] | None:
    """The digest of each TF variable, read in one ``tf.function`` call; None when this
    path does not apply (no compiled kernel, a variable on an accelerator or of another
    type: the caller digests one by one)."""
    from .. import _ckernel

    if not variables or _ckernel.kernel() is None or not all(_plain(v) for v in variables):
        return None
    import numpy as np

    joined = np.asarray(_joined()(list(variables)))
    sizes = [v.shape.num_elements() * v.dtype.size for v in variables]
    starts = np.cumsum([0] + sizes[:-1]).tolist()
    base = joined.ctypes.data
    return _ckernel.digests([base + s for s in starts], sizes)  # joined lives until here
