"""``fwd9m env``: the environment fingerprint, its JSON form and --diff."""

from __future__ import annotations

import json

import pytest
from conftest import run_fwd9m

from fwd9m import environment
from fwd9m.errors import FileFormatError


def test_collect_has_schema_and_sections(monkeypatch):
    monkeypatch.setenv("PYTHONHASHSEED", "7")
    fp = environment.collect()
    assert fp["schema"] == environment.SCHEMA and fp["schema_version"] == environment.SCHEMA_VERSION
    for section in ("python", "os", "cpu", "gpus", "packages", "env", "threads", "container", "frameworks"):
        assert section in fp
    assert fp["env"]["PYTHONHASHSEED"] == "7"
    assert fp["cpu"]["logical_cores"] >= 1
    json.dumps(fp)


def test_collect_with_import_asks_torch():
    pytest.importorskip("torch")
    fp = environment.collect(import_frameworks=True, frameworks=["torch"])
    assert fp["frameworks"]["torch"]["intra_op_threads"] >= 1


def test_diff_ranks_hashseed_first():
    a = environment.collect()
    b = json.loads(json.dumps(a))
    b["env"]["PYTHONHASHSEED"] = "7919"  # values no CI machine sets, so there is a difference
    b["os"]["release"] = "other"
    b["threads"]["OMP_NUM_THREADS"] = "4093"
    diffs = environment.diff(a, b)
    assert [d.key for d in diffs] == ["env.PYTHONHASHSEED", "threads.OMP_NUM_THREADS", "os.release"]
    assert "set" in diffs[0].reason


def test_diff_ignores_executable():
    a = environment.collect()
    b = json.loads(json.dumps(a))
    b["python"]["executable"] = "/elsewhere/python"
    assert environment.diff(a, b) == []


def test_cli_json_and_diff(tmp_path):
    out = run_fwd9m("env", "--format", "json", env={"PYTHONHASHSEED": "1"})
    assert out.returncode == 0, out.stderr
    a = tmp_path / "a.json"
    a.write_text(out.stdout)
    b = tmp_path / "b.json"
    data = json.loads(out.stdout)
    data["env"]["PYTHONHASHSEED"] = "2"
    b.write_text(json.dumps(data))
    same = run_fwd9m("env", "--diff", str(a), str(a))
    assert same.returncode == 0 and "no differences" in same.stdout
    differ = run_fwd9m("env", "--diff", str(a), str(b))
    assert differ.returncode == 1 and "PYTHONHASHSEED" in differ.stdout
    js = run_fwd9m("env", "--diff", str(a), str(b), "--format", "json")
    assert json.loads(js.stdout)[0]["key"] == "env.PYTHONHASHSEED"


@pytest.mark.parametrize(
    "content,message",
    [
        (None, "no such file"),
        ("{not json", "not a JSON"),
        ('{"schema": "something-else"}', "not an environment fingerprint"),
        ('{"schema": "fwd9m.environment", "schema_version": 99}', "schema version 99"),
        (b"\xff\xfe\x00bad", "not a JSON"),
        ("[" * 100000 + "]" * 100000, "not a JSON"),  # was a RecursionError traceback
        ('{"a": ' + "9" * 5000 + "}", "not a JSON"),  # int too long to convert
        ('{"schema": "fwd9m.environment"}', "without a valid schema_version"),
        ('{"schema": "fwd9m.environment", "schema_version": "x"}', "without a valid schema_version"),
    ],
)
def test_bad_fingerprint_files(tmp_path, content, message):
    p = tmp_path / "f.json"
    if isinstance(content, bytes):
        p.write_bytes(content)
    elif content is not None:
        p.write_text(content)
    with pytest.raises(FileFormatError, match=message):
        environment.load(p)
    out = run_fwd9m("env", "--diff", str(p), str(p))
    assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr


def _cli(capsys, *args):
    from fwd9m.cli import main

    code = main(list(args))
    return code, capsys.readouterr().err


def test_framework_option_implies_import_and_rejects_what_it_cannot_do(capsys):
    """`env --framework torch` without --import was silently ignored (no torch runtime
    line); naming a framework is asking about it, so it imports that one."""
    pytest.importorskip("torch")
    out = run_fwd9m("env", "--framework", "torch", "--format", "json")
    assert out.returncode == 0, out.stderr
    assert list(json.loads(out.stdout)["frameworks"]) == ["torch"]
    code, err = _cli(capsys, "env", "--framework", "caffe")
    assert code == 2 and "unknown framework 'caffe'" in err
    code, err = _cli(capsys, "env", "--framework", "torch", "--diff", "a.json", "b.json")
    assert code == 2 and "--diff compares two saved files" in err


