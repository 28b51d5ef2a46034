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

import sys
import warnings

from .._log import logger
from ..enable import Changes
from ..errors import Fwd9mWarning
from ._enable import enable_determinism, startup_env
from ._patches import _unpatch  # noqa: F401  (tests restore TensorFlow with it)
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


class LegacyAPIWarning(Fwd9mWarning, FutureWarning):
    """A deprecated fwd9m/tfdeterminism entry point (``patch()``) was called."""


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
