"""Copies made on first write, in the run's own process: the user's files that
:class:`~fwd9m._runtime.workdir.Guard` did not copy before the runs (``--cwd link``; larger
than its copy limit) are copied just before the run first opens one for writing, so that a
checkpoint the script overwrites in place can be put back afterwards.

The guard writes the list (``{real path: where its copy goes}``, JSON) and names it in
:data:`ENV` in the runs' environment; :func:`install` adds an audit hook (PEP 578) that sees
every ``open`` of Python code (``open()``, ``io.open``, ``os.open``: ``torch.save``,
``np.save``, ``pickle.dump`` to a path) before it happens. A file written by C code that
does not go through Python's ``open`` (a TensorFlow checkpoint writer, HDF5) is not seen:
the report names such a file as not put back, as before. The hook never raises and
changes nothing the program sees; a copy that does not fit the disk is not made."""

from __future__ import annotations

import json
import os
import sys
import time

#: the runs' environment variable naming the guard's list of files to copy on first write
ENV = "FWD9M_GUARD_LAZY"
#: the list's file name, beside the guard's journal
LIST = "lazy.json"
#: room left on the copies' file system after a copy, besides the copy itself
_SPARE_BYTES = 1 << 30
#: seconds a process waits for another process's copy of the same file to finish
_WAIT_S = 600.0
_WRITES = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_TRUNC
_state: dict = {"files": None}


def install() -> bool:
    """Add the audit hook when :data:`ENV` names a readable list; idempotent."""
    if _state["files"] is not None:
        return True
    path = os.environ.get(ENV)
    if not path:
        return False
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        files = {str(k): str(v) for k, v in data["files"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False
    _state["files"] = files
    if files:
        sys.addaudithook(_audit)
    return True


def _writes(mode, flags) -> bool:
    if isinstance(mode, str):
        return any(c in mode for c in "wax+")
    return isinstance(flags, int) and bool(flags & _WRITES)


def _audit(event: str, args: tuple) -> None:
    if event != "open":
        return
    files = _state["files"]
    if not files:
        return
    try:
        path, mode, flags = args
        if isinstance(path, int) or not _writes(mode, flags):
            return
        real = os.path.realpath(os.fsdecode(path))
        dst = files.pop(real, None)  # first write only: popped before copying (its own opens come here)
        if dst is not None:
            copy_once(real, dst)
    except Exception:  # noqa: BLE001 - never break the user's program
        pass


def copy_once(src: str, dst: str) -> bool:
    """Copy ``src`` to ``dst`` unless a copy is there or being made (by another process
    of the runs: then wait for it); the copy appears under ``dst`` only when complete."""
    if os.path.exists(dst):
        return True
    try:
        claim = os.open(dst + ".claim", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return _wait_for(dst)
    except OSError:
        return False
    os.close(claim)
    import shutil

    tmp = f"{dst}.partial-{os.getpid()}"
    try:
        size = os.path.getsize(src)
        if shutil.disk_usage(os.path.dirname(dst)).free < size + _SPARE_BYTES:
            return False
        shutil.copy2(src, tmp)
        os.replace(tmp, dst)
        return True
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False
    finally:
        try:
            os.unlink(dst + ".claim")
        except OSError:
            pass


def _wait_for(dst: str) -> bool:
    end = time.monotonic() + _WAIT_S
    while time.monotonic() < end:
        if os.path.exists(dst):
            return True
        if not os.path.exists(dst + ".claim"):  # the other process gave up
            return os.path.exists(dst)
        time.sleep(0.05)
    return False
