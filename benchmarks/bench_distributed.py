"""Distributed costs: the replica-consistency check, per-rank step digests under
torchrun, and ``fwd9m debug diff`` of two per-rank digest folders at cluster scale.

Replica check: fwd9m.distributed.check_replicas against what a data-parallel step
already does, in a one-rank gloo group in this process.

The check digests every parameter and buffer (fwd9m.fingerprint) and all-gathers the
digests (8 bytes per tensor plus names), so its cost is one read of the model's bytes;
the baselines are an SGD step and a copy of every parameter. Run it every N steps: the
per-step overhead is the ratio divided by N.

Step digests under torchrun (gloo, 1, 2 and 4 ranks on this machine): ``fwd9m run
--digests DIR/ -- torchrun ... _ddp_digest_steps.py`` against the same ``fwd9m run``
without ``--digests``, launched alternately in the same run; the clock is the slowest
rank's CPU seconds for its timed steps (the script measures them after warm-up steps,
so interpreter start-up is not counted; FWD9M_BENCH_WALL=1 for wall-clock seconds).
The note gives the bytes of one step's record per rank (a DDP MLP, Adam: 16
parameters, each with its gradient and Adam's three state values).

Debug diff at scale: two folders of 256 simulated ranks x 1,000 steps (100 digests per
step), written by this benchmark, rank 97 differing from step 500; baseline: reading
every byte of both folders. Records whose bytes agree are not decoded.

Figures (2-core machine shared with other jobs, 2026-12-02, CPU clock, 60 timed steps):
  digests / plain per step (target 1.3, missed): 1 rank 1.49x (2.7 -> 4.1 ms), 2 ranks
  1.45x, 4 ranks 1.35x (slowest rank 4.7 -> 6.4 ms): about 1.3-1.7 ms per step to digest
  this model's ~3 MB of parameters, gradients and Adam moments, against a step of a
  64-sample batch; a heavier step per byte of state shrinks the ratio (bench_steps).
  One step's record: 1,245 bytes per rank (102 digests, 12 bytes each, 21 of framing).
  debug diff 256 ranks x 1,000 steps (2 x 314 MB): 1.7 s, 16x reading the files; before
  agreeing records were compared without decoding them, 9.2 s with 30 digests per step.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from _harness import Case

HERE = os.path.dirname(os.path.abspath(__file__))


def cases(quick: bool):
    return _replica_cases(quick) + _digest_cases(quick) + [_diff_case(quick)]


def _replica_cases(quick: bool):
    import torch
    import torch.distributed as dist

    import fwd9m.distributed as fd

    if not dist.is_initialized():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    width, depth = (512, 4) if quick else (1024, 8)
    torch.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.BatchNorm1d(width)]
    model = torch.nn.Sequential(*layers)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    model(torch.randn(8, width)).sum().backward()
    params = [p.detach() for p in model.parameters()]
    mb = sum(p.numel() * p.element_size() for p in params) / 2**20

    def sgd_step():
        opt.step()

    def clone():
        return [p.clone() for p in params]

    def check():
        fd.check_replicas(model)

    repeat = 3 if quick else 7
    return [
        Case(
            f"check_replicas vs SGD step ({mb:.0f} MiB of parameters)",
            sgd_step,
            check,
            baseline_name="optimizer.step()",
            repeat=repeat,
            target=10.0,
            note="one check costs a few optimizer steps: check every 100 steps for <10% overhead",
        ),
        Case(
            f"check_replicas vs cloning every parameter ({mb:.0f} MiB)",
            clone,
            check,
            baseline_name="[p.clone() for p in params]",
            repeat=repeat,
            target=5.0,
            note="the check reads the parameters' bytes once, as a copy does",
        ),
    ]


class _StepClock:
    """The harness's clock: the seconds of timed steps the launches so far reported (the
    slowest rank of each), so a case's time is its steps', not start-up."""

    def __init__(self) -> None:
        self.total = 0.0

    def __call__(self) -> float:
        return self.total

    def add(self, folder: str) -> None:
        times = [float(open(p).read()) for p in glob.glob(os.path.join(folder, "rank*.time"))]
        self.total += max(times)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _scratch(prefix: str) -> str:
    """A temporary folder removed when the benchmark ends."""
    import atexit

    tmp = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, tmp, True)
    return tmp


def _launch(ranks: int, clock: _StepClock, tmp: str, digests: str | None, quick: bool, case=None) -> None:
    """One torchrun job of ``ranks`` ranks under fwd9m run; with ``digests`` (a folder),
    the size of one step's record goes to ``case.note``."""
    out = tempfile.mkdtemp(dir=tmp)
    env = {**os.environ, "BENCH_OUT": out, "BENCH_STEPS": "20" if quick else "60", "OMP_NUM_THREADS": "1"}
    env.update({"GLOO_SOCKET_IFNAME": "lo", "MASTER_ADDR": "127.0.0.1"})
    command = [sys.executable, "-m", "fwd9m", "run", *(["--digests", digests] if digests else []), "--"]
    command += [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(ranks)]
    command += ["--master-addr", "127.0.0.1", "--master-port", str(_free_port())]
    command += [os.path.join(HERE, "_ddp_digest_steps.py")]
    subprocess.run(command, env=env, check=True, capture_output=True, timeout=600)
    clock.add(out)
    shutil.rmtree(out)
    if digests and case is not None and not case.note:
        case.note = f"one step's record: {_record_bytes(digests)} bytes per rank"
        print(f"{case.name}: {case.note}", file=sys.stderr)


