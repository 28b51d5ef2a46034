"""framework-determinism: make deep-learning runs bit-for-bit reproducible, and find
out where and why when they are not.

Importing ``fwd9m`` imports no deep-learning framework; each public name below is
loaded on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

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

__all__ = sorted([*_LAZY, "__version__", "Fwd9mError", "ConfigurationError",
                  "UnsupportedVersionError", "FileFormatError", "CatalogError", "RunError",
                  "NondeterminismError", "Fwd9mWarning", "TooLateWarning"])


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
