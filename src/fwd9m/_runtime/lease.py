"""fwd9m's temporary folders outlive fwd9m only when it is killed (SIGKILL, a crash, the
machine's OOM killer): each one holds an owner file (:data:`OWNER`: the pid and start
time of the fwd9m process that made it), and every process of its runs carries its path
in :data:`ENV_LEASE`. :func:`recover`, run when a check or debug starts, finds the
folders whose owner is gone, kills what still runs of them, puts back the user's files
from a guard's journal (:func:`fwd9m._runtime.workdir.recover_journal`) and deletes the
folder, as a database recovers from its log."""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .workdir import Guard

__all__ = ["ENV_LEASE", "OWNER", "claim", "finish", "recover", "release", "shielded"]

ENV_LEASE = "FWD9M_LEASE"
OWNER = "owner.json"
#: the names of fwd9m's temporary folders (tempfile.mkdtemp prefixes)
PREFIX = "fwd9m-"


def _start_time(pid: int) -> str | None:
    """The start time of process ``pid`` (field 22 of /proc/PID/stat), None if gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def claim(root: Path) -> None:
    """Mark ``root`` as this process's, and make it the lease of every process started
    from now on (:data:`ENV_LEASE`, inherited)."""
    tmp = root / (OWNER + ".tmp")
    tmp.write_text(json.dumps({"pid": os.getpid(), "start": _start_time(os.getpid())}), encoding="utf-8")
    os.replace(tmp, root / OWNER)
    os.environ[ENV_LEASE] = str(root)


def release(root: Path) -> None:
    if os.environ.get(ENV_LEASE) == str(root):
        del os.environ[ENV_LEASE]


def _orphaned(root: Path) -> bool:
    try:
        owner = json.loads((root / OWNER).read_text(encoding="utf-8"))
        pid, start = int(owner["pid"]), owner["start"]
    except (OSError, ValueError, KeyError, TypeError):
        return False  # not a folder of this version, or being made: left alone
    return pid != os.getpid() and _start_time(pid) != start


def _kill_leased(root: Path) -> int:
    """SIGKILL every process of this user whose environment carries ``root``'s lease."""
    token = f"{ENV_LEASE}={root}\0".encode()
    killed = 0
    for name in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if token not in f.read() + b"\0":
                    continue
            os.kill(int(name), signal.SIGKILL)
            killed += 1
        except (OSError, ValueError):
            continue
    return killed


def recover(say: Callable[[str], None]) -> None:
    """Clean up after fwd9m commands that were killed (see the module docstring)."""
    from .workdir import JOURNAL, recover_journal

    base = Path(tempfile.gettempdir())
    try:
        roots = [p for p in base.iterdir() if p.name.startswith(PREFIX) and p.is_dir() and not p.is_symlink()]
    except OSError:
        return
    for root in roots:
        if not _orphaned(root):
            continue
        killed = _kill_leased(root)
        put_back: list[str] = []
        left: list[str] = []
        for journal in (root / JOURNAL, root / "backup" / JOURNAL):
            if journal.is_file():
                done, failed = recover_journal(journal.parent)
                put_back += done
                left += failed
        shutil.rmtree(root, ignore_errors=True)
        if put_back or killed:
            say(
                "recovery: a fwd9m command was killed before it finished; "
                + (
                    f"put back {', '.join(put_back[:5])}" + (" and more" if len(put_back) > 5 else "")
                    if put_back
                    else ""
                )
                + ("; " if put_back and killed else "")
                + (f"stopped {killed} process(es) it left running" if killed else "")
            )
        if left:
            say(
                f"recovery: fwd9m could not put back {', '.join(left[:5])}: the runs changed them and "
                f"fwd9m had no copy (larger than its copy limit, or a source file left as you may have edited it)"
            )


def finish(root: Path, guard: Guard | None, keep: bool, say: Callable[[str], None]) -> None:
    """On every way out (an error, Ctrl-C, SIGTERM): the user's files put back (with
    ``--cwd link``), fwd9m's folder deleted (kept, without its journal, with ``keep``);
    signals wait until it is done."""
    with shielded():
        left = guard.restore_all() if guard is not None else []
        if left:
            say(f"WARNING: fwd9m could not put back {', '.join(left[:5])} in your directory (no copy of it was made)")
        if keep:  # a folder the user asked for: no longer fwd9m's to recover
            (root / OWNER).unlink(missing_ok=True)
            shutil.rmtree(root / "backup", ignore_errors=True)
        else:
            shutil.rmtree(root, ignore_errors=True)
        release(root)


@contextmanager
def shielded() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP wait while the block runs (putting the user's files
    back must not be cut short by a second Ctrl-C); they are delivered after it."""
    sigs = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    except (ValueError, OSError):  # not the main thread of a platform with it
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
