"""``fwd9m check``'s early stop (:mod:`fwd9m.check._lockstep`): real scripts, real torch
(CPU), runs side by side; and the pieces it is made of (the stream follower, the
comparison that decides a stop, the doubt that sends runs back to one after the other)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fwd9m.errors import FileFormatError
from fwd9m.steps import StepRecord, StepWriter
from fwd9m.steps._follow import StepFollower

# a tiny training; DIVERGE_AT=k adds a value of os.urandom (no two runs share it) to one
# gradient at step k. The unseeded `random` draw makes the rng digests differ at every
# step though nothing the script computes depends on it: that must not stop a run.
TRAIN = """
import os, random, torch
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(16, 8), torch.randint(0, 2, (16,))
k = int(os.environ.get("DIVERGE_AT", "-1"))
for step in range(int(os.environ.get("STEPS", "300"))):
    random.random()
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    if step == k:
        model[2].bias.grad.add_(1e-9 + int.from_bytes(os.urandom(4), "little") * 1e-12)
    opt.step()
print("final loss", float(loss))
"""


def check(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith("FWD9M_")}
    full.update(env)
    return subprocess.run(
        [sys.executable, "-m", "fwd9m", "check", *args],
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def train(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("early")
    (d / "train.py").write_text(TRAIN)
    return d


CORES = len(os.sched_getaffinity(0))
#: the three orders of runs 1 and 2 (fwd9m.check._parallel): the default with torch's
#: threads set to the cores (two runs do not fit side by side: lock step); one after the
#: other and side by side, forced
ORDERS = {
    "in lock step": {"OMP_NUM_THREADS": str(CORES)},
    "one after the other": {"FWD9M_SIDE_BY_SIDE": "0"},
    "side by side": {"FWD9M_SIDE_BY_SIDE": "1"},
}


@pytest.mark.parametrize("order", list(ORDERS))
def test_divergence_at_step_150_of_300_is_diagnosed_there(train, order):
    pytest.importorskip("torch")
    out = check(train, "--format", "json", "train.py", DIVERGE_AT="150", **ORDERS[order])
    assert out.returncode == 1, out.stderr
    result = json.loads(out.stdout)
    (finding,) = result["findings"]
    assert finding["source"] == "step" and finding["summary"].startswith("training step 150:"), finding
    assert "grads: 2.bias" in finding["detail"] and "params: 2.bias" in finding["detail"]
    assert "pid" in finding["detail"]  # the process it happened in
    assert result["compared"] == {"training steps": 151}
    # the early stop says what was not compared; the note of a run that captured nothing does not apply
    assert not [n for n in result["notes"] if "no final state was captured" in n], result["notes"]
    run1, run2 = result["runs"]
    assert "stopped by the early stop at step 150" in run2["error"]
    if order == "one after the other":  # run 1 ran to its end, run 2 was compared with it as it went
        assert f"runs one after the other: {CORES} threads each on {CORES} core" in out.stderr, out.stderr
        assert "(FWD9M_SIDE_BY_SIDE=0)" in out.stderr, out.stderr
        assert "run 1 ended after 300 training step(s): run 2 starts" in out.stderr, out.stderr
        assert run1["returncode"] == 0 and "differ at step 150: run 2 stopped" in out.stderr
        assert any(
            n.startswith("early stop: run 2 ran after run 1 and was stopped at step 150") for n in result["notes"]
        )
        return
    if order == "in lock step":  # one step at a time each, in turn, once both compute steps
        assert f"runs in lock step: {CORES} threads each on {CORES} core" in out.stderr, out.stderr
        # run 1 goes ahead while run 2 starts up: with steps this small it may reach its end
        assert run1["returncode"] == 0 or "stopped by the early stop at step 150" in run1["error"], run1
        assert any(n.startswith("early stop: run 1 and run 2 ran in lock step") for n in result["notes"])
        return
    # run 2 starts once run 1 imports torch, so run 1 may have finished its 300 steps already
    assert run1["returncode"] == 0 or "stopped by the early stop at step 150" in run1["error"]
    assert "differ at step 150: both stopped" in out.stderr or "differ at step 150: run 2 stopped" in out.stderr
    assert "runs side by side: " in out.stderr and "(FWD9M_SIDE_BY_SIDE=1)" in out.stderr, out.stderr


def test_threads_that_fit_the_cores_run_side_by_side(train):
    """One thread each (OMP_NUM_THREADS=1, read as torch reads it) on 2 cores or more:
    runs 1 and 2 side by side, as before; the decision is said."""
    pytest.importorskip("torch")
    if CORES < 2:
        pytest.skip("one usable core: two runs never fit side by side")
    out = check(train, "train.py", DIVERGE_AT="5", STEPS="10", OMP_NUM_THREADS="1")
    assert out.returncode == 1, out.stdout + out.stderr
    assert f"runs side by side: 1 thread each on {CORES} cores" in out.stderr, out.stderr
    assert "starts beside it" in out.stderr


def test_runs_one_after_the_other_still_read_the_clock_in_other_seconds(tmp_path):
    """A run that ends within CLOCK_GAP_S after announcing torch (it only looks the
    module up): run 2 starts CLOCK_GAP_S after run 1 at least, so a seed read from the
    clock in seconds differs, as side by side."""
    from fwd9m.check._process import CLOCK_GAP_S

    (tmp_path / "clock.py").write_text(
        "import importlib.util, time\nprint(repr(time.time()))\nimportlib.util.find_spec('torch')\n"
    )
    out = check(tmp_path, "--keep", "--format", "json", "clock.py", FWD9M_SIDE_BY_SIDE="0")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "run 2 runs after it" in out.stderr or "run 2 starts, compared with run 1's steps" in out.stderr, out.stderr
    kept = Path(next(n for n in json.loads(out.stdout)["notes"] if n.startswith("run directories kept in")).split()[-1])
    t1, t2 = (float((kept / "side-by-side" / f"run{k}" / "stdout").read_text()) for k in (1, 2))
    assert t2 - t1 >= CLOCK_GAP_S and int(t2) != int(t1)


def test_runs_to_the_end_one_after_the_other_read_the_clock_in_other_seconds(tmp_path):
    """--no-early-stop: runs of well under a second that print the clock in seconds
    differ (each run starts CLOCK_GAP_S after the one before at least), never a false
    REPRODUCIBLE."""
    (tmp_path / "clock.py").write_text("import time\nprint(int(time.time()))\n")
    out = check(tmp_path, "--no-early-stop", "--no-hashseed-check", "--runs", "3", "clock.py")
    assert out.returncode == 1 and out.stdout.startswith("NOT REPRODUCIBLE"), out.stdout + out.stderr


@pytest.mark.parametrize(("overlap", "ring"), [("0", "0"), ("1", "0"), ("0", "1")])
def test_debug_records_only_the_diverging_step_150(train, overlap, ring):
    """fwd9m debug: the digest runs find step 150; the op-level runs record that step
    only and end after it; the first divergence is the value os.urandom added there.
    FWD9M_DEBUG_OVERLAP=1: the op-level runs start beside the digest runs and wait at
    each step for their verdict (automatic with 4 cores and no GPU). FWD9M_DEBUG_RING_ON
    unset (the default): the digest runs' rings hold step 150's ops, no op-level run."""
    pytest.importorskip("torch")
    full = {k: v for k, v in os.environ.items() if not k.startswith("FWD9M_")}
    order = "side by side" if overlap == "1" else "one after the other"  # each with each overlap, across the two
    full.update(DIVERGE_AT="150", PYTHONHASHSEED="0", FWD9M_DEBUG_OVERLAP=overlap, **ORDERS[order])
    if ring == "0":
        full["FWD9M_DEBUG_RING_ON"] = "0"
    out = subprocess.run(
        [sys.executable, "-m", "fwd9m", "debug", "--format", "json", "train.py"],
        cwd=train,
        env=full,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 1, out.stderr
    report = json.loads(out.stdout)
    assert report["first"]["step"] == 150 and report["kind"] == "external", report["first"]
    assert "train.py:15" in report["first"]["location"]  # the add_ of the os.urandom value
    assert report["notes"][0].startswith(
        f"early stop: step digests of two runs {order} first differ at optimizer step 150"
    )
    assert f"step digests first: two runs {order}" in out.stderr, out.stderr
    if ring == "1":
        assert "first difference at step 150; its ops, from the digest runs' rings" in out.stderr, out.stderr
        assert "recording run 1/2" not in out.stderr and "the digest runs recorded the ops" in report["notes"][0]
    else:
        assert "op-level runs of that step only" in out.stderr
    assert ("beside the digest runs, waiting for its step" in out.stderr) == (overlap == "1"), out.stderr


def test_debug_overlap_without_a_differing_step_records_the_whole_runs(train):
    """FWD9M_DEBUG_OVERLAP=1 and no step differs: the op-level runs started beside the
    digest runs are stopped and the whole runs recorded, as without the overlap."""
    pytest.importorskip("torch")
    full = {k: v for k, v in os.environ.items() if not k.startswith("FWD9M_")}
    full.update(STEPS="3", PYTHONHASHSEED="0", FWD9M_DEBUG_OVERLAP="1")
    out = subprocess.run(
        [sys.executable, "-m", "fwd9m", "debug", "train.py"],
        cwd=train,
        env=full,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0 and out.stdout.startswith("reproducible: all"), out.stdout + out.stderr
    assert "beside the digest runs" in out.stderr, out.stderr
    assert "the whole runs, op by op, from the digest runs' rings" in out.stderr, out.stderr  # none runs again


def test_step_gate_decides_the_window_as_the_digest_runs_go_on(tmp_path):
    """The op-level runs started beside the digest runs (fwd9m._recording._common.StepGate):
    a step below the agreed ones runs unrecorded at once, a later one waits for the
    verdict, and the first differing step becomes the window."""
    import threading

    from fwd9m._recording._common import StepGate

    path = str(tmp_path / "gate")
    StepGate.write(path, 3)
    gate = StepGate(path)
    assert gate.steps_at(0) == (3, 3) and gate.steps_at(2) == (3, 3)  # outside: no dispatch mode
    later = threading.Timer(0.05, StepGate.write, (path, 5, True))
    later.start()
    assert gate.steps_at(3) == (5, 5)  # waited until the digest runs differed at step 5
    assert gate.steps_at(5) == (5, 5) and gate.window == (5, 5)
    later.join()


def test_reproducible_training_stays_reproducible(train):
    """The rng digests differ at every step (an unseeded random.random()), the script's
    outputs do not: REPRODUCIBLE, with the whole comparison done."""
    pytest.importorskip("torch")
    out = check(train, "train.py", STEPS="20")
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith("REPRODUCIBLE") and "state tensors" in out.stdout


def test_a_script_without_steps_keeps_its_verdict(tmp_path):
    (tmp_path / "noise.py").write_text("import os\nprint(os.urandom(4).hex())\n")
    (tmp_path / "same.py").write_text("print('same')\n")
    for flags in ((), ("--no-early-stop",)):
        noise = check(tmp_path, *flags, "--format", "json", "noise.py")
        assert noise.returncode == 1, noise.stderr
        assert [f["source"] for f in json.loads(noise.stdout)["findings"]] == ["stdout"]
        same = check(tmp_path, *flags, "same.py")
        assert same.returncode == 0 and same.stdout.startswith("REPRODUCIBLE"), same.stdout
    assert "side by side" not in same.stderr  # the last check above: --no-early-stop, same.py


def _record(step: int, **digests: int) -> StepRecord:
    return StepRecord(step, {tuple(k.split("__")): ("float32[2]", v) for k, v in digests.items()})


class _Fake:
    """Two runs' streams as :func:`_first_divergence` sees them."""

    def __init__(self, records):
        self.records, self.off, self.pid, self.header = records, None, "1", {}


