"""TensorFlow side of :mod:`fwd9m.batch`: rows of a tensor (Keras models on TensorFlow
are hooked by ``fwd9m/keras/_batch.py``)."""

from __future__ import annotations

from typing import Any

FRAMEWORK = "tensorflow"


def take(x: Any, index: list[int], dim: int) -> Any:
    """Rows ``index`` of ``x`` along ``dim`` (``tf.gather``)."""
    import tensorflow as tf

    return tf.gather(x, index, axis=dim)


def model_name(model: Any) -> str:
    return type(model).__qualname__


def probe_ops() -> dict:
    """Ops measured by ``fwd9m probe --batch-invariance``: name -> fn(NumPy samples) -> NumPy rows."""
    import numpy as np
    import tensorflow as tf

    r = np.random.RandomState(0)
    w, b = tf.constant(r.randn(512, 512).astype("float32")), tf.constant(r.randn(512).astype("float32"))

    def layer_norm(x):
        mean, var = tf.nn.moments(x, axes=[-1], keepdims=True)
        return (x - mean) * tf.math.rsqrt(var + 1e-5)

    def attention(x):
        q = tf.reshape(x, (-1, 8, 8, 8))
        s = tf.nn.softmax(tf.matmul(q, q, transpose_b=True) / 8.0, -1)
        return tf.reshape(tf.matmul(s, q), (-1, 512))

    def run(f):
        return lambda x: f(tf.constant(x)).numpy()

    return {
        "matmul": run(lambda x: tf.matmul(x, w)),
        "linear": run(lambda x: tf.matmul(x, w) + b),
        "sum": run(lambda x: tf.reduce_sum(x, -1)),
        "mean": run(lambda x: tf.reduce_mean(x, -1)),
        "softmax": run(lambda x: tf.nn.softmax(x, -1)),
        "layer_norm": run(layer_norm),
        "attention": run(attention),
    }
