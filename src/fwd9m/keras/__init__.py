"""Keras 3: determinism on whichever backend is active, and Keras' own seeds.

Keras has no determinism switch of its own; the backend's applies
(:mod:`fwd9m.tensorflow`, :mod:`fwd9m.torch`, :mod:`fwd9m.jax`). What Keras adds:

* Seeds: unseeded initializers, Dropout and random layers draw their seeds from
  Python's ``random`` (``make_default_seed`` in
  https://github.com/keras-team/keras/blob/master/keras/src/random/seed_generator.py),
  so ``tf.random.set_seed`` alone leaves them random; ``keras.utils.set_random_seed``
  (through :func:`fwd9m.seed.seed_everything`) seeds Python, NumPy, the backend and
  Keras' global seed generator.
* ``Model.compile(jit_compile="auto")`` (catalog entry ``keras.jit-compile``): on
  TensorFlow it resolves to False once op determinism is enabled, on torch to False;
  on JAX everything is XLA, so XLA's GPU determinism flag is what counts
  (``_resolve_auto_jit_compile`` and ``model_supports_jit`` in
  https://github.com/keras-team/keras/blob/master/keras/src/trainers/trainer.py).
"""

from __future__ import annotations

import importlib

from packaging.version import Version

from .. import _frameworks
from ..enable import Change, Changes, cite, seed_change

__all__ = ["enable_determinism", "startup_env", "NEWEST_KNOWN", "MULTI_BACKEND_SINCE"]

# --- version gates -------------------------------------------------------------------
#: Keras 3 (multi-backend, ``keras.config.backend()``): https://keras.io/keras_3/
MULTI_BACKEND_SINCE = Version("3.0")
#: Newest Keras this recipe was checked against (the version CI installs).
NEWEST_KNOWN = Version("3.15")

_BACKENDS = {"tensorflow": "tensorflow", "torch": "torch", "jax": "jax"}


def startup_env(version: str | None = None, environ: dict | None = None) -> list[Change]:
    """Keras itself needs nothing before start-up (its backend's module lists what the
    backend needs). Imports nothing."""
    return []


def active_backend() -> str:
    """Name of the active Keras backend (imports Keras)."""
    import keras

    config = getattr(keras, "config", None)
    if config is not None and hasattr(config, "backend"):
        return config.backend()
    return keras.backend.backend()


def enable_determinism(seed: int | None = None, include_backend: bool = True) -> Changes:
    """Enable determinism for Keras 3 on its active backend.

    Args:
        seed: int in ``[0, 2**32 - 1]`` or None. Seeds Python, NumPy, Keras' global
            seed generator and the backend (``keras.utils.set_random_seed``).
        include_backend: also run the backend framework's ``enable_determinism``
            (``fwd9m.enable_determinism`` passes False when it runs that itself).

    Returns:
        :class:`~fwd9m.enable.Changes`.

    Raises:
        UnsupportedVersionError: from the backend module (e.g. TensorFlow < 1.14).
    """
    import keras

    changes = Changes()
    v = Version(Version(keras.__version__).public)
    if v < MULTI_BACKEND_SINCE:
        changes.note(
            f"Keras {keras.__version__} is Keras 2 (tf.keras); determinism comes "
            "from TensorFlow: fwd9m.tensorflow.enable_determinism"
        )
        backend = "tensorflow"
    else:
        backend = active_backend()
        if Version(f"{v.major}.{v.minor}") > NEWEST_KNOWN:
            changes.note(
                f"Keras {keras.__version__} is newer than any version fwd9m knows "
                f"(newest checked: {NEWEST_KNOWN}); applied the newest recipe"
            )
    framework = _BACKENDS.get(backend)
    if framework is None:
        changes.note(f"Keras backend {backend!r} has no determinism switch fwd9m knows; seeding only")
    elif include_backend:
        module = importlib.import_module(f"fwd9m.{framework}")
        changes.extend_from(module.enable_determinism(seed=None))
    if backend == "jax":
        changes.note(
            "Keras on JAX compiles with XLA (jit_compile='auto' -> True): "
            "XLA_FLAGS --xla_gpu_deterministic_ops=true must be set before the JAX "
            "backend starts (fwd9m run does); source: " + cite("keras.jit-compile")
        )
    names = ["keras"] + ([framework] if framework and _frameworks.is_imported(framework) else [])
    change = seed_change("keras", seed, names)
    if change:
        changes.append(change)
    return changes
