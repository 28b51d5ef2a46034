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

from ._enable import enable_determinism, startup_env
from ._legacy import LegacyAPIWarning, patch
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

__all__ = [
    "enable_determinism",
    "startup_env",
    "recipe",
    "Recipe",
    "patch",
    "LegacyAPIWarning",
    "OP_DETERMINISM_SINCE",
    "DETERMINISTIC_OPS_ENV_SINCE",
    "CUDNN_DETERMINISTIC_ENV_SINCE",
    "CUDNN_FRONTEND_WORKAROUND",
    "NGC_SINCE",
    "NEWEST_KNOWN",
]

# Public classes keep the public module name (repr, pickling, docs) they had before
# fwd9m.tensorflow became a package.
for _cls in (Recipe, Step, LegacyAPIWarning):
    _cls.__module__ = __name__
del _cls
