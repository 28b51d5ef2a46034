"""``fwd9m check``'s runs 1 and 2 in lock step (:mod:`fwd9m.check._gate`), with real
PyTorch and JAX: one run computes a training step at a time, both stop at the first step
that differs, and a run that crashes, hangs or is interrupted leaves no run waiting, no
process behind and the user's folder as it was."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fwd9m.check._gate import Gates
from fwd9m.steps._gate import DONE, GO

# each step's compute (forward and backward, before opt.step(), where the run waits for
# its turn) is logged to $LOG/<pid> as "step start end" (CLOCK_MONOTONIC: not the clock
# fwd9m moves in each run); at step $DIVERGE_AT a gradient gets an os.urandom value; at
# step $TROUBLE_AT the first run there (an O_EXCL marker) exits 3 ($TROUBLE=crash) or
# hangs ($TROUBLE=hang)
TRAIN = """
import os, sys, time, torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(64, 64), torch.randint(0, 2, (64,))
log = open(os.path.join(os.environ["LOG"], str(os.getpid())), "a")
now = lambda: time.clock_gettime(time.CLOCK_MONOTONIC)
for step in range(int(os.environ.get("STEPS", "60"))):
    t = now()
    if step == int(os.environ.get("TROUBLE_AT", "-1")):
        try:
            os.close(os.open(os.path.join(os.environ["LOG"], "trouble"), os.O_CREAT | os.O_EXCL))
            if os.environ["TROUBLE"] == "crash":
                sys.exit(3)
            time.sleep(1000)
        except FileExistsError:
            pass
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    if step == int(os.environ.get("DIVERGE_AT", "-1")):
        model[2].bias.grad.add_(1e-9 + int.from_bytes(os.urandom(4), "little") * 1e-12)
    print(step, t, now(), file=log, flush=True)
    opt.step()
print("done")
"""


def _sigint_default() -> None:
    """In the child: Ctrl-C's default action (a background job of a non-interactive shell
    starts with SIGINT ignored, and so would fwd9m: the SIGINT test would hang)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def check(cwd: Path, *args: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith("FWD9M_")}
    full.update(env)
    return subprocess.run(
        [sys.executable, "-m", "fwd9m", "check", *args],
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _logs(folder: Path) -> list[list[tuple[int, float, float]]]:
    """Each run's steps, in the order the runs started."""
    runs = []
    for p in folder.iterdir():
        if p.name.isdigit():
            runs.append([(int(a), float(b), float(c)) for a, b, c in (ln.split() for ln in p.read_text().splitlines())])
    return sorted(runs, key=lambda r: r[0][1] if r else 0.0)


@pytest.fixture
def project(tmp_path) -> tuple[Path, Path]:
    pytest.importorskip("torch")
    proj, log = tmp_path / "proj", tmp_path / "log"
    proj.mkdir()
    log.mkdir()
    (proj / "train.py").write_text(TRAIN)
    return proj, log


def test_one_run_computes_a_step_at_a_time_and_both_stop_at_the_step_that_differs(project):
    proj, log = project
    out = check(proj, "--format", "json", "train.py", LOG=str(log), DIVERGE_AT="40", FWD9M_SIDE_BY_SIDE="step")
    assert out.returncode == 1, out.stderr
    assert "runs in lock step: " in out.stderr and "(FWD9M_SIDE_BY_SIDE=step)" in out.stderr, out.stderr
    # run 1 goes ahead while run 2 starts up: on a quick machine it may end its 60 steps
    # first, and the line then says that only run 2 was stopped
    stopped = "differ at step 40: both stopped" in out.stderr
    ahead = "differ at step 40: run 2 stopped" in out.stderr and "run 1: exit 0" in out.stderr
    assert stopped or ahead, out.stderr
    result = json.loads(out.stdout)
    assert result["compared"] == {"training steps": 41}
    assert any(n.startswith("early stop: run 1 and run 2 ran in lock step") for n in result["notes"])
    one, two = _logs(log)
    if stopped:  # run 2 stopped there, not a step later (alone, it runs free until killed)
        assert max(s for s, _, _ in two) == 40
    # once run 2 computed its first step, no step of one run overlaps a step of the other
    # (run 1 may go ahead while run 2 starts up: its start-up overlaps run 1's first steps)
    for s, a, b in two[1:]:
        clash = [(r, c, d) for r, c, d in one if c < b and a < d]
        assert not clash, (s, a, b, clash)


def test_a_run_that_crashes_leaves_the_other_running_to_its_end(project):
    proj, log = project
    t0 = time.monotonic()
    out = check(proj, "train.py", LOG=str(log), TROUBLE_AT="20", TROUBLE="crash", FWD9M_SIDE_BY_SIDE="step")
    assert "exit 3" in out.stderr, out.stderr
    assert time.monotonic() - t0 < 240
    logs = _logs(log)
    assert any(len(r) == 60 for r in logs), [len(r) for r in logs]  # the other ran all its steps


def test_a_run_that_hangs_times_out_alone_and_the_other_goes_on(project):
    """The waiting run's timeout counts only the time it computed: it is not killed
    while its partner hangs."""
    proj, log = project
    out = check(
        proj, "--timeout", "20", "train.py", LOG=str(log), TROUBLE_AT="10", TROUBLE="hang", FWD9M_SIDE_BY_SIDE="step"
    )
    assert "timed out" in out.stderr, out.stderr
    first = _logs(log)[:2]
    assert sorted(len(r) for r in first) == [10, 60], [len(r) for r in first]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_an_interrupted_lock_step_leaves_nothing_running_and_the_folder_as_it_was(project, sig):
    proj, log = project
    (proj / "data.txt").write_text("mine\n")
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in proj.iterdir()}
    env = {k: v for k, v in os.environ.items() if not k.startswith("FWD9M_")}
    env.update(LOG=str(log), STEPS="100000", FWD9M_SIDE_BY_SIDE="step")
    p = subprocess.Popen(
        [sys.executable, "-m", "fwd9m", "check", "train.py"],
        cwd=proj,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=_sigint_default,  # as from a terminal, also when pytest runs as a background job
    )
    t0 = time.monotonic()
    while len([r for r in _logs(log) if len(r) > 5]) < 2:  # both runs in their steps
        assert p.poll() is None and time.monotonic() - t0 < 120
        time.sleep(0.1)
    pids = [int(f.name) for f in log.iterdir() if f.name.isdigit()]
    os.kill(p.pid, sig)
    assert p.wait(timeout=60) != 0
    for pid in pids:
        t0 = time.monotonic()
        while Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1][:3]:
            assert time.monotonic() - t0 < 15, f"run process {pid} still running"
            time.sleep(0.05)
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in proj.iterdir()} == before


