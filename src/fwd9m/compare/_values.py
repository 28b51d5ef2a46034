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
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

#: how deep :func:`replace_in_leaves` looks inside a leaf (lists in an HDF5 string
#: dataset); :func:`flatten` walks any depth
MAX_DEPTH = 64

_SCALARS = frozenset((bool, int, float, complex, str, bytes))


@dataclass(frozen=True)
class Tensor:
    """An array leaf: the NumPy array and the dtype name its framework uses."""

    array: Any  #: numpy.ndarray
    dtype: str


_ROOTS: dict[str, Any] = {}


def _backend_of(obj: Any):
    """The backend of the already-imported framework that ``obj``'s type (or a base)
    comes from (:attr:`fwd9m._backend.Backend.type_roots`), or None."""
    roots = _ROOTS
    if not roots:
        from .. import _frameworks

        roots.update({r: b for b in _frameworks.backends(list(_frameworks.FRAMEWORKS)) for r in b.type_roots})
    for cls in type(obj).__mro__:
        root = cls.__module__.partition(".")[0]
        if root in roots and root in sys.modules:
            return roots[root]
    return None


def _np():
    import numpy

    return numpy


def to_numpy(value: Any) -> Tensor | None:
    """Convert one array-like leaf to a :class:`Tensor`; None if it is not array-like.

    Imports a framework only when ``value``'s type comes from it and it is already
    imported.
    """
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, (np.ndarray, np.generic)):
        arr = np.asarray(value)
        return Tensor(arr, arr.dtype.name)
    backend = _backend_of(value)
    if backend is not None:
        tensor = backend.to_numpy(value)
        if tensor is not None:
            return tensor
    if hasattr(value, "__array__") and not isinstance(value, type):
        try:
            arr = _np().asarray(value)
        except Exception:
            return None
        if arr.dtype != object:
            return Tensor(arr, arr.dtype.name)
    return None


def _expand(value: Any) -> tuple[Mapping[str, Any], bool] | None:
    """Framework containers (modules, models, optimizers) as a mapping, and whether its
    keys are names the framework made up (Keras layer and variable names, TF variable
    names) rather than attribute names (a torch ``state_dict``); None for anything else."""
    backend = _backend_of(value)
    return None if backend is None else backend.expand(value)


def _join(prefix: str, key: Any) -> str:
    """A string key (a dict key, a field or attribute name) joins with ``.``; any other key
    (a sequence index, a dict's int, float, tuple or None key) is shown as its ``repr``
    in brackets, so ``{1: 0}`` (``[1]``) and ``{"1": 0}`` (``1``) have different paths."""
    if isinstance(key, str):
        return f"{prefix}.{key}" if prefix else key
    return f"{prefix}[{key!r}]"


def _container_kind(value: Any, kind: type) -> str:
    """What ``value`` (``kind``: its type before a framework container was expanded) is
    as a container: ``dict`` for every mapping (``OrderedDict``, ``defaultdict``), ``list``
    and ``tuple`` for their subclasses, the class name for named tuples, dataclasses,
    plain objects and framework containers."""
    if isinstance(value, Mapping) and kind is type(value):
        return "dict"
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return "list" if isinstance(value, list) else "tuple"
    return kind.__qualname__


def _attributes(value: Any) -> dict[str, Any] | None:
    """An object's attributes: its ``__dict__`` and the ``__slots__`` of its classes that
    are set (private ones under their mangled name); None for an object with neither."""
    attrs = dict(vars(value)) if hasattr(value, "__dict__") else None
    for cls in type(value).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name in ("__dict__", "__weakref__"):
                continue
            if name.startswith("__") and not name.endswith("__"):
                name = f"_{cls.__name__.lstrip('_')}{name}"
            attrs = {} if attrs is None else attrs
            try:
                attrs.setdefault(name, getattr(value, name))
            except AttributeError:  # a slot never set
                pass
    return attrs


def _children(value: Any) -> list[tuple[Any, Any]] | None:
    """``(key, child)`` pairs of a container, in order; None for a leaf."""
    if isinstance(value, Mapping):
        return list(value.items())
    if isinstance(value, (list, tuple)):
        fields = getattr(value, "_fields", None)  # namedtuple
        return [(fields[i] if fields else i, v) for i, v in enumerate(value)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [(f.name, getattr(value, f.name)) for f in dataclasses.fields(value)]
    if isinstance(value, (set, frozenset)) or type(value).__eq__ is not object.__eq__ or isinstance(value, type):
        return None
    attrs = _attributes(value)
    return None if attrs is None else list(attrs.items())


def _leaves(value: Any, path: str, named: int | None, ancestors: set[int]) -> list[tuple[str, Any]] | None:
    """The leaves ``value`` is by itself (a scalar, an array, a masked array's data and
    mask, a value met again inside itself); None for a container to walk into."""
    if value is None or type(value) in _SCALARS:
        return [(_path(path, named), value)]
    if id(value) in ancestors:  # a cycle: compared by type
        return [(_path(path, named), _Opaque(type(value)))]
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, np.ma.MaskedArray):  # its mask is part of the value
        data, mask = np.asarray(value.data), np.ma.getmaskarray(value)
        return [
            (_path(_join(path, "data"), named), Tensor(data, data.dtype.name)),
            (_path(_join(path, "mask"), named), Tensor(mask, mask.dtype.name)),
        ]
    arr = to_numpy(value)
    return None if arr is None else [(_path(path, named), arr)]


