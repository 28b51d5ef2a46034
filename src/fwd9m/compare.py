"""Bitwise comparison of nested values: what differs, where, and by how much.

``compare(a, b)`` walks two values of the same structure (dicts, lists, tuples,
named tuples, dataclasses, and plain objects' attributes) down to their leaves and
returns one :class:`LeafDiff` per leaf that is not bit-for-bit identical. Leaves are:

- NumPy arrays and scalars; Python ``float`` (compared by its IEEE-754 bits),
  ``int``, ``bool``, ``str``, ``bytes``, ``None`` (compared with ``==``);
- PyTorch tensors, modules (their ``state_dict()``), optimizers and anything else
  from torch with a ``state_dict()`` (LR schedulers, ``GradScaler``);
- TensorFlow tensors and variables, ``tf.Module`` (its variables by name);
- Keras models and layers (Keras 3 and tf-keras): every weight by its path, plus the
  optimizer's variables when the model has a built optimizer;
- JAX arrays (typed PRNG keys by their key data);
- anything else with ``__array__``.

Equality is bitwise: two floats are equal when their bit patterns are, so NaNs with the
same bits are equal and ``-0.0 != 0.0``. Framework values are converted to NumPy only
when reached, and a framework is imported only when a value's type comes from a module
that is already imported (``sys.modules``), so comparing plain data imports nothing.

A value converted for comparison keeps its framework dtype name (``bfloat16`` from torch
is compared through a bit-exact NumPy view).
"""

from __future__ import annotations

import dataclasses
import os
import math
import re
import struct
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

__all__ = ["LeafDiff", "Tensor", "compare", "compare_arrays", "compare_flat", "compare_text", "file_digest",
           "flatten", "normalize_line", "read_structured", "to_numpy"]

#: elements compared per chunk in the fast equality test (bounds temporary memory)
CHUNK = 1 << 22
#: leaves nested deeper than this are compared by type name only
MAX_DEPTH = 64

_SCALARS = frozenset((bool, int, float, complex, str, bytes))
_FRAMEWORK_ROOTS = ("torch", "tensorflow", "keras", "tf_keras", "jax", "jaxlib")


@dataclass(frozen=True)
class Tensor:
    """An array leaf: the NumPy array and the dtype name its framework uses."""

    array: Any  #: numpy.ndarray
    dtype: str


@dataclass(frozen=True)
class LeafDiff:
    """One leaf that differs between run ``a`` and run ``b``.

    ``kind``: ``"values"`` (same dtype and shape, some elements differ), ``"shape"``,
    ``"dtype"``, ``"type"``, ``"only_a"`` / ``"only_b"`` (the leaf exists in one run
    only), or ``"value"`` (a non-array leaf such as a string differs).
    ``n_diff``: number of differing elements out of ``size``; ``max_abs``: largest
    absolute difference among them (float64; ``inf`` when one side is NaN or inf and
    the other is not); ``max_ulp``: largest distance in units in the last place of the
    dtype (floats only, NaN pairs excluded); ``first_index``: index of the first
    differing element in C order; ``a``/``b``: short reprs of the values there.
    """

    path: str
    kind: str
    dtype: str | None = None
    shape: tuple[int, ...] | None = None
    n_diff: int | None = None
    size: int | None = None
    max_abs: float | None = None
    max_ulp: int | None = None
    first_index: tuple[int, ...] | None = None
    a: str | None = None
    b: str | None = None

    def summary(self) -> str:
        """One line: what differs and by how much."""
        if self.kind == "values":
            parts = [f"{self.n_diff} of {self.size} elements differ"]
            if self.max_abs is not None:
                parts.append(f"max abs diff {self.max_abs:.3g}")
            if self.max_ulp is not None:
                parts.append(f"max {self.max_ulp} ULP")
            if self.first_index:
                idx = ",".join(map(str, self.first_index))
                parts.append(f"first at [{idx}]: {self.a} vs {self.b}")
            shape = "x".join(map(str, self.shape or ())) or "scalar"
            if self.first_index == ():
                parts.append(f"{self.a} vs {self.b}")
            return f"{self.path} ({self.dtype}, {shape}): " + "; ".join(parts)
        if self.kind in ("only_a", "only_b"):
            which = "first" if self.kind == "only_a" else "second"
            return f"{self.path}: only in the {which} run ({self.a or self.b})"
        return f"{self.path}: {self.kind} differs: {self.a} vs {self.b}"

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["summary"] = self.summary()
        if d["max_abs"] is not None and not math.isfinite(d["max_abs"]):
            d["max_abs"] = str(d["max_abs"])  # JSON has no inf
        return d


