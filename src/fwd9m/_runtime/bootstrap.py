"""The import hook behind ``fwd9m run``: enable determinism for each framework as it is
imported, in this interpreter and in every Python child that inherits the environment.

``fwd9m run`` puts :func:`bootstrap_dir` first on ``PYTHONPATH``. That directory holds
only a ``sitecustomize.py``, which Python's :mod:`site` imports at start-up
(https://docs.python.org/3/library/site.html): it calls :func:`install` and then
imports the ``sitecustomize`` that it shadows (a distribution's or the user's), so
that one still runs. Launchers such as ``torchrun`` start ranks as new interpreters
with the same environment, so every rank gets the hook.

:func:`install` adds a :data:`sys.meta_path` finder that wraps the loaders of the
top-level ``tensorflow``, ``keras``, ``torch`` and ``jax`` modules: after a module has
finished executing, ``fwd9m.<framework>.enable_determinism(seed)`` runs, with the seed
from ``FWD9M_SEED``; Python's ``random`` is seeded at start-up and NumPy's global RNG
when NumPy is imported, so scripts that use them before any framework repeat too.
A failure there warns :class:`~fwd9m.errors.Fwd9mWarning` and never breaks the
user's import.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

from .. import _frameworks
from .._import_hook import ImportHook

__all__ = ["install", "uninstall", "bootstrap_dir", "ENV_ENABLE", "ENV_VERBOSE", "FRAMEWORK_MODULES"]

#: "1": the sitecustomize installs the hook. ``fwd9m run --no-enable`` leaves it unset.
ENV_ENABLE = "FWD9M_RUN_ENABLE"
#: verbosity (0, 1, 2) for the ``fwd9m`` logger in hooked processes (stderr).
ENV_VERBOSE = "FWD9M_RUN_VERBOSE"
#: ``warn_only`` for torch ("1"/"0").
ENV_WARN_ONLY = "FWD9M_RUN_WARN_ONLY"
#: top-level module -> fwd9m framework module (from the registry, :mod:`fwd9m._frameworks`)
FRAMEWORK_MODULES = {f.module: f.name for f in _frameworks.FRAMEWORKS.values()}

_finder: ImportHook | None = None


def bootstrap_dir() -> str:
    """The directory to put on ``PYTHONPATH`` (it contains only ``sitecustomize.py``)."""
    return str(Path(__file__).resolve().parent.parent / "_sitecustomize")


def _seed_from_env() -> int | None:
    """``FWD9M_SEED`` as an int (None if unset). Parsed here rather than through
    :func:`fwd9m.seed.current_seed` to keep interpreter start-up light; ``fwd9m run``
    validated the value before setting it."""
    raw = os.environ.get("FWD9M_SEED", "").strip()
    try:
        return int(raw) if raw else None
    except ValueError:
        return None


def _enable(framework: str, then: Callable[[str], None] | None = None) -> None:
    """Hook body: enable ``framework`` just after its import, then ``then(framework)``
    (what a layer above adds, such as :func:`fwd9m.distributed._startup.after_enable`),
    a failure of either a warning. Python's and NumPy's global RNG states are restored
    afterwards, so that a framework imported late (a lazy import mid-run) does not undo
    the script's own ``random.seed``."""
    from ..errors import Fwd9mWarning

    seed = _seed_from_env()
    if framework == "numpy":  # not a framework: only its legacy global RNG to seed
        if seed is not None:
            sys.modules["numpy"].random.seed(seed)
        return
    import random

    py_state = random.getstate()
    np = sys.modules.get("numpy")
    np_state = np.random.get_state() if np is not None else None
    try:
        module = importlib.import_module(f"fwd9m.{FRAMEWORK_MODULES[framework]}")
        kwargs = {}
        if framework == "torch" and os.environ.get(ENV_WARN_ONLY) == "1":
            kwargs["warn_only"] = True
        module.enable_determinism(seed=seed, **kwargs)
        if then is not None:
            then(framework)
    except Exception as exc:  # never break the user's import
        import logging

        message = f"fwd9m run: could not enable determinism for {framework}: {type(exc).__name__}: {exc}"
        logging.getLogger("fwd9m").warning("%s", message)
        warnings.warn(message, Fwd9mWarning, stacklevel=2)
    finally:
        random.setstate(py_state)
        if np_state is not None:
            np.random.set_state(np_state)


def _configure_logging() -> None:
    if os.environ.get(ENV_VERBOSE, "") not in ("1", "2"):
        return
    import logging

    level = {"1": logging.INFO, "2": logging.DEBUG}[os.environ[ENV_VERBOSE]]
    logger = logging.getLogger("fwd9m")
    if not any(getattr(h, "_fwd9m_run", False) for h in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("fwd9m run: %(message)s"))
        handler._fwd9m_run = True
        logger.addHandler(handler)
    logger.setLevel(level)


def install(callback=_enable, then: Callable[[str], None] | None = None) -> None:
    """Install the hook (idempotent): seed Python's ``random`` now, NumPy's global RNG
    when NumPy is imported, and enable each framework when it is imported (those
    already imported: now), calling ``then(framework)`` after each one enabled."""
    global _finder
    if then is not None:
        callback = functools.partial(callback, then=then)
    _configure_logging()
    if _finder is not None and _finder in sys.meta_path:
        return
    seed = _seed_from_env()
    if seed is not None:
        import random

        random.seed(seed)
    names = [n for n in (*FRAMEWORK_MODULES, "numpy") if n not in sys.modules]
    _finder = ImportHook(names, callback)
    sys.meta_path.insert(0, _finder)
    for name in (*FRAMEWORK_MODULES, "numpy"):
        if name in sys.modules:
            callback(name)


def uninstall() -> None:
    """Remove the hook (for tests)."""
    global _finder
    if _finder is not None and _finder in sys.meta_path:
        sys.meta_path.remove(_finder)
    _finder = None
