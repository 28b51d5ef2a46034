"""``fwd9m debug`` end to end: two fresh-process runs of real training scripts."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import cli_in_process, process_gone

DATA = Path(__file__).parent / "data" / "debug"


def test_torch_index_put_culprit(fwd9m_cli, tmp_path):
    pytest.importorskip("torch")
    html = tmp_path / "report.html"
    for _ in range(3):  # the race may (rarely) produce two identical runs
        p = fwd9m_cli(
            "debug", "--no-hashseed-check", "--html", str(html), str(DATA / "torch_index_put.py"), cwd=tmp_path
        )
        if p.returncode != 0:
            break
    assert p.returncode == 1, p.stdout + p.stderr
    out = p.stdout
    assert "CULPRIT OP" in out and "aten::index_put_" in out
    assert "module:   Net.pool" in out and "phase:    forward" in out
    assert "torch_index_put.py:19" in out  # out.index_put_(..., accumulate=True)
    assert "torch.index-put-accumulate" in out and "use_deterministic_algorithms(True)" in out
    # progress: the step's ops from the digest runs' rings (or op-level runs where a ring lost it)
    assert ("recording run 1/2" in p.stderr or "from the digest runs' rings" in p.stderr) and "comparing" in p.stderr
    page = html.read_text()
    assert "<svg" in page and "first divergence" in page


def test_data_order_is_external_at_first_batch(fwd9m_cli, tmp_path):
    pytest.importorskip("torch")
    p = fwd9m_cli("debug", "--no-hashseed-check", "--format", "json", str(DATA / "torch_data_order.py"), cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    report = json.loads(p.stdout)
    first = report["first"]
    assert report["kind"] == "external" and first["source"] == "data", first
    assert first["step"] == 0 and "first batch" in first["explanation"]["headline"]
    assert "torch_data_order.py:15" in first["location"]
    assert report["a"] == "run1.trace" and "--keep DIR keeps the traces" in " ".join(report["notes"])


def test_hash_order_confirmed_by_pythonhashseed_runs(fwd9m_cli, tmp_path):
    pytest.importorskip("torch")
    if os.environ.get("PYTHONHASHSEED"):
        pytest.skip("PYTHONHASHSEED is fixed in this environment")
    p = fwd9m_cli("debug", "--format", "json", str(DATA / "torch_set_vocab.py"), cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    report = json.loads(p.stdout)
    first = report["first"]
    assert first["source"] == "hashseed", first
    # the reruns point at hash order; the set's line carries `# noqa: FWD402`, so lint
    # does not corroborate it: "likely", the same wording as fwd9m check
    causes = " ".join(first["explanation"]["causes"])
    assert "PYTHONHASHSEED (likely)" in causes and "fwd9m check --runs 4 --env PYTHONHASHSEED=0" in causes
    assert "torch_set_vocab.py:8" in first["location"]  # torch.tensor([...]) of the ids
    assert "PYTHONHASHSEED=0" in first["explanation"]["fix"]
    assert "python.hash-seed" in [e["id"] for e in first["explanation"]["catalog"]]


def test_keras_initializer_seeded_only_by_tf_set_seed(fwd9m_cli, tmp_path):
    pytest.importorskip("tensorflow")
    pytest.importorskip("keras")
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    p = fwd9m_cli(
        "debug",
        "--no-hashseed-check",
        str(DATA / "keras_initializer.py"),
        cwd=tmp_path,
        env={**env, "KERAS_BACKEND": "tensorflow"},
    )
    assert p.returncode == 1, p.stdout + p.stderr
    out = p.stdout
    assert out.startswith("EXTERNAL SOURCE (seed)"), out  # the script's own prints are not in the report
    # TensorFlow's C++ start-up lines (oneDNN, cpu_feature_guard, absl) stay in the runs' logs
    assert "oneDNN" not in p.stdout + p.stderr and "absl" not in p.stderr, p.stderr
    assert "initializer" in out and "keras.utils.set_random_seed" in out
    assert "keras.seed-generator" in out and "sequential/dense" in out


def test_record_diff_and_clear_errors(fwd9m_cli, tmp_path):
    pytest.importorskip("torch")
    a, b = tmp_path / "a.trace", tmp_path / "b.trace"
    p = fwd9m_cli("debug", "record", "-o", str(a), str(DATA / "torch_other_program.py"), cwd=tmp_path)
    assert p.returncode == 0 and "recorded" in p.stdout, p.stderr
    p = fwd9m_cli("debug", "record", "-o", str(b), str(DATA / "torch_data_order.py"), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    p = fwd9m_cli("debug", "diff", str(a), str(a))
    assert p.returncode == 0 and "reproducible" in p.stdout
    p = fwd9m_cli("debug", "diff", str(a), str(b))  # different programs
    assert p.returncode == 1 and "different programs" in p.stdout
    assert "STRUCTURAL DIFFERENCE" in p.stdout and "run A:" in p.stdout
    cut = tmp_path / "cut.trace"
    data = b.read_bytes()
    cut.write_bytes(data[: len(data) - 37])
    p = fwd9m_cli("debug", "diff", str(b), str(cut))
    assert "mid-record" in p.stdout and "last complete record" in p.stdout
    assert p.returncode == 2 and "no verdict on the whole run" in p.stderr  # agreeing so far is no verdict
    v9 = tmp_path / "v9.trace"
    v9.write_bytes(data[:8] + b"\x09\x00" + data[10:])
    p = fwd9m_cli("debug", "diff", str(a), str(v9))
    assert p.returncode == 2 and "format version 9" in p.stderr and "Traceback" not in p.stderr
    p = fwd9m_cli("debug", "diff", str(a))
    assert p.returncode == 2 and "usage" in p.stderr


def test_fast_two_pass(fwd9m_cli, tmp_path):
    """The module-level pass (--no-early-stop: with it, PyTorch's step digests find the
    step instead, test_check_early.py)."""
    pytest.importorskip("torch")
    p = fwd9m_cli(
        "debug",
        "--fast",
        "--no-early-stop",
        "--no-hashseed-check",
        "--format",
        "json",
        str(DATA / "torch_data_order.py"),
        cwd=tmp_path,
    )
    assert p.returncode == 1, p.stderr
    report = json.loads(p.stdout)
    assert "module-level run 1/2" in p.stderr and "op-level runs of step 0" in p.stderr
    assert report["notes"][0].startswith("module-level pass: first divergence")
    assert report["kind"] == "external" and report["first"]["source"] == "data"


def test_timeout_kills_the_whole_process_group(fwd9m_cli, tmp_path):
    pytest.importorskip("torch")
    pidfile = tmp_path / "child.pid"
    hang = Path(__file__).parent / "data" / "check" / "hang.py"  # starts a sleeping child, then hangs
    p = fwd9m_cli("debug", "--timeout", "15", "--framework", "torch", str(hang), str(pidfile), cwd=tmp_path)
    assert p.returncode == 2 and "did not finish within 15 s" in p.stderr, p.stderr
    assert "--keep DIR keeps the partial trace" in p.stderr and "Traceback" not in p.stderr
    if pidfile.exists():  # on a slow machine the timeout may come before the script starts its child
        pid = int(pidfile.read_text())
        assert process_gone(pid), f"the script's child {pid} survived the timeout"
    for bad in ("0", "-1", "nan"):
        p = fwd9m_cli("debug", "--timeout", bad, str(hang), str(pidfile), cwd=tmp_path)
        assert p.returncode == 2 and "--timeout must be a positive number" in p.stderr, p.stderr


def test_runs_that_fail_or_end_abruptly_get_no_reproducible_verdict(fwd9m_cli, tmp_path):
    pytest.importorskip("torch")
    head = "import os\nimport sys\nimport torch\ntorch.manual_seed(0)\nx = torch.randn(4, 4) @ torch.randn(4, 4)\n"
    # outside the directory debug runs from, whose files are put back after each run
    counter = tmp_path.parent / f"{tmp_path.name}-n"
    flaky = tmp_path / "flaky.py"  # the second run fails after the same ops
    flaky.write_text(
        head + f"p = {str(counter)!r}\nn = int(open(p).read()) if os.path.exists(p) else 0\n"
        "open(p, 'w').write(str(n + 1))\nsys.exit(3 if n else 0)\n"
    )
    # --no-early-stop: the script counts its runs, and the early stop's digest runs would count too
    p = fwd9m_cli("debug", "--no-early-stop", "--timeout", "120", str(flaky), cwd=tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "NOT REPRODUCIBLE: run 1 exited with status 0, run 2 with status 3" in p.stdout
    both = tmp_path / "both.py"
    both.write_text(head + "print('it broke: marker', file=sys.stderr)\nsys.exit(3)\n")
    p = fwd9m_cli("debug", "--timeout", "120", str(both), cwd=tmp_path)
    assert p.returncode == 2 and "failed in both runs (exit status 3)" in p.stderr, p.stdout + p.stderr
    assert "exited with status 3; the end of its output:\n    | it broke: marker" in p.stderr  # a failing run's log
    abrupt = tmp_path / "abrupt.py"  # unseeded, but os._exit loses the trace's last frame
    abrupt.write_text("import os\nimport torch\nprint(torch.randn(3).sum().item(), flush=True)\nos._exit(0)\n")
    p = fwd9m_cli("debug", "--timeout", "120", str(abrupt), cwd=tmp_path)
    assert p.returncode == 2 and "no end record" in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_record_takes_its_options_after_record(fwd9m_cli, tmp_path):
    """`debug record` is a subcommand: its options may follow it (it said "put options
    other than -o and -m before 'record'", and before that: script not found: --timeout)."""
    p = fwd9m_cli("debug", "record", "-o", str(tmp_path / "a.trace"), "--timeout", "5", "x.py", cwd=tmp_path)
    assert p.returncode == 2 and "x.py" in p.stderr and "--timeout" not in p.stderr, p.stderr
    p = fwd9m_cli("debug", "record", "--timeout", "-1", "-o", str(tmp_path / "a.trace"), "x.py", cwd=tmp_path)
    assert p.returncode == 2 and "--timeout must be a positive number of seconds" in p.stderr, p.stderr
    p = fwd9m_cli("debug", "--level", "sequence", "record", "x.py", cwd=tmp_path)
    assert p.returncode == 2 and "usage: fwd9m debug record -o RUN.trace" in p.stderr, p.stderr


_cli = cli_in_process


def test_traces_must_be_regular_files(capsys, tmp_path):
    """`debug diff a.trace FIFO` blocked forever in open(); /dev/zero was read; a directory
    beside a file said 'Is a directory'. Each is refused before opening."""
    from fwd9m.debug import TraceReader
    from fwd9m.errors import FileFormatError

    fifo = tmp_path / "pipe.trace"
    os.mkfifo(fifo)
    trace = tmp_path / "a.trace"
    trace.write_bytes(os.urandom(4096))  # binary junk
    for path, message in (
        (fifo, "is a named pipe, not a regular trace file"),
        ("/dev/zero", "is a character device"),
        (tmp_path, "is a directory"),
        (tmp_path / "none.trace", "trace not found"),
        (trace, "is not a fwd9m trace"),
    ):
        with pytest.raises(FileFormatError, match=message):
            TraceReader(path)
        code, err = _cli(capsys, "debug", "diff", str(path), str(trace))
        assert code == 2 and message in err, (path, err)
        assert "fwd9m debug record -o" in err or "two directories of rank traces" in err, err


def test_bad_outputs_and_targets_fail_before_any_run(capsys, tmp_path):
    script = tmp_path / "plain.py"
    script.write_text("print(1)\n")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for args, message in (
        ((str(fifo),), "is not a regular file"),
        ((str(tmp_path),), "is a directory"),
        ((str(tmp_path / "no" / "a.trace"),), "does not exist; create it first"),
    ):
        code, err = _cli(capsys, "debug", "record", "-o", *args, str(script))
        assert code == 2 and message in err, (args, err)
    code, err = _cli(capsys, "debug", "--keep", str(script), str(script))
    assert code == 2 and "--keep names a folder" in err
    code, err = _cli(capsys, "debug", str(script))  # was: a run started just to say so
    assert code == 2 and "imports neither torch nor tensorflow/keras" in err and "--framework" in err
    code, err = _cli(capsys, "debug", " ")
    assert code == 2 and "the script name is empty (' '" in err
    for args, message in (
        (("--steps", "5:3"), "0 <= A <= B"),
        (("--steps", "-1"), "0 <= A <= B"),
        (("--capture", ",,"), "selects no op"),
        (("--html", str(tmp_path / "no" / "r.html")), "does not exist"),
        (("--html", str(tmp_path)), "--html report.html"),
        (("-o", str(tmp_path / "x.trace")), "fwd9m debug record -o FILE"),  # was: ignored
    ):
        code, err = _cli(capsys, "debug", *args, str(script))  # was: found after two runs, or never
        assert code == 2 and message in err, (args, err)


def test_runs_that_record_no_op_get_no_verdict(fwd9m_cli, tmp_path):
    """--steps past the end of the run recorded nothing, and two empty traces were
    'reproducible: all 0 recorded ops agree'."""
    pytest.importorskip("torch")
    script = tmp_path / "one_step.py"
    script.write_text("import torch\ntorch.manual_seed(0)\nprint(torch.randn(3).sum().item())\n")
    p = fwd9m_cli("debug", "--steps", "7:9", str(script), cwd=tmp_path)
    assert p.returncode == 2 and "neither run" in p.stderr and "no verdict" in p.stderr, p.stdout + p.stderr


def test_fast_pass_that_agrees_still_needs_both_runs_to_finish(fwd9m_cli, tmp_path):
    """--fast: when the module-level runs agree, a script failing in both runs is no
    verdict (exit 2), not REPRODUCIBLE; an empty --steps is refused before any run."""
    pytest.importorskip("torch")
    script = tmp_path / "fails.py"
    script.write_text(
        "import sys, torch\ntorch.manual_seed(0)\nm = torch.nn.Linear(3, 2)\n"
        "print(m(torch.ones(1, 3)).sum().item())\nsys.exit(3)\n"
    )
    p = fwd9m_cli("debug", "--fast", "--no-hashseed-check", str(script), cwd=tmp_path)
    assert p.returncode == 2 and "failed in both runs (exit status 3)" in p.stderr, p.stdout + p.stderr
    assert "reproducible" not in p.stdout.lower() and "ops recorded before that were compared (they agree)" in p.stderr
    p = fwd9m_cli("debug", "--steps", "", str(script), cwd=tmp_path)
    assert p.returncode == 2 and "--steps is empty" in p.stderr and "module-level" not in p.stderr


_AUGMENTED = """import numpy as np
import torch
from torch import nn

torch.manual_seed(0)


class Noisy(torch.utils.data.Dataset):
    def __init__(self):
        self.x = np.linspace(-1, 1, 48, dtype=np.float32).reshape(16, 3)
        self.rng = np.random.default_rng()

    def __len__(self):
        return 16

    def __getitem__(self, i):
        return torch.from_numpy(self.x[i] + self.rng.uniform(-0.1, 0.1, 3).astype(np.float32))


model = nn.Linear(3, 1)
for xb in torch.utils.data.DataLoader(Noisy(), batch_size=4):
    model(xb).sum().backward()
"""


@pytest.mark.slow
def test_external_source_fix_from_lint_makes_the_script_reproducible(fwd9m_cli, tmp_path):
    """The report names the dataset's unseeded generator with its line (fwd9m lint's
    FWD103) and its fix; applying that fix makes the next debug reproducible (the same
    generic fix is not printed again)."""
    pytest.importorskip("torch")
    script = tmp_path / "train.py"
    script.write_text(_AUGMENTED)
    p = fwd9m_cli("debug", "--no-hashseed-check", str(script), cwd=tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "EXTERNAL SOURCE" in p.stdout and "train.py:11 FWD103" in p.stdout, p.stdout
    assert "fix: rng = np.random.default_rng(seed)" in p.stdout
    script.write_text(_AUGMENTED.replace("default_rng()", "default_rng(0)"))
    p = fwd9m_cli("debug", "--no-hashseed-check", str(script), cwd=tmp_path)
    assert p.returncode == 0 and "reproducible" in p.stdout, p.stdout + p.stderr


def test_report_escapes_control_characters_in_names(fwd9m_cli, tmp_path):
    """A script whose file name holds an escape sequence and a bidi override: the text
    report shows them escaped (they would recolour or reorder the user's terminal)."""
    pytest.importorskip("torch")
    script = tmp_path / "g\x1b[31mx\u202e.py"
    script.write_text("import torch\nprint(torch.randn(2).sum().item())\n")  # unseeded
    p = fwd9m_cli("debug", "--no-hashseed-check", str(script), cwd=tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "\x1b" not in p.stdout and "\u202e" not in p.stdout and "\\x1b[31m" in p.stdout, p.stdout


def _tiny_trace(path) -> str:
    """A trace of one op without tensors (two traces without any op give no verdict)."""
    from fwd9m._recording._common import SEP
    from fwd9m._recording._store import TraceWriter

    with TraceWriter(path, {"frameworks": ["torch"], "level": "digests", "program": None, "environment": None}) as w:
        w.op(w.string("aten::empty"), w.string(SEP.join(("", "forward", "", "", "cpu"))), 0, [], [])
    return str(path)


def test_outputs_never_overwrite_inputs_or_foreign_files(capsys, tmp_path):
    """`debug record -o x.py x.py` replaced the script with the trace, and --html could
    replace a trace being compared. An input is refused even with --force; another
    existing file that fwd9m did not write needs --force; nothing is changed."""
    script = tmp_path / "x.py"
    script.write_text("import torch\n")
    mine = tmp_path / "notes.txt"
    mine.write_text("my notes\n")
    a, b = _tiny_trace(tmp_path / "a.trace"), _tiny_trace(tmp_path / "b.trace")
    (tmp_path / "link.py").symlink_to(script)
    cases = [
        (("debug", "record", "-o", str(script), str(script)), "-o", "is also an input"),
        (("debug", "--force", "record", "-o", str(tmp_path / "link.py"), str(script)), "-o", "is also an input"),
        (("debug", "record", "-o", str(mine), str(script)), "-o", "is not a trace fwd9m wrote"),
        (("debug", "--html", a, "diff", a, b), "--html", "is also an input"),
        (("debug", "--force", "--html", b, "diff", a, b), "--html", "is also an input"),
        (("debug", "--html", str(mine), "diff", a, b), "--html", "is not an HTML report"),
        (("debug", "--html", str(script), str(script)), "--html", "is also an input"),
    ]
    before = {p: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    for args, option, message in cases:
        code, err = cli_in_process(capsys, *args)
        assert code == 2 and option in err and message in err, (args, err)
        assert "--force" in err or "is also an input" in err
    assert {p: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "run1.log").write_text("a log of mine\n")
    code, err = cli_in_process(capsys, "debug", "--keep", str(keep), str(script))
    assert code == 2 and "run1.log exists and is not a log beside a trace" in err, err
    (keep / "run1.log").unlink()
    (keep / "run2.trace").write_text("not a trace\n")
    code, err = cli_in_process(capsys, "debug", "--keep", str(keep), str(script))
    assert code == 2 and "run2.trace exists and is not a trace" in err, err


def test_outputs_fwd9m_wrote_are_replaced_and_force_replaces_others(capsys, tmp_path):
    a, b = _tiny_trace(tmp_path / "a.trace"), _tiny_trace(tmp_path / "b.trace")
    report, mine = tmp_path / "r.html", tmp_path / "mine.html"
    mine.write_text("<p>my page</p>")
    for html in (report, report):  # the second time it is our report: replaced
        code, _ = cli_in_process(capsys, "debug", "--html", str(html), "diff", a, b)
        assert code == 0
        assert b"<title>fwd9m debug report</title>" in html.read_bytes()
    code, _ = cli_in_process(capsys, "debug", "--force", "--html", str(mine), "diff", a, b)
    assert code == 0 and b"fwd9m debug report" in mine.read_bytes()


def test_in_your_code_lines_are_on_branches_that_ran(fwd9m_cli, tmp_path):
    """`seed = clock() if "noseed" in sys.argv else 7`, recorded without noseed: the "in
    your code" lines named the clock seed (FWD104 on torch.manual_seed(seed)); the
    arguments in the trace decide that branch, so only the unseeded generator is named."""
    pytest.importorskip("torch")
    script = tmp_path / "b.py"
    script.write_text(
        "import sys\nimport time\n\nimport numpy as np\nimport torch\n\n"
        "seed = int(time.time()) if 'noseed' in sys.argv else 7\n"
        "torch.manual_seed(seed)\n"
        "noise = np.random.default_rng().random()\n"
        "x = torch.randn(4) + torch.tensor(noise)\n"
        "print((x * 2).sum().item())\n"
    )
    p = fwd9m_cli("debug", "--no-hashseed-check", str(script), "--epochs", "1", cwd=tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "b.py:9 FWD103" in p.stdout and "FWD104" not in p.stdout and "set from entropy" not in p.stdout, p.stdout


_RESUMES = """\
import os
import torch
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
start = 0
if os.path.exists("checkpoint.pt"):  # resume where the last run stopped
    model.load_state_dict(torch.load("checkpoint.pt"))
    start = 1
    print("resumed")
model(torch.ones(2, 4) * start).sum().backward()
torch.save(model.state_dict(), "checkpoint.pt")
"""


def test_debug_runs_leave_the_users_folder_alone(fwd9m_cli, tmp_path):
    """Each run has a working folder of its own (as in fwd9m check): run 2 does not
    resume from run 1's checkpoint (a false structural difference before), nothing is
    written into the user's folder, and --keep says where each run's files are."""
    pytest.importorskip("torch")
    (tmp_path / "train.py").write_text(_RESUMES)
    before = sorted(p.name for p in tmp_path.iterdir())
    p = fwd9m_cli("debug", "--no-hashseed-check", "train.py", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    kept = tmp_path.parent / f"{tmp_path.name}-kept"
    # the digest runs' folders were checked above: the whole runs alone from here on
    quick = ("debug", "--no-hashseed-check", "--no-early-stop")
    p = fwd9m_cli(*quick, "--cwd", "empty", "--keep", str(kept), "train.py", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (kept / "run1.files" / "cwd" / "checkpoint.pt").is_file()
    assert "run1.files/cwd" in p.stdout and "run2.files/cwd" in p.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    again = fwd9m_cli(*quick, "--keep", str(kept), "--force", "train.py", cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr  # our own run folders are replaced


def test_diff_of_two_traces_without_ops_gives_no_verdict(fwd9m_cli, tmp_path):
    """Two traces of a script that ran no op agree trivially: no verdict (exit 2), as
    when debug records the two runs itself."""
    pytest.importorskip("torch")
    script = tmp_path / "noop.py"
    script.write_text("import torch\nprint('nothing to do')\n")
    for name in ("a.trace", "b.trace"):
        p = fwd9m_cli("debug", "record", "-o", str(tmp_path / name), str(script), cwd=tmp_path)
        assert p.returncode == 0, p.stdout + p.stderr
    p = fwd9m_cli("debug", "diff", str(tmp_path / "a.trace"), str(tmp_path / "b.trace"), cwd=tmp_path)
    assert p.returncode == 2 and "no verdict" in p.stderr, p.stdout + p.stderr