# --------------------------------------------------------------------------- flatten

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


# --------------------------------------------------------------------------- compare

def _bits_dtype(np: Any, dtype: Any) -> Any:
    raw = dtype.kind == "V" and dtype.itemsize in (1, 2, 4, 8) and dtype.fields is None  # ml_dtypes
    if dtype.kind in "biufc" or raw:
        if dtype.kind == "b":
            return np.dtype(np.uint8)
        size = dtype.itemsize // 2 if dtype.kind == "c" else dtype.itemsize
        if size in (1, 2, 4, 8):
            return np.dtype(f"u{size}")
    return None


def _is_float(np: Any, dtype: Any) -> bool:
    if dtype.kind in "fc":
        return True
    if dtype.kind == "V":
        try:
            import ml_dtypes

            ml_dtypes.finfo(dtype)
            return True
        except Exception:
            return False
    return False


def _as_bits(np: Any, arr: Any, bits: Any) -> Any:
    arr = np.ascontiguousarray(arr)
    if arr.dtype.kind == "c":
        arr = arr.view(arr.real.dtype if arr.dtype.kind == "c" else arr.dtype)
    return arr.view(bits)


def _equal_bits(np: Any, a: Any, b: Any) -> bool:
    """Fast bitwise equality of two same-shape, same-dtype arrays, chunked."""
    bits = _bits_dtype(np, a.dtype)
    if bits is None:
        return bool(np.array_equal(a, b))
    fa, fb = _as_bits(np, a, bits).reshape(-1), _as_bits(np, b, bits).reshape(-1)
    for start in range(0, fa.size, CHUNK):
        if not np.array_equal(fa[start:start + CHUNK], fb[start:start + CHUNK]):
            return False
    return True


def _ordered(np: Any, bits: Any, float_dtype_size: int) -> Any:
    """Map IEEE bit patterns to integers whose difference is the distance in ULPs.

    Negative floats have their magnitude bits flipped (``i ^ 0x7F..F``), so the integers
    follow the floats' order; -0.0 and +0.0 are one apart, as their bits differ.
    """
    signed = bits.view(f"i{float_dtype_size}")
    out = signed >> (8 * float_dtype_size - 1)  # all ones for negative floats, else 0
    out &= np.iinfo(signed.dtype).max
    out ^= signed
    return out


def _short(x: Any) -> str:
    text = repr(x.item() if hasattr(x, "item") and getattr(x, "ndim", 1) == 0 else x)
    return text if len(text) <= 40 else text[:37] + "..."


def _magnitudes(np: Any, da: Any, db: Any, bits: Any, is_float: bool) -> tuple[float, int | None]:
    """Largest absolute difference (float64) and, for floats, largest ULP distance
    (NaN pairs excluded) between 1-d arrays of differing elements."""
    if not da.size:
        return 0.0, None
    complex_ = da.dtype.kind == "c"
    with np.errstate(all="ignore"):
        diff = da.astype(np.complex128 if complex_ else np.float64)
        diff -= db
        absdiff = np.abs(diff, out=None if complex_ else diff)
    if not is_float:
        return float(absdiff.max()), None
    parts_a, parts_b = (da.view(da.real.dtype), db.view(db.real.dtype)) if complex_ else (da, db)
    nan_a, nan_b = np.isnan(parts_a), np.isnan(parts_b)
    any_nan = bool(nan_a.any() or nan_b.any())
    if any_nan:
        one = nan_a ^ nan_b
        both = nan_a & nan_b
        if complex_:
            one, both = one.reshape(-1, 2).any(axis=1), both.reshape(-1, 2).all(axis=1)
        absdiff[one] = np.inf
        absdiff[both] = 0.0
    max_abs = float(absdiff.max())
    size = bits.itemsize
    oa = _ordered(np, parts_a.view(bits), size)
    ob = _ordered(np, parts_b.view(bits), size)
    if any_nan:
        keep = ~(nan_a | nan_b)
        oa, ob = oa[keep], ob[keep]
    if not oa.size:
        return max_abs, None
    if size == 8:  # exact: the difference fits in uint64, not in int64
        hi = np.maximum(oa, ob)
        np.minimum(oa, ob, out=oa)
        hi = hi.view(np.uint64)
        hi -= oa.view(np.uint64)
        return max_abs, int(hi.max())
    wide = oa.astype(np.int64)
    wide -= ob
    return max_abs, int(np.abs(wide, out=wide).max())


