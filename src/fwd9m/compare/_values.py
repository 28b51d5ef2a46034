"""The leaves of a nested result: :func:`flatten` walks dicts, lists, tuples, named
tuples, dataclasses, plain objects' attributes and framework containers (torch modules
and optimizers, Keras models and layers, ``tf.Module``) down to leaves, and
:func:`to_numpy` turns an array-like leaf (NumPy, torch, TensorFlow, Keras, JAX,
anything with ``__array__``) into a :class:`Tensor`.

A framework is imported only when a value's type comes from a module that is already
imported (``sys.modules``), so walking plain data imports nothing.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Iterator

#: leaves nested deeper than this are compared by type name only
MAX_DEPTH = 64

_SCALARS = frozenset((bool, int, float, complex, str, bytes))
_FRAMEWORK_ROOTS = ("torch", "tensorflow", "keras", "tf_keras", "jax", "jaxlib")


@dataclass(frozen=True)
class Tensor:
    """An array leaf: the NumPy array and the dtype name its framework uses."""

    array: Any  #: numpy.ndarray
    dtype: str


def _root(obj: Any) -> str | None:
    """The already-imported framework that ``obj``'s type (or a base) comes from."""
    for cls in type(obj).__mro__:
        root = cls.__module__.partition(".")[0]
        if root in _FRAMEWORK_ROOTS and root in sys.modules:
            return root
    return None


def _np():
    import numpy

    return numpy


def _torch_array(t: Any) -> Tensor:
    import torch

    t = t.detach()
    if t.layout != torch.strided:
        t = t.to_dense()
    if getattr(t, "is_quantized", False):
        t = t.int_repr()
    t = t.cpu().resolve_conj().resolve_neg().contiguous()
    name = str(t.dtype).replace("torch.", "")
    try:
        return Tensor(t.numpy(), name)
    except TypeError:  # dtypes NumPy lacks: bfloat16, float8_*, ...
        pass
    try:
        import ml_dtypes

        mlt = getattr(ml_dtypes, name)
        bits = {1: torch.uint8, 2: torch.int16}[t.element_size()]
        return Tensor(t.view(bits).numpy().view(mlt), name)
    except (ImportError, AttributeError, KeyError, RuntimeError, TypeError):
        # exact for bfloat16/float16/float8 (float32 holds every value)
        return Tensor(t.float().numpy(), name)


def _keras_weights(layer: Any) -> dict[str, Any]:
    """A Keras 3 or tf-keras layer/model's variables by path, then its optimizer's."""
    out: dict[str, Any] = {}

    def add(prefix: str, variables) -> None:
        for i, v in enumerate(variables):
            name = getattr(v, "path", None) or getattr(v, "name", None) or str(i)
            key = f"{prefix}{name}"
            if key in out:
                key = f"{key}#{i}"
            out[key] = v

    add("", getattr(layer, "weights", ()) or ())
    opt = getattr(layer, "optimizer", None)
    opt_vars = getattr(opt, "variables", None) if opt is not None else None
    if callable(opt_vars):  # tf-keras: a method
        try:
            opt_vars = opt_vars()
        except Exception:
            opt_vars = None
    if opt_vars:
        add("optimizer/", opt_vars)
    return out


def to_numpy(value: Any) -> Tensor | None:
    """Convert one array-like leaf to a :class:`Tensor`; None if it is not array-like.

    Imports a framework only when ``value``'s type comes from it and it is already
    imported.
    """
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, (np.ndarray, np.generic)):
        arr = np.asarray(value)
        return Tensor(arr, arr.dtype.name)
    root = _root(value)
    if root == "torch":
        import torch

        if isinstance(value, torch.Tensor):
            return _torch_array(value)
    elif root == "tensorflow":
        import tensorflow as tf

        if isinstance(value, (tf.Tensor, tf.Variable)) and hasattr(value, "numpy"):
            try:
                arr = np.asarray(value.numpy()) if np else _np().asarray(value.numpy())
            except Exception:  # symbolic tensor inside a tf.function: no value
                return None
            return Tensor(arr, value.dtype.name)
    elif root == "keras":
        import keras

        if isinstance(value, keras.Variable):
            arr = _np().asarray(keras.ops.convert_to_numpy(value.value))
            return Tensor(arr, str(value.dtype))
    elif root in ("jax", "jaxlib"):
        import jax

        if isinstance(value, jax.Array):
            name = str(value.dtype)
            if jax.dtypes.issubdtype(value.dtype, jax.dtypes.prng_key):
                value = jax.random.key_data(value)
            return Tensor(_np().asarray(value), name)
    if hasattr(value, "__array__") and not isinstance(value, type):
        try:
            arr = _np().asarray(value)
        except Exception:
            return None
        if arr.dtype != object:
            return Tensor(arr, arr.dtype.name)
    return None


