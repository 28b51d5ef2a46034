"""debug replay: capture a culprit's call, replay it alone, with and without the switch;
bad input (no capture, an op that cannot be rebuilt, a device not here) is a clear error."""

from __future__ import annotations

import argparse
import json
import os
import textwrap

import numpy as np
import pytest

from fwd9m import debug
from fwd9m.debug import _replay
from fwd9m.errors import ConfigurationError, FileFormatError, Fwd9mError

torch = pytest.importorskip("torch")

TWO_CORES = pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="a parallel CPU kernel needs 2 cores")


def _index_put_trace(tmp_path, capture: str | None):
    """One recorded index_put_(accumulate=True) with heavy contention (8 rows, 200k
    updates): torch's CPU kernel adds floats with atomics when >1 thread runs it."""
    g = torch.Generator().manual_seed(0)
    x, i, v = torch.zeros(8, 16), torch.randint(0, 8, (200000,), generator=g), torch.randn(200000, 16, generator=g)
    path = tmp_path / "run.trace"
    with debug.record(path, framework="torch", capture=capture):
        x.index_put_((i,), v, accumulate=True)
    ops = list(debug.TraceReader(path))
    seq = next(o.seq for o in ops if "index_put" in o.name)
    return path, seq


def _cli(argv):
    from fwd9m._cli import replay as cli

    p = argparse.ArgumentParser()
    cli.add_arguments(p)
    return cli.run(p.parse_args(argv))


@TWO_CORES
def test_replay_confirms_index_put_accumulate_and_the_switch_fixes_it(tmp_path):
    # a real race of real atomics, the thing under test: measured 20 of 20 replays distinct
    # at 2 threads in every run on this 2-core machine (also under load)
    torch.set_num_threads(2)
    path, seq = _index_put_trace(tmp_path, capture="0-5")
    assert os.path.exists(_replay.capture_path(path, seq))
    r = debug.replay(path, seq, repeat=20)
    assert r.confirmed and r.off.distinct > 1 and r.off.max_ulp > 0
    assert r.verdict().startswith(f"confirmed: {r.off.distinct} distinct outputs in 20 replays (max ")
    assert r.on.status == "deterministic"
    assert "the switch fixes it" in r.switch_verdict()
    assert r.threads == 2 and r.device == "cpu" and r.op == "aten::index_put_"


