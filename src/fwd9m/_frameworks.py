"""Which frameworks fwd9m knows, which are installed, and which are already imported.

Nothing here imports a framework: installed versions come from package metadata
(``importlib.metadata``), imported ones from ``sys.modules``.
"""

from __future__ import annotations

import importlib.metadata as _md
import sys
from dataclasses import dataclass

__all__ = ["FRAMEWORKS", "Framework", "installed_version", "is_imported", "imported", "of_module",
           "resolve"]


@dataclass(frozen=True)
class Framework:
    name: str  #: fwd9m's name, also the module name under ``fwd9m``
    module: str  #: top-level import name
    distributions: tuple[str, ...]  #: distribution names that provide it, in preference order
    #: top-level modules of libraries that train through it (a script importing
    #: ``pytorch_lightning`` uses torch even if it never imports torch itself)
    libraries: tuple[str, ...] = ()


FRAMEWORKS: dict[str, Framework] = {
    f.name: f
    for f in (
        Framework("tensorflow", "tensorflow",
                  ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tf-nightly", "tensorflow-macos"),
                  ("tf_keras", "tensorflow_datasets", "tensorflow_hub", "tensorflow_addons")),
        Framework("keras", "keras", ("keras", "keras-nightly"), ("keras_hub", "keras_nlp", "keras_cv")),
        Framework("torch", "torch", ("torch",),
                  ("torchvision", "torchaudio", "torchtext", "torchmetrics", "pytorch_lightning", "lightning",
                   "accelerate", "transformers", "timm", "deepspeed")),
        Framework("jax", "jax", ("jax",), ("flax", "optax", "orbax", "haiku", "equinox", "chex", "jraph")),
    )
}


def of_module(module: str) -> str | None:
    """The framework a top-level module belongs to or trains through (``torch``,
    ``pytorch_lightning`` -> ``"torch"``; ``flax`` -> ``"jax"``), None for others."""
    for f in FRAMEWORKS.values():
        if module == f.module or module in f.libraries:
            return f.name
    return None


def _lookup(name: str) -> Framework:
    try:
        return FRAMEWORKS[name]
    except KeyError:
        from .errors import ConfigurationError

        known = ", ".join(FRAMEWORKS)
        raise ConfigurationError(f"unknown framework {name!r}; known frameworks: {known}") from None


def installed_version(name: str) -> str | None:
    """Version string of framework ``name`` from package metadata, or None if absent."""
    for dist in _lookup(name).distributions:
        try:
            return _md.version(dist)
        except _md.PackageNotFoundError:
            continue
    return None


def is_imported(name: str) -> bool:
    return _lookup(name).module in sys.modules


def imported() -> list[str]:
    """Names of the known frameworks that this process has already imported."""
    return [n for n, f in FRAMEWORKS.items() if f.module in sys.modules]


def resolve(frameworks: str | list[str] | tuple[str, ...] | None) -> list[str]:
    """``None`` -> the imported frameworks; a name or list -> validated names."""
    if frameworks is None:
        return imported()
    if isinstance(frameworks, str):
        frameworks = [frameworks]
    return [_lookup(n).name for n in frameworks]