def test_only_result_tensors_stop_a_run():
    from fwd9m.check._lockstep import _first_divergence

    a = [_record(0, params__w=1, rng__python=5, batch__x=7), _record(1, params__w=2)]
    b = [_record(0, params__w=1, rng__python=6, batch__x=8), _record(1, params__w=3)]
    index, found = _first_divergence(_Fake(a[:1]), _Fake(b[:1]), 0, "t.py")
    assert found is None and index == 1  # rng and batch differ, the result does not
    index, found = _first_divergence(_Fake(a), _Fake(b[:1]), index, "t.py")
    assert found is None and index == 1  # run 1 is ahead: wait for run 2
    _, found = _first_divergence(_Fake(a), _Fake(b), index, "t.py")
    assert found.step == 1 and [d[:2] for d in found.differ] == [("params", "w")]
    # a step that differs only in its number, or a run with more steps, does not stop
    _, found = _first_divergence(_Fake([_record(0, params__w=1)]), _Fake([_record(7, params__w=1)]), 0, "t.py")
    assert found is None


def test_follower_reads_whole_records_as_they_come(tmp_path):
    path = tmp_path / "s.steps"
    w = StepWriter(path, {"program": {}, "environment": None})
    f = StepFollower(path)
    assert f.poll() == [] and f.header is not None
    w.step(0, [("params", "w", "float32[2]", 5)])
    raw = path.read_bytes()
    w.close()
    cut = tmp_path / "cut.steps"
    cut.write_bytes(raw[:-3])  # a record still being written: not yet, not damage
    g = StepFollower(cut)
    assert g.poll() == []
    with open(cut, "ab") as out:
        out.write(raw[-3:])
    assert [r.step for r in g.poll()] == [0]
    assert [r.step for r in f.poll()] == [0] and f.end == {"steps": 1}
    foreign = tmp_path / "foreign"
    foreign.write_bytes(b"PK\x03\x04 not a digest file at all")
    with pytest.raises(FileFormatError):
        StepFollower(foreign).poll()
    flipped = bytearray(raw)
    flipped[-6] ^= 1
    (tmp_path / "flipped").write_bytes(bytes(flipped))
    with pytest.raises(FileFormatError, match="checksum"):
        StepFollower(tmp_path / "flipped").poll()


