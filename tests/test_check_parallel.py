"""Side by side or one after the other (:mod:`fwd9m.check._parallel`): the rule, and each
framework's thread count as read from the environment before it starts."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from fwd9m import _frameworks
from fwd9m.check._parallel import ENV_SIDE_BY_SIDE, Parallel, decide, for_runs, sees_gpu, threads_of


@pytest.mark.parametrize(
    ("cores", "threads", "gpu", "side_by_side"),
    [
        (2, [1, 1], False, True),  # one thread each on two cores: each has its own
        (2, [2, 2], False, False),  # the case: 4 busy threads on 2 cores
        (4, [2, 2], False, True),
        (4, [4, 4], False, False),  # a framework's default: one thread per core, each
        (3, [1, 2], False, True),
        (3, [2, 2], False, False),
        (16, [1, 1], True, False),  # one GPU for both: its memory and streams shared
        (1, [1, 1], False, False),
    ],
)
def test_side_by_side_only_when_the_threads_fit_the_cores_and_no_gpu_is_shared(cores, threads, gpu, side_by_side):
    p = decide(cores, threads, gpu)
    assert p.side_by_side is side_by_side
    assert p.lockstep is not side_by_side  # else in lock step, never one after the other
    assert (p.cores, p.threads, p.gpu) == (cores, max(threads), gpu)


def test_the_progress_line_says_how_and_why():
    assert decide(2, [2, 2], False).describe() == "runs in lock step: 2 threads each on 2 cores"
    assert decide(4, [1, 1], False).describe() == "runs side by side: 1 thread each on 4 cores"
    assert (
        decide(8, [1, 1], True).describe() == "runs in lock step: they would share one GPU (1 thread each on 8 cores)"
    )
    forced = Parallel(True, 2, 2, forced=True).describe()
    assert forced == f"runs side by side: 2 threads each on 2 cores ({ENV_SIDE_BY_SIDE}=1)"
    after = Parallel(False, 2, 2, forced=True).describe()
    assert after == f"runs one after the other: 2 threads each on 2 cores ({ENV_SIDE_BY_SIDE}=0)"
    step = Parallel(False, 2, 2, forced=True, lockstep=True).describe()
    assert step == f"runs in lock step: 2 threads each on 2 cores ({ENV_SIDE_BY_SIDE}=step)"


@pytest.mark.parametrize(
    ("framework", "env", "threads"),
    [
        ("torch", {}, 6),
        ("torch", {"OMP_NUM_THREADS": "1"}, 1),
        ("torch", {"OMP_NUM_THREADS": "3", "MKL_NUM_THREADS": "1"}, 1),  # MKL's wins
        ("torch", {"OMP_NUM_THREADS": "abc"}, 6),  # not a number: torch warns, takes its default
        ("torch", {"OMP_NUM_THREADS": "0"}, 6),
        ("tensorflow", {"OMP_NUM_THREADS": "1"}, 6),  # TF's pool does not read it
        ("tensorflow", {"TF_NUM_INTRAOP_THREADS": "2"}, 2),
        ("jax", {}, 6),
        ("jax", {"XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"}, 1),
        ("jax", {"XLA_FLAGS": "--xla_force_host_platform_device_count=2 intra_op_parallelism_threads=3"}, 3),
        ("keras", {"TF_NUM_INTRAOP_THREADS": "2"}, 2),  # on TensorFlow, Keras' default backend
        ("keras", {"KERAS_BACKEND": "torch", "OMP_NUM_THREADS": "1"}, 1),
        ("keras", {"KERAS_BACKEND": "jax", "OMP_NUM_THREADS": "1"}, 6),
    ],
)
def test_each_framework_reads_its_threads_from_the_environment(framework, env, threads):
    assert _frameworks.backend(framework).intra_op_threads(env, 6) == threads


def test_a_run_takes_the_most_threads_of_its_frameworks_and_cores_when_none_is_known():
    assert threads_of(["torch", "tensorflow"], {"OMP_NUM_THREADS": "1", "TF_NUM_INTRAOP_THREADS": "3"}, 8) == 3
    assert threads_of([], {"OMP_NUM_THREADS": "1"}, 8) == 8
    assert threads_of(["numpy"], {}, 8) == 8


@pytest.mark.parametrize("env", [{}, {"OMP_NUM_THREADS": "1"}, {"OMP_NUM_THREADS": "3", "MKL_NUM_THREADS": "1"}])
def test_torch_starts_with_the_threads_the_backend_reads(env):
    """What torch itself says in a fresh process with that environment (``taskset`` one
    core where the affinity allows, so the default differs from the value of a variable)."""
    pytest.importorskip("torch")
    full = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    full.update(env)
    cores = len(os.sched_getaffinity(0))
    out = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
        env=full,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    assert int(out) == min(_frameworks.backend("torch").intra_op_threads(env, cores), os.cpu_count() or 1)


def test_a_hidden_gpu_is_not_shared():
    """No GPU here: ``sees_gpu`` is False whatever the variables say; with the device file
    of one (simulated: the path is taken from an existing file), hiding it counts."""
    from fwd9m.check import _parallel

    assert not sees_gpu({}) or any(os.path.exists(p) for p in _parallel._ACCELERATORS)
    saved = dict(_parallel._ACCELERATORS)
    try:  # simulated NVIDIA device file: this test's own source file stands in for it
        _parallel._ACCELERATORS.clear()
        _parallel._ACCELERATORS[__file__] = ("CUDA_VISIBLE_DEVICES",)
        assert sees_gpu({})
        assert sees_gpu({"CUDA_VISIBLE_DEVICES": "0"})
        assert not sees_gpu({"CUDA_VISIBLE_DEVICES": ""})
        assert not sees_gpu({"CUDA_VISIBLE_DEVICES": "-1"})
    finally:
        _parallel._ACCELERATORS.clear()
        _parallel._ACCELERATORS.update(saved)


def test_the_environment_variable_forces_either_way():
    assert for_runs(["torch"], {ENV_SIDE_BY_SIDE: "1"}).side_by_side
    after = for_runs(["torch"], {ENV_SIDE_BY_SIDE: "0", "OMP_NUM_THREADS": "1"})
    assert not after.side_by_side and not after.lockstep and after.forced
    step = for_runs(["torch"], {ENV_SIDE_BY_SIDE: "step", "OMP_NUM_THREADS": "1"})
    assert step.lockstep and not step.side_by_side and step.forced
    cores = len(os.sched_getaffinity(0))
    for value in ("auto", ""):  # unset: the rule (benchmarks/check_order.md: lock step measured fastest)
        unforced = for_runs(["torch"], {ENV_SIDE_BY_SIDE: value, "OMP_NUM_THREADS": "1"})
        assert unforced.side_by_side is (cores >= 2 and not sees_gpu({"OMP_NUM_THREADS": "1"}))
        assert unforced.lockstep is not unforced.side_by_side and not unforced.forced
    default = for_runs(["torch"], {})  # torch's default: one thread per core each
    assert default.lockstep and not default.side_by_side and not default.forced
