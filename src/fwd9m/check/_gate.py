"""Runs 1 and 2 in lock step (:func:`fwd9m.check._lockstep.run_pair`): both start
together, and from then on only one computes a training step at a time, in turn, so that
two runs whose threads do not fit the cores together never share them (each keeps its
thread count: it changes results) and still stop together at the first step that
differs, after about the start-up plus twice the steps up to it.

The run's own process waits after each step it records (:mod:`fwd9m.steps._gate`: a
byte on a named pipe says the step is written, a byte back lets it go on); this side
decides, at each look, which waiting run goes on (:meth:`Gates.turn`): the one with
fewer steps, run 1 when they are level, and a run whose partner is still starting up
(it has recorded no step: its start-up, mostly single-threaded imports, overlaps the
other's first steps). A run whose partner ended, stopped recording or is not in lock
step runs free to its end: closing its pipe lets it go, and a process that waits on a
pipe nobody holds goes on, so no run waits on one that is gone, crashed or hung (its
timeout counts only the time it was not waiting here: :meth:`Gates.waited`).
"""

from __future__ import annotations

import os
import select
import time
from pathlib import Path

from ..steps._gate import DONE, ENV_GATE, GO

__all__ = ["Gates"]

#: the pipes' names until the run's process id is known
_NEW = ".new"


class Gates:
    """The pipes of the two runs of a pair, and where each run stands."""

    def __init__(self) -> None:
        self.fds: list[tuple[int, int] | None] = [None, None]  #: (go, done) of each run, while it is gated
        self.free = [False, False]  #: the run was let run free (or never gated)
        self.waiting = [False, False]  #: the run waits for its word
        self.since = [0.0, 0.0]
        self.total = [0.0, 0.0]  #: seconds waited, but for the current wait
        self.turns = 0  #: words given
        self.paths: list[Path] = []  #: the pipes, removed at :meth:`close`

    def env(self, k: int, folder: Path, gated: bool = True) -> dict[str, str]:
        """Make run ``k``'s pipes in its step folder; the environment that gates it
        (none without ``gated``)."""
        if not gated:
            return {}
        flags = os.O_RDWR | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
        fds = []
        for name in (GO, DONE):
            path = folder / f"{name}{_NEW}"
            os.mkfifo(path, 0o600)
            self.paths.append(path)
            fds.append(os.open(path, flags))
        self.fds[k] = (fds[0], fds[1])
        return {ENV_GATE: "1"}

    def started(self, k: int, folder: Path, pid: int | None) -> None:
        """Name run ``k``'s pipes after its process (None: it did not start)."""
        if self.fds[k] is None:
            return
        if pid is None:
            self.release(k)
            return
        for name in (GO, DONE):
            os.rename(folder / f"{name}{_NEW}", folder / f"{name}{pid}")
            self.paths.append(folder / f"{name}{pid}")

    def wait(self, seconds: float) -> None:
        """Up to ``seconds``, until a gated run says it recorded a step."""
        fds = {f[1]: k for k, f in enumerate(self.fds) if f is not None}
        if not fds:
            time.sleep(seconds)
            return
        ready, _, _ = select.select(list(fds), [], [], seconds)
        now = time.monotonic()
        for fd in ready:
            try:
                said = os.read(fd, 64)
            except BlockingIOError:
                continue
            k = fds[fd]
            if said and not self.waiting[k]:
                self.waiting[k], self.since[k] = True, now

    def go(self, k: int) -> None:
        """Let run ``k`` compute its next step."""
        fds = self.fds[k]
        if fds is None:
            return
        self._count(k)
        self.turns += 1
        os.write(fds[0], b"g")

    def release(self, k: int) -> None:
        """Let run ``k`` run free to its end (a waiting run goes on at once)."""
        fds, self.fds[k], self.free[k] = self.fds[k], None, True
        self._count(k)
        for fd in fds or ():
            os.close(fd)

    def _count(self, k: int) -> None:
        if self.waiting[k]:
            self.total[k] += time.monotonic() - self.since[k]
            self.waiting[k] = False

    def waited(self, k: int) -> float:
        """Seconds run ``k`` waited for its word so far."""
        return self.total[k] + (time.monotonic() - self.since[k] if self.waiting[k] else 0.0)

    def turn(self, steps: list[int], live: list[bool | None]) -> None:
        """Give the word to the run whose turn it is. ``steps``: each run's recorded
        steps; ``live``: running and its steps compared (True), not started yet (None),
        or ended, stopped recording or not in lock step (False: its partner runs free)."""
        for k in (0, 1):
            if live[k] is False and not self.free[k]:
                self.release(k)
        for k in (0, 1):
            j = 1 - k
            if self.fds[k] is not None and self.free[j]:
                self.release(k)
            if not self.waiting[k] or self.fds[k] is None or live[j] is None:
                continue
            if self.waiting[j]:
                if (steps[k], k) < (steps[j], j):  # behind, or level and run 1
                    self.go(k)
            elif steps[j] == 0:  # the other is starting up
                self.go(k)

    def close(self) -> None:
        """Let every run run free, and remove the pipes (nothing that copies a run's
        folder meets them)."""
        for k in (0, 1):
            if self.fds[k] is not None:
                self.release(k)
        for path in self.paths:
            try:
                os.unlink(path)
            except OSError:  # renamed, or the folder is gone
                pass
