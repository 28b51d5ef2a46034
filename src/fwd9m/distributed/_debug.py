"""``fwd9m debug`` per rank: one trace per rank, rank r of run A against rank r of run B.

Collectives are dispatched as ops (``c10d::allreduce_``, ``c10d::broadcast_``,
``c10d::allgather_``: ``ProcessGroup`` calls them through the dispatcher,
https://github.com/pytorch/pytorch/blob/main/torch/csrc/distributed/c10d/ProcessGroup.hpp),
so :func:`fwd9m.debug.record` sees them like any aten op, including the gradient
all-reduce that DDP's reducer issues during backward; a reduction whose inputs agree but
whose output differs is named as the culprit op.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._log import logger
from ..errors import ConfigurationError
from ._ranks import rank_info

__all__ = ["record_rank", "diff_ranks", "RankDiff", "ENV_RECORD_RANKS", "record_from_env"]

#: ``fwd9m run --record-ranks DIR`` sets it: every process that imports torch records
#: its ops into ``DIR/rank<r>.trace`` until it exits.
ENV_RECORD_RANKS = "FWD9M_RECORD_RANKS"
_TRACE = re.compile(r"^rank(\d+)\.trace$")


def trace_path(directory: str | os.PathLike[str], rank: int | None = None) -> str:
    """``directory/rank<r>.trace`` for this process's rank (or ``rank``)."""
    r = rank_info().rank if rank is None else rank
    return os.path.join(os.fspath(directory), f"rank{r}.trace")


@contextlib.contextmanager
def record_rank(directory: str | os.PathLike[str], **kwargs: Any) -> Iterator[Any]:
    """``fwd9m.debug.record`` into ``directory/rank<r>.trace`` (the directory is
    created); keyword arguments go to ``record``. Yields its :class:`~fwd9m.debug.Trace`."""
    from .. import debug

    os.makedirs(directory, exist_ok=True)
    info = rank_info()
    kwargs.setdefault("program", {"argv": list(sys.argv), "rank": info.rank, "world_size": info.world_size})
    with debug.record(trace_path(directory, info.rank), **kwargs) as trace:
        yield trace


def record_from_env(environ: dict | None = None) -> bool:
    """Start recording this process until it exits (called by ``fwd9m run``'s import
    hook once torch is imported), into ``$FWD9M_RECORD_RANKS/rank<r>.trace``. Returns
    True when recording started.

    The rank is decided when the process ends, not when it imports torch: a child of
    ``torch.multiprocessing.spawn`` learns its rank only in ``init_process_group``, so at
    import every child (and their parent) looked like rank 0 and all wrote into
    ``rank0.trace`` at once. Until the end the trace is ``.pending-<pid>.trace``; a
    process that never joined a process group and has no launcher rank (the parent of
    spawned ranks) gets ``rank<r>.trace`` only if no rank took it (else
    ``single-<pid>.trace``), and a DataLoader worker's trace is dropped (the rank's own
    trace has what the worker handed it)."""
    directory = (os.environ if environ is None else environ).get(ENV_RECORD_RANKS)
    if not directory:
        return False
    if rank_info().source == "single" and is_launcher():
        return False  # torchrun's agent imports torch too; its ranks record themselves
    os.makedirs(directory, exist_ok=True)
    pending = os.path.join(directory, f".pending-{os.getpid()}.trace")
    program = {"argv": list(sys.argv)}
    from .. import debug

    cm = debug.record(pending, framework="torch", program=program)
    cm.__enter__()
    joined = _watch_process_group()

    def stop() -> None:
        try:
            cm.__exit__(None, None, None)
            _settle(pending, directory, joined)
        except Exception as exc:  # the process is ending; the trace says it is incomplete
            logger.warning("could not close the trace in %s: %s", directory, exc)

    atexit.register(stop)
    return True


def _watch_process_group() -> dict[str, int]:
    """``{"rank": r}`` once ``torch.distributed.init_process_group`` returns in this
    process (the wrapper only notes the rank; the call is the user's)."""
    import torch.distributed as dist

    joined: dict[str, int] = {}
    original = getattr(dist, "init_process_group", None)
    if original is None or getattr(original, "_fwd9m_watched", False):
        return joined

    def init_process_group(*args, **kwargs):
        out = original(*args, **kwargs)
        try:
            joined["rank"] = dist.get_rank()
        except Exception:  # noqa: BLE001 - never break the user's call
            pass
        return out

    init_process_group._fwd9m_watched = True  # type: ignore[attr-defined]
    init_process_group.__wrapped__ = original  # type: ignore[attr-defined]
    dist.init_process_group = init_process_group
    return joined