def compare_arrays(path: str, a: Tensor, b: Tensor) -> LeafDiff | None:
    """Compare two array leaves bit for bit; None when identical."""
    np = _np()
    xa, xb = np.asarray(a.array), np.asarray(b.array)
    if a.dtype != b.dtype or xa.dtype != xb.dtype:
        return LeafDiff(path, "dtype", a.dtype, tuple(xa.shape), a=a.dtype, b=b.dtype)
    if xa.shape != xb.shape:
        return LeafDiff(path, "shape", a.dtype, tuple(xa.shape), a=str(tuple(xa.shape)), b=str(tuple(xb.shape)))
    if _equal_bits(np, xa, xb):
        return None
    bits = _bits_dtype(np, xa.dtype)
    if bits is not None:
        ba, bb = _as_bits(np, xa, bits), _as_bits(np, xb, bits)
        ne = ba != bb
        if xa.dtype.kind == "c":  # a complex element differs if either part does
            ne = ne.reshape(*xa.shape, 2).any(axis=-1)
    else:
        ne = np.asarray(xa != xb)
    n_diff = int(np.count_nonzero(ne))
    flat_first = int(np.argmax(ne.reshape(-1)))
    first = tuple(int(i) for i in np.unravel_index(flat_first, xa.shape)) if xa.ndim else ()
    va, vb = xa.reshape(-1)[flat_first], xb.reshape(-1)[flat_first]
    max_abs = max_ulp = None
    if bits is not None and (xa.dtype.kind in "iufc" or _is_float(np, xa.dtype)):
        if n_diff * 10 > xa.size * 9:  # equal elements add 0 to both maxima: skip the gather
            da, db = xa.reshape(-1), xb.reshape(-1)
        else:
            flat_ne = ne.reshape(-1)  # ascontiguousarray gave 0-d arrays a dimension
            da, db = xa.reshape(-1)[flat_ne], xb.reshape(-1)[flat_ne]  # the differing elements only
        max_abs, max_ulp = _magnitudes(np, da, db, bits, _is_float(np, xa.dtype))
    return LeafDiff(path, "values", a.dtype, tuple(int(s) for s in xa.shape), n_diff, int(xa.size),
                    max_abs, max_ulp, first, _short(va), _short(vb))


def _float_bits(x: float) -> bytes:
    return struct.pack("<d", x)


def _compare_leaf(path: str, a: Any, b: Any) -> LeafDiff | None:
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        return compare_arrays(path, a, b)
    if type(a) is not type(b) and not (isinstance(a, Tensor) or isinstance(b, Tensor)) \
            and not (isinstance(a, _Opaque) and isinstance(b, _Opaque)):
        return LeafDiff(path, "type", a=type(a).__name__, b=type(b).__name__)
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        ta = a.dtype if isinstance(a, Tensor) else type(a).__name__
        tb = b.dtype if isinstance(b, Tensor) else type(b).__name__
        return LeafDiff(path, "type", a=ta, b=tb)
    if isinstance(a, float):
        if _float_bits(a) == _float_bits(b):
            return None
        ulp = None
        if math.isfinite(a) and math.isfinite(b):
            ia, ib = (struct.unpack("<q", _float_bits(x))[0] for x in (a, b))
            ia, ib = (i ^ ((1 << 63) - 1) if i < 0 else i for i in (ia, ib))
            ulp = abs(ia - ib)
        diff = abs(a - b) if not (math.isnan(a) or math.isnan(b)) else math.inf
        return LeafDiff(path, "values", "float", (), 1, 1, diff, ulp, (), repr(a), repr(b))
    if isinstance(a, complex):
        if _float_bits(a.real) + _float_bits(a.imag) == _float_bits(b.real) + _float_bits(b.imag):
            return None
        return LeafDiff(path, "values", "complex", (), 1, 1, abs(a - b), None, (), repr(a), repr(b))
    if isinstance(a, _Opaque):
        return None if a.type is b.type else LeafDiff(path, "type", a=repr(a), b=repr(b))
    try:
        same = a == b
        same = bool(same)
    except Exception:
        same = repr(a) == repr(b)
    if same:
        return None
    if isinstance(a, int) and not isinstance(a, bool):
        return LeafDiff(path, "values", "int", (), 1, 1, float(abs(a - b)), None, (), _short(a), _short(b))
    return LeafDiff(path, "value", type(a).__name__, a=_short(a), b=_short(b))


