"""Issue 17: can a C++ op observer beat the Python floor of recording every PyTorch op?

A global ``at::addGlobalCallback(at::RecordFunctionCallback(...))`` observer of ATen ops
(``_cxx_observer.cpp``, built on first use with ``torch.utils.cpp_extension.load_inline``
into ``$XDG_CACHE_HOME/fwd9m`` or ``/tmp``), timed against the same training steps
uninstrumented, in the same run, interleaved, for the small CNN and the transformer block
of ``_models.py`` (the workloads of ``bench_debug.py``):

* ``C++ RF floor``: a start callback that does nothing (the cost of RecordFunction alone);
* ``C++ RF outputs, no digest``: ``needsOutputs``, one record per output tensor, no bytes read;
* ``C++ RF outputs``: ``needsOutputs``; every output tensor digested in C++ (a 64-bit
  multiply-xor over its bytes in memory order), appended with the op name and number to a
  preallocated in-memory buffer;
* ``C++ RF outputs, leaf ops, no views``: the outputs of the ops during which no other op
  started (``aten::addmm``, not the ``aten::linear`` around it), views skipped;
* ``C++ RF inputs+outputs``: the same with ``needsInputs``, inputs digested before the kernel;
* ``Python no-op TorchDispatchMode`` and ``fwd9m record`` (as ``bench_debug.py`` drives it).

``python benchmarks/run.py cxx`` prints best-of ratios like every benchmark; running this
file directly (``python benchmarks/bench_cxx_observer.py [--rounds N]``) prints the median
and the best ratio of each variant over N interleaved rounds, the machine's load, and what
RecordFunction sees against what the dispatch mode sees (op counts per step). Without a
C++ compiler or ninja the cases are skipped with a message.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _harness import Case
from _models import torch_models, torch_train

HERE = Path(__file__).resolve().parent
TMP = tempfile.mkdtemp(prefix="fwd9m-bench-cxxobs-")
FUNCTIONS = ["install", "uninstall", "reset", "counts", "records", "digest_of"]
#: variant number of _cxx_observer.cpp's install() -> case label
VARIANTS = {
    0: "C++ RF floor",
    3: "C++ RF outputs, no digest",
    1: "C++ RF outputs",
    4: "C++ RF outputs, leaf ops, no views",
    2: "C++ RF inputs+outputs",
}
#: -DNDEBUG as torch's release build: without it record_function.h's debug-only
#: ``inputs_valid_`` check fires on every ``inputs()`` (the member is never set true by a
#: release libtorch) and the class's debug-only member differs from the library's
CFLAGS = ["-O2", "-DNDEBUG"]
_EXT = None


def _build_dir(source: str, torch_version: str) -> Path:
    tag = hashlib.sha256((source + torch_version + " ".join(CFLAGS)).encode()).hexdigest()[:16]
    root = os.environ.get("XDG_CACHE_HOME")
    base = Path(root) / "fwd9m" if root else Path(tempfile.gettempdir()) / f"fwd9m-{os.getuid()}"
    path = base / f"cxx-observer-{tag}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def extension():
    """The built observer module; ImportError (the skip) without a compiler or ninja."""
    global _EXT
    if _EXT is not None:
        return _EXT
    import torch
    from torch.utils import cpp_extension

    if not (shutil.which("c++") or shutil.which("g++")) or not shutil.which("ninja"):
        raise ImportError("no C++ compiler or ninja on PATH: the C++ observer cannot be built")
    source = (HERE / "_cxx_observer.cpp").read_text()
    name = "fwd9m_cxx_observer"
    try:
        _EXT = cpp_extension.load_inline(
            name,
            source,
            functions=FUNCTIONS,
            build_directory=str(_build_dir(source, torch.__version__)),
            extra_cflags=CFLAGS,
        )
    except (RuntimeError, OSError) as exc:  # a failed build is a skip, with its reason
        raise ImportError(f"the C++ observer did not build: {str(exc).splitlines()[0]}") from exc
    return _EXT


def _noop_mode():
    from torch.utils._python_dispatch import TorchDispatchMode

    class NoOp(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    return NoOp


def _workloads(steps: int):
    """[(model name, train, {label: candidate})], the candidates in the order printed."""
    import torch

    import fwd9m.debug as dbg

    ext, NoOp = extension(), _noop_mode()
    torch.manual_seed(0)
    torch.set_num_threads(1)  # a shared 2-core machine: keep the measurement stable
    out = []
    for name, make in torch_models():
        model, x, y = make()
        opt = torch.optim.SGD(model.parameters(), lr=0.01)

        train = torch_train(model, x, y, opt, steps)

        def observed(variant, train=train):
            ext.reset()
            ext.install(variant, False)
            try:
                train()
            finally:
                ext.uninstall()

        def noop(train=train):
            with NoOp():
                train()

        def recorded(train=train, name=name):
            with dbg.record(os.path.join(TMP, f"torch-{name}.trace"), framework="torch"):
                train()

        cands = {label: (lambda v=v, f=observed: f(v)) for v, label in VARIANTS.items()}
        cands["Python no-op TorchDispatchMode"] = noop
        cands["fwd9m record (TorchDispatchMode)"] = recorded
        out.append((name, train, cands))
    return out


def cases(quick: bool):
    try:
        import torch  # noqa: F401
    except ImportError:
        raise ImportError("torch is not installed") from None
    steps, repeat = (3, 3) if quick else (10, 5)
    return [
        Case(
            f"torch {label} {name} ({steps} steps)",
            train,
            cand,
            baseline_name="uninstrumented",
            repeat=repeat,
            clock=time.process_time,  # one torch thread: CPU time, which the load inflates less
        )
        for name, train, cands in _workloads(steps)
        for label, cand in cands.items()
    ]


def _timed(fn) -> float:
    """CPU seconds of this process: torch runs on one thread here, and other processes on
    the shared machine inflate wall time far more than they do this."""
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def _rounds(train, cands: dict, rounds: int) -> dict:
    """{label: [candidate/plain of each round]}: each round times plain, then every
    candidate, then plain again, and divides by the mean of the two plain times."""
    train()
    for fn in cands.values():
        fn()  # warm-up
    ratios: dict = {label: [] for label in cands}
    plain = []
    for _ in range(rounds):
        for label, fn in cands.items():
            before, t, after = _timed(train), _timed(fn), _timed(train)
            ratios[label].append(2 * t / (before + after))
            plain += [before, after]
    return {"plain (s)": plain, **ratios}


def _op_census(ext, train_step) -> tuple[int, int, int, int, list[int]]:
    """(ops the dispatch mode sees, ATen ops RecordFunction sees, of them inside autograd
    nodes, autograd nodes, [output records, bytes, copies; inputs+outputs records, bytes,
    copies]) in one training step."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Count.n += 1
            return func(*args, **(kwargs or {}))

    with Count():
        train_step()
    ext.reset()
    ext.install(3, True)
    try:
        train_step()
    finally:
        ext.uninstall()
    ops, _records, nodes, _b, _c = ext.counts()
    in_bwd = len({seq for seq, _n, _d, _s, inb in ext.records() if inb})
    digested = []
    for variant in (1, 4, 2):
        ext.reset()
        ext.install(variant, False)
        try:
            train_step()
        finally:
            ext.uninstall()
        digested += ext.counts()[1:2] + ext.counts()[3:]
    return Count.n, ops, in_bwd, nodes, digested


