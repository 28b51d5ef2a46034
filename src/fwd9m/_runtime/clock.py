"""Child side of ``fwd9m check``: the clock the user's own code reads, moved forward in
each run by a different amount, so that a seed taken from the clock differs between
runs whenever they read it.

Two runs that read ``int(time.time())`` within the same second get the same seed and
agree: a clock-seeded script would pass as REPRODUCIBLE by chance (side by side, or one
after the other when a run takes less than a second). Starting runs a second apart is
not enough: a run can catch up with the one before it (a faster import). So each run
of a check reads, from the script and its own modules only, the clock moved forward by
:data:`ENV_SHIFT` seconds (``k`` times :data:`SHIFT_S` for the check's ``k``-th run):
``time.time``, ``time.time_ns``, ``time.monotonic``, ``time.perf_counter`` (and their
``_ns`` forms). Intervals the script measures are unchanged (both ends are moved), and
libraries (the standard library, site-packages, fwd9m) read the true clock.

Not moved: ``datetime.now()`` and other clock reads made in C (``datetime`` cannot be
wrapped without changing its class).
"""

from __future__ import annotations

import os
import sys
import sysconfig
import time
from typing import Any

__all__ = ["ENV_SHIFT", "SHIFT_S", "install", "shift_for"]

#: the environment variable that gives a run its clock shift in seconds
ENV_SHIFT = "FWD9M_CLOCK_SHIFT"
#: the step between the shifts of two runs: more than a minute (a seed from the clock in
#: seconds or minutes differs), with a fraction (a seed modulo 10, 60 or 1000 differs too)
SHIFT_S = 61.37
#: runs get shifts 0, 1, ..., CYCLE - 1 times SHIFT_S (at most an hour ahead)
CYCLE = 58

_NAMES = ("time", "monotonic", "perf_counter")
_state: dict[str, Any] = {"installed": False, "user": {}}


def shift_for(k: int) -> str:
    """The value of :data:`ENV_SHIFT` for the ``k``-th run (from 0) a process launches."""
    return f"{(k % CYCLE) * SHIFT_S:.2f}"


def _library_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    try:
        import site

        roots.update(site.getsitepackages())
        roots.add(site.getusersitepackages())
    except (AttributeError, ImportError):  # a virtualenv's old site module
        pass
    roots.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # fwd9m itself
    return tuple(os.path.join(os.path.realpath(r), "") for r in roots if r)


def _is_user(filename: str) -> bool:
    """Whether code of ``filename`` is the user's (not a library's, not frozen)."""
    known = _state["user"].get(filename)
    if known is None:
        real = os.path.realpath(filename) if not filename.startswith("<") else ""
        known = bool(real) and not real.startswith(_state["roots"])
        _state["user"][filename] = known
    return known


def _wrap(read: Any, shift: float) -> Any:
    def clock() -> Any:
        value = read()
        try:
            user = _is_user(sys._getframe(1).f_code.co_filename)
        except (ValueError, AttributeError):  # no caller frame (called from C)
            return value
        return value + shift if user else value

    clock.__name__, clock.__doc__ = read.__name__, read.__doc__
    return clock


def install() -> bool:
    """Move the clock the user's code reads by :data:`ENV_SHIFT` seconds (nothing when it
    is unset or 0). Idempotent; returns whether the clock is moved."""
    if _state["installed"]:
        return True
    try:
        shift = float(os.environ.get(ENV_SHIFT, "0") or 0)
    except ValueError:
        return False
    if not shift:
        return False
    _state.update(installed=True, roots=_library_roots())
    for name in _NAMES:
        setattr(time, name, _wrap(getattr(time, name), shift))
        setattr(time, f"{name}_ns", _wrap(getattr(time, f"{name}_ns"), int(shift * 1e9)))
    return True
