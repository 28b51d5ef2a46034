"""fwd9m check --resume end to end on a JAX/optax loop checkpointed with orbax-checkpoint:
the jitted step is found by its trace (it calls optax.apply_updates), with no change to
the script; interrupted for real (SIGTERM) and resumed in a fresh interpreter."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("jax")
pytest.importorskip("optax")
pytest.importorskip("orbax.checkpoint")

HERE = Path(__file__).parent / "resume"
pytestmark = pytest.mark.slow


def _check(tmp_path: Path, script: str, *options: str):
    user = tmp_path / "user"
    user.mkdir(exist_ok=True)
    shutil.copy(HERE / script, user / script)
    return subprocess.run(
        [sys.executable, "-m", "fwd9m", "check", "-q", "--resume", *options, "--resume-args=--resume", script],
        cwd=user,
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ),
    )


def _explain(proc) -> str:
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr[-3000:]}"


def test_jax_loop_saving_the_dropout_key_resumes_exactly(tmp_path):
    """Params, opt_state, step and the key in the orbax checkpoint (every 3 steps);
    interrupted after step 4, resumed from step 3."""
    proc = _check(tmp_path, "jax_optax_ok.py", "--interrupt-after", "4")
    assert proc.returncode == 0, _explain(proc)
    assert proc.stdout.startswith("RESUMES EXACTLY"), _explain(proc)
    assert "resumed from step 3" in proc.stdout.splitlines()[0], _explain(proc)
    assert "only run C (resumed) bound, in its resume branch: restored, target" in proc.stdout, _explain(proc)
    assert sorted(p.name for p in (tmp_path / "user").iterdir()) == ["jax_optax_ok.py"]


def test_jax_loop_not_saving_the_dropout_key_names_the_key_and_the_step(tmp_path):
    """The default interruption (after the first checkpoint: the orbax step folder 3)."""
    proc = _check(tmp_path, "jax_optax_broken.py")
    assert proc.returncode == 1, _explain(proc)
    first = proc.stdout.splitlines()[0]
    assert first.startswith("RESUME NOT EXACT") and "resumed from step 3" in first, _explain(proc)
    assert "after its first checkpoint" in first, _explain(proc)
    assert first.endswith(
        "lost at the resume point: JAX step argument key (compared 4 stdout lines, 3 files, 23 state tensors)."
    ), _explain(proc)
    assert "Lost at the resume point (run A before step 4 vs run C just after loading" in proc.stdout
    assert "jax.random.key_data(key)" in proc.stdout, _explain(proc)
