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
