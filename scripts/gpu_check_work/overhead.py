"""gpu-check workload: what recording and step digests cost on the device, and whether
they synchronise the host with the device once per op.

Prints one JSON object: ``ops`` (recorded per run), ``syncs`` (host synchronisations in a
plain, a recorded and a step-digest run of ``steps`` steps), ``record_ratio`` and
``digest_ratio`` (best-of-``repeat`` times against plain steps, interleaved).

On CUDA the syncs are counted with ``torch.cuda.set_sync_debug_mode("warn")`` (one
warning per synchronising call). On ``cpu`` (dry run and tests) the two CUDA calls are
replaced by stand-ins named CPU_STAND_IN_FOR_*: the sync counter counts the calls that
synchronise when the tensor is on CUDA (``Tensor.item``, ``tolist``, ``cpu``, ``to``
the host), and the device barrier before reading a clock does nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import time
import warnings

import torch

DEVICE = os.environ.get("FWD9M_GPU_CHECK_DEVICE", "cuda:0")
CUDA = DEVICE.startswith("cuda")
#: (batch, sequence, width, heads, feed-forward width): a block large enough that an H200
#: spends its time in kernels, not in launches (about 5 TFLOP a step, float32); on the
#: CPU only the code path matters
SIZES = (16, 1024, 2048, 16, 8192) if CUDA else (4, 16, 64, 4, 128)
STEPS, REPEAT = (5, 3) if CUDA else (2, 2)


def barrier() -> None:
    if CUDA:
        torch.cuda.synchronize(DEVICE)
    else:
        CPU_STAND_IN_FOR_CUDA_SYNCHRONIZE()


def CPU_STAND_IN_FOR_CUDA_SYNCHRONIZE() -> None:  # noqa: N802 - named to be seen
    """Nothing to wait for: CPU ops have finished when they return."""


class CPU_STAND_IN_FOR_SYNC_DEBUG_MODE(torch.overrides.TorchFunctionMode):  # noqa: N801
    """Warns, as ``set_sync_debug_mode("warn")`` does on CUDA, at each call that would
    synchronise the host with a CUDA stream."""

    SYNCING = {torch.Tensor.item, torch.Tensor.tolist, torch.Tensor.cpu, torch.Tensor.__bool__}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        to_host = func is torch.Tensor.to and any(str(a) == "cpu" for a in (*args[1:], *kwargs.values()))
        if func in self.SYNCING or to_host:
            warnings.warn("CPU stand-in: called a synchronizing CUDA operation")
        return func(*args, **kwargs)


@contextlib.contextmanager
def count_syncs(box: list):
    """Append to ``box`` the number of synchronising calls made in the block."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        if CUDA:
            torch.cuda.set_sync_debug_mode("warn")
            try:
                yield
            finally:
                torch.cuda.set_sync_debug_mode("default")
        else:
            with CPU_STAND_IN_FOR_SYNC_DEBUG_MODE():
                yield
    box.append(sum("synchronizing CUDA operation" in str(w.message) for w in seen))


def make_training():
    batch, seq, width, heads, ff = SIZES
    torch.manual_seed(0)
    block = torch.nn.TransformerEncoderLayer(width, heads, ff, dropout=0.0, batch_first=True).to(DEVICE)
    head = torch.nn.Linear(width, 10).to(DEVICE)
    opt = torch.optim.Adam([*block.parameters(), *head.parameters()], lr=1e-4)
    x = torch.randn(batch, seq, width, device=DEVICE)
    y = torch.randint(0, 10, (batch,), device=DEVICE)

    def train():
        for _ in range(STEPS):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(head(block(x).mean(1)), y).backward()
            opt.step()
        barrier()

    return train


def timed(fn) -> float:
    barrier()
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    import fwd9m.debug as dbg
    from fwd9m.steps import _torch as step_hooks  # what `fwd9m run --digests` installs
    from fwd9m.steps._session import StepSession

    train = make_training()
    tmp = tempfile.mkdtemp(prefix="overhead-", dir=os.getcwd())  # gpu-check runs it in a folder it deletes
    traces = iter(range(10**6))
    session = StepSession(os.path.join(tmp, "run.steps"))
    last = {}

    def recorded():
        with dbg.record(os.path.join(tmp, f"{next(traces)}.trace"), framework="torch") as trace:
            train()
        last["ops"] = trace.ops

    def digested():
        step_hooks.install(session)
        try:
            train()
        finally:
            step_hooks.uninstall()

    for fn in (train, recorded, digested):  # warm-up: kernels, caches, the trace writer
        fn()
    syncs = {}
    for name, fn in (("plain", train), ("recorded", recorded), ("digests", digested)):
        box: list = []
        with count_syncs(box):
            fn()
        syncs[name] = box[0]
    times = {"plain": [], "recorded": [], "digests": []}
    for _ in range(REPEAT):
        for name, fn in (("plain", train), ("recorded", recorded), ("digests", digested)):
            times[name].append(timed(fn))
    best = {k: min(v) for k, v in times.items()}
    out = {
        "device": DEVICE,
        "sizes": SIZES,
        "steps": STEPS,
        "ops": last["ops"],
        "syncs": syncs,
        "seconds": best,
        "record_ratio": best["recorded"] / best["plain"],
        "digest_ratio": best["digests"] / best["plain"],
        "sync_counter": "torch.cuda.set_sync_debug_mode" if CUDA else "CPU_STAND_IN_FOR_SYNC_DEBUG_MODE",
    }
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