JAX_LOOP = """
import os, jax, jax.numpy as jnp, numpy as np, optax
seed = int(np.random.default_rng().integers(1 << 16)) if os.environ.get("UNSEEDED") == "1" else 0
params = {"w": jax.random.normal(jax.random.key(seed), (8, 4))}
x, y = jnp.linspace(0, 1, 128).reshape(16, 8), jnp.ones((16, 4))
opt = optax.sgd(0.01)
state = opt.init(params)
step = jax.jit(lambda p, s: (lambda g: (lambda u, s: (optax.apply_updates(p, u), s))(*opt.update(g, s, p)))(
    jax.grad(lambda p: jnp.mean((x @ p["w"] - y) ** 2))(p)))
for i in range(40):
    params, state = step(params, state)
print([repr(float(v)) for v in params["w"].ravel()[:4]])
"""


@pytest.mark.parametrize("unseeded", [False, True])
def test_a_jax_loop_in_lock_step(tmp_path, unseeded):
    pytest.importorskip("jax")
    pytest.importorskip("optax")
    (tmp_path / "loop.py").write_text(JAX_LOOP)
    env = {"FWD9M_SIDE_BY_SIDE": "step", **({"UNSEEDED": "1"} if unseeded else {})}
    out = check(tmp_path, "--format", "json", "loop.py", **env)
    assert "runs in lock step: " in out.stderr, out.stderr
    result = json.loads(out.stdout)
    if unseeded:
        assert out.returncode == 1 and result["compared"] == {"training steps": 1}, out.stderr
        # run 1 goes ahead while run 2 starts up: a short loop may end before run 2's step 0,
        # and the line then says that only run 2 was stopped
        stopped = "differ at step 0: both stopped" in out.stderr
        ahead = "differ at step 0: run 2 stopped" in out.stderr and "run 1: exit 0" in out.stderr
        assert stopped or ahead, out.stderr
    else:
        assert out.returncode == 0, out.stderr


def test_the_turn_goes_to_the_run_behind_and_a_run_alone_runs_free(tmp_path):
    """:meth:`Gates.turn` on real pipes, the child's side played by this process."""
    folders = [tmp_path / "a", tmp_path / "b"]
    gates = Gates()
    ends = []
    for k, f in enumerate(folders):
        f.mkdir()
        assert gates.env(k, f) == {"FWD9M_STEPS_GATE": "1"}
        gates.started(k, f, 100 + k)
        ends.append(
            (os.open(f / f"{GO}{100 + k}", os.O_RDONLY | os.O_NONBLOCK), os.open(f / f"{DONE}{100 + k}", os.O_WRONLY))
        )

    def said(k: int) -> None:
        os.write(ends[k][1], b"s")
        gates.wait(1.0)

    def heard(k: int) -> bytes:
        try:
            return os.read(ends[k][0], 1)
        except BlockingIOError:
            return b"-"

    said(0)
    gates.turn([1, 0], [True, None])  # run 2 not started: run 1 waits
    assert heard(0) == b"-"
    gates.turn([1, 0], [True, True])  # run 2 starting up: run 1 goes ahead
    assert heard(0) == b"g"
    said(0)
    said(1)
    gates.turn([2, 1], [True, True])  # run 2 is behind: its turn
    assert (heard(0), heard(1)) == (b"-", b"g")
    said(1)
    gates.turn([2, 2], [True, True])  # level: run 1
    assert (heard(0), heard(1)) == (b"g", b"-")
    said(0)
    gates.turn([3, 2], [True, False])  # run 2 ended: run 1 runs free (the end of its pipe)
    assert gates.free == [True, True] and heard(0) == b""
    assert gates.waited(1) > 0
    gates.close()
