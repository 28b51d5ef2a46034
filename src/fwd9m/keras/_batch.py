"""Keras side of :mod:`fwd9m.batch`: the first call of an outermost Keras model
(``model(x)`` or ``model.predict(x)``) on values, and calling it in inference mode.
Rows of its inputs are taken by the backend's own ``_batch`` module."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

FRAMEWORK = "keras"


def first_call(on_call: Callable[[Any, tuple, dict], None]) -> Callable[[], None]:
    """Call ``on_call(model, args, kwargs)`` at the first call of a Keras model not
    called from inside another layer (``predict(x)`` as ``(model, (x,), {})``), before
    it runs. Returns the function undoing it."""
    import keras

    layer_call, predict = keras.Layer.__call__, keras.Model.predict
    depth = [0]

    def call(self, *args, **kwargs):
        if depth[0] == 0 and isinstance(self, keras.Model):
            on_call(self, args, {k: v for k, v in kwargs.items() if k != "training"})
        depth[0] += 1
        try:
            return layer_call(self, *args, **kwargs)
        finally:
            depth[0] -= 1

    def predict_call(self, x, *args, **kwargs):
        on_call(self, (x,), {})
        return predict(self, x, *args, **kwargs)

    keras.Layer.__call__, keras.Model.predict = call, predict_call

    def undo() -> None:
        keras.Layer.__call__, keras.Model.predict = layer_call, predict

    return undo


def concrete(args: tuple, kwargs: dict) -> bool:
    """The call holds values (NumPy arrays or eager tensors), not symbolic tensors (a
    functional model being built, a step being traced)."""
    import keras

    leaves = list(args) + list(kwargs.values())
    return any(hasattr(x, "shape") and not _symbolic(x, keras) for x in leaves)


def _symbolic(x: Any, keras: Any) -> bool:
    if isinstance(x, keras.KerasTensor):
        return True
    try:
        return bool(keras.ops.is_tensor(x)) and not hasattr(x, "numpy") and not hasattr(x, "__array__")
    except Exception:  # noqa: BLE001 - unknown: not a value
        return True


def invoker(model: Any) -> Callable:
    """``model`` called in inference mode (``training=False``: dropout off)."""

    def call(*args, **kwargs):
        return model(*args, training=False, **kwargs)

    return call


def model_name(model: Any) -> str:
    return type(model).__qualname__
