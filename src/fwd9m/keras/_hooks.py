"""What fwd9m's process plumbing needs from Keras, for modules outside this package
(``_runtime/capture.py``, ``check/_resume_child.py``, ``rng/_adapters.py``): they may not import
:mod:`._private`, which keeps every use of Keras' private API in one file."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import _private


def sublayers(layer: Any, include_self: bool = False) -> list:
    """A layer's sublayers (see :func:`._private.sublayers`)."""
    return _private.sublayers(layer, include_self)


def layer_seed_generators(layer: Any) -> list:
    """The ``SeedGenerator`` objects of a layer and its sublayers (see
    :func:`._private.layer_seed_generators`)."""
    return _private.layer_seed_generators(layer)


def add_to_every_fit(callback_type: type, on_error: Callable[[BaseException], None]) -> None:
    """Append an instance of ``callback_type`` to the callbacks of every later ``fit``
    (``evaluate``, ``predict``): Keras wraps them in one ``CallbackList``, whose
    ``__init__`` is wrapped here. A failure is passed to ``on_error`` and the user's
    callbacks stay as they were."""
    CallbackList = _private.callback_list_class()
    original = CallbackList.__init__

    def __init__(self, callbacks=None, *args, **kwargs):
        try:
            listed = _private.flatten(callbacks) if callbacks else []
            if not any(isinstance(c, callback_type) for c in listed):
                callbacks = [*listed, callback_type()]
        except Exception as exc:  # noqa: BLE001 - the hook must not break fit
            on_error(exc)
        original(self, callbacks, *args, **kwargs)

    CallbackList.__init__ = __init__
