"""Seeding: one seed for every RNG in the process, and seeds derived from it.

``seed_everything`` seeds Python's :mod:`random`, NumPy's legacy global RNG and each
framework that is already imported (or named), and exports the seed in the
``FWD9M_SEED`` environment variable so that child processes (DataLoader workers,
``multiprocessing``, distributed ranks) can find it. It never imports a framework the
caller did not import or name.

``derive_seed`` turns ``(seed, *keys)`` into a new seed with BLAKE2b over a typed,
length-prefixed encoding of the keys, so it is stable across Python versions,
platforms and ``PYTHONHASHSEED`` (Python's ``hash()`` is salted per process for
``str``/``bytes``: https://docs.python.org/3/reference/datamodel.html#object.__hash__).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import struct
import sys
from typing import Any, Callable, Iterable

from ._frameworks import installed_version, resolve
from ._log import logger
from .errors import ConfigurationError

__all__ = ["seed_everything", "derive_seed", "Seeder", "jax_key", "ENV_VAR", "MAX_SEED",
           "current_seed"]

#: Environment variable that carries the seed to child processes.
ENV_VAR = "FWD9M_SEED"

#: Largest seed ``seed_everything`` accepts. NumPy's legacy global RNG
#: (``numpy.random.seed``) takes integers in ``[0, 2**32 - 1]``
#: (https://numpy.org/doc/stable/reference/random/generated/numpy.random.seed.html,
#: "Must be convertible to 32 bit unsigned integers"), the narrowest range of the
#: sources seeded here: ``torch.manual_seed`` takes up to ``2**64 - 1``
#: (https://github.com/pytorch/pytorch/blob/main/torch/random.py) and TensorFlow
#: truncates seeds modulo ``2**31 - 1`` (``_truncate_seed`` in
#: https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/framework/random_seed.py).
MAX_SEED = 2**32 - 1

_DERIVE_PERSON = b"fwd9m-seed-v1"  # BLAKE2b personalisation: versions the derivation


def _check_seed(seed: Any, *, name: str = "seed", maximum: int | None = MAX_SEED) -> int:
    if isinstance(seed, bool) or not hasattr(seed, "__index__"):
        raise TypeError(f"{name} must be an int, got {type(seed).__name__} {seed!r}")
    value = int(seed.__index__())
    if maximum is None:
        if value < 0:
            raise ConfigurationError(f"{name}={value} must be a non-negative int")
        return value
    if not 0 <= value <= maximum:
        raise ConfigurationError(
            f"{name}={value} is out of range: seeds must be in [0, {maximum}] "
            f"(NumPy's global RNG accepts only 32-bit unsigned seeds).\n"
            f"Fix: pass a smaller seed, or fold a large one: "
            f"fwd9m.derive_seed({value}, bits=32)")
    return value


def current_seed() -> int | None:
    """The seed exported by the last ``seed_everything`` in this or a parent process.

    Reads ``FWD9M_SEED``; returns None when it is unset.

    Raises:
        ConfigurationError: the variable is set but is not an integer in range.
    """
    raw = os.environ.get(ENV_VAR)
    if raw is None or raw.strip() == "":
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise ConfigurationError(
            f"environment variable {ENV_VAR}={raw!r} is not an integer.\n"
            f"Fix: export {ENV_VAR}=<int in [0, {MAX_SEED}]> or unset it") from None
    return _check_seed(value, name=ENV_VAR)


def _seed_tensorflow(seed: int) -> None:
    import tensorflow as tf

    # Sets the graph/eager global seed and resets the eager op-seed counter
    # (context._set_global_seed makes a new random.Random(seed) and clears the
    # kernel cache): tensorflow/python/eager/context.py in
    # https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/eager/context.py
    tf.random.set_seed(seed)


def _seed_keras(seed: int) -> None:
    import keras

    if "tensorflow" in sys.modules or installed_version("tensorflow") is None:
        # keras.utils.set_random_seed seeds random, numpy, TF (if importable) and torch
        # (torch backend), stores the global seed and drops the global SeedGenerator:
        # https://github.com/keras-team/keras/blob/master/keras/src/utils/rng_utils.py
        keras.utils.set_random_seed(seed)
        return
    # set_random_seed would import TensorFlow (its `tf.available` check imports it);
    # do the Keras-only part of it without that import. Private API, same module.
    from keras.src.backend.common import global_state
    from keras.src.random import seed_generator
    from keras.src.utils import rng_utils

    global_state.set_global_attribute(rng_utils.GLOBAL_RANDOM_SEED, seed)
    global_state.set_global_attribute(seed_generator.GLOBAL_SEED_GENERATOR, None)


def _seed_torch(seed: int) -> None:
    import torch

    # Seeds the CPU generator and every CUDA/MPS/XPU device ("Sets the seed for
    # generating random numbers on all devices"):
    # https://github.com/pytorch/pytorch/blob/main/torch/random.py
    torch.manual_seed(seed)


def _seed_jax(seed: int) -> None:
    # JAX has no global RNG state: randomness comes from explicit keys
    # (https://docs.jax.dev/en/latest/random-numbers.html). Nothing to seed;
    # use fwd9m.seed.jax_key(seed) for a key.
    return None


_SEEDERS: dict[str, Callable[[int], None]] = {
    "tensorflow": _seed_tensorflow,
    "keras": _seed_keras,
    "torch": _seed_torch,
    "jax": _seed_jax,
}
# Order matters: Keras' set_random_seed reseeds TF and torch too, so run it first and
# let the framework-specific calls have the last word.
_ORDER = ("keras", "tensorflow", "torch", "jax")


def seed_everything(seed: int | None = None,
                    frameworks: str | Iterable[str] | None = None) -> int:
    """Seed Python, NumPy and every imported (or named) framework; return the seed.

    Seeds, in this order: Python's :mod:`random` (``random.seed(seed)``), NumPy's legacy
    global RNG (``numpy.random.seed(seed)``, when NumPy is installed; it is not a
    framework), then each framework in ``frameworks``: Keras
    (``keras.utils.set_random_seed``, which also resets Keras' global
    ``SeedGenerator``), TensorFlow (``tf.random.set_seed``), PyTorch
    (``torch.manual_seed``: CPU and every accelerator device). JAX has no global RNG:
    nothing is seeded; make keys with :func:`jax_key`.

    Finally sets ``os.environ["FWD9M_SEED"] = str(seed)`` so child processes find it
    (``seed_everything()`` in a child with no argument reuses it).

    Args:
        seed: int in ``[0, 2**32 - 1]``. ``None``: the ``FWD9M_SEED`` environment
            variable if set, else a fresh random seed (logged, and returned so that you
            can record it).
        frameworks: ``None`` (default) for the frameworks already imported in this
            process (``sys.modules``); or names among ``"tensorflow"``, ``"keras"``,
            ``"torch"``, ``"jax"``, which are imported if needed.

    Returns:
        The seed used (int).

    Raises:
        ConfigurationError: seed out of range, unknown framework name, or a malformed
            ``FWD9M_SEED``.
        TypeError: seed is not an int (``bool`` is rejected).
    """
    if seed is None:
        seed = current_seed()
        if seed is None:
            seed = secrets.randbelow(MAX_SEED + 1)
            logger.warning("seed_everything: no seed given and %s unset; using fresh "
                           "random seed %d. Pass seed=%d to repeat this run.",
                           ENV_VAR, seed, seed)
    seed = _check_seed(seed)
    names = resolve(list(frameworks) if frameworks is not None
                    and not isinstance(frameworks, str) else frameworks)
    absent = [n for n in names if n != "jax" and n not in sys.modules
              and installed_version(n) is None]
    if absent:  # checked before anything is seeded
        raise ConfigurationError(
            f"seed_everything: frameworks {absent} were named but are not installed. "
            f"Fix: install them, or leave them out of frameworks=")

    import random

    random.seed(seed)
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy ships with every framework
        np = None
    if np is not None:
        np.random.seed(seed)
    for name in _ORDER:
        if name in names:
            try:
                _SEEDERS[name](seed)
            except ImportError as exc:
                raise ConfigurationError(
                    f"seed_everything: framework {name!r} was named but cannot be imported "
                    f"({exc}). Fix: install it, or leave it out of frameworks=") from exc
    # Keras' set_random_seed reseeded python/numpy with the same seed: harmless.
    os.environ[ENV_VAR] = str(seed)
    logger.info("seed_everything(%d): python, numpy%s", seed,
                "".join(", " + n for n in _ORDER if n in names))
    return seed


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
            f"derive_seed keys must be int, str, bytes, bool, None or tuples of them; "
            f"got {type(key).__name__} {key!r}")
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


def _env_int(names: tuple[str, ...], default: int) -> int:
    for n in names:
        raw = os.environ.get(n)
        if raw not in (None, ""):
            try:
                return int(raw)
            except ValueError:
                raise ConfigurationError(f"environment variable {n}={raw!r} is not an "
                                         f"integer") from None
    return default


class Seeder:
    """Seeds for every (task, epoch, step, rank, worker) of a run, from one seed.

    ``Seeder(42, rank=1).seed("dropout", epoch=3)`` is
    ``derive_seed(42, "fwd9m.Seeder", "dropout", 3, None, 1, None)``: each coordinate has
    a fixed position, so ``epoch=1, step=12`` never collides with ``epoch=11, step=2``
    (the classic ``seed + epoch * 10 + step`` mistake). ``shared=True`` leaves the rank
    out, for what all ranks must agree on (initial weights, a global shuffle).

    Registered generators (:meth:`register`) are reseeded by :meth:`set_epoch` from
    ``seed(("registered", name), epoch=epoch)``, so an epoch's streams do not depend on
    how many numbers earlier epochs drew: resuming at any epoch boundary needs only the
    epoch number.

    Args:
        seed: base seed (int >= 0). ``None``: ``FWD9M_SEED`` if set, else a fresh one
            (as :func:`seed_everything`).
        rank: this process's rank; default ``$RANK`` (set by ``torchrun``), else 0.
        world_size: number of ranks; default ``$WORLD_SIZE``, else 1.

    Raises:
        ConfigurationError: negative seed, or rank not in ``[0, world_size)``.
    """

    def __init__(self, seed: int | None = None, *, rank: int | None = None,
                 world_size: int | None = None) -> None:
        if seed is None:
            seed = current_seed()
            if seed is None:
                seed = secrets.randbelow(MAX_SEED + 1)
                logger.warning("Seeder: no seed given and %s unset; using %d", ENV_VAR, seed)
        self.base_seed = _check_seed(seed, maximum=None)
        self.rank = _env_int(("RANK",), 0) if rank is None else int(rank)
        self.world_size = _env_int(("WORLD_SIZE",), 1) if world_size is None else int(world_size)
        if not 0 <= self.rank < self.world_size:
            raise ConfigurationError(f"rank={self.rank} must be in [0, world_size="
                                     f"{self.world_size})")
        self.epoch: int | None = None
        self._registered: dict[str, Any] = {}

    def __repr__(self) -> str:
        return (f"Seeder({self.base_seed}, rank={self.rank}, world_size={self.world_size}, "
                f"epoch={self.epoch})")

    def seed(self, task: Any = "", *, epoch: int | None = None, step: int | None = None,
             worker: int | None = None, shared: bool = False, bits: int = 64) -> int:
        """The seed for one coordinate of the run (see the class docstring).

        Args:
            task: any :func:`derive_seed` key naming what the seed is for ("shuffle",
                "augment", ("layer", 3)).
            epoch, step, worker: ints or None (None is a distinct value, not 0).
            shared: True for a seed identical on every rank.
            bits: output width (64 for generators, 32 for :func:`seed_everything`).

        Returns:
            int in ``[0, 2**bits - 1]``.
        """
        return derive_seed(self.base_seed, "fwd9m.Seeder", task, epoch, step,
                           None if shared else self.rank, worker, bits=bits)

    def numpy(self, task: Any = "", **coords: Any) -> Any:
        """A fresh ``numpy.random.Generator`` (PCG64) for ``seed(task, **coords)``."""
        import numpy as np

        return np.random.default_rng(self.seed(task, **coords))

    def torch(self, task: Any = "", *, device: str = "cpu", **coords: Any) -> Any:
        """A fresh ``torch.Generator`` on ``device`` seeded with ``seed(task, **coords)``."""
        import torch

        g = torch.Generator(device=device)
        g.manual_seed(self.seed(task, **coords))
        return g

    def jax_key(self, task: Any = "", **coords: Any) -> Any:
        """A JAX key for ``seed(task, **coords, bits=32)``."""
        return jax_key(self.seed(task, bits=32, **coords))

    def seed_everything(self, epoch: int | None = None, *, shared: bool = False,
                        frameworks: str | Iterable[str] | None = None) -> int:
        """``seed_everything`` with this Seeder's 32-bit seed for ``("global", epoch)``."""
        return seed_everything(self.seed("global", epoch=epoch, shared=shared, bits=32),
                               frameworks)

    def register(self, obj: Any, name: str, *, shared: bool = False) -> Any:
        """Reseed ``obj`` at every :meth:`set_epoch` (kinds: see ``fwd9m.rng.register``).

        Reseeded now if an epoch is already set. Returns ``obj``.
        """
        from . import rng

        rng._adapter_for(obj)  # TypeError now rather than at the next epoch
        self._registered[name] = (obj, shared)
        if self.epoch is not None:
            rng.reseed(obj, self.seed(("registered", name), epoch=self.epoch, shared=shared))
        return obj

    def set_epoch(self, epoch: int) -> None:
        """Reseed every registered generator for ``epoch`` (call at each epoch start)."""
        from . import rng

        self.epoch = int(epoch)
        for name, (obj, shared) in self._registered.items():
            rng.reseed(obj, self.seed(("registered", name), epoch=self.epoch, shared=shared))
