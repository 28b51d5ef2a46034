"""fwd9m check --resume end to end: real training scripts, written as their users write
them, interrupted for real (SIGTERM, SIGKILL) and resumed in a fresh interpreter.

Each run imports torch and starts DataLoader workers, so each check takes a while on a
loaded machine: the scripts are small, and the cases few."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")  # every script here but the Keras ones

HERE = Path(__file__).parent / "resume"
pytestmark = pytest.mark.slow


def _check(tmp_path: Path, script: str, *options: str, env: dict[str, str] | None = None):
    """``fwd9m check --resume OPTIONS SCRIPT`` in ``tmp_path/user``, the user's folder."""
    user = tmp_path / "user"
    user.mkdir(exist_ok=True)
    shutil.copy(HERE / script, user / script)
    return subprocess.run(
        [sys.executable, "-m", "fwd9m", "check", "-q", "--resume", *options, script],
        cwd=user,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )


def _explain(proc) -> str:
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr[-3000:]}"


def test_torch_loop_with_rng_state_and_resumable_sampler_resumes_exactly(tmp_path):
    """Model, optimizer, ResumableSampler and fwd9m.rng.state_dict() in the checkpoint:
    interrupted mid-epoch (step 4 of 8, num_workers=2), resumed from step 3."""
    proc = _check(tmp_path, "torch_loop_ok.py", "--interrupt-after", "4", "--resume-args=--resume")
    assert proc.returncode == 0, _explain(proc)
    assert proc.stdout.startswith("RESUMES EXACTLY"), _explain(proc)
    assert "resumed from step 3" in proc.stdout, _explain(proc)
    assert sorted(p.name for p in (tmp_path / "user").iterdir()) == ["torch_loop_ok.py"]  # the user's folder left alone


def test_torch_loop_saving_model_and_optimizer_only_names_the_torch_generator(tmp_path):
    proc = _check(tmp_path, "torch_loop_broken.py", "--interrupt-after", "4", "--resume-args=--resume")
    assert proc.returncode == 1, _explain(proc)
    first = proc.stdout.splitlines()[0]
    assert first.startswith("RESUME NOT EXACT") and "resumed from step 3" in first, _explain(proc)
    assert "lost at the resume point: RNG torch" in first, _explain(proc)  # python, numpy: unseeded, unused
    assert "Lost at the resume point (run A before step 4 vs run C just after loading" in proc.stdout
    assert "fwd9m.rng.state_dict()" in proc.stdout and "ResumableSampler" in proc.stdout


def test_sigkill_between_two_checkpoints_replays_from_the_last_one(tmp_path):
    """Checkpoints at steps 3 and 6; SIGKILL after step 5: C replays steps 4 and 5."""
    proc = _check(tmp_path, "torch_loop_ok.py", "--interrupt-after", "5", "--signal", "KILL", "--resume-args=--resume")
    assert proc.returncode == 0, _explain(proc)
    assert "resumed from step 3" in proc.stdout and "SIGKILL" in proc.stdout, _explain(proc)


def test_a_resume_that_starts_from_scratch_is_reported_as_such(tmp_path):
    """Without --resume the script ignores its checkpoint: the result is the same as run A,
    but nothing was resumed."""
    proc = _check(tmp_path, "torch_loop_ok.py", "--interrupt-after", "4")
    assert proc.returncode == 1, _explain(proc)
    assert proc.stdout.startswith("RESUME STARTED FROM SCRATCH"), _explain(proc)
    assert "--resume-args" in proc.stdout


def test_a_script_that_never_checkpoints_gets_no_verdict(tmp_path):
    proc = _check(tmp_path, "never_checkpoints.py", "--interrupt-after", "3")
    assert proc.returncode == 2, _explain(proc)
    assert "wrote no file before it was interrupted at step 3" in proc.stderr, _explain(proc)
    proc = _check(tmp_path, "never_checkpoints.py")  # the default: wait for a checkpoint
    assert proc.returncode == 2, _explain(proc)
    assert "before it could be interrupted after its first checkpoint" in proc.stderr, _explain(proc)


def test_a_script_that_ignores_sigterm_is_killed_and_gets_no_verdict(tmp_path):
    pids = tmp_path / "pids"
    proc = _check(tmp_path, "ignores_sigterm.py", "--interrupt-after", "2", "--grace", "1", env={"PID_FILE": str(pids)})
    assert proc.returncode == 2, _explain(proc)
    assert "did not exit within 1 s of SIGTERM" in proc.stderr and "nothing is left running" in proc.stderr
    for pid in map(int, pids.read_text().split()):
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_a_failing_resume_command_gets_no_verdict(tmp_path):
    proc = _check(tmp_path, "torch_loop_ok.py", "--interrupt-after", "4", "--resume-args=--no-such-option")
    assert proc.returncode == 2, _explain(proc)
    assert "the resume command failed" in proc.stderr and "unrecognized arguments" in proc.stderr, _explain(proc)


