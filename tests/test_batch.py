"""Batch invariance (``fwd9m check|debug --vary batch``, :mod:`fwd9m.batch`) on real
models on this CPU: a PyTorch MLP and a small transformer block vary with the batch
size (MKL's matmul takes another path for a few rows: PyTorch 2.13 here), a model
padded to one shape or run one row at a time does not."""

from __future__ import annotations

import json
import textwrap

import pytest
from conftest import cli_in_process, run_fwd9m

torch = pytest.importorskip("torch")

MLP = """
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
x = torch.randn(64, 512)
with torch.no_grad():
    print(model(x).sum().item())
"""

BLOCK = """
import torch
import torch.nn.functional as F


class Block(torch.nn.Module):
    def __init__(self, d=256, heads=4):
        super().__init__()
        self.heads = heads
        self.norm1 = torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        self.norm2 = torch.nn.LayerNorm(d)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.norm2(x))


torch.manual_seed(0)
model = Block()
x = torch.randn(32, 2, 256)
with torch.no_grad():
    print(model(x).sum().item())
"""

PADDED = """
import torch


class Padded(torch.nn.Module):
    '''Every batch padded to 64 rows: one shape, so one reduction order for every row.'''

    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))

    def forward(self, x):
        pad = x.new_zeros(64 - x.shape[0], x.shape[1])
        return self.net(torch.cat([x, pad]))[: x.shape[0]]


torch.manual_seed(0)
model = Padded()
x = torch.randn(16, 512)
with torch.no_grad():
    print(model(x).sum().item())
"""


def _script(tmp_path, name: str, source: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return name


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))


def test_linear_rows_depend_on_the_batch_here():
    """The fact the other tests rest on: nn.Linear(512, 512) on this CPU gives other bits
    for row 0 in a batch of 1, 2 or 3 rows than in one of 64."""
    torch.manual_seed(0)
    lin, x = torch.nn.Linear(512, 512), torch.randn(64, 512)
    with torch.no_grad():
        ref = lin(x)
        assert not any(torch.equal(lin(x[:b])[0], ref[0]) for b in (1, 2, 3))
        assert torch.equal(lin(x[:8])[0], ref[0])


def test_check_invariance_api_names_the_sizes():
    from fwd9m.batch import check_invariance

    res = check_invariance(_mlp(), torch.randn(64, 512))
    assert not res and not res.invariant
    assert {1, 2, 3} <= set(res.varying_sizes())
    assert all(d.max_ulp and d.max_ulp > 0 for d in res.differences)
    text = res.report()
    assert text.startswith("VARIES WITH THE BATCH") and "first 1 rows" in text and "Compared:" in text
    assert json.loads(res.to_json())["invariant"] is False


def test_rows_one_at_a_time_are_invariant():
    from fwd9m.batch import check_invariance

    model = _mlp()

    def one_by_one(x):
        return torch.cat([model(x[i : i + 1]) for i in range(x.shape[0])])

    res = check_invariance(one_by_one, torch.randn(8, 512), model=model)
    assert res and res.report().startswith("BATCH INVARIANT: 8 sample(s)")


def test_debug_invariance_api_names_the_matmul_with_a_replay():
    from fwd9m.batch import debug_invariance

    res = debug_invariance(_mlp(), torch.randn(64, 512))
    assert not res
    assert res.culprit["op"] == "aten::addmm.default" and res.culprit["module"] == "0 (Linear)"
    assert res.replay["stable"] and res.replay["differ"]
    assert any(f["id"] == "torch.batch.matmul" for f in res.fixes)