def _settle(pending: str, directory: str, joined: dict[str, int]) -> None:
    """Give the ended trace ``pending`` its name (see :func:`record_from_env`); never
    replaces a trace another process of the run wrote."""
    data = sys.modules.get("torch.utils.data")
    if "rank" not in joined and data is not None and data.get_worker_info() is not None:
        os.unlink(pending)  # a DataLoader worker
        return
    info = rank_info()
    rank = joined.get("rank", info.rank)
    names = [f"rank{rank}.trace"]
    if "rank" not in joined and info.source == "single":
        names.append(f"single-{os.getpid()}.trace")
    else:
        names.append(f"rank{rank}.{os.getpid()}.trace")
    for name in names:
        try:
            os.link(pending, os.path.join(directory, name))  # fails if the name is taken
        except FileExistsError:
            continue
        os.unlink(pending)
        if name != names[0]:
            logger.warning("%s was taken by another process of the run; this one's trace is %s", names[0], name)
        return


#: programs that start ranks rather than being one: ``torchrun``, ``horovodrun``,
#: ``python -m torch.distributed.run`` / ``torch.distributed.launch``
_LAUNCHER_SCRIPTS = ("torchrun", "horovodrun")
_LAUNCHER_MODULES = ("torch.distributed.run", "torch.distributed.launch")


def is_launcher(argv: list[str] | None = None) -> bool:
    """Whether this interpreter is a launcher that starts ranks (torchrun's agent), from
    its original command line (``sys.orig_argv``: while ``python -m
    torch.distributed.run`` imports torch, ``sys.argv[0]`` is still "-m")."""
    args = list(getattr(sys, "orig_argv", sys.argv) if argv is None else argv)
    for i, a in enumerate(args[1:], 1):
        if a == "-m":
            return i + 1 < len(args) and args[i + 1] in _LAUNCHER_MODULES
        if not a.startswith("-"):
            return os.path.basename(a) in _LAUNCHER_SCRIPTS
    return False


@dataclass
class RankDiff:
    """Per-rank comparison of two directories of traces (``rank<r>.trace``).

    ``reports``: rank -> :class:`fwd9m.debug.Report`; ``missing``: ranks with a trace
    in one directory only; ``first_rank``: the rank whose first divergence comes
    earliest (training step, then op number), None when every rank is reproducible.
    """

    a: str
    b: str
    reports: dict[int, Any] = field(default_factory=dict)
    missing: list[int] = field(default_factory=list)

    @property
    def reproducible(self) -> bool:
        return not self.missing and all(r.reproducible for r in self.reports.values())

    @property
    def first_rank(self) -> int | None:
        bad = [
            (r.first.step if r.first else 0, r.first.seq if r.first else 0, k)
            for k, r in self.reports.items()
            if not r.reproducible
        ]
        return min(bad)[2] if bad else None

    def render(self, fmt: str = "text") -> str:
        if fmt == "json":
            import json

            return json.dumps(
                {
                    "a": self.a,
                    "b": self.b,
                    "reproducible": self.reproducible,
                    "first_rank": self.first_rank,
                    "missing": self.missing,
                    "ranks": {str(k): json.loads(r.render("json")) for k, r in self.reports.items()},
                },
                indent=2,
                default=str,
            )
        lines = []
        first = self.first_rank
        if self.reproducible:
            lines.append(f"REPRODUCIBLE: every rank's trace agrees ({len(self.reports)} ranks).")
        else:
            bad = [k for k, r in self.reports.items() if not r.reproducible]
            lines.append(
                f"NOT REPRODUCIBLE: ranks {', '.join(map(str, bad)) or '-'} diverge"
                + (f"; rank {first} diverges first" if first is not None else "")
                + "."
            )
        if self.missing:
            lines.append(f"traces of ranks {', '.join(map(str, self.missing))} exist in one directory only")
        order = sorted(self.reports, key=lambda k: (k != first, k))
        for k in order:
            lines += ["", f"=== rank {k} ===", self.reports[k].render("text")]
        return "\n".join(lines)


def _traces(directory: str) -> dict[int, str]:
    out = {}
    for p in Path(directory).iterdir():
        m = _TRACE.match(p.name)
        if m:
            out[int(m.group(1))] = str(p)
    return out


def diff_ranks(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> RankDiff:
    """Compare rank r of run ``a`` with rank r of run ``b`` (directories of
    ``rank<r>.trace`` files, as :func:`record_rank` and ``fwd9m run --record-ranks``
    write them).

    Raises:
        ConfigurationError: a directory holds no ``rank<r>.trace``.
        FileFormatError: a trace is damaged (from :func:`fwd9m.debug.diff`).
    """
    from .. import debug

    a, b = os.fspath(a), os.fspath(b)
    ta, tb = _traces(a), _traces(b)
    for d, t in ((a, ta), (b, tb)):
        if not t:
            raise ConfigurationError(
                f"{d} holds no rank<r>.trace files; record them with `fwd9m run --record-ranks {d} -- torchrun ...`"
            )
    result = RankDiff(a, b, missing=sorted(set(ta) ^ set(tb)))
    for rank in sorted(set(ta) & set(tb)):
        result.reports[rank] = debug.diff(ta[rank], tb[rank])
    return result
