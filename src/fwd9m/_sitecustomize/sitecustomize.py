"""Start-up hook of ``fwd9m run`` and ``fwd9m check`` (this directory is first on
PYTHONPATH), so that it reaches every interpreter a launcher starts.

Installs fwd9m's import hook when ``FWD9M_RUN_ENABLE=1`` (``fwd9m run``) and final-state
capture when ``FWD9M_CAPTURE_SITE=1`` (``fwd9m check`` of a command), sends each torchrun
worker's output to a file of its own when ``FWD9M_CHECK_RANKS`` names a directory
(:func:`fwd9m._runtime.launch.split_rank_output`), then runs the
``sitecustomize`` this file shadows (a distribution's or the user's), if any.
"""

import importlib
import os
import sys


def _distributed(framework):
    """After each framework enabled: ``fwd9m run --check-replicas`` and ``--record-ranks``
    (:mod:`fwd9m.distributed._startup`), imported only when torch is enabled and one of
    them is asked, to keep every interpreter's start-up light."""
    if framework != "torch" or not (os.environ.get("FWD9M_CHECK_REPLICAS") or os.environ.get("FWD9M_RECORD_RANKS")):
        return
    from fwd9m.distributed._startup import after_enable

    after_enable(framework)


def _fwd9m_start():
    if os.environ.get("FWD9M_RUN_ENABLE") == "1":
        try:
            from fwd9m._runtime.bootstrap import install

            install(then=_distributed)
        except Exception as exc:  # fwd9m not importable here: run the program anyway
            import warnings

            warnings.warn(f"fwd9m run: import hook not installed: {type(exc).__name__}: {exc}")
    if os.environ.get("FWD9M_CAPTURE_SITE") == "1":
        try:
            from fwd9m._runtime.capture import install as install_capture

            install_capture()
        except Exception as exc:  # never break the user's program
            import warnings

            warnings.warn(f"fwd9m check: state capture not installed: {type(exc).__name__}: {exc}")
    if "{rank}" in os.environ.get("FWD9M_STEPS_OUT", "") + os.environ.get("FWD9M_STEPS_AGAINST", ""):
        try:  # fwd9m run --digests DIR/ -- LAUNCHER: each rank records its own steps
            from fwd9m.steps._session import start

            start()
        except Exception as exc:  # never break the user's program
            import warnings

            warnings.warn(f"fwd9m run: step digests not started: {type(exc).__name__}: {exc}")
    if os.environ.get("FWD9M_CHECK_RANKS"):
        try:
            from fwd9m._runtime.launch import split_rank_output

            split_rank_output()  # one output file per torchrun rank
        except Exception:  # never break the user's program
            pass
    here = os.path.realpath(os.path.dirname(os.path.abspath(__file__)))
    this = sys.modules.pop("sitecustomize", None)
    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or os.curdir) != here]
    try:
        importlib.import_module("sitecustomize")
    except ModuleNotFoundError as exc:
        if exc.name != "sitecustomize":
            raise
        if this is not None:
            sys.modules["sitecustomize"] = this
    finally:
        sys.path[:] = saved


_fwd9m_start()