#: the counter a framework appends to a repeated name (Keras: dense, dense_1, dense_2_kernel)
_AUTO_SUFFIX = re.compile(r"_\d+(?=[\W_]|$)")


def _aligned(fa: Mapping[str, Any], fb: Mapping[str, Any]) -> bool:
    """Same leaves under different names (Keras's auto-numbered ``dense_1`` in a second
    model built in one process): same count, the same paths but for such counters, and
    pairwise the same kind of leaf. Paths that differ otherwise (``{0: x}`` vs ``{1: x}``)
    are a difference, not a renaming."""
    if len(fa) != len(fb) or fa.keys() == fb.keys():
        return False
    if [_AUTO_SUFFIX.sub("", k) for k in fa] != [_AUTO_SUFFIX.sub("", k) for k in fb]:
        return False
    for a, b in zip(fa.values(), fb.values()):
        if type(a) is not type(b) or _describe(a) != _describe(b):
            return False
    return True


def compare_flat(fa: Mapping[str, Any], fb: Mapping[str, Any]) -> list[LeafDiff]:
    """Compare two :func:`flatten` results; differences in ``fa``'s order, then
    leaves only in ``fb``. When the paths differ but the leaves match one to one in
    order, count, dtype and shape, leaves are paired by position and named by ``fa``."""
    if _aligned(fa, fb):
        fb = dict(zip(fa.keys(), fb.values()))
    out = []
    for path, a in fa.items():
        if path not in fb:
            out.append(LeafDiff(path, "only_a", a=_describe(a)))
            continue
        d = _compare_leaf(path, a, fb[path])
        if d is not None:
            out.append(d)
    for path, b in fb.items():
        if path not in fa:
            out.append(LeafDiff(path, "only_b", b=_describe(b)))
    return out


def _describe(leaf: Any) -> str:
    if isinstance(leaf, Tensor):
        shape = "x".join(map(str, getattr(leaf.array, "shape", ()))) or "scalar"
        return f"{leaf.dtype} {shape}"
    return type(leaf).__name__


def compare(a: Any, b: Any, prefix: str = "") -> list[LeafDiff]:
    """Every leaf of ``a`` and ``b`` that is not bit-for-bit identical; [] when equal.

    Args:
        a, b: nested values (see the module docstring for what is understood).
        prefix: prepended to every path.

    Returns:
        ``LeafDiff`` per differing leaf, in traversal order of ``a``.
    """
    return compare_flat(flatten(a, prefix), flatten(b, prefix))


# --------------------------------------------------------------------------- text

#: Parts of printed lines that change from run to run without meaning a different
#: result: memory addresses, temporary file names, wall-clock timestamps, durations and
#: rates (Keras's ``0s 12ms/step``, tqdm's ``3.2it/s``). They are masked before comparing.
VOLATILE = (
    (re.compile(r"0x[0-9a-fA-F]{6,}"), "<addr>"),
    (re.compile(r"\btmp[a-z0-9_]{8}\b"), "<tmpname>"),  # tempfile.mkdtemp()/mkstemp() names
    (re.compile(r"\b\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"), "<time>"),
    (re.compile(r"\bETA:?\s*\d+(?::\d+)*(?:\.\d+)?\s*[a-z]*"), "<eta>"),
    (re.compile(r"(?<![\w.])\d+(?:\.\d+)?\s*(?:ms|us|µs|ns|s|sec|secs|seconds|min|h)"
                r"(?:/(?:step|it|epoch|sample|batch))?(?![\w])"), "<duration>"),
    (re.compile(r"(?<![\w.])\d+(?:\.\d+)?\s*(?:it|its|step|steps|samples|examples|batches)/s(?![\w])"), "<rate>"),
)
_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![\w.])"
                     r"|(?<![\w])[-+]?(?:nan|inf|infinity)(?![\w])", re.IGNORECASE)


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|[\x08]")


