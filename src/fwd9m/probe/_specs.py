"""The probe specs (``specs.toml``, keyed by catalog entry id) and their inputs.

Inputs are drawn here, with NumPy, from a generator seeded by the entry id (blake2b,
never ``hash()``), so every repeat, process and framework of one entry sees the same
bytes. Nothing here imports a framework.
"""

from __future__ import annotations

import hashlib
import re
import sys
from dataclasses import dataclass, field
from importlib import resources

from ..errors import FileFormatError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["Spec", "draw", "load", "parse_input"]

_INPUT = re.compile(r"^\s*([a-z0-9]+)\[([0-9, ]*)\]\s*(?:<\s*([0-9.]+))?\s*$")
_DTYPES = ("float16", "float32", "float64", "int32", "int64", "bool")


@dataclass(frozen=True)
class Spec:
    """One runnable probe: ``inputs`` name -> (dtype, shape, bound), ``run`` code."""

    id: str
    inputs: dict = field(default_factory=dict)
    run: str = ""
    skip: str | None = None


def parse_input(text: str, where: str = "input") -> tuple[str, tuple[int, ...], float | None]:
    """``"float32[8,16]"`` -> ("float32", (8, 16), None); ``"int64[100]<8"`` bound 8."""
    m = _INPUT.match(text)
    if not m or m.group(1) not in _DTYPES:
        raise FileFormatError(
            f"{where}: bad input {text!r}; expected DTYPE[SHAPE] or DTYPE[SHAPE]<BOUND "
            f"with DTYPE one of {', '.join(_DTYPES)}"
        )
    shape = tuple(int(s) for s in m.group(2).replace(" ", "").split(",") if s)
    bound = float(m.group(3)) if m.group(3) else None
    return m.group(1), shape, bound


def _read(text: str, where: str) -> dict[str, Spec]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise FileFormatError(f"{where}: not valid TOML ({exc})") from None
    out = {}
    for key, raw in data.items():
        if not isinstance(raw, dict) or not (isinstance(raw.get("run"), str) or isinstance(raw.get("skip"), str)):
            raise FileFormatError(f'{where}: [{key!r}] needs run = "..." or skip = "why"')
        inputs = {n: parse_input(v, f"{where} [{key}] {n}") for n, v in (raw.get("inputs") or {}).items()}
        out[key] = Spec(key, inputs, raw.get("run", ""), raw.get("skip"))
    return out


_CACHE: dict[str, dict[str, Spec]] = {}


def load() -> dict[str, Spec]:
    """Every spec of the bundled ``specs.toml``, by entry id."""
    if "bundled" not in _CACHE:
        text = resources.files("fwd9m.probe").joinpath("specs.toml").read_text(encoding="utf-8")
        _CACHE["bundled"] = _read(text, "fwd9m/probe/specs.toml")
    return _CACHE["bundled"]


def seed_of(key: str) -> int:
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "little")


def draw(inputs: dict, key: str) -> dict:
    """NumPy arrays for ``inputs`` (name -> (dtype, shape, bound)), seeded by ``key``."""
    import numpy as np

    rng = np.random.default_rng(seed_of(key))
    out = {}
    for name, (dtype, shape, bound) in inputs.items():
        if dtype == "bool":
            out[name] = rng.random(shape) < 0.5
        elif dtype.startswith("int"):
            out[name] = rng.integers(0, int(bound or 100), size=shape, dtype=dtype)
        elif bound is not None:
            out[name] = (rng.random(shape) * bound).astype(dtype)
        else:
            out[name] = rng.standard_normal(shape).astype(dtype)
    return out
