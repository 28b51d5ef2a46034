"""The error and warning family of fwd9m.

Every error fwd9m raises for a domain failure derives from :class:`Fwd9mError` and
also from the builtin it best matches, so ``except ValueError`` keeps working for
callers who do not know about fwd9m. Programming errors (a wrong argument type) raise
plain builtins.
"""

from __future__ import annotations

__all__ = [
    "Fwd9mError",
    "ConfigurationError",
    "UnsupportedVersionError",
    "FileFormatError",
    "CatalogError",
    "RunError",
    "UncomparableError",
    "NondeterminismError",
    "Fwd9mWarning",
    "TooLateWarning",
]


class Fwd9mError(Exception):
    """Root of every error fwd9m raises on purpose."""


class ConfigurationError(Fwd9mError, ValueError):
    """A setting, seed or option is out of range or inconsistent."""


class UnsupportedVersionError(Fwd9mError, RuntimeError):
    """The installed framework version cannot be made deterministic by fwd9m."""


class FileFormatError(Fwd9mError, ValueError):
    """A file fwd9m reads (fingerprint, trace, RNG-state file, catalog) is unreadable,
    truncated, or written by an unknown format version."""


class CatalogError(Fwd9mError, LookupError):
    """A catalog query names an unknown framework, device or malformed version."""


class RunError(Fwd9mError, RuntimeError):
    """A script or function under test could not be run (missing, crashed, timed out)."""


class UncomparableError(Fwd9mError, TypeError):
    """A value fwd9m cannot compare between runs (an iterator, a random generator): the
    message names its type and what to return instead."""


class NondeterminismError(Fwd9mError, AssertionError):
    """Two runs that should agree bit for bit did not."""


class Fwd9mWarning(UserWarning):
    """Root of fwd9m's warnings."""


class TooLateWarning(Fwd9mWarning):
    """A setting was applied after the framework read it (CUDA context, JAX backend or
    the interpreter already started), so it has no effect in this process."""
