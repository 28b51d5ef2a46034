"""The digest of :mod:`fwd9m.fingerprint` for TensorFlow tensors: eager CPU tensors
through a zero-copy NumPy view, others (and tensors inside ``tf.function`` graphs) with
TF ops on their device."""

from __future__ import annotations

from ..fingerprint import GOLDEN, ROW_OFFSET, ROW_WORDS, finalize, numpy_digest, word_multipliers


def partial(tensor):
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
        r * tf.constant(np.uint64(GOLDEN).view(np.int64)) + tf.constant(ROW_OFFSET, tf.int64),
        tf.constant(1, tf.int64),
    )
    return tf.reduce_sum(row_sums * k), nbytes


def digest(tensor) -> int:
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
    s, nbytes = partial(tensor)
    return finalize(int(s.numpy()), int(nbytes))
