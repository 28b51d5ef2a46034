"""Resume examples: a run stopped after epoch 2 and resumed in a new process from its
checkpoint ends with bitwise the same weights as a run that was never interrupted."""

from __future__ import annotations

import numpy as np
import pytest
from _examples_spec import EXAMPLES, explain, ids, python, require_fwd9m, require_modules

RESUMABLE = [e for e in EXAMPLES if e.resume]


def _load(path):
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


@pytest.mark.parametrize("example", RESUMABLE, ids=ids(RESUMABLE))
def test_resumed_run_equals_uninterrupted_bitwise(example, tmp_path):
    require_modules(example)
    require_fwd9m(*example.fixed_needs)
    script = str(example.script("fixed"))
    ckpt = str(tmp_path / ("ckpt.pt" if "torch" in example.modules else "ckpt"))

    whole = python(script, "--epochs", "4", "--out", str(tmp_path / "whole.npz"))
    assert whole.returncode == 0, explain(whole)
    first = python(script, "--epochs", "4", "--checkpoint", ckpt, "--stop-after", "2")
    assert first.returncode == 0, explain(first)
    assert not (tmp_path / "resumed.npz").exists()
    second = python(script, "--epochs", "4", "--checkpoint", ckpt, "--out", str(tmp_path / "resumed.npz"))
    assert second.returncode == 0, explain(second)
    assert "resumed from" in second.stdout, explain(second)

    a, b = _load(tmp_path / "whole.npz"), _load(tmp_path / "resumed.npz")
    assert a.keys() == b.keys() and a
    differing = [k for k in a if a[k].dtype != b[k].dtype or a[k].tobytes() != b[k].tobytes()]
    assert not differing, f"resumed run differs from the uninterrupted one in {differing}"