def test_diff_refuses_pipes_devices_directories_and_huge_files(capsys, tmp_path):
    """A named pipe as a --diff input blocked forever; /dev/zero never ended."""
    import os

    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as f:  # sparse: no disk used
        f.truncate(17 << 20)
    cases = [
        (fifo, "is a named pipe, not a regular fingerprint file"),
        ("/dev/zero", "is a character device"),
        (tmp_path, "is a directory, not a fingerprint file"),
        (huge, "is 17 MiB, more than any fingerprint file fwd9m writes"),
    ]
    for path, message in cases:
        code, err = _cli(capsys, "env", "--diff", str(path), str(path))
        assert code == 2 and message in err and "env --format json" in err, (path, err)


def test_env_import_keeps_tensorflow_startup_lines_out():
    """TF's C++ runtime logs start-up lines on descriptor 2 whatever TF_CPP_MIN_LOG_LEVEL
    says; `fwd9m env --import` silences them while it imports a framework."""
    pytest.importorskip("tensorflow")
    out = run_fwd9m("env", "--framework", "tensorflow")
    assert out.returncode == 0, out.stderr
    assert "runtime    tensorflow" in out.stdout
    assert "oneDNN" not in out.stderr and "absl" not in out.stderr, out.stderr


_EVIL = ("\x1b]0;pwned\x07", "\x1b[2J", "a\nREPRODUCIBLE: forged", "\u202egnp.exe", "\x9b31m")


def _no_control(out: str) -> None:
    assert not any(c in out for c in "\x1b\x07\u202e\x9b"), repr(out)
    assert not any(line.startswith("REPRODUCIBLE") for line in out.splitlines()), out


def test_env_diff_and_env_escape_control_characters(capsys, tmp_path, monkeypatch):
    """Keys and values of a fingerprint file reached the terminal as they were (an OSC
    title change, a screen clear), and so did environment variables in `fwd9m env`."""
    base = environment.collect()
    a, b = json.loads(environment.dump(base)), json.loads(environment.dump(base))
    for i, evil in enumerate(_EVIL):
        b["env"][evil] = evil
        b["packages"][f"p{i}{evil}"] = "1"
        a["threads"][evil] = i
    pa, pb = tmp_path / "a.json", tmp_path / "b.json"
    pa.write_text(json.dumps(a))
    pb.write_text(json.dumps(b))
    from fwd9m.cli import main

    assert main(["env", "--diff", str(pa), str(pb)]) == 1
    out = capsys.readouterr().out
    _no_control(out)
    assert "\\x1b]0;pwned\\x07" in out and "a\\nREPRODUCIBLE: forged" in out
    monkeypatch.setenv("XLA_FLAGS", "\x1b[2J\nREPRODUCIBLE: forged")
    monkeypatch.setenv("OMP_NUM_THREADS", "\x1b]0;pwned\x07")
    assert main(["env"]) == 0
    out = capsys.readouterr().out
    _no_control(out)
    assert "XLA_FLAGS=\\x1b[2J\\nREPRODUCIBLE: forged" in out


def test_error_messages_escape_file_names(capsys, tmp_path):
    bad = tmp_path / "x\x1b[2J\nREPRODUCIBLE: forged.json"
    bad.write_text("[1]")
    code, err = _cli(capsys, "env", "--diff", str(bad), str(bad))
    assert code == 2 and "x\\x1b[2J\\nREPRODUCIBLE: forged.json" in err, err
    _no_control(err)


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
    max_leaves=15,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    doc=st.dictionaries(
        st.sampled_from(
            ["schema", "schema_version", "env", "cpu", "gpus", "packages", "frameworks", "threads", "x\x1b"]
        ),
        _json,
        max_size=6,
    ),
    raw=st.binary(max_size=200),
    valid=st.booleans(),
)
def test_fuzz_fingerprint_files(tmp_path, doc, raw, valid):
    """Random bytes and crafted JSON: load raises FileFormatError only, and whatever
    loads can be diffed and rendered without control characters reaching the output."""
    if valid:
        doc.update(schema=environment.SCHEMA, schema_version=1)
    path = tmp_path / "fp.json"
    for data in (raw, json.dumps(doc).encode()):
        path.write_bytes(data)
        try:
            fp = environment.load(path)
        except FileFormatError:
            continue
        out = environment.render_diff(environment.diff(fp, environment.collect()))
        assert "\x1b" not in out


def test_the_interconnect_settings_are_in_the_fingerprint_and_its_diff(monkeypatch):
    """NCCL cannot run here (no GPU): its variables are set as a job's launcher would."""
    from fwd9m import environment

    monkeypatch.setenv("NCCL_NTHREADS", "256")
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("RANK", "3")
    a = environment.collect()
    assert a["interconnect"]["env"] == {"NCCL_NTHREADS": "256", "NCCL_NVLS_ENABLE": "0"}
    assert a["interconnect"]["world_size"] == 8 and a["interconnect"]["launcher"] == "torchrun"
    monkeypatch.setenv("NCCL_NTHREADS", "512")
    monkeypatch.setenv("WORLD_SIZE", "16")
    keys = {d.key: d for d in environment.diff(a, environment.collect())}
    assert "interconnect.env.NCCL_NTHREADS" in keys and "order" in keys["interconnect.env.NCCL_NTHREADS"].reason
    assert keys["interconnect.world_size"].rank == 0
