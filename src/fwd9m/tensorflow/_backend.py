"""The TensorFlow backend (:class:`fwd9m._backend.Backend`). tensorflow is imported only
inside the methods; its private API is reached through :mod:`._private`."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from .. import _frameworks
from .._backend import Adapter, BackendBase, Source, env_threads

__all__ = ["TensorFlowBackend"]


def _cap_seed():
    from . import _private

    ctx = _private.eager_context()
    rng = getattr(ctx, "_rng", None)
    seed = ctx._seed
    from .._rng_adapters import _py_get

    return {
        "global_seed": None if seed is None else int(seed),
        "op_seed_rng": None if rng is None or seed is None else _py_get(rng),
    }


def _set_seed(s):
    import tensorflow as tf

    from .._rng_adapters import _py_set
    from . import _private

    if s["global_seed"] is None:  # back to unseeded (op seeds from fresh entropy)
        tf.random.set_seed(None)
        return
    tf.random.set_seed(int(s["global_seed"]))
    if s["op_seed_rng"] is not None:
        _py_set(_private.eager_context()._rng, s["op_seed_rng"])


def _cap_global_generator():
    from . import _private
    from ._rng import generator_state

    g = _private.global_generator()
    return None if g is None else generator_state(g)


def _set_global_generator(s):
    import tensorflow as tf

    from . import _private
    from ._rng import set_generator_state

    g = _private.global_generator()
    if g is None:
        g = tf.random.Generator.from_seed(0)
        tf.random.set_global_generator(g)
    set_generator_state(g, s)


def _first_root(value: Any) -> str | None:
    """The first imported top-level module of ``type(value)``'s MRO among this backend's
    type roots (a tf-keras object is not treated as a plain ``tf.Module``)."""
    for cls in type(value).__mro__:
        root = cls.__module__.partition(".")[0]
        if root in TensorFlowBackend.type_roots and root in sys.modules:
            return root
    return None


class TensorFlowBackend(BackendBase):
    type_roots = ("tensorflow", "tf_keras")
    optional_sources = ("tensorflow.global_generator",)
    rng_kinds = ("tf.random.Generator",)
    capture_rank = 2
    captures_state = True  # fwd9m.tensorflow._capture
    state_roots = ("tensorflow", "tf_keras")

    def seed(self, seed: int) -> None:
        import tensorflow as tf

        # Sets the graph/eager global seed and resets the eager op-seed counter
        # (context._set_global_seed makes a new random.Random(seed) and clears the
        # kernel cache): tensorflow/python/eager/context.py in
        # https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/eager/context.py
        tf.random.set_seed(seed)

    def rng_sources(self) -> dict[str, Source]:
        return {
            "tensorflow": (_cap_seed, _set_seed),
            "tensorflow.global_generator": (_cap_global_generator, _set_global_generator),
        }

    def rng_adapter(self, obj: Any) -> Adapter | None:
        from ._rng import adapter

        return adapter(obj)

    def to_numpy(self, value: Any):
        import numpy as np
        import tensorflow as tf

        from ..compare._values import Tensor

        if isinstance(value, (tf.Tensor, tf.Variable)) and hasattr(value, "numpy"):
            try:
                arr = np.asarray(value.numpy())
            except Exception:  # symbolic tensor inside a tf.function: no value
                return None
            return Tensor(arr, value.dtype.name)
        return None

    def expand(self, value: Any) -> tuple[Mapping[str, Any], bool] | None:
        layer = _frameworks.backend("keras").expand(value)  # a Keras layer: Keras' backend expands it
        if layer is not None:
            return layer
        import tensorflow as tf

        if _first_root(value) == "tensorflow" and isinstance(value, tf.Module):
            out: dict[str, Any] = {}
            for i, v in enumerate(value.variables):
                key = v.name if v.name not in out else f"{v.name}#{i}"
                out[key] = v
            return out, True
        return None

    def digest(self, value: Any) -> int | None:
        if not (type(value).__module__ or "").startswith("tensorflow"):
            return None
        from ._digest import digest as tf_digest

        return tf_digest(value)

    def digest_partial(self, value: Any) -> tuple[Any, int] | None:
        if not (type(value).__module__ or "").startswith("tensorflow"):
            return None
        from ._digest import partial

        s, nbytes = partial(value)
        return s, int(nbytes)

    def runtime_info(self) -> dict[str, Any]:
        import tensorflow as tf

        from ._enable import _op_determinism_enabled

        build = dict(tf.sysconfig.get_build_info())
        return {
            "version": tf.__version__,
            "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
            "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
            "cuda": build.get("cuda_version"),
            "cudnn": build.get("cudnn_version"),
            "gpus": len(tf.config.list_physical_devices("GPU")),
            "op_determinism": _op_determinism_enabled(tf),
        }

    def intra_op_threads(self, environ: Mapping[str, str], cores: int) -> int:
        """``TF_NUM_INTRAOP_THREADS``, else one thread per usable core
        (``NumIntraOpThreadsFromEnvironment`` and ``MaxParallelism`` in
        tensorflow/core/common_runtime/process_util.cc,
        https://github.com/tensorflow/tensorflow/blob/master/tensorflow/core/common_runtime/process_util.cc)."""
        return env_threads(environ, "TF_NUM_INTRAOP_THREADS") or cores

    def recorder(self, rec: Any) -> Any:
        from ._recorder import TFRecorder

        return TFRecorder(rec)