_LEAVE = object()


def _walk(value: Any, path: str, containers: dict[str, str]) -> Iterator[tuple[str, Any]]:
    """``(path, leaf)`` pairs, depth first, at any depth (iteratively; a value met again
    inside itself is a leaf compared by type). Keys that a framework made up (Keras
    layer names) give a :class:`NamedPath`; ``containers`` gets ``{path: kind}``
    (:func:`_container_kind`) of every non-empty container outside such names."""
    ancestors: set[int] = set()
    stack: list[tuple[Any, ...]] = [(value, path, None, 0)]
    while stack:
        item = stack.pop()
        if item[0] is _LEAVE:
            ancestors.difference_update(item[1])
            continue
        value, path, named, depth = item
        leaves = _leaves(value, path, named, ancestors)
        if leaves is not None:
            yield from leaves
            continue
        kind, ids = type(value), (id(value),)
        expanded = _expand(value)
        if expanded is not None:
            value, by_framework = expanded
            ids += (id(value),)
            if by_framework and named is None:
                named = len(path)
        children = _children(value)
        if children is None:
            yield _path(path, named), value if type(value).__eq__ is not object.__eq__ else _Opaque(kind)
            continue
        if named is None and (children or not depth):  # () vs [] as the whole result
            containers[path or "<value>"] = _container_kind(value, kind)
        if not children and depth:  # {"a": []} and {} differ; an empty result still flattens to {}
            yield _path(path, named), _Empty(kind)
        ancestors.update(ids)
        stack.append((_LEAVE, ids))
        stack.extend((child, _join(path, key), named, depth + 1) for key, child in reversed(children))


#: the counter a framework appends to a name it made up for the second, third, ... object
#: of a kind in one process (Keras: ``dense``, ``dense_1``, ``adam/dense_2_kernel_momentum``;
#: Keras 3 ``uniquify`` in keras/src/utils/naming.py,
#: https://github.com/keras-team/keras/blob/master/keras/src/utils/naming.py)
_AUTO_SUFFIX = re.compile(r"_\d+(?=[\W_]|$)")


class NamedPath(str):
    """A leaf path whose tail, from index ``start``, holds names a framework made up.

    Keras numbers the layers, models and optimizers built in one process (``dense``,
    ``dense_1``, ...), so a model built twice in one process (``fwd9m.check(fn)``) has
    differently named weights. :func:`~fwd9m.compare.compare_flat` pairs such leaves
    when their :attr:`generic` paths (those counters removed from the tail) agree; the
    part of the path from the user's own keys must match exactly. A plain ``str`` for
    every other use (hashing, equality, JSON).
    """

    start: int
    generic: str

    def __new__(cls, path: str, start: int) -> NamedPath:
        self = super().__new__(cls, path)
        self.start = start
        self.generic = path[:start] + _AUTO_SUFFIX.sub("", path[start:])
        return self

    def __reduce__(self):
        return NamedPath, (str(self), self.start)


def _path(path: str, named: int | None) -> str:
    return path if named is None else NamedPath(path, named)


@dataclass(frozen=True)
class _Opaque:
    """A leaf fwd9m cannot look into; only its type is compared."""

    type: type

    def __repr__(self) -> str:
        return f"<{self.type.__module__}.{self.type.__qualname__}>"


@dataclass(frozen=True)
class _Empty:
    """An empty container below the top level (a dict, list, tuple or dataclass without
    items), so that ``{"a": []}``, ``{"a": {}}`` and ``{}`` differ."""

    type: type

    def __repr__(self) -> str:
        return f"<empty {self.type.__qualname__}>"