def test_replay_under_the_switch_raises_where_torch_has_no_deterministic_kernel(tmp_path, capsys):
    idx, src = torch.tensor([0, 0, 1]), torch.tensor([1.0, 2.0, 3.0])
    path = tmp_path / "run.trace"
    with debug.record(path, framework="torch", capture="0-3"):
        torch.zeros(4).put_(idx, src)  # accumulate=False: raises under the switch (probe-measured)
    seq = next(o.seq for o in debug.TraceReader(path) if "put_" in o.name)
    rc = _cli([str(path), "--op", str(seq), "-k", "3", "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["off"]["status"] == "deterministic"  # 3 indices: no parallel kernel
    assert out["on"]["status"] == "raises" and "raises" in out["switch_verdict"]


def test_a_trace_without_captures_is_a_clear_error(tmp_path, capsys):
    path, seq = _index_put_trace(tmp_path, capture=None)
    with pytest.raises(FileFormatError, match=rf"no capture of op #{seq}.*--capture {seq}:0"):
        debug.replay(path, seq)
    with pytest.raises(FileFormatError, match="no trace"):
        debug.replay(tmp_path / "missing.trace", 3)


def test_an_op_that_cannot_be_rebuilt_is_a_clear_error(tmp_path):
    s = torch.sparse_coo_tensor(torch.tensor([[0, 1]]), torch.tensor([1.0, 2.0]), (3,))
    path = tmp_path / "run.trace"
    with debug.record(path, framework="torch", capture="0-9"):
        (s * 2.0).coalesce()
    seq = next(o.seq for o in debug.TraceReader(path) if o.name.startswith("aten::mul"))
    with pytest.raises(ConfigurationError, match="cannot be rebuilt.*sparse"):
        debug.replay(path, seq)


def _capture_file(tmp_path, call: dict, arrays: dict) -> str:
    path = str(tmp_path / "x.trace.op0.npz")
    np.savez(path, call=np.frombuffer(json.dumps(call).encode(), dtype=np.uint8), **arrays)
    return path


def test_a_device_that_is_not_here_is_a_clear_error(tmp_path):
    # simulated: CUDA cannot run here, so the capture file says the op ran on cuda:7
    if torch.cuda.device_count() > 7:
        pytest.skip("this machine has a cuda:7")
    call = {
        "framework": "torch",
        "op": "aten::add",
        "overload": "Tensor",
        "args": [{"tensor": 0}, {"tensor": 0}],
        "kwargs": {},
        "threads": 1,
        "tensors": [{"dtype": "float32", "shape": [2], "stride": [1], "device": "cuda:7", "requires_grad": False}],
    }
    path = _capture_file(tmp_path, call, {"t0": np.zeros(8, dtype=np.uint8)})
    with pytest.raises(ConfigurationError, match="cuda:7, which is not there"):
        debug.replay(tmp_path / "x.trace", 0, capture=path)


def test_a_capture_is_never_unpickled(tmp_path):
    path = str(tmp_path / "evil.npz")
    np.savez(path, call=np.array([{"framework": "torch"}], dtype=object))  # needs pickle to load
    with pytest.raises(FileFormatError, match="not a replay capture"):
        debug.replay(tmp_path / "x.trace", 0, capture=path)
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(Fwd9mError):
        _cli([str(tmp_path / "x.trace"), "--op", "0", "--capture", str(tmp_path / "junk.npz")])


@pytest.mark.slow
@TWO_CORES
def test_debug_culprit_in_training_is_confirmed_by_a_targeted_run(tmp_path, monkeypatch):
    script = tmp_path / "train.py"
    script.write_text(
        textwrap.dedent("""
        import torch
        torch.manual_seed(0)
        torch.set_num_threads(2)
        emb = torch.nn.Parameter(torch.randn(8, 16))
        opt = torch.optim.SGD([emb], lr=0.1)
        g = torch.Generator().manual_seed(1)
        idx = torch.randint(0, 8, (200000,), generator=g)
        w = torch.randn(200000, 16, generator=g)
        for step in range(2):
            opt.zero_grad()
            (emb[idx] * w).sum().backward()   # backward of advanced indexing: index_put_(accumulate=True)
            opt.step()
    """)
    )
    monkeypatch.chdir(tmp_path)
    runs = []
    for k in (1, 2):
        p = tmp_path / f"run{k}.trace"
        runs.append(p)
        assert (
            _replay.subprocess.run(
                [
                    _replay.sys.executable,
                    "-m",
                    "fwd9m.debug._child",
                    str(p),
                    "digests",
                    "-",
                    "-",
                    "torch",
                    "0",
                    str(script),
                ]
            ).returncode
            == 0
        )
    report = debug.diff(*runs)
    assert report.kind == "culprit" and "index_put" in report.first.op
    result = _replay.confirm(report, str(script), trace=str(tmp_path / "run3.trace"))
    assert result.confirmed, result.render()
    assert result.on.status == "deterministic"


def test_debug_replay_is_a_debug_subcommand_and_bad_input_is_exit_2(tmp_path, capsys):
    from fwd9m import cli

    missing = tmp_path / "none.trace"
    assert cli.main(["debug", "replay", str(missing), "--op", "3"]) == 2
    assert "none.trace" in capsys.readouterr().err


def test_a_targeted_run_over_its_timeout_is_killed_with_what_it_started(tmp_path):
    # the targeted run used subprocess.run(timeout=), which kills only the child: a
    # grandchild (a data loader worker, a launcher's rank) outlived fwd9m debug
    import subprocess
    import sys
    import time

    from fwd9m.errors import RunError

    pidfile = tmp_path / "grandchild.pid"
    code = (
        "import subprocess, sys, time; "
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
        f"open({str(pidfile)!r}, 'w').write(str(p.pid)); time.sleep(600)"
    )
    with pytest.raises(RunError, match="took over 3 s"):
        _replay._run_logged([sys.executable, "-c", code], "train.py", 7, str(tmp_path), None, 3)
    pid = int(pidfile.read_text())
    for _ in range(100):  # reaped by init shortly after the kill
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        if subprocess.run(["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, text=True).stdout.startswith("Z"):
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"grandchild {pid} still runs after the targeted run timed out")


def test_a_random_op_replays_from_the_same_generator_state():
    """debug replay of aten::uniform_ said 'STAYS NONDETERMINISTIC ... a silent gap in the
    switch': each replay drew from where the last one left the generator. Each replay now
    starts from the same generator state, and the caller's state is left as it was."""
    import torch

    from fwd9m.torch._replay import Replayer, capture

    x = torch.empty(64)
    call, arrays = capture(torch.ops.aten.uniform_.default, (x, 0.0, 1.0), {})
    replayer = Replayer(call, arrays, switch=False)
    torch.manual_seed(5)
    before = torch.get_rng_state()
    first, second = replayer.run(), replayer.run()
    assert np.array_equal(first[0], second[0])
    assert torch.equal(torch.get_rng_state(), before)