def _expand(value: Any) -> Any:
    """Framework containers (modules, models, optimizers) as a mapping; else None."""
    root = _root(value)
    if root is None:
        return None
    if root == "torch":
        import torch

        if isinstance(value, (torch.nn.Module, torch.optim.Optimizer)) or (
                callable(getattr(value, "state_dict", None)) and not isinstance(value, torch.Tensor)):
            return value.state_dict()
    if root in ("keras", "tf_keras", "tensorflow"):
        layer_types = []
        for mod in ("keras", "tf_keras"):
            if mod in sys.modules:
                layer_types.append(sys.modules[mod].layers.Layer)
        if layer_types and isinstance(value, tuple(layer_types)):
            return _keras_weights(value)
        if root == "tensorflow":
            import tensorflow as tf

            if isinstance(value, tf.Module):
                out: dict[str, Any] = {}
                for i, v in enumerate(value.variables):
                    key = v.name if v.name not in out else f"{v.name}#{i}"
                    out[key] = v
                return out
    return None


def _join(prefix: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{prefix}[{key}]"
    return f"{prefix}.{key}" if prefix else str(key)


def _walk(value: Any, path: str, depth: int, seen: set[int]) -> Iterator[tuple[str, Any]]:
    if value is None or type(value) in _SCALARS:
        yield path, value
        return
    if depth > MAX_DEPTH or id(value) in seen:
        yield path, _Opaque(type(value))
        return
    arr = to_numpy(value)
    if arr is not None:
        yield path, arr
        return
    expanded = _expand(value)
    if expanded is not None:
        value = expanded
    seen = seen | {id(value)}
    if isinstance(value, Mapping):
        for k, v in value.items():
            yield from _walk(v, _join(path, k if isinstance(k, str) else str(k)), depth + 1, seen)
    elif isinstance(value, (list, tuple)):
        fields = getattr(value, "_fields", None)  # namedtuple
        for i, v in enumerate(value):
            yield from _walk(v, _join(path, fields[i] if fields else i), depth + 1, seen)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from _walk(getattr(value, f.name), _join(path, f.name), depth + 1, seen)
    elif isinstance(value, (set, frozenset)):
        yield path, value
    elif type(value).__eq__ is not object.__eq__:
        yield path, value  # compared with ==
    elif hasattr(value, "__dict__") and not isinstance(value, type):
        for k, v in vars(value).items():
            yield from _walk(v, _join(path, k), depth + 1, seen)
    else:
        yield path, _Opaque(type(value))


@dataclass(frozen=True)
class _Opaque:
    """A leaf fwd9m cannot look into; only its type is compared."""

    type: type

    def __repr__(self) -> str:
        return f"<{self.type.__module__}.{self.type.__qualname__}>"


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """``{path: leaf}`` for every leaf of ``value``, in traversal order.

    Array-like leaves become :class:`Tensor`; Python scalars, strings, bytes, sets and
    objects with their own ``__eq__`` stay as they are. Paths join mapping keys with
    ``.`` and sequence indices with ``[i]``: ``"model.fc.weight"``, ``"history[3]"``.
    """
    out: dict[str, Any] = {}
    for path, leaf in _walk(value, prefix, 0, set()):
        key, n = path or "<value>", 1
        while key in out:  # two leaves that render to one path
            n += 1
            key = f"{path}#{n}"
        out[key] = leaf
    return out