class Flat(dict):
    """:func:`flatten`'s result: ``{path: leaf}``, plus :attr:`containers`,
    ``{path: kind}`` of the containers the leaves sit in (``"dict"``, ``"list"``,
    ``"tuple"``, or a class name; ``"<value>"`` for the value itself), so that
    :func:`~fwd9m.compare.compare_flat` sees ``(1, 2)`` and ``[1, 2]`` differ, and
    :attr:`ignored`, ``{path: reason}`` of leaves that are not compared (a save time
    stamp in a checkpoint's metadata): :func:`~fwd9m.compare.compare_flat` skips them
    and :func:`~fwd9m.compare.ignored` lists them."""

    def __init__(
        self, *args: Any, containers: dict[str, str] | None = None, ignored: dict[str, str] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.containers: dict[str, str] = dict(containers or {})
        self.ignored: dict[str, str] = dict(ignored or {})


def _replace(text: Any, replacements: tuple[tuple[Any, Any], ...]) -> Any:
    for old, new in replacements:
        if old:
            text = text.replace(old, new)
    return text


def _replace_leaf(
    leaf: Any, texts: tuple[tuple[str, str], ...], raw: tuple[tuple[bytes, bytes], ...], depth: int = 0
) -> Any:
    """``leaf`` with ``texts`` replaced in its strings (``raw`` in its bytes), also inside
    lists, tuples and dicts (an HDF5 string dataset, a captured ``repr``) and in string,
    bytes and object arrays, which keep their dtype."""
    if isinstance(leaf, str):
        return _replace(leaf, texts)
    if isinstance(leaf, bytes):
        return _replace(leaf, raw)
    if depth > MAX_DEPTH:
        return leaf
    if isinstance(leaf, (list, tuple)) and type(leaf) in (list, tuple):
        return type(leaf)(_replace_leaf(x, texts, raw, depth + 1) for x in leaf)
    if type(leaf) is dict:
        return {
            _replace_leaf(k, texts, raw, depth + 1): _replace_leaf(v, texts, raw, depth + 1) for k, v in leaf.items()
        }
    if isinstance(leaf, Tensor) and leaf.array.dtype.kind in "USO" and leaf.array.size:
        np = _np()
        arr = leaf.array
        if arr.dtype.kind != "O":  # most string arrays hold no path: skip the loop over them
            data = arr.tobytes()
            little = arr.dtype.byteorder == "<" or (arr.dtype.byteorder in "=|" and sys.byteorder == "little")
            codec = "utf-32-le" if little else "utf-32-be"
            if not any(
                (o.encode(codec) if arr.dtype.kind == "U" else o) in data
                for o, _ in (texts if arr.dtype.kind == "U" else raw)
            ):
                return leaf
        out = np.empty(arr.shape, arr.dtype)
        flat_in, flat_out = arr.reshape(-1), out.reshape(-1)
        try:
            for i, x in enumerate(flat_in):
                x = x if arr.dtype.kind == "O" else x.item()
                flat_out[i] = _replace_leaf(x, texts, raw, depth + 1)
        except (SystemError, ValueError):  # bytes that are no code point: left as they are
            return leaf
        return Tensor(out, leaf.dtype)
    return leaf


def replace_in_leaves(flat: Mapping[str, Any], replacements: tuple[tuple[str, str], ...]) -> Flat:
    """``flat`` with every ``(old, new)`` of ``replacements`` (a run's own folder:
    ``fwd9m check`` runs each run in a folder of its own) replaced in every path and
    every string and bytes leaf (bytes: the UTF-8 and file-system encodings of ``old``),
    as :func:`~fwd9m.compare.normalize_line` does for printed lines. A Lightning
    checkpoint stores its ``dirpath`` and ``best_model_path`` as absolute paths."""
    import os

    texts = tuple((o, n) for o, n in replacements if o)
    if not texts:
        return flat if isinstance(flat, Flat) else Flat(flat)
    raw = tuple(dict.fromkeys((enc(o), n.encode()) for o, n in texts for enc in (str.encode, os.fsencode)))
    out = Flat(
        containers={_replace(k, texts): v for k, v in getattr(flat, "containers", {}).items()},
        ignored={_replace(k, texts): v for k, v in getattr(flat, "ignored", {}).items()},
    )
    for path, leaf in flat.items():
        key = _replace(str(path), texts)
        if isinstance(path, NamedPath):
            key = NamedPath(key, len(_replace(str(path)[: path.start], texts)))
        out[key] = _replace_leaf(leaf, texts, raw)
    return out


def flatten(value: Any, prefix: str = "") -> Flat:
    """``{path: leaf}`` for every leaf of ``value``, in traversal order (a :class:`Flat`,
    which also records each container's kind).

    Array-like leaves become :class:`Tensor`; Python scalars, strings, bytes, sets and
    objects with their own ``__eq__`` stay as they are; an empty container inside
    ``value`` is a leaf of its own, objects fwd9m cannot look into are leaves compared
    by type. Paths join string keys (mapping keys, fields, attributes) with ``.``; any
    other key, a sequence index or a dict's int, float, tuple or None key, is its
    ``repr`` in brackets: ``"model.fc.weight"``, ``"history[3]"``, ``"opt.state[0].step"``
    (a torch optimizer's int key); ``{"1": 0}`` flattens to ``"1"``, ``{1: 0}`` to
    ``"[1]"``. Weights named by Keras or TensorFlow have a :class:`NamedPath`.
    """
    out = Flat()
    for path, leaf in _walk(value, prefix, out.containers):
        key, n = path or "<value>", 1
        while key in out:  # two leaves that render to one path
            n += 1
            key = f"{path}#{n}"
            if isinstance(path, NamedPath):
                key = NamedPath(key, path.start)
        out[key] = leaf
    return out
