"""The proof of a culprit, made cheaply (issue 33): the early stop's op-level run 1 keeps
the whole call of every op of its one step (within a budget), so that the culprit is
replayed from it without a targeted run; where it kept none, the targeted run replays
the op itself, once the script has ended, instead of two fresh processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fwd9m import debug
from fwd9m._recording._capture import ENV_KEEP_CALLS, capture_path

torch = pytest.importorskip("torch")

DATA = Path(__file__).parent / "data" / "debug"
TWO_CORES = pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="a parallel CPU kernel needs 2 cores")


def _debug(tmp_path, *args: str, **extra: str):
    env = {k: v for k, v in os.environ.items() if not k.startswith("FWD9M_")}
    env.update(extra)
    return subprocess.run(
        [sys.executable, "-m", "fwd9m", "-v", "debug", "--no-hashseed-check", "--format", "json", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _train(model, x, steps: int) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()


def test_a_one_step_window_keeps_every_call_while_its_budget_lasts(tmp_path, monkeypatch):
    """Under ENV_KEEP_CALLS a recording of one step writes each op's whole call beside the
    trace, until the budget of bytes is spent; outside the window nothing is kept."""
    torch.manual_seed(0)
    model, x = torch.nn.Linear(64, 64), torch.randn(32, 64)
    monkeypatch.setenv(ENV_KEEP_CALLS, str(1 << 30))
    path = tmp_path / "all.trace"
    with debug.record(path, framework="torch", steps=(1, 1)):
        _train(model, x, 3)
    ops = list(debug.TraceReader(path))
    assert ops and all(os.path.exists(capture_path(str(path), o.seq)) for o in ops if not o.name.startswith("<"))
    monkeypatch.setenv(ENV_KEEP_CALLS, "1")  # spent by the first call: the ops after it are not kept
    path = tmp_path / "one.trace"
    with debug.record(path, framework="torch", steps=(1, 1)):
        _train(model, x, 3)
    assert len(list(tmp_path.glob("one.trace.op*.npz"))) == 1
    monkeypatch.delenv(ENV_KEEP_CALLS)
    path = tmp_path / "none.trace"
    with debug.record(path, framework="torch", steps=(1, 1)):
        _train(model, x, 3)
    assert not list(tmp_path.glob("none.trace.op*.npz"))


@TWO_CORES
def test_the_culprit_of_the_early_stop_is_replayed_from_the_inputs_run_1_kept(tmp_path):
    """fwd9m debug (the early stop, its op-level runs: FWD9M_DEBUG_RING_ON=0): no targeted
    run; the replays in one fresh process, confirmed, and the switch fixes it; the cost
    of the replay said in -v."""
    for _ in range(3):  # the race may (rarely) produce two identical runs
        p = _debug(tmp_path, str(DATA / "torch_index_put.py"), FWD9M_DEBUG_RING_ON="0")
        if p.returncode != 0:
            break
    assert p.returncode == 1, p.stderr
    first = json.loads(p.stdout)["first"]
    assert first["kind"] == "culprit" and first["op"] == "aten::index_put_", first
    proof = first["explanation"]["replay"]
    assert proof["status"] == "nondeterministic" and proof["distinct"] > 1, proof
    assert "the switch fixes it" in proof["switch"]
    assert "(from the inputs run 1 kept)" in p.stderr and "replay: no targeted run" in p.stderr, p.stderr
    assert "third, targeted run" not in p.stderr


@TWO_CORES
@pytest.mark.parametrize("early", ["ring", "no-early-stop"])
def test_the_targeted_run_replays_the_op_itself(tmp_path, early):
    """The step from the digest runs' rings (the default), or --no-early-stop: no run kept
    the inputs; the targeted run captures the culprit and replays it in its own process
    once the script ended; the verdict is the same."""
    for _ in range(3):
        args = ["--no-early-stop"] if early == "no-early-stop" else []
        p = _debug(tmp_path, *args, str(DATA / "torch_index_put.py"))
        if p.returncode != 0:
            break
    assert p.returncode == 1, p.stderr
    first = json.loads(p.stdout)["first"]
    proof = first["explanation"]["replay"]
    assert first["op"] == "aten::index_put_" and proof["status"] == "nondeterministic", proof
    assert "the switch fixes it" in proof["switch"]
    assert "third, targeted run" in p.stderr and "of which its replays of the op alone" in p.stderr, p.stderr
