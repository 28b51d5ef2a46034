"""TensorFlow: the determinism recipe for the installed version, and the legacy ``patch()``.

:func:`recipe` picks the steps for a TensorFlow version (and NGC container version) and
imports nothing; :func:`enable_determinism` applies them to the imported TensorFlow;
:func:`startup_env` lists the variables ``fwd9m run`` sets before start-up.

Recipes, newest first (version gates in :mod:`fwd9m.tensorflow._recipe`, each with
its source):

* TF >= 2.8: ``tf.config.experimental.enable_op_determinism()``.
* TF 2.1 - 2.7 and NGC >= 19.06: ``TF_DETERMINISTIC_OPS=1``.
* TF 2.5 - 2.8 additionally ``TF_CUDNN_USE_FRONTEND=1`` (deterministic *selection* of
  cuDNN convolution algorithms was lost in 2.5 and restored in 2.9).
* TF 1.14 - 2.0 (stock): ``TF_CUDNN_DETERMINISTIC=1`` plus Python patches of
  ``tf.nn.bias_add`` and the segment-sum ops (the historic ``tfdeterminism.patch``).
* Older: :class:`~fwd9m.errors.UnsupportedVersionError`.
* Newer than :data:`NEWEST_KNOWN`: the newest recipe, with a note.
"""

from __future__ import annotations

import os
import sys
import warnings

from .. import _frameworks
from .._log import logger
from ..enable import Change, Changes, cite, env_change, is_fully_imported, seed_change, set_env
from ..errors import Fwd9mWarning
from ._patches import _apply_patches, _unpatch  # noqa: F401  (_unpatch: tests restore TF with it)
from ._recipe import (  # noqa: F401  (Step: the type of Recipe.steps, public before the split)
    CUDNN_DETERMINISTIC_ENV_SINCE,
    CUDNN_FRONTEND_WORKAROUND,
    DETERMINISTIC_OPS_ENV_SINCE,
    NEWEST_KNOWN,
    NGC_SINCE,
    OP_DETERMINISM_SINCE,
    Recipe,
    Step,
    recipe,
)

__all__ = ["enable_determinism", "startup_env", "recipe", "Recipe", "patch",
           "LegacyAPIWarning", "OP_DETERMINISM_SINCE", "DETERMINISTIC_OPS_ENV_SINCE",
           "CUDNN_DETERMINISTIC_ENV_SINCE", "CUDNN_FRONTEND_WORKAROUND", "NGC_SINCE",
           "NEWEST_KNOWN"]

_XLA_FLAG = "--xla_gpu_deterministic_ops=true"
#: XLA's flag: "--xla_gpu_deterministic_ops is a superset of
#: --xla_gpu_exclude_nondeterministic_ops": https://github.com/openxla/xla/pull/12520
_XLA_SOURCE = "https://github.com/openxla/xla/pull/12520"


class LegacyAPIWarning(Fwd9mWarning, FutureWarning):
    """A deprecated fwd9m/tfdeterminism entry point (``patch()``) was called."""


def startup_env(version: str | None = None, environ: dict | None = None) -> list[Change]:
    """Environment variables to set before TensorFlow starts (for ``fwd9m run``):
    the env-var switches of the recipe for ``version`` (default: installed) and
    XLA's GPU determinism flag. Imports nothing; returns [] when TensorFlow is not
    installed and no version is given."""
    if version is None and _frameworks.installed_version("tensorflow") is None:
        return []
    out: list[Change] = []
    env = dict(os.environ if environ is None else environ)
    for step in recipe(version).steps:
        if step.kind == "env":
            c = env_change("tensorflow", step.name, step.value, step.why, step.source, environ=env)
            if c:
                out.append(c)
                env[step.name] = c.new
    c = env_change("tensorflow", "XLA_FLAGS", _XLA_FLAG,
                   "XLA (jit_compile=True, Keras jit_compile) picks nondeterministic GPU "
                   "kernels (scatter, autotuned GEMM/conv) without it; read once, when XLA "
                   "starts", cite("keras.jit-compile", _XLA_SOURCE), append_flag=True, environ=env)
    if c:
        out.append(c)
    return out