def _record_bytes(folder: str) -> int:
    """The bytes of one step's record (its frame) in rank 0's file."""
    from fwd9m.steps._format import StepReader

    with StepReader(os.path.join(folder, "rank0.steps")) as reader:
        payload = next(iter(reader.raw_steps()))
    return len(payload) + 8  # the frame's length and checksum


def _digest_cases(quick: bool) -> list[Case]:
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return []
    tmp = _scratch("fwd9m-bench-dist-")
    out = []
    for ranks in (1, 2, 4):
        clock = _StepClock()
        folder = os.path.join(tmp, f"digests{ranks}")
        case = Case(
            f"step digests under torchrun, {ranks} rank(s)",
            lambda r=ranks, c=clock: _launch(r, c, tmp, None, quick),
            lambda: None,
            baseline_name="the same fwd9m run -- torchrun without --digests",
            repeat=2 if quick else 3,
            target=1.3,
            clock=clock,
        )
        case.candidate = lambda r=ranks, c=clock, f=folder, k=case: _launch(r, c, tmp, f + "/", quick, k)
        out.append(case)
    return out


def _write_folder(folder: str, ranks: int, steps: int, tensors: int, differ: tuple[int, int] | None) -> None:
    """Per-rank digest files as ``fwd9m run --digests DIR/`` writes them, ``tensors``
    digests per step; ``differ``: (rank, step) from which that rank's digests change."""
    from fwd9m.steps._format import StepWriter

    os.makedirs(folder)
    groups = ("grads", "params", "optimizer", "buffers")
    names = [(groups[i % 4], f"layer{i // 4}.weight", "float32[256,256]") for i in range(tensors)]
    for rank in range(ranks):
        header = {"program": {}, "rank": {"rank": rank, "world_size": ranks, "launcher": "torchrun"}}
        writer = StepWriter(os.path.join(folder, f"rank{rank}.steps"), header)
        for step in range(steps):
            bump = differ is not None and rank == differ[0] and step >= differ[1]
            base = (rank * 1_000_003 + step) * 1_000
            writer.step(step, [(g, n, m, base + i + bump) for i, (g, n, m) in enumerate(names)])
        writer.close({"completed": True})


def _read_all(folders: list[str]) -> None:
    for folder in folders:
        for path in glob.glob(os.path.join(folder, "*.steps")):
            with open(path, "rb") as f:
                while f.read(1 << 20):
                    pass


def _diff_case(quick: bool) -> Case:
    ranks, steps = (64, 1000) if quick else (256, 1000)
    tmp = _scratch("fwd9m-bench-diff-")
    ref, run = os.path.join(tmp, "ref"), os.path.join(tmp, "run")

    def setup() -> None:
        if not os.path.isdir(ref):
            t0 = time.perf_counter()
            _write_folder(ref, ranks, steps, 100, None)
            _write_folder(run, ranks, steps, 100, (ranks * 3 // 8, steps // 2))
            print(f"wrote 2 x {ranks} ranks x {steps} steps in {time.perf_counter() - t0:.0f} s", file=sys.stderr)

    def diff() -> None:
        from fwd9m.steps._compare import diff_step_folders

        report = diff_step_folders(ref, run)
        assert report.first() == (steps // 2, [ranks * 3 // 8]), report.first()

    return Case(
        f"debug diff of 2 folders, {ranks} ranks x {steps} steps",
        lambda: _read_all([ref, run]),
        diff,
        baseline_name="reading every byte of both folders",
        repeat=1 if quick else 2,
        target=60.0,
        setup=setup,
        note="must take well under a minute (absolute seconds in the output)",
    )