def test_runs_side_by_side_are_doubted_when_they_could_meet(tmp_path):
    from fwd9m.check._lockstep import doubt
    from fwd9m.check._process import _Run
    from fwd9m.check._result import RunInfo

    def run(code, touched=()):
        r = _Run(RunInfo("run", ["x"], returncode=code), tmp_path, tmp_path, tmp_path / "o")
        r.touched = list(touched)
        return r

    assert doubt([run(0), run(0)], False) is None
    assert "ended differently" in doubt([run(0), run(1)], False)  # a crash in one run only
    assert doubt([run(0), run(None)], True) is None  # stopped at a divergence
    assert "your directory" in doubt([run(0), run(0, ["ckpt"])], True)


@pytest.mark.parametrize("damage", ["truncated", "foreign", "flipped"])
def test_damaged_digest_files_are_exit_2_for_every_reader(tmp_path, capsys, monkeypatch, damage):
    from conftest import cli_in_process

    monkeypatch.chdir(tmp_path)
    w = StepWriter(tmp_path / "good.steps", {"program": {}, "environment": None})
    for s in range(3):
        w.step(s, [("params", "w", "float32[2]", s)])
    w.close()
    raw = (tmp_path / "good.steps").read_bytes()
    bad = {"truncated": raw[:-7], "foreign": b"\x89HDF\r\n\x1a\n" + raw[8:], "flipped": raw[:20] + b"\xff" + raw[21:]}
    (tmp_path / "bad.steps").write_bytes(bad[damage])
    (tmp_path / "t.py").write_text("print('never run')\n")
    code, err = cli_in_process(capsys, "run", "--against", "bad.steps", "t.py")
    assert code == 2 and "bad.steps" in err and "never run" not in err, err
    code, err = cli_in_process(capsys, "debug", "diff", "good.steps", "bad.steps")
    assert code == 2 and "bad.steps" in err, err