def normalize_line(line: str, replacements: tuple[tuple[str, str], ...] = ()) -> str:
    """What a terminal shows once the line is finished: the text after the last
    carriage return (progress bars redraw themselves with ``\\r`` a varying number of
    times), without colour escapes, backspaces and trailing blanks, with
    ``replacements`` (such as the run's working directory) and :data:`VOLATILE` masked."""
    line = line.rstrip("\n").rstrip("\r")
    if "\r" in line:
        line = line.rsplit("\r", 1)[1]
    line = _ANSI.sub("", line).rstrip()
    for old, new in replacements:
        if old:
            line = line.replace(old, new)
    for pattern, mask in VOLATILE:
        line = pattern.sub(mask, line)
    return line


def _split_numbers(line: str) -> tuple[str, list[str]]:
    return _NUMBER.sub("\0", line), _NUMBER.findall(line)


def _number_diff(xs: list[str], ys: list[str]) -> float | None:
    """Largest |x - y| when the numbers differ only as numbers; 0.0 when equal as
    numbers (``1.0`` and ``1.00``); None when they cannot be compared numerically."""
    worst = 0.0
    for x, y in zip(xs, ys):
        if x == y:
            continue
        try:
            fx, fy = float(x), float(y)
        except ValueError:
            return None
        if fx == fy or (math.isnan(fx) and math.isnan(fy)):
            continue
        worst = max(worst, abs(fx - fy) if math.isfinite(fx) and math.isfinite(fy) else math.inf)
    return worst


def _lines(f) -> Iterator[str]:
    while True:
        line = f.readline(1 << 16)  # bounded: a line without newlines comes in pieces
        if not line:
            return
        yield line


def compare_text(path: str, file_a: str | os.PathLike[str], file_b: str | os.PathLike[str],
                 replace_a: tuple[tuple[str, str], ...] = (),
                 replace_b: tuple[tuple[str, str], ...] = ()) -> LeafDiff | None:
    """Compare two text files line by line, numbers as numbers, reading both as streams
    (memory does not grow with their length). None when they agree.

    The returned ``LeafDiff`` has kind ``"lines"``: ``n_diff`` differing lines out of
    ``size``; ``first_index``: ``(line number,)`` 1-based; ``a``/``b`` that line in each
    run; ``max_abs``: the largest difference between numbers on lines that differ
    only in their numbers (None if no line does).
    """
    import itertools

    if _same_bytes(file_a, file_b):
        return None
    n_diff = total = 0
    first = None
    max_abs: float | None = None
    # lines end at "\n" only: a "\r" redraws the line, as on a terminal
    with open(file_a, encoding="utf-8", errors="replace", newline="\n") as fa, \
            open(file_b, encoding="utf-8", errors="replace", newline="\n") as fb:
        for la, lb in itertools.zip_longest(_lines(fa), _lines(fb)):
            total += 1
            if la == lb:
                continue
            if la is not None and lb is not None:
                na, nb = normalize_line(la, replace_a), normalize_line(lb, replace_b)
                if na == nb:
                    continue
                (sa, xa), (sb, xb) = _split_numbers(na), _split_numbers(nb)
                if sa == sb:
                    d = _number_diff(xa, xb)
                    if d == 0.0:
                        continue
                    if d is not None:
                        max_abs = d if max_abs is None else max(max_abs, d)
            n_diff += 1
            if first is None:
                first = (total, _clip(la), _clip(lb))
    if not n_diff:
        return None
    line, a, b = first
    return LeafDiff(path, "lines", "text", None, n_diff, total, max_abs, None, (line,), a, b)


def _same_bytes(file_a: str | os.PathLike[str], file_b: str | os.PathLike[str]) -> bool:
    """Byte-for-byte equality, 1 MiB at a time (the common case: identical output)."""
    if os.path.getsize(file_a) != os.path.getsize(file_b):
        return False
    with open(file_a, "rb") as fa, open(file_b, "rb") as fb:
        while True:
            ba, bb = fa.read(1 << 20), fb.read(1 << 20)
            if ba != bb:
                return False
            if not ba:
                return True


def _clip(line: str | None, width: int = 160) -> str:
    if line is None:
        return "<no line: output ended>"
    line = line.rstrip("\r\n")
    return line if len(line) <= width else line[:width - 3] + "..."


# --------------------------------------------------------------------------- files

