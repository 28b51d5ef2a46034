"""framework-determinism: make deep-learning runs bit-for-bit reproducible, and find
out where and why when they are not.

Importing ``fwd9m`` imports no deep-learning framework; each public name below is
loaded on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import (  # noqa: F401  (light, re-exported)
    CatalogError,
    ConfigurationError,
    FileFormatError,
    Fwd9mError,
    Fwd9mWarning,
    NondeterminismError,
    RunError,
    TooLateWarning,
    UnsupportedVersionError,
)

__version__ = "0.4.0.dev0"

# public name -> module that defines it (relative to this package)
_LAZY: dict[str, str] = {
    "enable_determinism": ".enable",
    "seed_everything": ".seed",
    "derive_seed": ".seed",
    "Seeder": ".seed",
    "capture_rng_state": ".rng",
    "restore_rng_state": ".rng",
    "save_rng_state": ".rng",
    "load_rng_state": ".rng",
    "seeded": ".rng",
    "check": ".check",
    "check_script": ".check",
    "assert_reproducible": ".check",
    "CheckResult": ".check",
    "environment": ".environment",
    "catalog": ".catalog",
    "debug": ".debug",
    "lint": ".lint",
    "tensorflow": ".tensorflow",
    "torch": ".torch",
    "jax": ".jax",
    "keras": ".keras",
    "rng": ".rng",
    "seed": ".seed",
    "data": ".data",
    "callbacks": ".callbacks",
    "distributed": ".distributed",
    "fingerprint": ".fingerprint",
    "compare": ".compare",
}

__all__ = sorted(
    [
        *_LAZY,
        "__version__",
        "Fwd9mError",
        "ConfigurationError",
        "UnsupportedVersionError",
        "FileFormatError",
        "CatalogError",
        "RunError",
        "NondeterminismError",
        "Fwd9mWarning",
        "TooLateWarning",
    ]
)


if TYPE_CHECKING:  # what the lazy names are, for type checkers; nothing is imported at run time
    from . import (
        callbacks,
        catalog,
        compare,
        data,
        debug,
        distributed,
        environment,
        fingerprint,
        jax,
        keras,
        lint,
        rng,
        seed,
        tensorflow,
        torch,
    )
    from .check import CheckResult, assert_reproducible, check, check_script
    from .enable import enable_determinism
    from .rng import capture_rng_state, load_rng_state, restore_rng_state, save_rng_state, seeded
    from .seed import Seeder, derive_seed, seed_everything


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'fwd9m' has no attribute {name!r}")
    module = importlib.import_module(target, __name__)
    value = module if module.__name__.rsplit(".", 1)[-1] == name else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
