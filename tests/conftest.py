"""Shared test configuration: GPU-marked tests skip cleanly without a CUDA GPU."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@functools.lru_cache(maxsize=1)
def has_cuda_gpu() -> bool:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return False
    try:
        return subprocess.run([exe, "-L"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def pytest_collection_modifyitems(config, items):
    if not has_cuda_gpu():
        skip = pytest.mark.skip(reason="needs a CUDA GPU (nvidia-smi found none)")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)
    if os.environ.get("PYTEST_XDIST_WORKER"):  # one of `pytest -n N`'s workers
        _schedule_for_workers(items)


def _schedule_for_workers(items) -> None:
    """Under pytest-xdist (scripts/test: ``-n 2 --dist loadfile``, each file on one worker,
    so a module-scoped fixture's work is done once): the files start in the order of their
    slowest test in tests/heavy.txt, slowest first, so that no long file is left to run
    alone at the end; a file's tests keep their order. Every worker collects in this same
    order (xdist requires it), and ``--no-loadscope-reorder`` (scripts/test) keeps xdist from
    sorting the files by their number of tests, most first (pytest-xdist 3.8,
    ``LoadScopeScheduling.schedule``), which put these files last. (``--dist loadgroup``
    would group finer, but pytest-xdist 3.8 marks a group by rewriting ``item._nodeid``,
    which pytest 9.2 no longer reads.)"""
    heavy = {nodeid: i for i, nodeid in enumerate(_heavy_tests())}
    first: dict[str, int] = {}
    for item in items:
        path = item.nodeid.split("::")[0]
        first[path] = min(first.get(path, len(heavy)), heavy.get(item.nodeid, len(heavy)))
    order = {id(item): i for i, item in enumerate(items)}
    items.sort(key=lambda item: (first[item.nodeid.split("::")[0]], order[id(item)]))


def _heavy_tests() -> list[str]:
    lines = (REPO / "tests" / "heavy.txt").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


@pytest.fixture(autouse=True)
def _fwd9m_seed_stays_in_its_test():
    """``seed_everything`` exports FWD9M_SEED; without this, one test's seed reaches
    every later test and every process they start (results would depend on test order)."""
    saved = os.environ.get("FWD9M_SEED")
    yield
    if saved is None:
        os.environ.pop("FWD9M_SEED", None)
    else:
        os.environ["FWD9M_SEED"] = saved


def _determinism_switches() -> dict[str, object]:
    """The process-wide determinism switches of the frameworks already imported (off for
    one not imported yet)."""
    got: dict[str, object] = {"tf": False, "torch": (False, False)}
    if "tensorflow" in sys.modules:
        from tensorflow.python.framework.config import is_op_determinism_enabled  # not exported

        got["tf"] = is_op_determinism_enabled()
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        got["torch"] = (
            torch.are_deterministic_algorithms_enabled(),
            torch.is_deterministic_algorithms_warn_only_enabled(),
        )
    return got


@pytest.fixture(autouse=True, scope="module")
def _determinism_switches_stay_in_their_file():
    """Under pytest-xdist a worker runs many files in one process, in an order that changes
    from run to run: TensorFlow's op determinism or torch's deterministic algorithms turned
    on by one file (Keras then compiles no XLA step) must not reach the next."""
    before = _determinism_switches()
    yield
    after = _determinism_switches()
    if after["tf"] and not before["tf"]:
        from tensorflow.python.framework.config import disable_op_determinism  # not exported

        disable_op_determinism()
    if after["torch"] != before["torch"]:
        on, warn_only = before["torch"]  # type: ignore[misc]
        sys.modules["torch"].use_deterministic_algorithms(on, warn_only=warn_only)


def process_gone(pid: int, wait: float = 10.0) -> bool:
    """Whether process ``pid`` has gone (no such process, or a zombie awaiting its reaper)
    within ``wait`` seconds; polls, since a killed process can take a moment to die on a
    loaded machine."""
    deadline = time.monotonic() + wait
    while True:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return True
        if "State:\tZ" in status:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


def cli_in_process(capsys, *args: str) -> tuple[int, str]:
    """``fwd9m ARGS`` in this process, for errors raised before any run starts (no
    traceback allowed); returns (exit status, stderr). Restores the SIGTERM handler
    that ``fwd9m debug``/``check`` install."""
    import signal

    from fwd9m.cli import main

    handler = signal.getsignal(signal.SIGTERM)
    try:
        code = main(list(args))
    finally:
        signal.signal(signal.SIGTERM, handler)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


def run_fwd9m(*args: str, cwd=None, env=None, timeout: float = 600, input: str | None = None):
    """Run ``python -m fwd9m ARGS`` in a fresh interpreter; returns CompletedProcess."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "fwd9m", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        input=input,
    )


@pytest.fixture
def fwd9m_cli():
    return run_fwd9m


def pytest_configure(config):
    """Compile fwd9m to bytecode once, before any test starts a child: with
    PYTHONDONTWRITEBYTECODE set (as on the shared test machines) no process writes its
    ``__pycache__``, so each of the suite's ~1,700 runs compiled fwd9m's modules from
    source again: 0.09 CPU s per ``fwd9m._runtime.capture`` child of a plain script
    (0.25 -> 0.16) and 0.3 s per ``fwd9m check`` of one (0.9 -> 0.6). Python reads a
    valid ``.pyc`` whatever that variable says; the workers of pytest-xdist leave it to
    the process that started them."""
    if hasattr(config, "workerinput"):
        return
    import compileall

    import fwd9m

    compileall.compile_dir(Path(fwd9m.__file__).parent, quiet=2)


#: taken out of the environment at once, so that a pytest a test starts leaves no mark
_DONE_MARK = os.environ.pop("FWD9M_TEST_DONE", None)


def pytest_sessionfinish(session, exitstatus):
    """Leave a mark that the session ended through pytest (scripts/test checks it): a test
    that replaced the process (``fwd9m run`` execs the script) or called ``os._exit``
    ends the suite with the script's exit status, 0, and no test after it runs."""
    mark = _DONE_MARK
    if mark:
        with open(mark, "w") as f:
            f.write(f"{exitstatus}\n")


def debug_script(tmp_path, name: str, source: str) -> tuple[int, list[str]]:
    """Write ``source`` to ``tmp_path/name`` and run ``fwd9m debug`` on it there, as a user
    would (``PYTHONHASHSEED`` unset); returns the exit code and the report's lines."""
    (tmp_path / name).write_text(source)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    p = subprocess.run(
        [sys.executable, "-m", "fwd9m", "debug", "--no-hashseed-check", name],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return p.returncode, p.stdout.splitlines()


#: FWD9M_TEST_CPU=FILE appends one line per test to FILE: node id, wall seconds, and CPU
#: seconds (user + system) of pytest's process and of the children it waited for; CPU time
#: does not depend on the machine's load as wall time does (tests/cpu_report.py sums it)
_CPU_LOG = os.environ.get("FWD9M_TEST_CPU")


def _cpu_seconds() -> float:
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not _CPU_LOG:
        yield
        return
    wall, cpu = time.monotonic(), _cpu_seconds()
    yield
    wall, cpu = time.monotonic() - wall, _cpu_seconds() - cpu
    with open(_CPU_LOG, "a") as f:
        f.write(f"{item.nodeid}\t{wall:.2f}\t{cpu:.2f}\n")
