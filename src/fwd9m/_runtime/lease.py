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
import stat
import tempfile
import threading
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


def _where() -> str:
    """This process's machine and PID namespace (a pid means nothing elsewhere: another
    container sharing /tmp, another node sharing a TMPDIR)."""
    try:
        ns = os.readlink("/proc/self/ns/pid")
    except OSError:
        ns = "?"
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            boot = f.read().strip()
    except OSError:
        boot = "?"
    return f"{os.uname().nodename} {boot} {ns}"


#: seconds between the owner file's heartbeats: recovery puts back only what changed
#: before the owner's last sign of life (and a little after), never a later edit
HEARTBEAT_S = 2.0
_beating: dict[str, threading.Event] = {}


def claim(root: Path) -> None:
    """Mark ``root`` as this process's (its pid, start time, machine and PID namespace),
    keep it alive with a heartbeat (the owner file's mtime), and make it the lease of
    every process started from now on (:data:`ENV_LEASE`, inherited)."""
    tmp = root / (OWNER + ".tmp")
    owner = {"pid": os.getpid(), "start": _start_time(os.getpid()), "where": _where()}
    tmp.write_text(json.dumps(owner), encoding="utf-8")
    os.replace(tmp, root / OWNER)
    os.environ[ENV_LEASE] = str(root)
    stop = _beating[str(root)] = threading.Event()

    def beat() -> None:
        while not stop.wait(HEARTBEAT_S):
            try:
                os.utime(root / OWNER)
            except OSError:
                return

    threading.Thread(target=beat, name="fwd9m-heartbeat", daemon=True).start()


def release(root: Path) -> None:
    stop = _beating.pop(str(root), None)
    if stop is not None:
        stop.set()
    if os.environ.get(ENV_LEASE) == str(root):
        del os.environ[ENV_LEASE]


def _mine(path: Path) -> bool:
    """``path`` belongs to this user and no one else may write it (a folder or file in a
    shared /tmp may be anyone's: a planted journal must never be obeyed)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return st.st_uid == os.getuid() and not st.st_mode & 0o022 and not stat.S_ISLNK(st.st_mode)


def _orphaned(root: Path) -> float | None:
    """The owner's last sign of life (its heartbeat) when ``root`` is a folder of this
    user's whose fwd9m is gone, on this machine and in this PID namespace; else None."""
    if not (_mine(root) and _mine(root / OWNER)):
        return None
    try:
        owner = json.loads((root / OWNER).read_text(encoding="utf-8"))
        pid, start, where = int(owner["pid"]), owner["start"], owner["where"]
        alive = os.stat(root / OWNER).st_mtime
    except (OSError, ValueError, KeyError, TypeError):
        return None  # not a folder of this version, or being made: left alone
    if where != _where() or pid == os.getpid() or _start_time(pid) == start:
        return None
    return alive


def remove(root: Path) -> None:
    """Delete ``root``, also the mode-000 ``work/work`` folders an overlay leaves when not root."""

    shutil.rmtree(root, onerror=_retry)


def _retry(func: Callable[[str], object], path: str, _exc: object) -> None:
    """``func(path)`` once more with the folder and ``path`` writable; never chmod
    through a link (a link in fwd9m's folder may point at the user's files, or anyone's)."""
    try:
        parent = os.path.dirname(path)
        if not os.path.islink(parent):  # a path under a link is not fwd9m's: left as it is
            os.chmod(parent, 0o700)
            if not os.path.islink(path):
                os.chmod(path, 0o700)
        func(path)
    except OSError:
        pass


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
        alive = _orphaned(root)
        if alive is None:
            continue
        killed = _kill_leased(root)
        put_back: list[str] = []
        left: list[str] = []
        for journal in (root / JOURNAL, root / "backup" / JOURNAL):
            if journal.is_file() and _mine(journal):
                done, failed = recover_journal(journal.parent, alive + 2 * HEARTBEAT_S)
                put_back += done
                left += failed
        remove(root)
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
                f"recovery: fwd9m left {', '.join(left[:5])} as they are: changed after fwd9m was killed "
                f"(your edits are kept), or changed by its runs without a copy (larger than its copy limit, "
                f"or a source file you may have edited)"
            )


def finish(root: Path, guard: Guard | None, keep: bool, say: Callable[[str], None]) -> None:
    """On every way out (an error, Ctrl-C, SIGTERM): the user's files put back (with
    ``--cwd link``), fwd9m's folder deleted (kept, without its journal, with ``keep``);
    signals wait until it is done."""
    with shielded():
        _kill_leased(root)  # a process of the runs that left their process group
        left = guard.restore_all() if guard is not None else []
        if guard is not None:
            from .lazy_backup import ENV as LAZY

            os.environ.pop(LAZY, None)  # a later check in this process makes its own
        if left:
            say(f"WARNING: fwd9m could not put back {', '.join(left[:5])} in your directory (no copy of it was made)")
        if guard is not None and guard.kept:
            from .workdir import kept_note

            say(kept_note(guard))
        release(root)
        if keep:  # a folder the user asked for: no longer fwd9m's to recover
            (root / OWNER).unlink(missing_ok=True)
            remove(root / "backup")
        else:
            remove(root)


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
