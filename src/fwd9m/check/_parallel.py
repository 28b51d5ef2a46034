"""Side by side, in lock step or one after the other: whether two runs of a script fit
on this machine together (``fwd9m check``'s runs 1 and 2, ``fwd9m debug``'s digest runs).

Two runs side by side are only faster than one after the other while each has cores of
its own. A run's intra-op thread count must stay what it is (it changes results: a
reduction split over more threads adds in another order), so two runs of a framework
that takes one thread per core would each bring as many threads as there are cores; on 2
cores, 4 busy threads then crawl (issue 33: two PyTorch runs side by side reached step
150 in 11.6 s where one alone reaches it in 5.2 s). And two runs on one GPU compete for
its memory and streams. Where they do not fit, the runs go in lock step
(:mod:`fwd9m.check._gate`: both start, then one computes a training step at a time, in
turn), which measured faster than one after the other (run 1 runs to its end first) and
than side by side oversubscribed (``benchmarks/check_order.md``). :func:`decide` is the
rule, a pure function; :func:`for_runs`
gathers what it needs: the usable cores (``os.sched_getaffinity``), each framework's
thread count as it will read it at start-up (:meth:`fwd9m._backend.Backend.intra_op_threads`:
``OMP_NUM_THREADS`` and the like, else one per core) and whether the runs see a GPU.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = [
    "ENV_SIDE_BY_SIDE",
    "Parallel",
    "decide",
    "for_runs",
    "frameworks_of",
    "sees_gpu",
    "threads_of",
    "usable_cores",
]

#: ``1``: runs 1 and 2 side by side; ``0``: one after the other; ``step``: in lock step;
#: ``auto`` or unset: :func:`decide`
ENV_SIDE_BY_SIDE = "FWD9M_SIDE_BY_SIDE"
#: the values of :data:`ENV_SIDE_BY_SIDE` that force an order
_FORCED = {"1": "side by side", "0": "one after the other", "step": "in lock step"}
#: device files of GPUs (NVIDIA, AMD), and the variables that hide them from a process
_ACCELERATORS = {
    "/dev/nvidiactl": ("CUDA_VISIBLE_DEVICES",),
    "/dev/kfd": ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"),
}


@dataclass(frozen=True)
class Parallel:
    """How two runs go: ``side_by_side``, in ``lockstep`` (both started together, then
    one computing a training step at a time, in turn: :mod:`fwd9m.check._gate`) or one
    after the other (neither), and what decided it."""

    side_by_side: bool
    cores: int  #: usable by this process
    threads: int  #: intra-op threads of each run
    gpu: bool = False  #: the runs would share one GPU
    forced: bool = False  #: :data:`ENV_SIDE_BY_SIDE` decided
    lockstep: bool = False  #: in lock step (never with ``side_by_side``)

    @property
    def how(self) -> str:
        """``side by side``, ``in lock step`` or ``one after the other``."""
        return "side by side" if self.side_by_side else "in lock step" if self.lockstep else "one after the other"

    def describe(self) -> str:
        """The progress line: ``runs in lock step: 2 threads each on 2 cores``."""
        how = self.how
        each = f"{self.threads} thread{'s' if self.threads != 1 else ''} each on {self.cores} core" + (
            "s" if self.cores != 1 else ""
        )
        if self.forced:
            value = next(k for k, v in _FORCED.items() if v == how)
            return f"runs {how}: {each} ({ENV_SIDE_BY_SIDE}={value})"
        if self.gpu:
            return f"runs {how}: they would share one GPU ({each})"
        return f"runs {how}: {each}"


def decide(cores: int, threads: Iterable[int], gpu: bool) -> Parallel:
    """Side by side only when the runs' threads together fit the cores (``2 x threads <=
    cores`` for two runs alike) and they do not share a single GPU; else in lock step
    (one computes a step while the other waits: no core, no GPU shared by two steps).
    ``threads``: each run's intra-op thread count; ``gpu``: the runs use a GPU (one
    device for both)."""
    counts = [max(1, int(t)) for t in threads]
    cores = max(1, int(cores))
    beside = sum(counts) <= cores and not gpu
    return Parallel(beside, cores, max(counts, default=cores), gpu, lockstep=not beside)


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, as ``taskset`` sets it)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def threads_of(frameworks: Iterable[str], environ: Mapping[str, str], cores: int) -> int:
    """Intra-op threads a run of a script using ``frameworks`` (registry names) starts
    with, the most of any of them; ``cores`` (each framework's default) when none is
    known."""
    from .. import _frameworks

    names = [n for n in frameworks if n in _frameworks.FRAMEWORKS]
    return max((_frameworks.backend(n).intra_op_threads(environ, cores) for n in names), default=cores)


def frameworks_of(module: str | None) -> list[str]:
    """The framework (registry name) of a module a run imports (``torch``; ``flax`` ->
    ``jax``), as a list; empty when unknown."""
    from .. import _frameworks

    name = _frameworks.of_module(module) if module else None
    return [name] if name else []


def sees_gpu(environ: Mapping[str, str]) -> bool:
    """Whether a run would see a GPU: its device file is there and the variables that
    choose devices do not hide them all (``CUDA_VISIBLE_DEVICES=""`` or ``-1``)."""
    for device, names in _ACCELERATORS.items():
        if not os.path.exists(device):
            continue
        hidden = [n for n in names if n in environ and environ[n].strip() in ("", "-1")]
        if not hidden:
            return True
    return False


def for_runs(frameworks: Iterable[str], environ: Mapping[str, str] | None = None) -> Parallel:
    """:func:`decide` for two runs of a script using ``frameworks`` with the environment
    ``environ`` (this process's by default), unless :data:`ENV_SIDE_BY_SIDE` says."""
    env = os.environ if environ is None else environ
    cores = usable_cores()
    threads = threads_of(frameworks, env, cores)
    forced = env.get(ENV_SIDE_BY_SIDE, "").strip()
    if forced in _FORCED:
        return Parallel(forced == "1", cores, threads, False, True, lockstep=forced == "step")
    # unset or auto: lock step where two runs' threads do not fit the cores, which
    # benchmarks/check_order.md measured faster than side by side (oversubscribed) and
    # than one after the other (run 1 runs to its end first)
    return decide(cores, [threads, threads], sees_gpu(env))
