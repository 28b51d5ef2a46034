"""The values of the first diverging op side by side (run A, run B), for the reports:
from the full tensors captured with ``--capture`` (exact) or else from the 4 values
sampled per float tensor (first, one third, two thirds, last; see
:meth:`fwd9m._recording._common.Recording.sample`), which may all agree where others differ.

Plain ``struct`` decoding, so the core needs no NumPy; at most :data:`MAX_VALUES`
values of a tensor are compared and :data:`MAX_ROWS` rows kept per tensor (the ones
that differ most, in index order).
"""

from __future__ import annotations

import math
import struct
from typing import Any

from .._recording._common import SAMPLES
from .._recording._store import ARGS_DTYPE, Op, Tensor

__all__ = ["side_by_side"]

MAX_VALUES = 1 << 20
MAX_ROWS = 12
MAX_TENSORS = 4

#: dtype -> (struct value format, struct bit-pattern format, bytes, float?)
_FORMATS = {
    "float16": ("e", "H", 2, True),
    "float32": ("f", "I", 4, True),
    "float64": ("d", "Q", 8, True),
    "bfloat16": (None, "H", 2, True),
    "int8": ("b", "B", 1, False),
    "uint8": ("B", "B", 1, False),
    "int16": ("h", "H", 2, False),
    "uint16": ("H", "H", 2, False),
    "int32": ("i", "I", 4, False),
    "uint32": ("I", "I", 4, False),
    "int64": ("q", "Q", 8, False),
    "uint64": ("Q", "Q", 8, False),
    "bool": ("?", "B", 1, False),
}


def _numel(meta: str) -> int | None:
    shape = meta.partition("[")[2].rstrip("]")
    try:
        return math.prod(int(d) for d in shape.split(",") if d.strip()) if shape else 1
    except ValueError:
        return None


def _positions(meta: str, count: int) -> list[int]:
    """Element indices of the ``count`` sampled values of a tensor of ``meta``."""
    n = _numel(meta)
    if n is None or n <= SAMPLES or count != SAMPLES:
        return list(range(count))
    return [0, n // 3, (2 * n) // 3, n - 1]


def _decode(dtype: str, data: bytes) -> tuple[list, list[int]] | None:
    """(values, bit patterns) of at most MAX_VALUES values; None for other dtypes."""
    fmt = _FORMATS.get(dtype)
    if fmt is None:
        return None
    vf, bf, size, _ = fmt
    n = min(len(data) // size, MAX_VALUES)
    data = data[: n * size]
    bits = list(struct.unpack(f"<{n}{bf}", data))
    if vf is None:  # bfloat16: the high half of a float32
        values = [struct.unpack("<f", struct.pack("<I", b << 16))[0] for b in bits]
    else:
        values = list(struct.unpack(f"<{n}{vf}", data))
    return values, bits


def _ordered(bits: int, nbits: int) -> int:
    """A float's bit pattern as an integer in float order (as in _compare)."""
    sign = 1 << (nbits - 1)
    return -(bits ^ sign) if bits & sign else bits


def _distance(x, y, bx: int, by: int, size: int, is_float: bool) -> float:
    """ULP distance of two floats (0 for +0/-0 or two NaNs, whose bits still differ),
    absolute difference of two integers."""
    if bx == by or (is_float and math.isnan(x) and math.isnan(y)):
        return 0
    return abs(_ordered(bx, size * 8) - _ordered(by, size * 8)) if is_float else abs(int(x) - int(y))


def _pair(which: str, ta: Tensor, tb: Tensor, ca, cb) -> dict[str, Any] | None:
    if ca and cb:
        meta, da, db, source = ca[0], ca[1], cb[1], "captured"
    elif ta.sample and tb.sample:
        meta, da, db, source = ta.meta, ta.sample, tb.sample, "sampled"
    else:
        return None
    dtype = meta.split("[", 1)[0]
    va, vb = _decode(dtype, da), _decode(dtype, db)
    if va is None or vb is None or len(va[0]) != len(vb[0]):
        return None
    _, _, size, is_float = _FORMATS[dtype]
    dist = [_distance(x, y, bx, by, size, is_float) for x, y, bx, by in zip(va[0], vb[0], va[1], vb[1])]
    differ = [i for i, (bx, by) in enumerate(zip(va[1], vb[1])) if bx != by]
    # the rows that differ most, in index order; the first ones when none differ
    keep = sorted(sorted(differ, key=lambda i: -dist[i])[:MAX_ROWS]) or list(range(min(MAX_ROWS, len(dist))))
    index = _positions(meta, len(dist)) if source == "sampled" else list(range(len(dist)))
    return {
        "tensor": which,
        "meta": meta,
        "source": source,
        "values": _numel(meta),
        "compared": len(dist),
        "differ": len(differ),
        "unit": "ULP" if is_float else "abs",
        "rows": [[index[i], va[0][i], vb[0][i], dist[i]] for i in keep],
    }


def side_by_side(a: Op, b: Op, ins: list[int], outs: list[int]) -> list[dict[str, Any]]:
    """For the differing inputs, then the differing outputs, of the op pair (a, b):
    ``{"tensor": "output 0", "meta", "source": "captured"|"sampled", "values" (in the
    tensor), "compared", "differ", "unit": "ULP"|"abs", "rows": [[element index, value A,
    value B, distance], ...]}``.
    Tensors without captured or sampled values (and non-tensor arguments) are left out."""
    out = []
    for side, idx, ts_a, ts_b in ((0, ins, a.inputs, b.inputs), (1, outs, a.outputs, b.outputs)):
        for i in idx:
            if ts_a[i].meta.startswith(ARGS_DTYPE + "["):
                continue
            pair = _pair(
                f"{('input', 'output')[side]} {i}",
                ts_a[i],
                ts_b[i],
                a.captures.get((side, i)),
                b.captures.get((side, i)),
            )
            if pair is not None:
                out.append(pair)
            if len(out) >= MAX_TENSORS:
                return out
    return out
