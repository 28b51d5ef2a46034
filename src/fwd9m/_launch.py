"""Run a user's script or module as ``__main__`` in this interpreter, with its own argv.

Shared by ``fwd9m run`` (after it has set the environment and import hooks), by the
child processes of ``fwd9m check`` (state capture at exit) and ``fwd9m debug``
(recording). Each caller installs its hooks first, then calls :func:`run_as_main`.
"""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path

from .errors import RunError

__all__ = ["run_as_main", "resolve_target"]


def resolve_target(target: str, module: bool = False) -> str:
    """Check that ``target`` exists (a script path, or a module name when ``module``).

    Raises:
        RunError: the script does not exist or is a directory without ``__main__.py``,
            or the module cannot be found.
    """
    if module:
        import importlib.util

        try:
            spec = importlib.util.find_spec(target)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            raise RunError(f"no module named {target!r} (python -m {target} would fail too); "
                           f"check the name and that its package is installed or on PYTHONPATH")
        return target
    path = Path(target)
    if not path.exists():
        raise RunError(f"script not found: {target}")
    if path.is_dir() and not (path / "__main__.py").exists():
        raise RunError(f"{target} is a directory without __main__.py; name the script to run")
    return str(path)


def run_as_main(target: str, argv: list[str] | tuple[str, ...] = (), module: bool = False) -> int:
    """Execute ``target`` as ``__main__`` with ``sys.argv = [target, *argv]``, as
    ``python script.py ARGS`` or ``python -m module ARGS`` would.

    Returns:
        The exit code the script requested (0 if it returned normally; 1 after an
        uncaught exception, whose traceback is printed to stderr as Python would).
    """
    target = resolve_target(target, module)
    if module:
        sys.argv = [target, *argv]
        sys.path.insert(0, os.getcwd())
    else:
        sys.argv = [target, *argv]
        sys.path.insert(0, str(Path(target).resolve().parent))
    try:
        if module:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(target, run_name="__main__")
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1
    except BaseException:
        import traceback

        traceback.print_exc()
        return 1
    return 0
