"""``seed_everything``: one seed for Python, NumPy and every imported framework.

Seeds Python's :mod:`random`, NumPy's legacy global RNG and each framework that is
already imported (or named), and exports the seed in the ``FWD9M_SEED`` environment
variable so that child processes (DataLoader workers, ``multiprocessing``, distributed
ranks) can find it. It never imports a framework the caller did not import or name.
"""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Iterable
from typing import Any

from .. import _frameworks
from .._frameworks import installed_version, resolve
from .._log import logger
from ..errors import ConfigurationError

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
            f"fwd9m.derive_seed({value}, bits=32)"
        )
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
            f"Fix: export {ENV_VAR}=<int in [0, {MAX_SEED}]> or unset it"
        ) from None
    return _check_seed(value, name=ENV_VAR)


def _seed_or_default(seed: Any, caller: str) -> Any:
    """``seed`` unchanged unless it is None; then ``FWD9M_SEED`` if set, else a fresh
    random seed in ``[0, MAX_SEED]``, logged as a warning that names ``caller`` and
    says how to repeat the run. The caller still validates the result.

    Raises:
        ConfigurationError: ``FWD9M_SEED`` is set but malformed (:func:`current_seed`).
    """
    if seed is not None:
        return seed
    seed = current_seed()
    if seed is None:
        seed = secrets.randbelow(MAX_SEED + 1)
        logger.warning(
            "%s: no seed given and %s unset; using fresh random seed %d. Pass seed=%d to repeat this run.",
            caller,
            ENV_VAR,
            seed,
            seed,
        )
    return seed


def seed_everything(seed: int | None = None, frameworks: str | Iterable[str] | None = None) -> int:
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
    seed = _check_seed(_seed_or_default(seed, "seed_everything"))
    names = resolve(list(frameworks) if frameworks is not None and not isinstance(frameworks, str) else frameworks)
    absent = [
        n for n in names if _frameworks.backend(n).global_rng and n not in sys.modules and installed_version(n) is None
    ]
    if absent:  # checked before anything is seeded
        raise ConfigurationError(
            f"seed_everything: frameworks {absent} were named but are not installed. "
            f"Fix: install them, or leave them out of frameworks="
        )

    import random

    random.seed(seed)
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy ships with every framework
        np = None
    if np is not None:
        np.random.seed(seed)
    # Order matters: a backend whose seed() reseeds others (Keras' set_random_seed
    # reseeds TF and torch) runs first, and the framework-specific calls have the last word.
    ordered = sorted(
        _frameworks.backends([n for n in _frameworks.FRAMEWORKS if n in names]), key=lambda b: not b.seeds_others
    )
    for b in ordered:
        try:
            b.seed(seed)
        except ImportError as exc:
            raise ConfigurationError(
                f"seed_everything: framework {b.name!r} was named but cannot be imported "
                f"({exc}). Fix: install it, or leave it out of frameworks="
            ) from exc
    # Keras' set_random_seed reseeded python/numpy with the same seed: harmless.
    os.environ[ENV_VAR] = str(seed)
    logger.info("seed_everything(%d): python, numpy%s", seed, "".join(", " + b.name for b in ordered))
    return seed