def enable_determinism(seed: int | None = None, *, _simulate_version: str | None = None) -> Changes:
    """Make TensorFlow deterministic with the recipe for the imported version.

    Imports TensorFlow (call it after ``import tensorflow`` or let ``fwd9m run`` call it).
    With a seed, seeds Python, NumPy and TensorFlow, plus Keras when Keras is already
    imported (Keras 3 initializers draw their seeds from Python's ``random``, which
    ``tf.random.set_seed`` alone does not seed: ``make_default_seed`` in
    https://github.com/keras-team/keras/blob/master/keras/src/random/seed_generator.py).

    Keras 3 on TensorFlow resolves ``jit_compile="auto"`` to False once op determinism
    is enabled (``model_supports_jit`` in
    https://github.com/keras-team/keras/blob/master/keras/src/trainers/trainer.py), so
    call this before ``model.compile``; XLA's GPU determinism flag is also added to
    ``XLA_FLAGS`` for explicit ``jit_compile=True``.

    Args:
        seed: int in ``[0, 2**32 - 1]``, or None for no seeding.
        _simulate_version: testing only: apply the recipe of this version (for versions
            that cannot be installed) to the TensorFlow that is installed.

    Returns:
        :class:`~fwd9m.enable.Changes`.

    Raises:
        UnsupportedVersionError: TensorFlow < 1.14 (see :func:`recipe`).
    """
    import tensorflow as tf

    version = _simulate_version or tf.version.VERSION
    plan = recipe(version)
    changes = Changes()
    for text in plan.notes:
        changes.note(text)
    for step in plan.steps:
        if step.kind == "env":
            set_env("tensorflow", step.name, step.value, step.why, step.source, changes=changes)
        elif step.kind == "op_determinism":
            old = _op_determinism_enabled(tf)
            if old is not True:
                tf.config.experimental.enable_op_determinism()
                _record(changes, Change("tensorflow", step.name, old, True, step.why, step.source))
        elif step.kind == "patch":
            for target, old in _apply_patches(tf):
                _record(changes, Change("tensorflow", target, old, step.value, step.why, step.source))
    set_env("tensorflow", "XLA_FLAGS", _XLA_FLAG,
            "XLA (jit_compile=True) picks nondeterministic GPU kernels without it; only "
            "effective if XLA has not started in this process (use `fwd9m run`)",
            cite("keras.jit-compile", _XLA_SOURCE), append_flag=True, changes=changes)
    if plan.name != "op-determinism" and is_fully_imported("tensorflow"):
        changes.note("TensorFlow reads TF_DETERMINISTIC_OPS/TF_CUDNN_* when ops first run; "
                     "call this before building the model, or launch with `fwd9m run`")
    # Keras 3 must be seeded itself (Python random); tf_keras (Keras 2) initializers use
    # TF's global seed, which seeding "tensorflow" covers. Never import Keras here.
    frameworks = ["keras", "tensorflow"] if is_fully_imported("keras") else ["tensorflow"]
    change = seed_change("tensorflow", seed, frameworks)
    if change:
        changes.append(change)
    return changes


def _op_determinism_enabled(tf) -> bool | None:
    """Whether op determinism is on (None if this TF cannot say). The query is not
    exported under tf.config in TF 2.21; Keras 3 reads the same private function
    (``model_supports_jit`` in keras/src/trainers/trainer.py)."""
    query = getattr(tf.config.experimental, "is_op_determinism_enabled", None)
    if query is None:
        try:
            from tensorflow.python.framework.config import is_op_determinism_enabled as query
        except ImportError:
            return None
    return bool(query())


def _record(changes: Changes, change: Change) -> None:
    logger.info("%s", change)
    changes.append(change)


# --- legacy entry point ----------------------------------------------------------------

def patch(*, _simulate_version: str | None = None) -> Changes:
    """Deprecated: use :func:`enable_determinism`.

    Kept for scripts written for ``tfdeterminism.patch()``. On TF 1.14-2.0 it applies
    the historic patch recipe (``TF_CUDNN_DETERMINISTIC`` plus bias_add and segment-sum
    patches); on newer TensorFlow (where the old patch has no meaning) and in NGC
    containers it runs :func:`enable_determinism` instead. Always warns
    :class:`LegacyAPIWarning`.

    Args:
        _simulate_version: testing only, as in :func:`enable_determinism`.

    Raises:
        UnsupportedVersionError: TensorFlow older than 1.14, naming the version and the fix.
    """
    import tensorflow as tf

    version = _simulate_version or tf.version.VERSION
    plan = recipe(version)  # raises for unsupported versions, naming the fix
    if plan.name == "cudnn-deterministic+patch":
        msg = ("patch() is deprecated; applying the TF 1.14-2.0 patch recipe. Use "
               "fwd9m.tensorflow.enable_determinism(seed=...) instead, which also seeds "
               "and keeps working on newer TensorFlow.")
    else:
        msg = (f"patch() is deprecated and has no meaning for TensorFlow {version}; "
               "ran fwd9m.tensorflow.enable_determinism() instead. Replace the call with "
               "fwd9m.tensorflow.enable_determinism(seed=...).")
    warnings.warn(msg, LegacyAPIWarning, stacklevel=_stacklevel())
    logger.warning("%s", msg)
    return enable_determinism(_simulate_version=_simulate_version)


def _stacklevel() -> int:
    """Point the warning at the user's call, skipping tfdeterminism's wrapper."""
    frame, level = sys._getframe(2), 2
    while frame is not None and frame.f_globals.get("__name__", "").startswith("tfdeterminism"):
        frame, level = frame.f_back, level + 1
    return level
