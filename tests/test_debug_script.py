"""``fwd9m.debug.debug_script`` and ``DebugOptions``: what ``fwd9m debug SCRIPT`` does, from
Python (the command's own tests are in test_debug_cli.py)."""

from __future__ import annotations

import dataclasses
import os

import pytest

from fwd9m.debug import DebugOptions, Report, debug_script, record_script
from fwd9m.errors import ConfigurationError


@pytest.mark.parametrize(
    "field, value, listed",
    [
        ("level", "ops", "modules, sequence, digests, full"),
        ("cwd", "tmp", "isolate, link, empty"),
        ("frameworks", ("pytorch",), "tensorflow, keras, torch, jax"),  # the registry's order
    ],
)
def test_an_invalid_option_lists_the_valid_values(field, value, listed):
    with pytest.raises(ConfigurationError, match=f"invalid {field.rstrip('s')} .*valid values are: {listed}"):
        DebugOptions(**{field: value})


def test_options_are_validated_once_and_frozen():
    o = DebugOptions(steps="3:5", frameworks="torch")
    assert o.steps == (3, 5) and o.frameworks == ("torch",)
    assert DebugOptions(steps=(2, 2)).steps == (2, 2) and DebugOptions().steps is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.level = "full"  # type: ignore[misc]
    for bad, message in (
        ({"steps": "5:3"}, "0 <= A <= B"),
        ({"steps": (4, 1)}, "0 <= A <= B"),
        ({"steps": ""}, "--steps is empty"),
        ({"timeout": 0}, "positive number"),
        ({"timeout": float("nan")}, "positive number"),
        ({"capture": ",,"}, "selects no op"),
    ):
        with pytest.raises(ConfigurationError, match=message):
            DebugOptions(**bad)


def test_bad_targets_and_outputs_are_refused_before_any_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "plain.py").write_text("print(1)\n")
    with pytest.raises(ConfigurationError, match="imports neither torch nor tensorflow/keras nor jax"):
        debug_script("plain.py")
    with pytest.raises(ConfigurationError, match="--keep names a folder"):
        debug_script("plain.py", options=DebugOptions(keep="plain.py"))
    with pytest.raises(ConfigurationError, match="is a directory"):
        record_script("plain.py", [], str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == ["plain.py"]


def test_debug_script_returns_the_report_of_two_fresh_runs(tmp_path, monkeypatch):
    """Two runs of an unseeded torch script differ at the first draw; the traces are
    deleted before it returns and the report names them by file name only."""
    pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "unseeded.py").write_text("import torch\nx = torch.randn(4)\nprint((x * 2).sum().item())\n")
    said: list[str] = []
    report = debug_script("unseeded.py", [], DebugOptions(hashseed_check=False, timeout=300), progress=said.append)
    assert isinstance(report, Report) and not report.reproducible, report.render()
    assert report.kind == "external" and report.first is not None and report.first.source == "rng", report.render()
    assert report.a == "run1.trace" and "--keep DIR keeps the traces" in report.render()
    # no optimizer step: the whole runs, from the digest runs' rings (or recorded, where a ring lost a step)
    whole = any("from the digest runs' rings" in m for m in said) or any(
        m.startswith("recording run 1/2") for m in said
    )
    assert whole and "comparing" in said, said
    assert sorted(os.listdir(tmp_path)) == ["unseeded.py"]  # the runs' folders and traces are gone


_LOADER_WORKERS = """import torch
from torch.utils.data import DataLoader, Dataset


class Squares(Dataset):  # ops in the DataLoader workers: more than one trace frame
    def __len__(self):
        return 64

    def __getitem__(self, i):
        x = torch.full((8,), float(i))
        for _ in range(60):
            x = x * 0.5 + 1.0
        return x, torch.tensor(i % 2)


torch.manual_seed(0)
model = torch.nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(Squares(), batch_size=16, shuffle=True, num_workers=2, generator=torch.Generator().manual_seed(1))
for xb, yb in loader:
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(xb), yb).backward()
    opt.step()
"""


def test_dataloader_workers_do_not_write_into_the_trace(tmp_path, monkeypatch):
    """Forked DataLoader workers inherited the recorder and wrote their ops into the
    parent's trace, interleaved in a different order each run: a reproducible training
    was reported as an EXTERNAL SOURCE at the dataset's torch.full."""
    pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(_LOADER_WORKERS)
    report = debug_script("train.py", [], DebugOptions(hashseed_check=False, timeout=300))
    assert report.reproducible, report.render()
    assert report.ops_a < 400, report.ops_a  # the parent's ops only (the workers ran ~8000)