# a custom loop with fwd9m.debug.step_digest and no file of its own: NumPy only (cheap)
LOOP = """
import os
import numpy as np
import fwd9m.debug
w = np.zeros(4)
for i in range(10):
    w = w + 1.0
    if i == int(os.environ.get("AT", "-1")):
        w[0] += 1e-9 + int.from_bytes(os.urandom(4), "little") * 1e-12
    fwd9m.debug.step_digest(i, params={"w": w})
print(w.sum())
"""


def test_step_digest_loop_stops_at_its_step_and_every_run_records(tmp_path):
    """Regression: only runs 1 and 2 had somewhere to write steps, so run 3 of a script
    calling step_digest() without a path stopped with an error: a false NOT REPRODUCIBLE."""
    (tmp_path / "loop.py").write_text(LOOP)
    out = check(tmp_path, "--format", "json", "--runs", "3", "loop.py")
    assert out.returncode == 0, out.stdout + out.stderr
    assert [r["returncode"] for r in json.loads(out.stdout)["runs"]] == [0, 0, 0]
    out = check(tmp_path, "--format", "json", "loop.py", AT="3")
    assert out.returncode == 1, out.stderr
    (finding,) = json.loads(out.stdout)["findings"]
    assert finding["summary"].startswith("training step 3:") and "params: w" in finding["detail"]


