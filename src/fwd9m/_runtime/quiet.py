"""Moved to :mod:`fwd9m._quiet` (below the packages that use it); importers here keep
the name."""

from .._quiet import QuietNativeStderr  # noqa: F401

__all__ = ["QuietNativeStderr"]
