"""Process groups of the interpreters that run a user's script: each run starts in a
new session (``start_new_session=True``), so that a timeout or an interruption ends the
script and every child it started, and the end of its stderr for the report."""

from __future__ import annotations

import os
import signal
import subprocess

__all__ = ["TAIL_BYTES", "KILL_GRACE_S", "tail", "kill_group", "kill_leftovers"]

#: bytes of each run's stderr kept for the report
TAIL_BYTES = 3000
#: seconds between SIGTERM and SIGKILL when a run times out
KILL_GRACE_S = 5.0


def tail(path: str | os.PathLike[str], n: int = TAIL_BYTES) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - n))
            data = f.read()
    except OSError:
        return ""
    text = data.decode("utf-8", "replace")
    if size > n:
        text = "..." + text.split("\n", 1)[-1]
    return text.strip()


def kill_group(proc: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            proc.wait(timeout=wait)
            if sig == signal.SIGKILL:
                return
        except subprocess.TimeoutExpired:
            continue
        # the leader is gone; children may linger in the group
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        return


def kill_leftovers(proc: subprocess.Popen) -> None:
    """Kill what is left in the process group of a run that has ended (children the
    script started and did not wait for)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
