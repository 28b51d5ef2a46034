"""What :mod:`fwd9m.batch` asks a framework: which framework an input comes from, rows
of it, and the model called in inference mode (``fwd9m/<fw>/_batch.py``)."""

from __future__ import annotations

import contextlib
import importlib
import sys
from types import ModuleType
from typing import Any

from ..errors import ConfigurationError


def framework_of(x: Any) -> ModuleType | None:
    """The ``fwd9m.<fw>._batch`` module of the framework ``x``'s type comes from; None
    for a NumPy array (or anything else with ``__array__``)."""
    from ..compare._values import _backend_of

    backend = _backend_of(x)
    if backend is None:
        return None
    name = backend.recorded_by() or backend.name
    try:
        return importlib.import_module(f"fwd9m.{name}._batch")
    except ImportError:
        return None


def batch_size(x: Any, dim: int) -> int | None:
    """The size of ``x`` along ``dim`` if it is an array with that dimension."""
    shape = getattr(x, "shape", None)
    if shape is None or not hasattr(x, "__array__") and framework_of(x) is None:
        return None
    try:
        return int(tuple(shape)[dim])
    except (IndexError, TypeError, ValueError):
        return None


def take(x: Any, index: list[int], dim: int) -> Any:
    """Rows ``index`` of ``x`` along ``dim``, in ``x``'s framework."""
    fw = framework_of(x)
    if fw is not None:
        return fw.take(x, index, dim)
    np = sys.modules.get("numpy") or importlib.import_module("numpy")
    return np.take(np.asarray(x), index, axis=dim)


def inference(model: Any, inputs: list[Any]):
    """The framework's inference context for ``model`` (eval mode, no gradients)."""
    for x in [model, *inputs]:
        fw = framework_of(x)
        if fw is not None and hasattr(fw, "inference"):
            return fw.inference(model)
    return contextlib.nullcontext()


def frameworks_named(names: list[str]) -> list[ModuleType]:
    """The ``_batch`` modules of the frameworks ``names`` (registry names)."""
    out = []
    for name in names:
        try:
            out.append(importlib.import_module(f"fwd9m.{name}._batch"))
        except ImportError as exc:
            raise ConfigurationError(f"fwd9m.batch has no support for {name}: {exc}") from None
    return out
