"""A held-out style sweep (issue 27): 20 scripts across PyTorch, TensorFlow/Keras and JAX
(``tests/debug_harmless/``) whose first differing value is harmless (an initial weight
overwritten, a draw never used, a value only printed, dropout in eval mode) and a later
one matters. Each is recorded twice in one process (an unseeded generator draws other
numbers the second time) and compared: the report's divergence must be the one marked
``# MATTERS`` in the script, and the harmless ones, listed after it, include the line
marked ``# HARMLESS``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent / "debug_harmless"
SCRIPTS = sorted(p.name for p in HERE.glob("t*.py"))
FRAMEWORK = {"tf": "tensorflow", "keras": "tensorflow", "jax": "jax"}

#: records the script twice and prints what the comparison found, as JSON
RUNNER = """\
import json, runpy, sys
import fwd9m.debug as dbg

script, framework = sys.argv[1:3]
__import__(framework)
for path in ("a.trace", "b.trace"):
    if framework == "tensorflow":  # Keras names layers dense, dense_1, ...: the second run as the first
        import tensorflow as tf

        tf.keras.backend.clear_session()
    with dbg.record(path, framework=framework):
        runpy.run_path(script, run_name="__main__")
r = dbg.diff("a.trace", "b.trace")
f = r.first
print(json.dumps({"kind": r.kind, "source": f and f.source, "op": f and f.op, "location": f and f.location,
                  "harmless": r.harmless, "text": r.render()}))
"""


def _line(source: str, mark: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if mark in line)


def _framework(name: str) -> str:
    return FRAMEWORK.get(name.split("_")[1], "torch")


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("name", SCRIPTS)
def test_the_consequential_divergence_comes_first(tmp_path, name):
    pytest.importorskip(_framework(name))
    source = (HERE / name).read_text()
    (tmp_path / name).write_text(source)
    p = subprocess.run(
        [sys.executable, "-c", RUNNER, name, _framework(name)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.splitlines()[-1])
    report = got["text"]
    assert got["kind"] == "external", report
    assert got["location"] == f"{name}:{_line(source, '# MATTERS')}", report
    harmless = {h["location"] for h in got["harmless"]}
    assert f"{name}:{_line(source, '# HARMLESS')}" in harmless, report
    assert "first divergence that reaches the results" in report.splitlines()[0], report