#: File name suffixes read tensor by tensor; anything else is compared by content hash
#: (or line by line for :data:`TEXT_SUFFIXES`).
STRUCTURED_SUFFIXES = (".npy", ".npz", ".safetensors", ".h5", ".hdf5", ".keras", ".pt", ".pth", ".ckpt")
TEXT_SUFFIXES = (".txt", ".csv", ".tsv", ".json", ".jsonl", ".log", ".yaml", ".yml", ".md", ".out")
#: Text files larger than this (bytes) are compared by hash.
TEXT_LIMIT = 64 << 20

_SAFETENSORS_DTYPES = {"F64": "f8", "F32": "f4", "F16": "f2", "I64": "i8", "I32": "i4", "I16": "i2",
                       "I8": "i1", "U64": "u8", "U32": "u4", "U16": "u2", "U8": "u1", "BOOL": "?",
                       "BF16": "bfloat16", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2"}


def _np_dtype(name: str) -> Any:
    np = _np()
    try:
        return np.dtype(name)
    except TypeError:
        import ml_dtypes  # bfloat16 and float8 types

        return np.dtype(getattr(ml_dtypes, name))


def _read_safetensors(path: Path) -> dict[str, Any]:
    """The safetensors layout (8-byte little-endian header size, JSON header, raw
    little-endian data; https://github.com/huggingface/safetensors#format), read
    without importing any framework."""
    np = _np()
    out: dict[str, Any] = {}
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        if n > 100 << 20:
            raise ValueError(f"header of {n} bytes")
        import json

        header = json.loads(f.read(n))
        base = 8 + n
        for name in sorted(header):
            info = header[name]
            if name == "__metadata__":
                out[name] = info
                continue
            start, end = info["data_offsets"]
            f.seek(base + start)
            buf = f.read(end - start)
            label = _SAFETENSORS_DTYPES.get(info["dtype"], info["dtype"])
            try:
                dt = _np_dtype(label)
                label = dt.name
            except (ImportError, AttributeError, TypeError):
                dt = np.dtype(f"V{max(1, len(buf) // max(1, math.prod(info['shape'])))}")
            out[name] = Tensor(np.frombuffer(buf, dtype=dt).reshape(info["shape"]), label.lower())
    return out


def _read_h5(source: Any) -> dict[str, Any]:
    import h5py

    np = _np()
    out: dict[str, Any] = {}
    with h5py.File(source, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                value = obj[()]
                if isinstance(value, np.ndarray) and value.dtype != object:
                    out[name] = Tensor(value, value.dtype.name)
                elif isinstance(value, np.generic):
                    out[name] = Tensor(np.asarray(value), value.dtype.name)
                else:
                    out[name] = value.tolist() if hasattr(value, "tolist") else value
        f.visititems(visit)
    return out


def _read_keras(path: Path) -> dict[str, Any]:
    """A Keras 3 ``.keras`` archive: the weights in ``model.weights.h5`` and the model
    config; ``metadata.json`` (it holds the save date) is skipped."""
    import io
    import zipfile

    out: dict[str, Any] = {}
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        if "config.json" in names:
            import json

            out.update(flatten(_drop_ids(json.loads(z.read("config.json"))), "config.json"))
        for name in names:
            if name.endswith(".h5"):
                out.update(flatten(_read_h5(io.BytesIO(z.read(name))), name))
            elif name.endswith(".npz"):
                out.update(flatten(_read_npz(io.BytesIO(z.read(name))), name))
    return out


def _drop_ids(config: Any) -> Any:
    """A Keras config without ``shared_object_id`` (Keras writes ``id(obj)`` there, a
    memory address: keras/src/saving/serialization_lib.py,
    https://github.com/keras-team/keras/blob/master/keras/src/saving/serialization_lib.py)."""
    if isinstance(config, dict):
        return {k: _drop_ids(v) for k, v in config.items() if k != "shared_object_id"}
    if isinstance(config, list):
        return [_drop_ids(v) for v in config]
    return config


def _read_npz(source: Any) -> dict[str, Any]:
    np = _np()
    with np.load(source, allow_pickle=False) as z:
        return {k: Tensor(z[k], z[k].dtype.name) for k in z.files}


def _read_torch(path: Path) -> Any:
    if "torch" not in sys.modules and not _installed("torch"):
        raise ImportError("PyTorch is not installed")
    import torch

    return torch.load(path, map_location="cpu", weights_only=True)


class _QuietStderr:
    """Send file descriptor 2 to /dev/null while TensorFlow's C++ runtime starts (it
    logs start-up lines there whatever ``TF_CPP_MIN_LOG_LEVEL`` says)."""

    def __enter__(self):
        try:
            sys.stderr.flush()
            self._saved = os.dup(2)
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 2)
            os.close(null)
        except OSError:
            self._saved = None
        return self

    def __exit__(self, *exc):
        if self._saved is not None:
            os.dup2(self._saved, 2)
            os.close(self._saved)


def _read_tf_checkpoint(prefix: Path) -> dict[str, Any]:
    if "tensorflow" not in sys.modules and not _installed("tensorflow"):
        raise ImportError("TensorFlow is not installed")
    with _QuietStderr():
        import tensorflow as tf

        reader = tf.train.load_checkpoint(str(prefix))
        out: dict[str, Any] = {}
        for name in sorted(reader.get_variable_to_dtype_map()):
            value = _np().asarray(reader.get_tensor(name))
            out[name] = Tensor(value, value.dtype.name) if value.dtype != object else value.tolist()
    return out


#: fields of TensorFlow's SavedModel ``fingerprint.pb`` (``FingerprintDef``,
#: https://github.com/tensorflow/tensorflow/blob/master/tensorflow/core/protobuf/fingerprint.proto;
#: numbers checked against the installed TF 2.21 ``fingerprint_pb2``). Field 7, ``uuid``,
#: is random for every save and is skipped.
_FINGERPRINT_FIELDS = {1: "saved_model_checksum", 2: "graph_def_program_hash", 3: "signature_def_hash",
                       4: "saved_object_graph_hash", 5: "checkpoint_hash", 6: "version"}


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7


def _read_saved_model_fingerprint(path: Path) -> dict[str, Any]:
    """The hashes in a SavedModel's ``fingerprint.pb`` (protobuf wire format, read
    without TensorFlow), without its per-save ``uuid``."""
    buf = path.read_bytes()
    out: dict[str, Any] = {}
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 2:
            n, i = _varint(buf, i)
            value, i = buf[i:i + n], i + n
        else:
            raise ValueError(f"unexpected protobuf wire type {wire}")
        if number in _FINGERPRINT_FIELDS:
            out[_FINGERPRINT_FIELDS[number]] = value
    return out


def _installed(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def read_structured(path: str | os.PathLike[str], tf_checkpoint: bool = False) -> dict[str, Any]:
    """``{tensor name: leaf}`` of a ``.npy/.npz/.safetensors/.h5/.hdf5/.keras/.pt/.pth/
    .ckpt`` file, or of the TensorFlow checkpoint with prefix ``path`` when
    ``tf_checkpoint``. ``.pt``/``.ckpt`` load with ``torch.load(weights_only=True)`` (no
    arbitrary code runs), TF checkpoints with ``tf.train.load_checkpoint``; the framework
    is imported only for those.

    Raises:
        FileFormatError: the file cannot be parsed as its suffix says, or the framework
            needed to read it is not installed (callers fall back to a content hash).
    """
    from .errors import FileFormatError

    p = Path(path)
    suffix = p.suffix.lower()
    try:
        if tf_checkpoint:
            return _read_tf_checkpoint(p)
        if p.name == "fingerprint.pb":
            return _read_saved_model_fingerprint(p)
        if suffix == ".npy":
            arr = _np().load(p, allow_pickle=False)
            return {"": Tensor(arr, arr.dtype.name)}
        if suffix == ".npz":
            return _read_npz(p)
        if suffix == ".safetensors":
            return _read_safetensors(p)
        if suffix in (".h5", ".hdf5"):
            return _read_h5(p)
        if suffix == ".keras":
            return _read_keras(p)
        if suffix in (".pt", ".pth", ".ckpt"):
            return flatten(_read_torch(p))
    except Exception as exc:  # any parser failure means: compare by hash instead
        raise FileFormatError(f"{p.name}: not readable as {suffix or 'a checkpoint'} "
                              f"({type(exc).__name__}: {str(exc)[:200]})") from None
    raise FileFormatError(f"{p.name}: no reader for {suffix!r} files")


def file_digest(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file's bytes, read in 1 MiB blocks."""
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
