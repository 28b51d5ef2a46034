"""``fwd9m debug`` ends with the runs' results too: when every recorded op agrees but
what the runs printed or wrote differs (NumPy noise added after the model), it is NOT
REPRODUCIBLE, exit 1, as ``fwd9m check`` says; and its report, redirected into the
script's own folder, is whole and the folder is left as it was."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

SCRIPT = """\
import numpy as np
import torch

torch.manual_seed(0)
model = torch.nn.Linear(4, 2)
with torch.no_grad():
    preds = model(torch.ones(3, 4)).numpy()
preds = preds + NOISE  # after the model, outside every recorded op
np.save("preds.npy", preds)
print("preds", preds.sum())
"""


def _debug(tmp_path, noise: str) -> tuple[int, str]:
    (tmp_path / "predict.py").write_text(SCRIPT.replace("NOISE", noise))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    with open(tmp_path / "report.txt", "w") as out:  # as in CI: the report into the script's folder
        p = subprocess.run(
            [sys.executable, "-m", "fwd9m", "debug", "--no-hashseed-check", "predict.py"],
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=600,
        )
    return p.returncode, (tmp_path / "report.txt").read_text()


def test_outputs_that_differ_after_the_last_recorded_op_are_not_reproducible(tmp_path):
    pytest.importorskip("torch")
    code, report = _debug(tmp_path, "np.random.normal(0, 0.01, preds.shape)")
    assert code == 1, report
    assert "NOT REPRODUCIBLE: all 8 recorded ops agree, but the runs' outputs differ after them" in report
    assert "their printed output" in report and "preds.npy" in report
    assert sorted(p.name for p in tmp_path.iterdir()) == ["predict.py", "report.txt"]


def test_outputs_that_agree_are_said_to_be_compared(tmp_path):
    pytest.importorskip("torch")
    code, report = _debug(tmp_path, "0.0")
    assert code == 0, report
    assert "reproducible: all 8 recorded ops agree" in report
    assert "compared too: their printed output and the files the runs wrote; they agree" in report
