"""Legacy name of fwd9m (``tensorflow-determinism`` 0.3 and earlier).

``from tfdeterminism import patch; patch()`` keeps working: on TensorFlow 1.14-2.0 it
applies the historic patch recipe, on newer TensorFlow it runs
:func:`fwd9m.tensorflow.enable_determinism`, always with a
:class:`fwd9m.tensorflow.LegacyAPIWarning`; on TensorFlow older than 1.14 it raises
:class:`fwd9m.errors.UnsupportedVersionError` naming the version and the fix.
The package was renamed in 0.4 (status page, "Announcement":
https://github.com/NVIDIA/framework-reproducibility).
"""

from fwd9m import __version__

__all__ = ["patch", "enable_determinism", "__version__"]


def patch():
    """Deprecated: use ``fwd9m.tensorflow.enable_determinism(seed=...)``.

    Returns the :class:`fwd9m.enable.Changes` made (the old function returned None).
    """
    from fwd9m.tensorflow import patch as _patch

    return _patch()


def enable_determinism(seed=None):
    """Deprecated alias of ``fwd9m.tensorflow.enable_determinism``."""
    import warnings

    from fwd9m.tensorflow import LegacyAPIWarning
    from fwd9m.tensorflow import enable_determinism as _enable

    warnings.warn("tfdeterminism is now fwd9m: use fwd9m.tensorflow.enable_determinism", LegacyAPIWarning, stacklevel=2)
    return _enable(seed=seed)
