"""The process-global RNGs of imported frameworks: capture and restore functions."""

from __future__ import annotations

import sys
from typing import Any, Callable

from ..keras import _private as _keras_private
from ..errors import ConfigurationError
from ._adapters import _keras_sg_get, _keras_sg_set, _np, _py_get, _py_set, _tfgen_get, _tfgen_set


# --------------------------------------------------------------------------- globals

def _tf_context():
    from tensorflow.python.eager import context  # private module: holds the op-seed RNG

    return context.context()


def _cap_tensorflow():
    ctx = _tf_context()
    rng = getattr(ctx, "_rng", None)
    seed = ctx._seed
    return {"global_seed": None if seed is None else int(seed),
            "op_seed_rng": None if rng is None or seed is None else _py_get(rng)}


def _set_tensorflow(s):
    import tensorflow as tf

    if s["global_seed"] is None:  # back to unseeded (op seeds from fresh entropy)
        tf.random.set_seed(None)
        return
    tf.random.set_seed(int(s["global_seed"]))
    if s["op_seed_rng"] is not None:
        _py_set(_tf_context()._rng, s["op_seed_rng"])


def _tf_global_generator():
    mod = sys.modules.get("tensorflow.python.ops.stateful_random_ops")
    return getattr(mod, "global_generator", None) if mod else None


def _cap_keras():
    # Keras 3 has no public getter for its global seed and seed generator.
    gen = _keras_private.global_seed_generator()
    return {"global_seed": _keras_private.global_seed(),
            "global_seed_generator": None if gen is None else _keras_sg_get(gen)}


def _set_keras(s):
    _keras_private.set_global_seed(s["global_seed"])
    if s["global_seed_generator"] is None:
        _keras_private.set_global_seed_generator(None)
        return
    gen = _keras_private.global_seed_generator()
    if gen is None:
        import keras

        gen = keras.random.SeedGenerator(seed=0)
        _keras_private.set_global_seed_generator(gen)
    _keras_sg_set(gen, s["global_seed_generator"])


def _cap_torch_cuda():
    import torch

    if not torch.cuda.is_initialized():
        return None
    return {"states": [t.numpy() for t in torch.cuda.get_rng_state_all()]}


def _set_torch_cuda(s):
    import torch

    states = [torch.from_numpy(_np().array(a, dtype=_np().uint8)) for a in s["states"]]
    if torch.cuda.device_count() != len(states):
        raise ConfigurationError(
            f"the state has {len(states)} CUDA generators but this process sees "
            f"{torch.cuda.device_count()} devices")
    torch.cuda.set_rng_state_all(states)


def _global_sources() -> dict[str, tuple[Callable[[], Any], Callable[[Any], None]]]:
    """Source name -> (capture, restore) for the globals of imported frameworks."""
    import random

    out: dict[str, tuple[Callable[[], Any], Callable[[Any], None]]] = {
        # the random module's getstate/setstate act on its hidden global Random
        "python": (lambda: _py_get(random), lambda s: _py_set(random, s)),
    }
    mods = sys.modules
    if "numpy" in mods:
        np = mods["numpy"]
        out["numpy"] = (lambda: np.random.get_state(legacy=False),
                        lambda s: np.random.set_state(s))
    if "torch" in mods:
        torch = mods["torch"]
        out["torch"] = (lambda: torch.get_rng_state().numpy(),
                        lambda s: torch.set_rng_state(
                            torch.from_numpy(_np().array(s, dtype=_np().uint8))))
        out["torch.cuda"] = (_cap_torch_cuda, _set_torch_cuda)
    if "tensorflow" in mods:
        out["tensorflow"] = (_cap_tensorflow, _set_tensorflow)

        def cap_gg():
            g = _tf_global_generator()
            return None if g is None else _tfgen_get(g)

        def set_gg(s):
            import tensorflow as tf

            g = _tf_global_generator()
            if g is None:
                g = tf.random.Generator.from_seed(0)
                tf.random.set_global_generator(g)
            _tfgen_set(g, s)

        out["tensorflow.global_generator"] = (cap_gg, set_gg)
    if "keras" in mods:
        out["keras"] = (_cap_keras, _set_keras)
    return out


# Restore order: frameworks first (Keras may draw from Python's random), Python last.
_RESTORE_ORDER = ("keras", "tensorflow", "tensorflow.global_generator", "torch.cuda",
                  "torch", "numpy", "python")
