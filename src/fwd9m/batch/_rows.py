"""Bitwise comparison of the shared rows of two NumPy arrays."""

from __future__ import annotations

from typing import Any


def equal_bits(a: Any, b: Any) -> bool:
    from ..compare import Tensor, compare_arrays

    return compare_arrays("", Tensor(a, a.dtype.name), Tensor(b, b.dtype.name)) is None


def diff(a: Any, b: Any) -> dict | None:
    """How ``a`` and ``b`` differ (elements, ULP, largest absolute difference); None if equal."""
    from ..compare import Tensor, compare_arrays

    d = compare_arrays("", Tensor(a, a.dtype.name), Tensor(b, b.dtype.name))
    if d is None:
        return None
    return {"n_diff": d.n_diff, "size": d.size, "max_ulp": d.max_ulp, "max_abs": d.max_abs}
