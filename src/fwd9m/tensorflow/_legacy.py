"""The legacy entry point ``patch()`` (``tfdeterminism.patch`` before the rename) and
its :class:`LegacyAPIWarning`."""

from __future__ import annotations

import sys
import warnings

from .._log import logger
from ..enable import Changes
from ..errors import Fwd9mWarning
from ._enable import enable_determinism
from ._recipe import recipe


class LegacyAPIWarning(Fwd9mWarning, FutureWarning):
    """A deprecated fwd9m/tfdeterminism entry point (``patch()``) was called."""


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
        msg = (
            "patch() is deprecated; applying the TF 1.14-2.0 patch recipe. Use "
            "fwd9m.tensorflow.enable_determinism(seed=...) instead, which also seeds "
            "and keeps working on newer TensorFlow."
        )
    else:
        msg = (
            f"patch() is deprecated and has no meaning for TensorFlow {version}; "
            "ran fwd9m.tensorflow.enable_determinism() instead. Replace the call with "
            "fwd9m.tensorflow.enable_determinism(seed=...)."
        )
    warnings.warn(msg, LegacyAPIWarning, stacklevel=_stacklevel())
    logger.warning("%s", msg)
    return enable_determinism(_simulate_version=_simulate_version)


def _stacklevel() -> int:
    """Point the warning at the user's call, skipping tfdeterminism's wrapper."""
    frame, level = sys._getframe(2), 2
    while frame is not None and frame.f_globals.get("__name__", "").startswith("tfdeterminism"):
        frame, level = frame.f_back, level + 1
    return level