def test_check_vary_batch_cli_mlp(tmp_path):
    _script(tmp_path, "mlp.py", MLP)
    done = run_fwd9m("check", "-q", "--vary", "batch", "mlp.py", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "VARIES WITH THE BATCH" in done.stdout and "in batches of 1, 2, 3" in done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlp.py"]  # nothing written in the user's folder


def test_check_vary_batch_cli_padded_model_is_invariant(tmp_path):
    _script(tmp_path, "padded.py", PADDED)
    done = run_fwd9m("check", "-q", "--vary", "batch", "--format", "json", "padded.py", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    out = json.loads(done.stdout)
    assert out["invariant"] and out["samples"] == 16 and out["differences"] == []


def test_check_and_debug_vary_batch_cli_transformer_block(tmp_path):
    _script(tmp_path, "block.py", BLOCK)
    done = run_fwd9m("check", "-q", "--vary", "batch", "block.py", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "VARIES WITH THE BATCH" in done.stdout
    done = run_fwd9m("debug", "--vary", "batch", "block.py", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    out = done.stdout
    assert "aten::addmm.default" in out and "module:   qkv (Linear)" in out and "location: block.py:18" in out
    assert "the same bits every time at each shape" in out and ": proven" in out
    assert "torch.batch.matmul" in out


def test_vary_batch_bad_input_exits_2(tmp_path, capsys):
    _script(tmp_path, "nomodel.py", "print(1)\n")
    done = run_fwd9m("check", "-q", "--vary", "batch", "nomodel.py", cwd=tmp_path)
    assert done.returncode == 2 and "ended without a call" in done.stderr
    code, err = cli_in_process(capsys, "check", "--vary", "batch=0,2", str(tmp_path / "nomodel.py"))
    assert code == 2 and "positive integers" in err
    code, err = cli_in_process(capsys, "debug", "--vary", "threads=1", str(tmp_path / "nomodel.py"))
    assert code == 2 and "--vary takes batch" in err


def test_keras_model_predict_varies(tmp_path):
    pytest.importorskip("keras")
    pytest.importorskip("tensorflow")
    _script(
        tmp_path,
        "kmlp.py",
        """
        import os

        os.environ.setdefault("KERAS_BACKEND", "tensorflow")
        import keras
        import numpy as np

        keras.utils.set_random_seed(0)
        layers = [keras.Input((512,)), keras.layers.Dense(512, activation="relu"), keras.layers.Dense(10)]
        model = keras.Sequential(layers)
        x = np.random.RandomState(0).randn(64, 512).astype("float32")
        print(model.predict(x, verbose=0).sum())
        """,
    )
    done = run_fwd9m("check", "-q", "--vary", "batch", "kmlp.py", cwd=tmp_path, env={"KERAS_BACKEND": "tensorflow"})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "model: Sequential" in done.stdout and "first 1 rows" in done.stdout


def test_jax_entry_varies(tmp_path):
    pytest.importorskip("jax")
    _script(
        tmp_path,
        "jmlp.py",
        """
        import jax
        import jax.numpy as jnp


        def apply(params, x):
            return jnp.tanh(x @ params["w"]) @ params["w"]


        params = {"w": jax.random.normal(jax.random.PRNGKey(0), (512, 512))}
        x = jax.random.normal(jax.random.PRNGKey(1), (64, 512))
        print(apply(params, x).sum())
        """,
    )
    done = run_fwd9m("check", "-q", "--vary", "batch", "--entry", "apply", "--format", "json", "jmlp.py", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    out = json.loads(done.stdout)
    assert out["model"] == "apply" and 2 in {d["batch"] for d in out["differences"]}


def test_batch_catalog_entries_are_complete_and_probed():
    from fwd9m.batch._probe import FRAMEWORKS
    from fwd9m.catalog._batch import REQUIRED, batch_entries
    from fwd9m.torch._batch import probe_ops

    entries = batch_entries()
    assert len({e["id"] for e in entries}) == len(entries) >= 6
    assert {e["framework"] for e in entries} == set(FRAMEWORKS)
    assert all(all(k in e for k in REQUIRED) and e["measured"] for e in entries)
    assert {e["probe"] for e in batch_entries("torch")} <= set(probe_ops())


def test_probe_batch_invariance_torch():
    done = run_fwd9m("probe", "--batch-invariance", "-f", "torch", "--format", "json")
    assert done.returncode == 0, done.stderr
    rows = {r["op"]: r for r in json.loads(done.stdout)}
    assert {1, 2, 3} <= set(rows["matmul"]["varies_at"]) and rows["matmul"]["entry"] == "torch.batch.matmul"
    assert rows["sum"]["varies_at"] == []  # a row sum is batch invariant on this CPU


def test_readme_batch_sample_is_real_output():
    """The README's sample of ``fwd9m debug --vary batch`` is what it prints on the example."""
    import re
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    readme = (repo / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Same bits whatever the batch?") :]
    sample = re.search(r"```text\n(.*?)```", section, re.S).group(1)
    done = run_fwd9m("debug", "--vary", "batch", "examples/batch_invariance/varies.py", cwd=repo)
    assert done.returncode == 1, done.stderr
    for line in sample.splitlines():
        assert line in done.stdout, line
    done = run_fwd9m("check", "-q", "--vary", "batch", "examples/batch_invariance/padded.py", cwd=repo)
    assert done.returncode == 0 and done.stdout.startswith("BATCH INVARIANT"), done.stdout + done.stderr


SLOW = """
import time

import torch


@torch.library.custom_op("fwd9mtest::slow_sum", mutates_args=())
def slow_sum(x: torch.Tensor) -> torch.Tensor:
    if torch.are_deterministic_algorithms_enabled():
        time.sleep(0.05)  # deliberately slower under the determinism switch (1.5 s in all:
        # 10 ms, 0.3 s in all, was outranked by aten::mm's noise on a loaded machine)
    return x.sum(0)


torch.manual_seed(0)
w = torch.randn(256, 256)
for _ in range(30):
    y = slow_sum(torch.relu(torch.randn(64, 256) @ w))
print(y.sum().item())
"""


@pytest.mark.serial
def test_check_cost_names_the_deliberately_slowed_op(tmp_path):
    """An op made 50 ms slower under enable_determinism is the main contributor, measured
    in one fwd9m check --cost (runs off and on alternately)."""
    _script(tmp_path, "slow.py", SLOW)
    done = run_fwd9m("check", "-q", "--cost", "--cost-pairs", "1", "--format", "json", "slow.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["contributors"][0][0] == "fwd9mtest::slow_sum" and out["contributors"][0][1] > 0.2
    assert len(out["ratios"]) == 1 and out["ratios"][0] > 0


DROPOUT = """
import torch
import torch.nn.functional as F


def forward(x):
    return F.dropout(x, 0.5, training=True)  # unseeded, in training mode: other bits each run


print(forward(torch.randn(8, 16)).sum().item())
"""


def test_run_to_run_nondeterminism_is_not_a_batch_effect(tmp_path):
    """Dropout in training mode gives other bits for the same batch twice: the verdict is
    'nondeterministic', batch invariance undecided, never 'varies with the batch'."""
    import torch.nn.functional as F

    from fwd9m.batch import check_invariance

    res = check_invariance(lambda x: F.dropout(x, 0.5, training=True), torch.randn(8, 16))
    assert not res and res.nondeterministic and res.differences
    assert {d.variant for d in res.differences} == {"the reference again"}
    text = res.report()
    assert text.startswith("NONDETERMINISTIC FROM RUN TO RUN") and "batch invariance undecided" in text
    assert "VARIES" not in text and json.loads(res.to_json())["invariant"] is None
    _script(tmp_path, "drop.py", DROPOUT)
    done = run_fwd9m("check", "-q", "--vary", "batch", "--entry", "forward", "drop.py", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert done.stdout.startswith("NONDETERMINISTIC FROM RUN TO RUN") and "VARIES" not in done.stdout


TRANSFORM = """
import torch


class Normalize(torch.nn.Module):
    '''A transform without parameters, as torchvision's: called on one image at a time.'''

    def forward(self, img):
        return (img - img.mean()) / (img.std() + 1e-6)


class Images(torch.utils.data.Dataset):
    def __init__(self):
        self.images, self.norm = torch.randn(16, 3, 8, 8), Normalize()

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return self.norm(self.images[i])


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(192, 10)

    def forward(self, x):
        return self.fc(x.flatten(1))


torch.manual_seed(0)
data = Images()
print(data.norm(data.images[0]).mean().item())  # the transform in the main process, on one image
loader = torch.utils.data.DataLoader(data, batch_size=16, num_workers=0)
model = Net()
with torch.no_grad():
    for x in loader:
        print(model(x).sum().item())
"""


def test_vary_batch_captures_the_model_not_a_data_transform(tmp_path):
    """A parameter-free module normalising images (in the main process, and in a Dataset
    run by a DataLoader) is called before the model: the model is the one checked."""
    _script(tmp_path, "transform.py", TRANSFORM)
    done = run_fwd9m("check", "-q", "--vary", "batch", "--format", "json", "transform.py", cwd=tmp_path)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    out = json.loads(done.stdout)
    assert out["model"] == "Net" and out["samples"] == 16


FAILS_UNDER_SWITCH = """
import sys

import torch

x = torch.randn(8, 8)
print((x @ x).sum().item())
if torch.are_deterministic_algorithms_enabled():
    sys.exit(1)  # fails only with the determinism switch on
sys.exit()  # None: a success
"""


def test_check_cost_does_not_time_a_failed_run(tmp_path):
    """A run that exits 1 under enable_determinism is an error (exit 2) naming the run and
    its status, never a ratio."""
    _script(tmp_path, "fails.py", FAILS_UNDER_SWITCH)
    done = run_fwd9m("check", "-q", "--cost", "--cost-pairs", "1", "fails.py", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "determinism on (pair 1/1)" in done.stderr and "exit status 1" in done.stderr
    assert "COST OF DETERMINISM" not in done.stdout


def test_op_names_come_from_public_torch_api():
    """The op timer of --cost and the recorder of debug --vary batch name ops through
    OpOverload's public API (namespace, __name__, overloadpacket), not ``_schema``."""
    import ast
    from pathlib import Path

    import fwd9m.torch
    from fwd9m.torch._batch import OpRecorder
    from fwd9m.torch._cost import OpTimer

    for name in ("_batch.py", "_cost.py"):
        tree = ast.parse((Path(fwd9m.torch.__file__).parent / name).read_text())
        private = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)} & {"_schema", "_overloadname"}
        assert not private, (name, private)
    timer = OpTimer()
    timer.start()
    torch.ones(2) + torch.ones(2)
    assert "aten::add" in timer.stop()
    lin = torch.nn.Linear(4, 4)
    with torch.no_grad(), OpRecorder(lin) as rec:
        lin(torch.ones(2, 4))
    assert "aten::addmm.default" in [op["op"] for op in rec.ops]
