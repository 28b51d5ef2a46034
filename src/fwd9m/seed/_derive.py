"""Derived seeds: ``derive_seed`` (BLAKE2b over typed, length-prefixed keys) and
``jax_key``.

Stable across Python versions, platforms and ``PYTHONHASHSEED`` (Python's ``hash()`` is
salted per process for ``str``/``bytes``:
https://docs.python.org/3/reference/datamodel.html#object.__hash__).
"""

from __future__ import annotations

import hashlib
import struct
from typing import Any

from ..errors import ConfigurationError
from ._everything import _check_seed

_DERIVE_PERSON = b"fwd9m-seed-v1"  # BLAKE2b personalisation: versions the derivation

_PACK_LEN = struct.Struct(">Q").pack


def _encode_key(key: Any) -> bytes:
    """Typed, length-prefixed encoding: distinct key tuples give distinct bytes. Strings
    are UTF-8 (``surrogatepass``: a lone surrogate, as from ``os.fsdecode``, is a key too)."""
    t = type(key)
    if t is int:  # fast paths for the common key types (same bytes as the general path)
        payload = key.to_bytes((key.bit_length() + 8) // 8, "big", signed=True)
        return b"i" + _PACK_LEN(len(payload)) + payload
    if t is str:
        payload = key.encode("utf-8", "surrogatepass")
        return b"s" + _PACK_LEN(len(payload)) + payload
    if isinstance(key, bool):
        tag, payload = b"b", b"\x01" if key else b"\x00"
    elif hasattr(key, "__index__") and not isinstance(key, (str, bytes)):
        value = int(key.__index__())
        length = (value.bit_length() + 8) // 8  # room for the sign bit
        tag, payload = b"i", value.to_bytes(length, "big", signed=True)
    elif isinstance(key, str):
        tag, payload = b"s", key.encode("utf-8", "surrogatepass")
    elif isinstance(key, (bytes, bytearray, memoryview)):
        tag, payload = b"y", bytes(key)
    elif key is None:
        tag, payload = b"n", b""
    elif isinstance(key, tuple):
        tag, payload = b"t", b"".join(_encode_key(k) for k in key)
    else:
        raise TypeError(
            f"derive_seed keys must be int, str, bytes, bool, None or tuples of them; got {type(key).__name__} {key!r}"
        )
    return tag + _PACK_LEN(len(payload)) + payload


def derive_seed(seed: int, *keys: Any, bits: int = 64) -> int:
    """A seed derived from ``seed`` and ``keys``, stable everywhere.

    ``derive_seed(s, "worker", 3)`` is the first ``bits`` bits (big-endian) of
    BLAKE2b-256 over a typed, length-prefixed encoding of ``(s, "worker", 3)``, with
    personalisation ``b"fwd9m-seed-v1"``. The value depends only on the key values and
    their types (``1``, ``"1"`` and ``True`` differ), not on the Python version,
    platform, byte order or ``PYTHONHASHSEED``. Different key tuples collide with
    probability about ``n**2 / 2**(bits+1)`` for ``n`` derived seeds (birthday bound):
    negligible at 64 bits, noticeable past ~10**4 seeds at 32 bits.

    Args:
        seed: non-negative int (any size).
        *keys: ints (any size, negative allowed), str, bytes, bool, None, or tuples
            of these.
        bits: output width, 1..256. 64 suits ``torch.Generator.manual_seed``,
            ``numpy.random.default_rng`` and ``random.Random``; use 32 for
            ``seed_everything``/``numpy.random.seed`` and 31 for TensorFlow op seeds.

    Returns:
        int in ``[0, 2**bits - 1]``.

    Raises:
        TypeError: a key of another type, or a non-int seed.
        ConfigurationError: negative seed or ``bits`` outside 1..256.
    """
    if type(seed) is not int or seed < 0:
        seed = _check_seed(seed, maximum=None)
    if isinstance(bits, bool) or not isinstance(bits, int) or not 1 <= bits <= 256:
        raise ConfigurationError(f"bits={bits!r} must be an int in 1..256")
    h = hashlib.blake2b(digest_size=32, person=_DERIVE_PERSON)
    h.update(_encode_key(seed))
    for key in keys:
        h.update(_encode_key(key))
    return int.from_bytes(h.digest(), "big") >> (256 - bits)


def jax_key(seed: int, *keys: Any) -> Any:
    """A JAX PRNG key for ``seed`` (or for ``derive_seed(seed, *keys)`` when keys given).

    JAX keeps no global RNG state, so ``seed_everything`` cannot seed it; use the key
    this returns (``jax.random.key``:
    https://docs.jax.dev/en/latest/_autosummary/jax.random.key.html).
    With keys, the derived seed is 32 bits wide so that it is exact without x64 mode.

    Returns:
        A typed JAX key array (shape ``()``, dtype ``key<fry>`` by default).
    """
    import jax

    value = derive_seed(seed, *keys, bits=32) if keys else _check_seed(seed)
    return jax.random.key(value)
