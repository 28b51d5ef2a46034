"""Bit-for-bit comparison of flattened values: :class:`LeafDiff` (what differs, where,
by how much), :func:`compare_arrays` (counts, largest absolute and ULP distance, first
differing index) and :func:`compare` / :func:`compare_flat` over whole nested values.

Equality is bitwise: two floats are equal when their bit patterns are, so NaNs with the
same bits are equal and ``-0.0 != 0.0``.
"""

from __future__ import annotations

import dataclasses
import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._escape import clip, escape_control
from ._values import NamedPath, Tensor, _Empty, _np, _Opaque, flatten

#: elements compared per chunk in the fast equality test (bounds temporary memory)
CHUNK = 1 << 22


@dataclass(frozen=True)
class LeafDiff:
    """One leaf that differs between run ``a`` and run ``b``.

    ``kind``: ``"values"`` (same dtype and shape, some elements differ), ``"shape"``,
    ``"dtype"``, ``"type"``, ``"only_a"`` / ``"only_b"`` (the leaf exists in one run
    only), ``"value"`` (a non-array leaf such as a string differs), or ``"error"``
    (comparing a non-array leaf with ``==`` raised, so whether it differs is unknown:
    ``dtype`` is its type's name and ``a`` the exception).
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
        """One line: what differs and by how much; control characters in paths and
        values (a user's dict key, a printed line) are escaped, so printing it is safe."""
        return escape_control(self._summary())

    def _summary(self) -> str:
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
        if self.kind == "error":
            return (
                f"{self.path}: cannot be compared: == on a {self.dtype} raised {self.a} "
                f"(return arrays, numbers or a state_dict instead)"
            )
        if self.kind in ("only_a", "only_b"):
            which, other = ("the first run", "the other") if self.kind == "only_a" else ("the other run", "the first")
            return f"{self.path}: only in {which} ({self.a or self.b}), not in {other}"
        return f"{self.path}: {self.kind} differs: {self.a} vs {self.b}"

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["summary"] = self.summary()
        if d["max_abs"] is not None and not math.isfinite(d["max_abs"]):
            d["max_abs"] = str(d["max_abs"])  # JSON has no inf
        return d


def _bits_dtype(np: Any, dtype: Any) -> Any:
    """The unsigned integer dtype to compare ``dtype``'s elements through (booleans,
    numbers, ml_dtypes' floats, datetime64/timedelta64, whose NaT is a bit pattern like
    any other); None for strings, bytes, structured and object dtypes (see :func:`_differs`)."""
    if dtype.kind in "Mm":
        return np.dtype("u8")
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


def _differs(np: Any, a: Any, b: Any) -> Any:
    """Per element of two same-shape, same-dtype arrays: True where the meaningful bits
    differ. Numbers and datetimes by their bit patterns (two NaNs or NaTs with the same
    bits agree, ``-0.0`` and ``0.0`` do not); structured arrays field by field (padding
    between fields is not compared); object arrays element by element with
    :func:`compare` (a ``None`` or ``nan`` element agrees with itself); strings, bytes
    and raw ``void`` by their bytes."""
    shape, fa, fb = a.shape, a.reshape(-1), b.reshape(-1)
    dtype = a.dtype
    if not fa.size:
        return np.zeros(shape, bool)
    if dtype.fields is not None:
        ne = np.zeros(fa.shape, bool)
        for name in dtype.names:
            sub = _differs(np, fa[name], fb[name])  # (n,) or (n, *subarray shape)
            ne |= sub.reshape(fa.size, -1).any(axis=1) if sub.ndim > 1 else sub
        return ne.reshape(shape)
    if dtype.kind == "O":
        return np.array([bool(compare(x, y)) for x, y in zip(fa, fb)], bool).reshape(shape)
    bits = _bits_dtype(np, dtype)
    if bits is not None:
        ne = _as_bits(np, fa, bits) != _as_bits(np, fb, bits)
        return (ne.reshape(fa.size, 2).any(axis=1) if dtype.kind == "c" else ne).reshape(shape)
    if not dtype.itemsize:
        return np.zeros(shape, bool)
    ba = np.ascontiguousarray(fa).view(np.uint8).reshape(fa.size, dtype.itemsize)
    bb = np.ascontiguousarray(fb).view(np.uint8).reshape(fb.size, dtype.itemsize)
    return (ba != bb).any(axis=1).reshape(shape)


def _equal_bits(np: Any, a: Any, b: Any) -> bool:
    """Fast bitwise equality of two same-shape, same-dtype arrays, chunked."""
    bits = _bits_dtype(np, a.dtype)
    if bits is None:
        fa, fb = a.reshape(-1), b.reshape(-1)
        return not any(_differs(np, fa[i : i + CHUNK], fb[i : i + CHUNK]).any() for i in range(0, fa.size, CHUNK))
    fa, fb = _as_bits(np, a, bits).reshape(-1), _as_bits(np, b, bits).reshape(-1)
    for start in range(0, fa.size, CHUNK):
        if not np.array_equal(fa[start : start + CHUNK], fb[start : start + CHUNK]):
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


def _element(arr: Any, i: int) -> Any:
    """Element ``i`` (C order) of ``arr``, or a 1-element array where numpy cannot make
    it a scalar (a str array holding bytes that are no code point: a damaged file)."""
    flat = arr.reshape(-1)
    try:
        return flat[i]
    except (SystemError, ValueError):  # UnicodeError is a ValueError
        return flat[i : i + 1]


def _hex(x: Any) -> str:
    try:
        return x.tobytes().hex()
    except (AttributeError, ValueError, TypeError):
        return "?"


def _shown(x: Any) -> str:
    try:
        return _short(x)
    except Exception:  # a damaged element that numpy cannot turn into a value
        return f"<bytes {clip(_hex(x), 40)}>"


def _short(x: Any) -> str:
    # .item() of NaT is None, of a record a tuple: show them as numpy does
    if getattr(getattr(x, "dtype", None), "kind", "-") in ("M", "m", "V"):
        text = str(x)
    else:
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
    ne = _differs(np, xa, xb)
    n_diff = int(np.count_nonzero(ne))
    flat_first = int(np.argmax(ne.reshape(-1)))
    first = tuple(int(i) for i in np.unravel_index(flat_first, xa.shape)) if xa.ndim else ()
    va, vb = _element(xa, flat_first), _element(xb, flat_first)
    max_abs = max_ulp = None
    if bits is not None and (xa.dtype.kind in "iufc" or _is_float(np, xa.dtype)):
        if n_diff * 10 > xa.size * 9:  # equal elements add 0 to both maxima: skip the gather
            da, db = xa.reshape(-1), xb.reshape(-1)
        else:
            flat_ne = ne.reshape(-1)  # ascontiguousarray gave 0-d arrays a dimension
            da, db = xa.reshape(-1)[flat_ne], xb.reshape(-1)[flat_ne]  # the differing elements only
        max_abs, max_ulp = _magnitudes(np, da, db, bits, _is_float(np, xa.dtype))
    sa, sb = _shown(va), _shown(vb)
    if sa == sb and xa.dtype.kind != "O":  # NaN payloads: "nan" vs "nan"
        sa, sb = (f"{s} (bits {clip(_hex(x), 40)})" for s, x in ((sa, va), (sb, vb)))
    return LeafDiff(
        path, "values", a.dtype, tuple(int(s) for s in xa.shape), n_diff, int(xa.size), max_abs, max_ulp, first, sa, sb
    )


def _float_bits(x: float) -> bytes:
    return struct.pack("<d", x)


def _compare_leaf(path: str, a: Any, b: Any) -> LeafDiff | None:
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        return compare_arrays(path, a, b)
    if type(a) is not type(b) or isinstance(a, (_Opaque, _Empty)) and a.type is not b.type:
        return LeafDiff(path, "type", a=_describe(a), b=_describe(b))
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
    if isinstance(a, (_Opaque, _Empty)):
        return None  # the same type
    try:
        same = bool(a == b)
    except Exception as exc:  # a's __eq__ raised, or returned something without a truth value
        return LeafDiff(path, "error", type(a).__qualname__, a=clip(f"{type(exc).__name__}: {exc}", 200))
    if same:
        return None
    if isinstance(a, int) and not isinstance(a, bool):
        return LeafDiff(path, "values", "int", (), 1, 1, float(abs(a - b)), None, (), _short(a), _short(b))
    return LeafDiff(path, "value", type(a).__name__, a=_short(a), b=_short(b))


def _renamed(fa: Mapping[str, Any], fb: Mapping[str, Any]) -> dict[str, str]:
    """``{path in fb: path in fa}`` for leaves that differ only in names a framework
    made up (:class:`~fwd9m.compare.NamedPath`: Keras's ``dense_1`` for a
    second model built in one process). Leaves with the same generic path pair up in
    order when both runs have as many of them; any other difference in paths (a user's
    own keys, list lengths, dataclass fields) is a difference, never a renaming."""
    groups: dict[str, tuple[list[str], list[str]]] = {}
    for side, flat in enumerate((fa, fb)):
        for k in flat:
            if isinstance(k, NamedPath):
                groups.setdefault(k.generic, ([], []))[side].append(k)
    out: dict[str, str] = {}
    for ka, kb in groups.values():
        if len(ka) == len(kb) and ka != kb:
            out.update((b, a) for a, b in zip(ka, kb) if a != b)
    return out


def _container_diffs(fa: Mapping[str, Any], fb: Mapping[str, Any]) -> list[LeafDiff]:
    """A ``"type"`` difference per path where both values hold a container of a
    different kind (a tuple and a list, a dict and a list); needs both to be
    :class:`~fwd9m.compare.Flat` (a plain mapping records no containers)."""
    ca, cb = getattr(fa, "containers", None), getattr(fb, "containers", None)
    if not ca or not cb:
        return []
    return [LeafDiff(path, "type", a=kind, b=cb[path]) for path, kind in ca.items() if path in cb and cb[path] != kind]


def compare_flat(fa: Mapping[str, Any], fb: Mapping[str, Any]) -> list[LeafDiff]:
    """Compare two :func:`flatten` results; containers of a different kind at the same
    path first (kind ``"type"``: ``(1, 2)`` and ``[1, 2]``, when both are
    :class:`~fwd9m.compare.Flat`), then leaves in ``fa``'s order, then leaves only in
    ``fb``. A path in one only is a difference (kind ``"only_a"`` or ``"only_b"``;
    ``{1: 0}`` and ``{"1": 0}`` have the paths ``[1]`` and ``1``), except weights whose
    names Keras or TensorFlow numbered differently (see
    :class:`~fwd9m.compare.NamedPath`); those pair up and are named by ``fa``."""
    out = _container_diffs(fa, fb)
    skip = dict(ignored(fa, fb))
    if skip:
        fa, fb = ({k: v for k, v in f.items() if k not in skip} for f in (fa, fb))
    renamed = _renamed(fa, fb)
    if renamed:
        moved = {renamed.get(k, k): v for k, v in fb.items()}
        if len(moved) == len(fb):  # no new name collides with one already there
            fb = moved
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


def ignored(fa: Mapping[str, Any], fb: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(path, reason)`` of the leaves :func:`compare_flat` does not compare: those a
    reader marked in either :class:`~fwd9m.compare.Flat`'s ``ignored`` (a save time
    stamp), in ``fa``'s order, then ``fb``'s."""
    out = dict(getattr(fa, "ignored", {}))
    for k, v in getattr(fb, "ignored", {}).items():
        out.setdefault(k, v)
    return list(out.items())


def _describe(leaf: Any) -> str:
    """What kind of leaf: ``"float32 3x4"`` for an array, ``"<empty list>"``, a type name."""
    if isinstance(leaf, Tensor):
        shape = "x".join(map(str, getattr(leaf.array, "shape", ()))) or "scalar"
        return f"{leaf.dtype} {shape}"
    if isinstance(leaf, (_Opaque, _Empty)):
        return repr(leaf)
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
