"""The Keras 3 backend (:class:`fwd9m._backend.Backend`). Keras runs on another
framework (``keras.config.backend()``): its ops are recorded by that framework's
recorder, and its own state (the global seed and ``SeedGenerator``, layers' variables)
is handled here. Keras is imported only inside the methods."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

from .._backend import Adapter, BackendBase, Source

__all__ = ["KerasBackend", "layer_types", "layer_weights"]


def layer_types() -> tuple[type, ...]:
    """The ``Layer`` classes of the Keras packages already imported (Keras 3, tf-keras)."""
    return tuple(sys.modules[m].layers.Layer for m in ("keras", "tf_keras") if m in sys.modules)


def layer_weights(layer: Any) -> dict[str, Any]:
    """A Keras 3 or tf-keras layer/model's variables by path, then its optimizer's."""
    out: dict[str, Any] = {}

    def add(prefix: str, variables) -> None:
        for i, v in enumerate(variables):
            name = getattr(v, "path", None) or getattr(v, "name", None) or str(i)
            key = f"{prefix}{name}"
            if key in out:
                key = f"{key}#{i}"
            out[key] = v

    add("", getattr(layer, "weights", ()) or ())
    out.update(_vocabularies(layer))
    opt = getattr(layer, "optimizer", None)
    opt_vars = getattr(opt, "variables", None) if opt is not None else None
    if callable(opt_vars):  # tf-keras: a method
        try:
            opt_vars = opt_vars()
        except Exception:
            opt_vars = None
    if opt_vars:
        add("optimizer/", opt_vars)
    return out


def _vocabularies(layer: Any) -> dict[str, Any]:
    """``{"<layer path>/vocabulary": array}`` of each lookup layer in ``layer`` (itself
    included): ``StringLookup``, ``IntegerLookup``, ``TextVectorization`` keep their
    vocabulary in a lookup table, not in a variable, and one built from a set has the
    string-hash seed's order."""
    import numpy as np

    out: dict[str, Any] = {}
    stack, seen = [layer], set()
    while stack:
        lay = stack.pop()
        if id(lay) in seen:
            continue
        seen.add(id(lay))
        get = getattr(lay, "get_vocabulary", None)
        if callable(get):
            try:
                out[f"{getattr(lay, 'path', None) or getattr(lay, 'name', '?')}/vocabulary"] = np.asarray(get())
            except Exception:  # noqa: BLE001 - not adapted yet: no vocabulary to compare
                pass
        stack.extend(getattr(lay, "layers", None) or ())
    return out


def _cap_state():
    from . import _private
    from ._rng import generator_state

    # Keras 3 has no public getter for its global seed and seed generator.
    gen = _private.global_seed_generator()
    return {
        "global_seed": _private.global_seed(),
        "global_seed_generator": None if gen is None else generator_state(gen),
    }


def _set_state(s):
    from . import _private
    from ._rng import set_generator_state

    _private.set_global_seed(s["global_seed"])
    if s["global_seed_generator"] is None:
        _private.set_global_seed_generator(None)
        return
    gen = _private.global_seed_generator()
    if gen is None:
        import keras

        gen = keras.random.SeedGenerator(seed=0)
        _private.set_global_seed_generator(gen)
    set_generator_state(gen, s["global_seed_generator"])


class KerasBackend(BackendBase):
    type_roots = ("keras",)
    optional_sources: tuple[str, ...] = ()
    seeds_others = True  # keras.utils.set_random_seed also seeds TF and torch
    rng_kinds = ("keras.random.SeedGenerator", "Keras layers/models")
    capture_rank = 1
    captures_state = True  # fwd9m.keras._capture
    state_roots = ("keras",)

    def seed(self, seed: int) -> None:
        import keras

        from .._frameworks import installed_version
        from . import _private

        if "tensorflow" in sys.modules or installed_version("tensorflow") is None:
            # keras.utils.set_random_seed seeds random, numpy, TF (if importable) and torch
            # (torch backend), stores the global seed and drops the global SeedGenerator:
            # https://github.com/keras-team/keras/blob/master/keras/src/utils/rng_utils.py
            keras.utils.set_random_seed(seed)
            return
        # set_random_seed would import TensorFlow (its `tf.available` check imports it);
        # do the Keras-only part of it without that import (Keras-private API).
        _private.set_global_seed(seed)
        _private.set_global_seed_generator(None)

    def rng_sources(self) -> dict[str, Source]:
        return {"keras": (_cap_state, _set_state)}

    def rng_adapter(self, obj: Any) -> Adapter | None:
        from ._rng import adapter

        return adapter(obj)

    def to_numpy(self, value: Any):
        import keras
        import numpy as np

        from ..compare._values import Tensor

        if isinstance(value, keras.Variable):
            return Tensor(np.asarray(keras.ops.convert_to_numpy(value.value)), str(value.dtype))
        return None

    def expand(self, value: Any) -> tuple[Mapping[str, Any], bool] | None:
        types = layer_types()
        if types and isinstance(value, types):
            return layer_weights(value), True
        return None

    def patch_tf_steps(self, is_active: Callable[[], bool]) -> list[tuple[Any, str, Any]] | None:
        """For TensorFlow's recorder, which reaches Keras through the registry (the
        framework packages do not import each other): :func:`fwd9m.keras._tf_xla.patch`."""
        from . import _tf_xla

        return _tf_xla.patch(is_active)

    def digest(self, value: Any) -> int | None:
        if not (type(value).__module__ or "").startswith("keras"):
            return None
        from ..tensorflow._digest import digest as tf_digest

        return tf_digest(value)

    def runtime_info(self) -> dict[str, Any]:
        import keras

        backend = getattr(keras, "backend", None)
        return {
            "version": keras.__version__,
            "backend": backend.backend() if backend and hasattr(backend, "backend") else None,
        }

    def intra_op_threads(self, environ: Mapping[str, str], cores: int) -> int:
        """Those of the backend Keras will run on (``KERAS_BACKEND``, else TensorFlow,
        Keras' default), read by that backend's own rule."""
        from .. import _frameworks

        name = environ.get("KERAS_BACKEND", "").strip() or "tensorflow"
        if name not in _frameworks.FRAMEWORKS or name == self.name:
            return cores
        return _frameworks.backend(name).intra_op_threads(environ, cores)

    def recorded_by(self) -> str | None:
        """Keras 3's ops run on its active backend (``keras.config.backend()``, read
        after the user's script imported Keras); that backend's recorder sees them."""
        from .. import _frameworks
        from . import active_backend

        name = active_backend()
        return name if name in _frameworks.FRAMEWORKS and name != self.name else None

    def recorder(self, rec: Any) -> Any:
        from .. import _frameworks
        from ..errors import ConfigurationError

        name = self.recorded_by()
        if name is None:
            raise ConfigurationError(
                "fwd9m debug records Keras 3 on the tensorflow, torch or jax backend; set KERAS_BACKEND to one of them"
            )
        return _frameworks.backend(name).recorder(rec)