def main(argv: list[str]) -> int:
    rounds = int(argv[argv.index("--rounds") + 1]) if "--rounds" in argv else 7
    try:
        t0 = time.perf_counter()
        ext = extension()
        print(f"extension ready in {time.perf_counter() - t0:.1f} s (a build the first time)")
        work = _workloads(10)
        steps1 = _workloads(1)
    except ImportError as exc:
        print(f"bench_cxx_observer: skipped ({exc})")
        return 0
    print(f"load average before: {os.getloadavg()}, cpus: {os.cpu_count()}, torch threads: 1")
    for (name, train, cands), (_n, step, _c) in zip(work, steps1):
        mode_ops, rf_ops, in_bwd, nodes, (ro, bo, co, rl, bl, cl, ri, bi, ci) = _op_census(ext, step)
        print(
            f"\n{name}, one step: dispatch mode sees {mode_ops} ops; RecordFunction (FUNCTION scope) "
            f"{rf_ops} ATen ops, {in_bwd} of them inside {nodes} autograd nodes; digested: outputs "
            f"{ro} tensors {bo / 2**20:.1f} MiB ({co} copied first), leaf ops' non-view outputs {rl} "
            f"tensors {bl / 2**20:.1f} MiB ({cl} copied first), inputs+outputs {ri} tensors "
            f"{bi / 2**20:.1f} MiB ({ci} copied first)"
        )
        print(f"{name}, 10 steps, {rounds} rounds: candidate/plain, median (best)")
        timed = _rounds(train, cands, rounds)
        print(f"  plain: {statistics.median(timed.pop('plain (s)')) * 1e3:.1f} ms CPU median")
        for label, rs in timed.items():
            print(f"  {label:<36} {statistics.median(rs):6.2f}x ({min(rs):.2f}x)", flush=True)
    print(f"\nload average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    raise SystemExit(main(sys.argv[1:]))
