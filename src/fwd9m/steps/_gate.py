"""The child side of ``fwd9m check``'s lock step (:mod:`fwd9m.check._gate`): after each
training step it records, the run's own process says so and waits for the check's word
before it computes the next step, so that only one of two runs computes a step at a time.

Two named pipes in the run's step folder (:data:`~fwd9m.steps._session.ENV_CHECK`),
named with the process's id (``gate-done-<pid>``, ``gate-go-<pid>``): the process writes
one byte to the first after the step's record is written, and reads one byte from the
second. ``g`` lets it go on; the end of the pipe (the check closed it, or ended) lets it
run free from then on, as does any error. Only the process that leads the run's session
(the one the check started, ``os.getsid(0) == os.getpid()``) and finds its own pipes
waits: processes it starts (a launcher's ranks, DataLoader workers) never do. Waiting
changes no thread count and nothing the step computes.
"""

from __future__ import annotations

import os

__all__ = ["DONE", "ENV_GATE", "GO", "Gate", "from_env"]

#: ``1``: the run's own process waits at each step boundary (set by ``fwd9m check``)
ENV_GATE = "FWD9M_STEPS_GATE"
#: the pipe the process writes a byte to after each recorded step (``<prefix><pid>``)
DONE = "gate-done-"
#: the pipe it reads its word from (``<prefix><pid>``)
GO = "gate-go-"


class Gate:
    """Waits at each step boundary for the check's word, until the pipes end."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.fds: tuple[int, int] | None = None
        self.off = False

    def _open(self) -> tuple[int, int]:
        pid = os.getpid()
        flags = os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
        go = os.open(os.path.join(self.folder, f"{GO}{pid}"), os.O_RDONLY | flags)
        try:
            done = os.open(os.path.join(self.folder, f"{DONE}{pid}"), os.O_WRONLY | flags)
        except OSError:
            os.close(go)
            raise
        os.set_blocking(go, True)
        return go, done

    def step(self) -> None:
        """Say a step was recorded, and wait for the word to compute the next."""
        if self.off:
            return
        try:
            if self.fds is None:
                self.fds = self._open()
            go, done = self.fds
            os.write(done, b"s")
            if os.read(go, 1) == b"g":
                return
        except OSError:  # no pipes (another process), or the check is gone: run free
            pass
        self.close()

    def close(self) -> None:
        self.off = True
        for fd in self.fds or ():
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds = None


def from_env(folder: str | None) -> Gate | None:
    """The gate of this process under ``fwd9m check``'s lock step, or None."""
    if not folder or os.environ.get(ENV_GATE) != "1":
        return None
    try:
        own = os.getsid(0) == os.getpid()
    except (AttributeError, OSError):  # not on POSIX
        return None
    return Gate(folder) if own else None
