"""The TF 1.14-2.0 Python patches (the historic ``tfdeterminism.patch``): ``bias_add``
and the segment sums replaced with deterministic Python versions.

Applied by the ``cudnn-deterministic+patch`` recipe (see
:func:`fwd9m.tensorflow.recipe`). TF 1.14-2.0 cannot be installed here, so tests apply
the patches to the installed TensorFlow, whose Python API still has these functions.
Replaces them in ``tf.nn``, ``tf.math``, ``tf`` and TensorFlow's private op modules
``tensorflow.python.ops.nn``, ``nn_ops`` and ``math_ops``, wherever the name exists.
"""

from __future__ import annotations

# Each replaced attribute: (module, attribute) -> original. Patching twice is a no-op.
_ORIGINALS: dict[tuple[object, str], object] = {}


def _targets(tf, names):
    from . import _private

    mods = [m for m in (getattr(tf, "nn", None), getattr(tf, "math", None), tf) if m is not None]
    mods += _private.op_modules()
    for mod in mods:
        for name in names:
            if hasattr(mod, name):
                yield mod, name


def _apply_patches(tf) -> list[tuple[str, object]]:
    """Replace ``bias_add`` and the segment sums with deterministic Python versions.
    Returns ``[(qualified target, original), ...]`` for the attributes changed now."""
    done = []
    replacements = {
        "bias_add": _make_bias_add(tf),
        "unsorted_segment_sum": _make_unsorted_segment_sum(tf),
        "segment_sum": _make_segment_sum(tf),
    }
    for mod, name in list(_targets(tf, replacements)):
        current = getattr(mod, name)
        if getattr(current, "_fwd9m_patch", False):
            continue
        _ORIGINALS[(mod, name)] = current
        setattr(mod, name, replacements[name])
        done.append((f"{mod.__name__}.{name}", current))
    return done


def _unpatch() -> int:
    """Restore every attribute :func:`_apply_patches` replaced; returns how many."""
    n = 0
    for (mod, name), original in list(_ORIGINALS.items()):
        setattr(mod, name, original)
        del _ORIGINALS[(mod, name)]
        n += 1
    return n


def _make_bias_add(tf):
    def bias_add(value, bias, data_format=None, name=None):
        """Deterministic ``tf.nn.bias_add`` (fwd9m patch for TF 1.14-2.0): a broadcast
        add, whose gradient is a reduce_sum instead of BiasAddGrad's atomics."""
        with tf.name_scope(name or "BiasAdd"):
            value = tf.convert_to_tensor(value, name="input")
            bias = tf.convert_to_tensor(bias, dtype=value.dtype, name="bias")
            if data_format is not None and data_format.startswith("NC"):
                shape = tf.concat([[1, tf.size(bias)], tf.ones([tf.rank(value) - 2], tf.int32)], 0)
                bias = tf.reshape(bias, shape)
            elif data_format is not None and not (data_format.startswith("N") and data_format.endswith("C")):
                raise ValueError("data_format must be of the form `N...C` or `NC...`")
            return tf.add(value, bias)

    bias_add._fwd9m_patch = True
    return bias_add


def _make_unsorted_segment_sum(tf):
    original = tf.math.unsorted_segment_sum

    def unsorted_segment_sum(data, segment_ids, num_segments, name=None):
        """Deterministic ``unsorted_segment_sum`` for floating types (fwd9m patch for TF
        1.14-2.0): ``one_hot(ids)^T @ data``. Memory: len(ids) x num_segments elements.
        Ids outside ``[0, num_segments)`` are dropped, as the op does."""
        data = tf.convert_to_tensor(data)
        if not (data.dtype.is_floating or data.dtype.is_complex):
            return original(data, segment_ids, num_segments, name=name)
        with tf.name_scope(name or "UnsortedSegmentSum"):
            ids = tf.convert_to_tensor(segment_ids)
            flat_ids = tf.reshape(ids, [-1])
            rows = tf.size(flat_ids)
            tail = tf.shape(data)[tf.rank(ids) :]
            matrix = tf.reshape(data, tf.stack([rows, tf.reduce_prod(tail)]))
            onehot = tf.one_hot(flat_ids, tf.cast(num_segments, tf.int32), dtype=data.dtype)
            summed = tf.matmul(onehot, matrix, transpose_a=True)
            return tf.reshape(summed, tf.concat([[tf.cast(num_segments, tf.int32)], tail], 0))

    unsorted_segment_sum._fwd9m_patch = True
    return unsorted_segment_sum


def _make_segment_sum(tf):
    unsorted = _make_unsorted_segment_sum(tf)

    def segment_sum(data, segment_ids, name=None):
        """Deterministic ``segment_sum`` (fwd9m patch for TF 1.14-2.0): sorted ids, so
        the number of segments is ``max(ids) + 1``."""
        ids = tf.convert_to_tensor(segment_ids)
        count = tf.cond(
            tf.size(ids) > 0, lambda: tf.cast(tf.reduce_max(ids), tf.int32) + 1, lambda: tf.constant(0, tf.int32)
        )
        return unsorted(data, ids, count, name=name or "SegmentSum")

    segment_sum._fwd9m_patch = True
    return segment_sum
