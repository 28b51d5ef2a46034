"""Keras' ``fit`` hook for ``fwd9m check --resume``'s child (``check/_resume_child.py``):
it may not import :mod:`._private`, which keeps every use of Keras' private API in one
file. This stays a function of the Keras package, not a
:class:`~fwd9m._backend.Backend` method: only Keras wraps a training loop's callbacks,
and the resume child's other step hooks (torch's optimizer hook, the ``jax.jit``
wrapper) are framework-specific code of its own too."""

from __future__ import annotations

from collections.abc import Callable

from . import _private


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