def test_the_stream_says_who_recorded_its_steps(tmp_path):
    """fwd9m debug narrows to an optimizer step only for streams of the automatic hook
    (one record per optimizer.step()); a callback's step may hold several."""
    from fwd9m.steps import StepReader, StepSession

    for claim, source in ((None, "auto"), ("lightning", "lightning")):
        session = StepSession(str(tmp_path / f"{source}.steps"), quiet=True)
        if claim:
            session.claim(claim)
        session.record([("params", "w", "float32[1]", 1)], source=claim or "auto")
        session.finish()
        assert StepReader(tmp_path / f"{source}.steps").header["source"] == source


def test_steps_of_a_process_the_script_starts_are_not_compared(tmp_path):
    """Regression: the only stream of each run came from a child process (which child
    pairs with which is unknown); compared, its random digests made a false NOT
    REPRODUCIBLE of a script whose output is the same."""
    child = (
        "import os, numpy as np, fwd9m.debug; "
        "fwd9m.debug.step_digest(0, params={'w': np.frombuffer(os.urandom(8), dtype=np.uint8)})"
    )
    (tmp_path / "parent.py").write_text(
        f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {child!r}], check=True)\nprint('done')\n"
    )
    out = check(tmp_path, "parent.py")
    assert out.returncode == 0 and out.stdout.startswith("REPRODUCIBLE"), out.stdout + out.stderr


def test_debug_reports_digest_runs_that_end_differently(tmp_path):
    """fwd9m debug: digest runs that differ in no step but end with different exit
    statuses are reported as they are (the statuses, each run's stderr), without
    recording the whole runs op by op. The run that creates the flag file first exits
    0, the other prints to stderr and exits 3."""
    pytest.importorskip("torch")
    flag = tmp_path / "flag"  # outside the script's folder: not a file of the user's directory
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "ends.py").write_text(
        "import os, sys, torch\n"
        "try:\n"
        f"    os.close(os.open({str(flag)!r}, os.O_CREAT | os.O_EXCL | os.O_WRONLY))\n"
        "except FileExistsError:\n"
        "    print('second run: giving up', file=sys.stderr)\n"
        "    sys.exit(3)\n"
    )
    full = {k: v for k, v in os.environ.items() if not k.startswith("FWD9M_")}
    out = subprocess.run(
        [sys.executable, "-m", "fwd9m", "debug", "--format", "json", "ends.py"],
        cwd=tmp_path / "work",
        env={**full, "PYTHONHASHSEED": "0"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 1, out.stderr
    report = json.loads(out.stdout)
    assert report["kind"] == "exit" and not report["reproducible"] and report["first"] is None, report
    statuses = sorted(["exited with status 0", "exited with status 3"])
    assert all(s in report["notes"][0] for s in statuses), report["notes"]
    assert any("the end of its stderr: second run: giving up" in n for n in report["notes"]), report["notes"]
    assert "recording the whole runs" not in out.stderr and "recording run" not in out.stderr, out.stderr
    assert "| second run: giving up" in out.stderr


def test_the_clock_gap_after_a_run_parts_every_read_of_it_or_follows_a_long_run_at_once():
    import time

    from fwd9m.check._process import CLOCK_GAP_S, clock_gap

    now = time.monotonic()
    assert CLOCK_GAP_S - 0.1 <= clock_gap(now, 0.5) <= CLOCK_GAP_S  # a short run: CLOCK_GAP_S after its end
    assert clock_gap(now - CLOCK_GAP_S, 0.5) == 0.0  # as long ago already
    assert clock_gap(now, 2 * CLOCK_GAP_S) == 0.0  # a long run: its start is far enough back
