"""Run a user's script or module as ``__main__`` in this interpreter, with its own argv.

Shared by ``fwd9m run`` (after it has set the environment and import hooks), by the
child processes of ``fwd9m check`` (state capture at exit) and ``fwd9m debug``
(recording). Each caller installs its hooks first, then calls :func:`run_as_main`.
:func:`require_regular_file` is the one check, before opening, of every path fwd9m
reads (scripts, traces, fingerprints, RNG-state files): a named pipe or a device is
refused. :func:`open_regular_file` opens without blocking and checks the opened file
again (a path swapped for a pipe after the check), and :func:`read_regular_file` reads
a whole file of at most a given size, so a reader never hangs or fills memory.
:func:`split_rank_output` gives each rank of a launcher its own output under ``fwd9m check``.
"""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path

from .._files import (  # noqa: F401  (moved to fwd9m._files; importers here keep their names)
    check_output_path,
    open_regular_file,
    read_regular_file,
    refuse_overwrite,
    require_regular_file,
    shown,
    starts_with,
)
from .._ranks import ENV_SOURCES
from ..errors import RunError

__all__ = [
    "run_as_main",
    "resolve_target",
    "check_module_name",
    "require_regular_file",
    "open_regular_file",
    "read_regular_file",
    "refuse_overwrite",
    "starts_with",
]


def check_module_name(name: str) -> None:
    """Reject a ``-m`` name that cannot be a module, without importing anything.

    Raises:
        RunError: the name is empty, a file path, or not dotted Python identifiers.
    """
    if not name.strip():
        raise RunError(
            f"the module name after -m is empty ({shown(name)}; an unset shell "
            f"variable?); name one, e.g. -m package.module"
        )
    if name.endswith(".py") or os.sep in name:
        dotted = name[:-3].replace(os.sep, ".") if name.endswith(".py") else "package.module"
        raise RunError(
            f"-m {shown(name)}: -m takes a module name (package.module), not a file path; "
            + (f"drop -m to run the script: {name}" if os.path.exists(name) else f"write it as -m {dotted}")
        )
    if not all(part.isidentifier() for part in name.split(".")):
        raise RunError(f"-m {name!r} is not a module name (dotted Python identifiers, e.g. -m package.module)")


def resolve_target(target: str, module: bool = False) -> str:
    """Check that ``target`` exists (a script path, or a module name when ``module``).

    A module name is checked for its form first, without importing, then looked up
    (``importlib.util.find_spec``, which imports the parent packages).

    Raises:
        RunError: the name is empty; the script does not exist, is a directory without
            ``__main__.py``, is not a regular file (a named pipe or device would block
            or never end) or is not readable; or the module cannot be found.
    """
    if module:
        import importlib.util

        check_module_name(target)
        # `python -m` puts the current directory first on sys.path: look there too
        added = os.getcwd() not in sys.path
        if added:
            sys.path.insert(0, os.getcwd())
        try:
            spec = importlib.util.find_spec(target)
        except (ImportError, ValueError):
            spec = None
        finally:
            if added:
                sys.path.remove(os.getcwd())
        if spec is None:
            raise RunError(
                f"no module named {target!r} (python -m {target} would fail too); "
                f"check the name and that its package is installed or on PYTHONPATH"
            )
        return target
    if not target.strip():
        raise RunError(
            f"the script name is empty ({shown(target)}; an unset shell variable?); "
            f"name a Python script or a directory with __main__.py, e.g. train.py"
        )
    path = Path(target)
    if not path.exists():
        near = target.strip()
        hint = (
            f"; the name has spaces around it: did you mean {near}?" if near != target and Path(near).exists() else ""
        )
        raise RunError(f"script not found: {shown(target)}{hint}")
    if path.is_dir():
        if not (path / "__main__.py").is_file():
            raise RunError(f"{shown(target)} is a directory without __main__.py; name the script to run")
        return str(path)
    require_regular_file(target, "script", "save the script to a .py file and name that file", error=RunError)
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


#: set by ``fwd9m check`` for a command: the directory where each torchrun worker's
#: stdout and stderr go, one file per rank (see :func:`split_rank_output`)
ENV_RANK_DIR = "FWD9M_CHECK_RANKS"
#: ``dev:ino`` of the files the launcher's shared stdout and stderr write to
ENV_SHARED_OUT = "FWD9M_CHECK_SHARED_OUT"
#: set in a worker once its output is split, so that the processes it starts itself
#: (a ``spawn`` DataLoader worker) keep writing where it does
ENV_RANK_DONE = "FWD9M_CHECK_RANK_SPLIT"
#: the rank variables of torchrun, horovodrun and Open MPI's mpirun, from
#: :data:`fwd9m._ranks.ENV_SOURCES` (where each is cited); not SLURM's, which srun sets
#: for every task, a launcher it starts included
RANK_VARS = tuple(rank for source, rank, *_ in ENV_SOURCES if source != "slurm")


def _fd_path(fd: int) -> str | None:
    """The file a descriptor writes to (Linux ``/proc``), or None."""
    try:
        path = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None
    return path if os.path.isabs(path) and os.path.isfile(path) else None


def split_rank_output() -> None:
    """In a worker that torchrun started (``python -m torch.distributed.run``,
    ``accelerate launch`` on top of it), under ``fwd9m check``: write this rank's
    stdout and stderr to files of their own, so that the check compares rank r with
    rank r instead of a shared stream in which the ranks' lines interleave at random.

    torchrun sets ``RANK`` and ``TORCHELASTIC_RUN_ID`` for every worker (``_start_workers``
    in torch/distributed/elastic/agent/server/local_elastic_agent.py). A descriptor that
    still writes to the launcher's shared output is moved to ``rank<R>.stdout`` (or
    ``.stderr``) in :data:`ENV_RANK_DIR`; one that torchrun already sends to a file of the
    rank's own (the user's ``--redirects``/``--tee``, which write
    ``<log_dir>/<run_id>_*/attempt_<n>/<local_rank>/stdout.log``, documented in
    ``DefaultLogsSpecs.reify`` in torch/distributed/elastic/multiprocessing/api.py) is left
    alone and its path recorded in ``rank<R>.stdout.path``, to be read after the run.
    Never raises: the program runs as it would without it.
    """
    out_dir = os.environ.get(ENV_RANK_DIR)
    if not out_dir or os.environ.get(ENV_RANK_DONE):
        return
    rank = next((os.environ[v] for v in RANK_VARS if os.environ.get(v, "").isdigit()), None)
    if rank is None:
        return
    try:  # a rank of some launcher ran: its shared output interleaves several processes
        open(os.path.join(out_dir, f"rank{int(rank)}.seen"), "a").close()
    except OSError:
        pass
    if "TORCHELASTIC_RUN_ID" not in os.environ or rank != os.environ.get("RANK"):
        return  # not a torchrun worker: its output stays where the launcher sends it
    os.environ[ENV_RANK_DONE] = "1"
    shared = set(os.environ.get(ENV_SHARED_OUT, "").split())
    for fd, name in ((1, "stdout"), (2, "stderr")):
        try:
            st = os.fstat(fd)
            base = os.path.join(out_dir, f"rank{int(rank)}.{name}")
            if f"{st.st_dev}:{st.st_ino}" in shared:
                target = os.open(base, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                os.dup2(target, fd)
                os.close(target)
            elif (path := _fd_path(fd)) is not None:
                with open(base + ".path", "w", encoding="utf-8") as f:
                    f.write(path)
        except (OSError, ValueError):
            continue
