"""Memory written outside every op (issue 27, case 2): a tensor whose memory NumPy shares
(``torch.from_numpy``, ``Tensor.numpy()``) can change without torch's version counter
moving, so ``fwd9m debug`` digests it again at each use: a replay buffer refilled in place
is a value entering from outside (EXTERNAL), never a deterministic op blamed. A culprit
whose replay alone does not vary is "unconfirmed", never "please report it"."""

from __future__ import annotations

import pytest
from conftest import debug_script as _debug

from fwd9m.torch._foreign import MAX_SPANS, ForeignMemory

REPLAY_BUFFER = """\
import numpy as np
import torch

torch.manual_seed(0)
obs = np.zeros((8, 3), dtype=np.float32)
replay = torch.from_numpy(obs)  # a replay buffer over NumPy memory
model = torch.nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    obs[:] = np.random.rand(8, 3)  # refilled in place, unseeded
    batch = replay + 0.0
    loss = model(batch).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(loss.item())
"""

NUMPY_VIEW = """\
import numpy as np
import torch

torch.manual_seed(0)
buf = torch.zeros(4, 3)
print(buf.sum().item())
buf.numpy()[:] = np.random.rand(4, 3)  # written through a NumPy view, unseeded
y = buf + 1.0
print(y.sum().item())
"""

# a write no patch can see (memory copied in by address): the op is blamed by its digests,
# and its replay alone shows it is not at fault
BEHIND_TORCH = """\
import ctypes

import numpy as np
import torch

torch.manual_seed(0)
buf = torch.zeros(4, 3)
print(buf.sum().item())
src = np.random.rand(4, 3).astype(np.float32)  # unseeded
ctypes.memmove(buf.data_ptr(), src.ctypes.data, src.nbytes)
y = buf + 1.0
print(y.sum().item())
"""


def test_a_replay_buffer_refilled_in_place_through_numpy_is_external(tmp_path):
    pytest.importorskip("torch")
    code, lines = _debug(tmp_path, "rl.py", REPLAY_BUFFER)
    report = "\n".join(lines)
    assert code == 1, report
    assert lines[0].startswith("EXTERNAL SOURCE (data): first divergence at op #"), report
    assert lines[2] == "  op:       aten::add", report
    assert lines[4] == "  location: rl.py:11", report
    assert "not produced by any recorded op" in lines[5], report
    assert "fwd9m.seed_everything(0)" in report and "please report" not in report
    assert "CULPRIT" not in report and "replay of op" not in report


def test_a_tensor_written_through_its_numpy_view_is_external(tmp_path):
    pytest.importorskip("torch")
    code, lines = _debug(tmp_path, "view.py", NUMPY_VIEW)
    report = "\n".join(lines)
    assert code == 1, report
    assert lines[0].startswith("EXTERNAL SOURCE (python): first divergence at op #"), report
    assert lines[2] == "  op:       aten::add", report
    assert lines[4] == "  location: view.py:8", report
    assert "view.py:4 FWD101" in report and "fwd9m.seed_everything(0)" in report


def test_a_culprit_its_replay_does_not_confirm_is_unconfirmed(tmp_path):
    pytest.importorskip("torch")
    code, lines = _debug(tmp_path, "poke.py", BEHIND_TORCH)
    report = "\n".join(lines)
    assert code == 1, report
    assert lines[0].startswith("CULPRIT OP (unconfirmed): first divergence at op #"), report
    assert lines[1].startswith("  unconfirmed: aten::add gave different outputs from inputs recorded as identical")
    assert lines[2] == "  op:       aten::add", report
    assert lines[4] == "  location: poke.py:11", report
    assert "not reproduced in isolation" in report and "deterministic too" in report
    assert "please report" not in report and "the op is nondeterministic" not in report
    assert "the switch fixes it" not in report and "enable_determinism" not in report


def test_foreign_spans_merge_and_cover_overlaps():
    m = ForeignMemory()
    assert not m and not m.covers(100, 8)
    m.add(100, 50)  # [100, 150)
    m.add(200, 10)  # [200, 210)
    assert m.covers(100, 1) and m.covers(149, 1) and not m.covers(150, 50) and m.covers(90, 11)
    assert m.covers(140, 100) and not m.covers(0, 100) and not m.covers(210, 4)
    m.add(150, 50)  # joins both: [100, 210)
    assert m._starts == [100] and m._ends == [210]
    for i in range(MAX_SPANS + 1):
        m.add(1000 + 2 * i, 1)
    assert m.everywhere and m.covers(0, 1)


def test_the_patches_record_shared_memory_and_are_removed(tmp_path):
    torch = pytest.importorskip("torch")
    np = pytest.importorskip("numpy")
    m = ForeignMemory()
    before = (torch.from_numpy, torch.as_tensor, "numpy" in torch.Tensor.__dict__)
    m.start(torch, lambda: False)
    try:
        a = np.zeros(16, np.float32)
        t = torch.from_numpy(a)
        assert m.covers(t.data_ptr(), 64)
        listed = torch.as_tensor([1.0, 2.0])  # a copy of a list: not shared
        assert not m.covers(listed.data_ptr(), 8)
        own = torch.ones(4)
        np.asarray(own)  # Tensor.__array__ -> Tensor.numpy: a view NumPy can write
        assert m.covers(own.data_ptr(), 16)
    finally:
        m.stop()
    assert (torch.from_numpy, torch.as_tensor, "numpy" in torch.Tensor.__dict__) == before