@pytest.mark.parametrize(
    "script, where, resumed",
    [("keras_fit_ok.py", "epoch:1", "step 4"), ("keras_fit_broken.py", "6", "step 4")],
    ids=["keras_fit_ok.py-epoch-end", "keras_fit_broken.py-mid-epoch"],
)
def test_keras_fit_with_backup_and_restore(tmp_path, script, where, resumed):
    """4 batches an epoch; BackupAndRestore saves at each epoch end, so a stop in epoch 2
    (after batch 6) and one at the end of epoch 1 both resume after step 4. Without
    RngStateCheckpoint the dropout layer's SeedGenerator starts over. Two of the four
    pairs: where the stop falls does not change the verdict, which compares the same final
    states from the same checkpoint (the ok script stopped mid-epoch and the broken one
    at an epoch end would prove nothing more; a replay after the last checkpoint that still
    resumes exactly: test_sigkill_between_two_checkpoints_replays_from_the_last_one)."""
    pytest.importorskip("keras")
    proc = _check(tmp_path, script, "--interrupt-after", where, env={"KERAS_BACKEND": "tensorflow"})
    first = proc.stdout.splitlines()[0] if proc.stdout else ""
    assert f"resumed from {resumed}" in first, _explain(proc)
    if script == "keras_fit_ok.py":
        assert proc.returncode == 0 and first.startswith("RESUMES EXACTLY"), _explain(proc)
    else:
        assert proc.returncode == 1 and "lost at the resume point: keras seed generators" in first, _explain(proc)
        assert "RngStateCheckpoint" in proc.stdout


# lightning_ok.py resumes exactly, from step 4: test_lightning_and_hf_trainer_interrupted_at_an_epoch_end
# (interrupted at the same checkpoint, named by its epoch instead of waited for)
@pytest.mark.parametrize("script", ["lightning_broken.py"])
def test_lightning_fit_ckpt_path_last(tmp_path, script):
    """ModelCheckpoint(save_last=True) at each epoch end (4 steps); interrupted at the first
    step after the first checkpoint appeared (Lightning's own SIGTERM handler ends the fit).
    Lightning's checkpoint holds no RNG state: the shuffle and dropout generator is lost
    unless a callback saves fwd9m.rng.state_dict() in it."""
    pytest.importorskip("pytorch_lightning")
    proc = _check(tmp_path, script)
    first = proc.stdout.splitlines()[0] if proc.stdout else ""
    assert "resumed from step 4" in first and "after its first checkpoint" in first, _explain(proc)
    if script == "lightning_ok.py":
        assert proc.returncode == 0 and first.startswith("RESUMES EXACTLY"), _explain(proc)
    else:
        assert proc.returncode == 1 and "lost at the resume point: RNG torch" in first, _explain(proc)
        assert "on_save_checkpoint" in proc.stdout, _explain(proc)


# hf_trainer_ok.py resumes exactly, from step 6: test_lightning_and_hf_trainer_interrupted_at_an_epoch_end
# (interrupted at the same checkpoint, named by its epoch instead of waited for; waiting for
# the first checkpoint: test_lightning_fit_ckpt_path_last)
@pytest.mark.parametrize("script", ["hf_trainer_broken.py"])
def test_hf_trainer_resume_from_checkpoint(tmp_path, script):
    """6 steps an epoch. ok: checkpoints at epoch ends, interrupted at the first step after
    the first one, resumed from step 6; Trainer restores the global generator its collator
    uses. broken: checkpoints every 4 steps, interrupted after step 6 (mid-epoch), resumed
    from step 4; the collator's own NumPy generator is not checkpointed."""
    pytest.importorskip("transformers")
    ok = script == "hf_trainer_ok.py"
    proc = _check(tmp_path, script, *(() if ok else ("--interrupt-after", "6")), "--resume-args=--resume")
    first = proc.stdout.splitlines()[0] if proc.stdout else ""
    assert f"resumed from step {6 if ok else 4}" in first, _explain(proc)
    if ok:
        assert proc.returncode == 0 and first.startswith("RESUMES EXACTLY"), _explain(proc)
    else:
        assert proc.returncode == 1, _explain(proc)
        assert "lost at the resume point: generator collate_fn.data_collator.rng" in first, _explain(proc)


def test_lightning_and_hf_trainer_interrupted_at_an_epoch_end(tmp_path):
    """--interrupt-after epoch:1 for the trainers whose epoch ends fwd9m sees through a
    callback: Lightning (4 steps an epoch) and the HF Trainer (6 steps an epoch); each is
    interrupted once its first epoch's checkpoint is written, and resumes after it."""
    pytest.importorskip("pytorch_lightning")
    pytest.importorskip("transformers")
    proc = _check(tmp_path, "lightning_ok.py", "--interrupt-after", "epoch:1")
    first = proc.stdout.splitlines()[0] if proc.stdout else ""
    assert proc.returncode == 0 and first.startswith("RESUMES EXACTLY"), _explain(proc)
    assert "resumed from step 4" in first and "at the end of epoch 1" in first, _explain(proc)
    proc = _check(tmp_path, "hf_trainer_ok.py", "--interrupt-after", "epoch:1", "--resume-args=--resume")
    first = proc.stdout.splitlines()[0] if proc.stdout else ""
    assert proc.returncode == 0 and first.startswith("RESUMES EXACTLY"), _explain(proc)
    assert "resumed from step 6" in first and "at the end of epoch 1" in first, _explain(proc)
