"""Step digest files: format, reader errors, comparison, the batched digests (real
NumPy and torch, CPU)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from fwd9m.errors import ConfigurationError, FileFormatError
from fwd9m.steps import (
    StepReader,
    StepWriter,
    diff_steps,
    is_step_digest_file,
    step_digest,
)
from fwd9m.steps._format import MAGIC


def _write(path, steps, header=None, close=True, change=None):
    w = StepWriter(path, header or {"program": {"argv": ["t.py"]}, "environment": None})
    for s in range(steps):
        entries = [("params", "w", "float32[2]", 10 + s), ("loss", "loss", "float32[]", 20 + s)]
        if change is not None and s == change:
            entries[0] = ("params", "w", "float32[2]", 999)
        w.step(s, entries)
    if close:
        w.close()
    return path


def test_round_trip(tmp_path):
    p = _write(tmp_path / "a.steps", 3)
    assert is_step_digest_file(p)
    r = StepReader(p)
    recs = list(r)
    assert [x.step for x in recs] == [0, 1, 2]
    assert recs[1].digests[("params", "w")] == ("float32[2]", 11)
    assert r.complete and r.end["steps"] == 3
    assert r.header["program"] == {"argv": ["t.py"]}


def test_no_end_record_is_read_and_said(tmp_path):
    p = _write(tmp_path / "a.steps", 2, close=False)
    r = StepReader(p)
    assert len(list(r)) == 2 and not r.complete
    rep = diff_steps(p, p)
    assert rep.reproducible and any("no end record" in n for n in rep.notes)


@pytest.mark.parametrize("cut", [3, 11, 14, 40, -1, -5, -13])
def test_truncated_is_file_format_error(tmp_path, cut):
    """Cut anywhere inside a frame: FileFormatError, at open or while reading."""
    data = _write(tmp_path / "a.steps", 3).read_bytes()
    bad = tmp_path / "cut.steps"
    bad.write_bytes(data[:cut] if cut > 0 else data[: len(data) + cut])
    with pytest.raises(FileFormatError):
        list(StepReader(bad))


def test_flipped_bit_and_foreign_and_version(tmp_path):
    data = bytearray(_write(tmp_path / "a.steps", 3).read_bytes())
    data[-8] ^= 1  # inside the end record's JSON
    (tmp_path / "flip.steps").write_bytes(bytes(data))
    with pytest.raises(FileFormatError, match="checksum"):
        list(StepReader(tmp_path / "flip.steps"))
    (tmp_path / "foreign.steps").write_bytes(b"PK\x03\x04" + b"\0" * 100)
    with pytest.raises(FileFormatError, match="not a fwd9m step digest file"):
        StepReader(tmp_path / "foreign.steps")
    (tmp_path / "v9.steps").write_bytes(MAGIC + b"\x09\x00\x00\x00")
    with pytest.raises(FileFormatError, match="version 9"):
        StepReader(tmp_path / "v9.steps")
    with pytest.raises(FileFormatError, match="not found"):
        StepReader(tmp_path / "missing.steps")
    with pytest.raises(FileFormatError, match="directory"):
        StepReader(tmp_path)


def test_a_pipe_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.steps"
    os.mkfifo(fifo)
    with pytest.raises(FileFormatError, match="named pipe"):
        StepReader(fifo)
    assert not is_step_digest_file(fifo)


def test_well_checksummed_garbage_is_file_format_error(tmp_path):
    """A frame whose checksum is right but whose record does not parse (another
    program, or an edit): a clear error, not a crash."""
    import struct
    import zlib

    p = _write(tmp_path / "a.steps", 1, close=False)
    payload = b"D" + struct.pack("<qI", 1, 5) + b"\0" * 3  # declares 5 digests, holds 3 bytes
    with open(p, "ab") as f:
        f.write(struct.pack("<I", len(payload)) + payload + struct.pack("<I", zlib.crc32(payload)))
    with pytest.raises(FileFormatError, match="declares 5 digests"):
        list(StepReader(p))


def test_writer_never_overwrites_another_file(tmp_path):
    user = tmp_path / "model.pt"
    user.write_bytes(b"weights")
    with pytest.raises(ConfigurationError, match="does not overwrite"):
        StepWriter(user, {})
    assert user.read_bytes() == b"weights"
    p = _write(tmp_path / "a.steps", 1)
    _write(p, 2)  # a digest file may be replaced
    assert len(list(StepReader(p))) == 2


def test_diff_steps_first_difference_and_lengths(tmp_path):
    a = _write(tmp_path / "a.steps", 5)
    b = _write(tmp_path / "b.steps", 5, change=3)
    rep = diff_steps(a, b)
    assert not rep.reproducible and rep.first.step_b == 3 and rep.first.names() == ["params/w"]
    assert rep.exit_code == 1 and "first difference at step 3 (steps 0..2 agree)" in rep.render()
    short = _write(tmp_path / "c.steps", 2)
    rep = diff_steps(a, short)
    assert rep.first is None and not rep.reproducible and "has 5 steps" in rep.render()
    assert diff_steps(a, a).reproducible


def test_report_escapes_control_characters(tmp_path):
    w = StepWriter(tmp_path / "a.steps", {})
    w.step(0, [("params", "evil\x1b[31m", "float32[1]", 1)])
    w.close()
    w = StepWriter(tmp_path / "b.steps", {})
    w.step(0, [("params", "evil\x1b[31m", "float32[1]", 2)])
    w.close()
    text = diff_steps(tmp_path / "a.steps", tmp_path / "b.steps").render()
    assert "\x1b" not in text and "\\x1b" in text


def test_batched_digests_equal_fingerprint(monkeypatch):
    torch = pytest.importorskip("torch")
    from fwd9m.steps import _values
    from fwd9m.torch._digest import digest as torch_digest

    g = torch.Generator().manual_seed(0)
    ts = [
        torch.randn(5, generator=g),
        torch.zeros(0),
        torch.randn(3, 7, generator=g).t(),
        torch.arange(3, dtype=torch.uint8),
        torch.tensor(True),
        torch.randn(1024, generator=g),
        torch.randn(3 * 1024, generator=g),
        torch.randn(5000, generator=g),  # several rows, a tail
        torch.randn(70 * 1024 + 3, generator=g).to(torch.float16),
        torch.randn(7, generator=g).to(torch.bfloat16),
        torch.tensor(7, dtype=torch.int64),
        torch.randn(4, generator=g, requires_grad=True),
    ]
    expected = [torch_digest(t) for t in ts]
    assert _values._cpu_digests(ts) == expected  # the compiled kernel, where there is one
    from fwd9m import _ckernel

    monkeypatch.setitem(_ckernel._state, "lib", None)  # the NumPy path (no C compiler)
    assert [torch_digest(t) for t in ts] == expected
    assert _values._cpu_digests(ts) == expected
    monkeypatch.setattr(_values, "_BATCH_WORDS", 1500)  # batches split between tensors
    assert _values._cpu_digests(ts) == expected
    entries = _values.digest_groups([("a", [("x", ts[0]), ("n", 3), ("f", 0.5)]), ("b", [("y", ts[7])])])
    assert [(e[0], e[1], e[2]) for e in entries] == [
        ("a", "x", "float32[5]"),
        ("a", "n", "int64[]"),
        ("a", "f", "float64[]"),
        ("b", "y", "float32[5000]"),
    ]
    assert entries[0][3] == expected[0] and entries[3][3] == expected[7]


def test_step_digest_pytree_and_path(tmp_path):
    p = tmp_path / "loop.steps"
    params = {"dense": {"w": np.ones((2, 3), np.float32), "b": np.zeros(3, np.float32)}}
    assert step_digest(0, loss=1.5, params=params, batch=(np.arange(4),), key=np.uint32([0, 1]), path=p)
    from fwd9m.steps._session import _by_path

    _by_path.pop(os.path.abspath(p)).finish()
    (rec,) = list(StepReader(p))
    assert set(rec.digests) >= {
        ("loss", "loss"),
        ("params", "dense.w"),
        ("params", "dense.b"),
        ("batch", "0"),
        ("rng", "key"),
        ("rng", "python"),
    }
    with pytest.raises(TypeError, match="params/x"):
        step_digest(params={"x": object()}, path=tmp_path / "t.steps")


def test_step_digest_without_destination_says_how(monkeypatch):
    monkeypatch.delenv("FWD9M_STEPS_OUT", raising=False)
    monkeypatch.delenv("FWD9M_STEPS_AGAINST", raising=False)
    with pytest.raises(ConfigurationError, match="fwd9m run --digests"):
        step_digest(loss=1.0)


def _torch_train(steps, diverge_at=None):
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    for step in range(steps):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        if step == diverge_at:  # one gradient element one ulp off
            g = model[2].bias.grad
            g.copy_(torch.nextafter(g, torch.full_like(g, 1.0)))
        opt.step()


@pytest.fixture
def torch_hooks():
    pytest.importorskip("torch")
    from fwd9m.steps import _torch as hooks

    yield hooks
    hooks.uninstall()


def test_live_comparison_stops_at_the_diverging_step(tmp_path, torch_hooks):
    from fwd9m.steps import DivergenceExit, StepSession

    ref = StepSession(str(tmp_path / "ref.steps"))
    torch_hooks.install(ref)
    _torch_train(5)
    torch_hooks.uninstall()
    assert ref.finish() == 0
    live = StepSession(str(tmp_path / "run.steps"), str(tmp_path / "ref.steps"))
    torch_hooks.install(live)
    with pytest.raises(DivergenceExit) as stop:
        _torch_train(5, diverge_at=2)
    assert stop.value.code == 1 and live.steps == 3
    first = stop.value.report.first
    assert first.step_b == 2 and first.names()[0] == "grads/2.bias"
    assert live.finish(1) == 1
    r = StepReader(tmp_path / "run.steps")
    assert len(list(r)) == 3 and r.end["stopped"] == "differs from the reference"


def test_a_failing_digest_does_not_break_training(tmp_path, torch_hooks, monkeypatch):
    """Regression: a hook whose digest fails must let training go on, and record the
    step as not recorded so later steps stay aligned."""
    from fwd9m.steps import StepSession

    def broken(*a, **k):
        raise RuntimeError("boom")

    monkeypatch.setattr(torch_hooks, "optimizer_entries", broken)
    s = StepSession(str(tmp_path / "a.steps"))
    torch_hooks.install(s)
    _torch_train(3)
    s.finish()
    recs = list(StepReader(tmp_path / "a.steps"))
    assert len(recs) == 3 and all(("error", "not recorded") in r.digests for r in recs)


def test_run_digest_options_are_checked_before_running(capsys, tmp_path, monkeypatch):
    from conftest import cli_in_process

    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("print('ran')\n")
    code, err = cli_in_process(capsys, "run", "--digests", "a.steps", "--", "torchrun", "train.py")
    assert code == 2 and "with a launcher each rank records its own steps" in err
    code, err = cli_in_process(capsys, "run", "--digests", " ", "train.py")
    assert code == 2 and "needs a file name" in err
    _write(tmp_path / "ref.steps", 2)
    code, err = cli_in_process(capsys, "run", "--digests", "ref.steps", "--against", "ref.steps", "train.py")
    assert code == 2 and "also an input" in err
    # a digest file fwd9m wrote is replaced, and the run says so (a kept reference?); in a
    # fresh interpreter: fwd9m run replaces its process with the script's (exec)
    from conftest import run_fwd9m

    out = run_fwd9m("run", "--digests", "ref.steps", "train.py", cwd=tmp_path)
    assert out.returncode == 0 and "--digests ref.steps exists (step digests fwd9m wrote" in out.stderr, out.stderr


def test_a_step_not_digested_is_not_compared(tmp_path):
    """Regression: two runs whose hook failed at the same step hold the same 'not
    recorded' entry; that is no evidence the step agreed (no false REPRODUCIBLE), and a
    failure in one run only is no evidence it differed."""
    a, b = StepWriter(tmp_path / "a.steps", {}), StepWriter(tmp_path / "b.steps", {})
    a.step(0, [("params", "w", "float32[1]", 1)])
    b.step(0, [("params", "w", "float32[1]", 1)])
    a.step(1, [("error", "not recorded", "RuntimeError", 0)])
    b.step(1, [("error", "not recorded", "RuntimeError", 0)])
    a.step(2, [("error", "not recorded", "RuntimeError", 0)])
    b.step(2, [("params", "w", "float32[1]", 3)])
    a.close()
    b.close()
    rep = diff_steps(tmp_path / "a.steps", tmp_path / "b.steps")
    assert rep.first is None and rep.unverified == 2
    assert "REPRODUCIBLE where compared: 1 of 3 steps agree" in rep.render()


def _cli(argv):
    from fwd9m import cli

    return cli.main(argv)


def test_debug_diff_reads_step_digest_files(tmp_path, capsys):
    a = _write(tmp_path / "a.steps", 4)
    b = _write(tmp_path / "b.steps", 4, change=2)
    assert _cli(["debug", "diff", str(a), str(a)]) == 0
    assert _cli(["debug", "diff", str(a), str(b)]) == 1
    assert "first difference at step 2" in capsys.readouterr().out
    trace_like = tmp_path / "x.trace"
    trace_like.write_bytes(b"not a digest file")
    assert _cli(["debug", "diff", str(a), str(trace_like)]) == 2
    assert "is a step digest file but" in capsys.readouterr().err


def test_keras_variables_read_together_have_the_one_by_one_digests():
    keras = pytest.importorskip("keras")
    if keras.config.backend() != "tensorflow":
        pytest.skip("the batched read is the TensorFlow backend's")
    from fwd9m.steps import keras as steps_keras
    from fwd9m.steps._values import digest_groups

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3), keras.layers.BatchNormalization()])
    model.compile(optimizer="adam", loss="mse")
    model.fit(np.ones((8, 4)), np.ones((8, 3)), verbose=0)
    odd = [
        ("bool", keras.Variable(np.array([True, False, True]), dtype="bool")),
        ("int8", keras.Variable(np.array([-1, 2, 3], np.int8), dtype="int8")),
        ("half", keras.Variable(np.arange(3), dtype="float16")),
        ("empty", keras.Variable(np.zeros((0, 3)), dtype="float32")),
    ]
    groups = [
        ("params", steps_keras._named(model.trainable_weights)),
        ("buffers", steps_keras._named(model.non_trainable_weights)),
        ("optimizer", steps_keras._named(model.optimizer.variables)),
        ("values", odd),
    ]
    together = steps_keras._variable_digests(groups)
    assert together == digest_groups(groups)
    assert len(together) == sum(len(leaves) for _, leaves in groups)


def test_a_reference_is_replaced_only_by_a_completed_run(tmp_path):
    """run --digests over an existing reference: a run that fails (or is killed) keeps
    the reference and leaves its own digests beside it; a completed run replaces it."""
    from conftest import run_fwd9m

    (tmp_path / "ok.py").write_text("print('ran')\n")
    (tmp_path / "fails.py").write_text("import sys\nsys.exit(3)\n")
    _write(tmp_path / "ref.steps", 2)
    kept = (tmp_path / "ref.steps").read_bytes()
    out = run_fwd9m("run", "--digests", "ref.steps", "fails.py", cwd=tmp_path)
    assert out.returncode == 3 and (tmp_path / "ref.steps").read_bytes() == kept, out.stderr
    assert "ref.steps is left as it was" in out.stderr and (tmp_path / "ref.steps.partial").exists()
    out = run_fwd9m("run", "--digests", "ref.steps", "ok.py", cwd=tmp_path)
    assert out.returncode == 0 and (tmp_path / "ref.steps").read_bytes() != kept, out.stderr
    assert list(StepReader(tmp_path / "ref.steps")) == [] and not (tmp_path / "ref.steps.partial").exists()


def test_against_an_incomplete_reference_is_exit_2(capsys, tmp_path, monkeypatch):
    from conftest import cli_in_process

    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("print('ran')\n")
    w = StepWriter(tmp_path / "cut.steps", {})
    w.step(0, [("params", "w", "float32[1]", 1)])
    os.close(w._fd)  # killed before its end record
    w._fd = None
    code, err = cli_in_process(capsys, "run", "--against", "cut.steps", "train.py")
    assert code == 2 and "the reference is incomplete (1 step(s) and no end record" in err, err
