"""The one registry of frameworks: which fwd9m knows, which are installed, which are
already imported, and the :class:`~fwd9m._backend.Backend` of each.

Nothing here imports a framework: installed versions come from package metadata
(``importlib.metadata``), imported ones from ``sys.modules``; a backend module is
imported on first use and imports its framework only inside its methods. An unknown
name raises :class:`~fwd9m.errors.ConfigurationError` listing the known ones (as
Lightning's ``accelerators/registry.py`` does).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ._backend import Backend

__all__ = [
    "FRAMEWORKS",
    "Framework",
    "installed_version",
    "is_imported",
    "imported",
    "of_module",
    "resolve",
    "backend",
    "backends",
]


@dataclass(frozen=True)
class Framework:
    name: str  #: fwd9m's name, also the module name under ``fwd9m``
    module: str  #: top-level import name
    distributions: tuple[str, ...]  #: distribution names that provide it, in preference order
    #: top-level modules of libraries that train through it (a script importing
    #: ``pytorch_lightning`` uses torch even if it never imports torch itself)
    libraries: tuple[str, ...] = ()
    #: ``module:Class`` of its :class:`~fwd9m._backend.Backend`
    backend: str = ""


#: the only list of frameworks: adding one is a package ``fwd9m/<name>/`` and a line here
FRAMEWORKS: dict[str, Framework] = {
    f.name: f
    for f in (
        Framework(
            "tensorflow",
            "tensorflow",
            ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tf-nightly", "tensorflow-macos"),
            ("tf_keras", "tensorflow_datasets", "tensorflow_hub", "tensorflow_addons"),
            "fwd9m.tensorflow._backend:TensorFlowBackend",
        ),
        Framework(
            "keras",
            "keras",
            ("keras", "keras-nightly"),
            ("keras_hub", "keras_nlp", "keras_cv"),
            "fwd9m.keras._backend:KerasBackend",
        ),
        Framework(
            "torch",
            "torch",
            ("torch",),
            (
                "torchvision",
                "torchaudio",
                "torchtext",
                "torchmetrics",
                "pytorch_lightning",
                "lightning",
                "accelerate",
                "transformers",
                "timm",
                "deepspeed",
            ),
            "fwd9m.torch._backend:TorchBackend",
        ),
        Framework(
            "jax",
            "jax",
            ("jax",),
            ("flax", "optax", "orbax", "haiku", "equinox", "chex", "jraph"),
            "fwd9m.jax._backend:JaxBackend",
        ),
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
    import importlib.metadata as _md  # here: it costs start-up time in hooked interpreters

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


_BACKENDS: dict[str, Any] = {}


def backend(name: str) -> Backend:
    """The backend of framework ``name`` (created once; imports no framework).

    Raises:
        ConfigurationError: ``name`` is not a known framework (the message lists them).
    """
    b = _BACKENDS.get(name)
    if b is None:
        import importlib

        f = _lookup(name)
        module, _, cls = f.backend.partition(":")
        b = _BACKENDS[name] = getattr(importlib.import_module(module), cls)(
            f.name, f.module, f.distributions, f.libraries
        )
    return b


def backends(frameworks: str | list[str] | tuple[str, ...] | None = None) -> list[Backend]:
    """Backends of :func:`resolve` ``(frameworks)``: the imported frameworks' by default."""
    return [backend(n) for n in resolve(frameworks)]
