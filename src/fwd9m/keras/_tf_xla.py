"""Keras 3 ``fit`` with an XLA-compiled step (TensorFlow backend) under ``fwd9m debug``.

Keras 3 compiles its train and test steps with XLA when ``compile(jit_compile=True)``,
and ``jit_compile="auto"`` resolves to XLA whenever a non-CPU device is present
(``_resolve_auto_jit_compile`` in keras/src/trainers/trainer.py). ``fit`` calls that
step, ``one_step_on_data`` (``tf.function(jit_compile=...)``), inside
``multi_step_on_iterator``, a plain ``tf.function`` (``TensorFlowTrainer._make_function``,
keras/src/backend/tensorflow/trainer.py, :mod:`._private`). TensorFlow
does not pass a function's call op to op callbacks, and XLA's code runs no Python
hooks, so such a recording held only the iterator's ops: no op of any training step.

For the duration of recording, the function ``_make_function`` returns is wrapped:
given the ``tf.data.Iterator`` ``fit`` passes, it takes the iterator's next batch
(``get_next_as_optional``; none left: ``StopIteration``, as Keras raises) and hands
Keras' own function a Python iterator of batches instead, so that Keras takes its own
other branch: ``one_step_on_data`` called eagerly on each of up to
``steps_per_execution`` batches. Each step is then one eager call of the XLA-compiled
function, recorded as the op ``xla:one_step_on_data`` (:mod:`._recorder`: its inputs
are the batch and the variables' values before the step, its outputs the loss and
metrics and the variables' values after it), and can be narrowed (:mod:`._xla`).
``predict``'s function (``make_predict_function``: a plain ``tf.function`` around the
same kind of XLA step) runs its Python function eagerly instead, while recording. The
step still runs compiled by XLA. Measured (Keras 3.15.1, TensorFlow 2.21, CPU; a
Dense-gelu-Dropout-LayerNormalization-Dense model, Adam, a metric, validation data,
50 samples in batches of 16, 2 epochs, ``steps_per_execution`` 1 and 3): every
variable after ``fit`` and every logged loss and metric equal, bit for bit, those of
the same script run without the wrapper; ``predict``'s outputs too (a
Dense-Dense model, and the model of ``tests/test_debug_keras_xla.py``).

Left as Keras runs them: a model under a non-default ``tf.distribute`` strategy, a
step that is not compiled by XLA (its ops are recorded one by one in the outer
function anyway), ``run_eagerly=True``, and a ``train_function`` built before recording
started. A call of an XLA function inside another ``tf.function`` that is still not
recorded is named in the trace's notes (:meth:`._recorder.TFRecorder._register`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

__all__ = ["patch"]


def patch(is_active: Callable[[], bool]) -> list[tuple[Any, str, Any]] | None:
    """Wrap ``TensorFlowTrainer._make_function`` and ``make_predict_function`` so that
    the functions they build run an XLA-compiled step eagerly while ``is_active()``;
    [(class, attribute, original)] to undo it, or None while Keras has not imported its
    TensorFlow trainer (imports nothing: the recorder may start while Keras itself is
    importing TensorFlow)."""
    from . import _private

    cls = _private.tf_trainer_class()
    make = None if cls is None else cls.__dict__.get("_make_function")
    make_predict = None if cls is None else cls.__dict__.get("make_predict_function")
    if make is None or make_predict is None:
        return None

    @functools.wraps(make)
    def _make_function(trainer, step_function):
        return _eager_steps(trainer, make(trainer, step_function), is_active)

    @functools.wraps(make_predict)
    def make_predict_function(trainer, force=False):
        out = make_predict(trainer, force)
        function = trainer.predict_function
        if not getattr(function, "_fwd9m_eager", False) and hasattr(function, "python_function"):
            trainer.predict_function = _eager_predict(trainer, function, is_active)
        return out

    cls._make_function = _make_function
    cls.make_predict_function = make_predict_function
    return [(cls, "_make_function", make), (cls, "make_predict_function", make_predict)]


def _eager_predict(trainer, function, is_active: Callable[[], bool]):
    """Keras' predict function, a plain ``tf.function`` around the XLA step: while
    recording, its Python function runs eagerly (the step called eagerly, compiled)."""

    @functools.wraps(function.python_function)
    def predict(data):
        if is_active() and _default_strategy(trainer):
            return function.python_function(data)
        return function(data)

    predict._fwd9m_eager = True  # type: ignore[attr-defined]
    return predict


def _eager_steps(trainer, function, is_active: Callable[[], bool]):
    @functools.wraps(function)
    def steps(iterator):
        if not (is_active() and _applies(trainer, iterator)):
            return function(iterator)
        first = iterator.get_next_as_optional()
        if not first.has_value():
            raise StopIteration  # what Keras' function raises at the end of the data
        return function(_batches(first.get_value(), iterator))

    return steps


def _applies(trainer, iterator) -> bool:
    """A ``tf.data.Iterator`` given to a compiled XLA step on the default strategy."""
    import tensorflow as tf

    return isinstance(iterator, tf.data.Iterator) and _default_strategy(trainer)


def _default_strategy(trainer) -> bool:
    """The step is compiled by XLA, not run eagerly, on the default strategy."""
    import tensorflow as tf

    try:
        return bool(
            trainer.jit_compile
            and not trainer.run_eagerly
            and not tf.distribute.has_strategy()
            and trainer.distribute_strategy is tf.distribute.get_strategy()
        )
    except Exception:  # noqa: BLE001 - a recorder never breaks the program: Keras' own path
        return False


def _batches(first, iterator):
    """The batch taken, then the iterator's next ones (Keras' ``zip(range(steps), it)``
    asks for no more than ``steps_per_execution``)."""
    yield first
    while True:
        nxt = iterator.get_next_as_optional()
        if not nxt.has_value():
            return
        yield nxt.get_value()
