"""A user's text made safe to print: :mod:`fwd9m._escape`, below every package, so that
a message that shows a path (:func:`fwd9m._files.shown`) does not import the whole
comparison package (0.05 CPU s in each ``fwd9m run`` and each run's process)."""

from __future__ import annotations

from .._escape import clip, escape_control, printable

__all__ = ["clip", "escape_control", "printable"]
