"""The op-level ring of fwd9m debug's digest runs (fwd9m._recording._ring): every op
recorded, a step's records held until the gate says the runs agree on it, the steps
not agreed written one trace each when the run ends or is stopped."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from fwd9m import _frameworks as registry
from fwd9m._recording._common import Recording, StepGate
from fwd9m._recording._ring import RingWriter, ring_path
from fwd9m.debug import TraceReader

torch = pytest.importorskip("torch")


def _train(out: str, gate: str | None, steps: int, budget: int = 1 << 20, agree: dict | None = None) -> RingWriter:
    torch.manual_seed(0)
    model, x = torch.nn.Linear(8, 4), torch.randn(16, 8)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    writer = RingWriter(out, {"frameworks": ["torch"], "level": "digests"}, gate, budget)
    rec = Recording(writer)
    recorder = registry.backend("torch").recorder(rec)
    recorder.start()
    try:
        for step in range(steps):
            if gate and agree and step in agree:
                StepGate.write(gate, agree[step])
            opt.zero_grad()
            model(x).sum().backward()
            opt.step()
    finally:
        recorder.stop()
    writer.dump({"completed": True, "steps": rec.step}, whole=True)  # as the run ends
    return writer


def _steps(out: str, n: int) -> list[int]:
    return [s for s in range(n + 1) if os.path.exists(ring_path(out, s))]


def test_steps_the_gate_agrees_on_are_dropped_and_the_rest_written_whole(tmp_path):
    out, gate = str(tmp_path / "ring.trace"), str(tmp_path / "gate")
    StepGate.write(gate, 0)
    _train(out, gate, 5, agree={3: 2})  # before step 3: steps 0 and 1 agree
    assert _steps(out, 5) == [2, 3, 4]
    reader = TraceReader(ring_path(out, 3))
    ops = list(reader)
    assert ops and {o.step for o in ops} == {3} and [o.seq for o in ops] == list(range(len(ops)))
    assert reader.end is not None and reader.end["ops"] == len(ops)
    # the same step recorded alone (a window of one step) has the same ops
    window = tmp_path / "window.trace"
    from fwd9m import debug

    torch.manual_seed(0)
    model, x = torch.nn.Linear(8, 4), torch.randn(16, 8)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with debug.record(window, framework="torch", steps=(3, 3)):
        for _ in range(5):
            opt.zero_grad()
            model(x).sum().backward()
            opt.step()
    assert debug.diff(ring_path(out, 3), window).reproducible
    assert [o.name for o in TraceReader(window)] == [o.name for o in ops]


def test_the_ring_drops_its_oldest_steps_beyond_its_budget(tmp_path):
    out = str(tmp_path / "ring.trace")
    _train(out, None, 6, budget=1)  # each completed step is over the budget at once
    assert _steps(out, 6) == [5]  # the current (last) step only


NOISY = """
import numpy as np, torch
torch.manual_seed(0)
model = torch.nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(16, 8)
for step in range(3):
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()
print(model(x).sum().item() + np.random.rand())  # printed output differs, no op does
"""


@pytest.mark.parametrize("ring", ["1", "0"])
def test_no_step_differs_the_whole_runs_come_from_the_rings_with_their_outputs(tmp_path, ring):
    """No step differs: the rings' whole traces are compared (nothing runs again), and the
    runs' printed output and files too, as for recorded whole runs: the same verdict."""
    (tmp_path / "noisy.py").write_text(NOISY)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FWD9M_")}
    env.update(PYTHONHASHSEED="0", FWD9M_DEBUG_RING_ON=ring)
    out = subprocess.run(
        [sys.executable, "-m", "fwd9m", "debug", "noisy.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 1, out.stdout + out.stderr
    assert "all 54 recorded ops agree, but the runs' outputs differ after them: their printed output" in out.stdout
    rings = "the whole runs, op by op, from the digest runs' rings" in out.stderr
    assert rings == (ring == "1") and ("recording the whole runs" in out.stderr) == (ring == "0"), out.stderr


def test_a_run_writes_at_most_max_step_files_the_oldest_first(tmp_path, monkeypatch):
    from fwd9m._recording import _ring

    monkeypatch.setattr(_ring, "MAX_STEP_FILES", 2)
    out = str(tmp_path / "ring.trace")
    _train(out, None, 5)
    assert _steps(out, 5) == [0, 1] and os.path.exists(out)  # and the whole run
    assert sum(1 for _ in TraceReader(out)) == sum(1 for s in range(6) for _ in _ring_ops(out, s))


def _ring_ops(out: str, step: int):
    return [o for o in TraceReader(out) if o.step == step]


def test_a_ring_over_its_budget_writes_no_whole_run(tmp_path):
    out = str(tmp_path / "ring.trace")
    _train(out, None, 3, budget=1)
    assert not os.path.exists(out)


_STOPPED_IN_A_COMPILED_STEP = """
import os, signal
from fwd9m._recording import _ring
_ring.start()
import torch

@torch.compile
def double(x):
    return x * 2

double(torch.ones(3))
os.kill(os.getpid(), signal.SIGTERM)  # as fwd9m debug stops a digest run at a differing step
"""


@pytest.mark.slow
def test_a_run_stopped_by_a_signal_keeps_its_notes_on_compiled_code(tmp_path):
    """A digest run stopped at the step that differs writes its ring without stopping its
    recorder: the notes the recorder would add when stopped (here: the compiled graphs'
    calls, each one op) are in the ring's end record all the same."""
    script, out = tmp_path / "train.py", str(tmp_path / "ring.trace")
    script.write_text(_STOPPED_IN_A_COMPILED_STEP)
    env = {**os.environ, "FWD9M_DEBUG_RING": out}
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 128 + 15, proc.stderr
    reader = TraceReader(ring_path(out, 0))
    list(reader)
    notes = reader.end.get("notes") or []
    assert any(n.startswith("torch.compile: 1 call(s) of Inductor-compiled graphs") for n in notes), (
        notes,
        proc.stderr,
    )
