"""fwd9m probe: specs cover the catalog, classification on real frameworks, bad input."""

from __future__ import annotations

import json
import os

import pytest

from fwd9m import catalog
from fwd9m.errors import ConfigurationError
from fwd9m.probe import Result, _compare, _specs, probe, probe_items


def test_every_op_entry_has_a_probe_or_a_reason():
    specs = _specs.load()
    ops = {e.id for fw in catalog.FRAMEWORKS for e in catalog.entries(fw) if e.kind == "op"}
    assert ops - set(specs) == set()
    assert set(specs) - ops == set(), "specs keyed by ids the catalog does not have"
    for s in specs.values():
        assert s.skip or s.run


def test_inputs_are_parsed_and_drawn_the_same_every_time():
    assert _specs.parse_input("int64[100, 2]<8") == ("int64", (100, 2), 8.0)
    with pytest.raises(Exception, match="bad input"):
        _specs.parse_input("float33[2]")
    spec = {"i": _specs.parse_input("int64[50]<8"), "x": _specs.parse_input("float32[3,4]")}
    a, b = _specs.draw(spec, "k"), _specs.draw(spec, "k")
    assert a["i"].max() < 8 and a["x"].shape == (3, 4)
    assert all((a[n] == b[n]).all() for n in a)


torch = pytest.importorskip("torch")


def _items(**runs):
    return [("torch", [{"key": k, "inputs": {}, "run": r} for k, r in runs.items()])]


def test_classifies_nondeterministic_deterministic_and_raises():
    # certain, not likely: the unseeded global generator advances every repeat; put_ with
    # accumulate=False has no deterministic implementation (measured: it raises under the switch)
    rep = probe_items(
        _items(
            drawn="torch.randn(64)",
            plain="torch.arange(8.0) * 2",
            put="torch.zeros(4).put_(torch.tensor([0, 0]), torch.tensor([1.0, 2.0]))",
        ),
        switch="both",
        threads=[1],
        repeat=3,
    )
    got = {(r.key, r.switch): r for r in rep.results}
    assert got["drawn", False].status == "nondeterministic" and got["drawn", False].distinct == 3
    assert got["drawn", False].max_ulp > 0
    assert got["plain", False].status == got["plain", True].status == "deterministic"
    assert got["put", False].status == "deterministic"
    assert got["put", True].status == "raises" and "deterministic" in got["put", True].error
    assert "distinct outputs in 3 repeats (max" in got["drawn", False].measured()


def test_contradictions_are_certain_ones_only():
    rep = probe_items([], switch="off", repeat=2)
    key = "torch.scatter-add"  # gpu only in the catalog
    rep.results = [
        Result(key, "torch", "cpu", False, 2, "nondeterministic", 3, 5, 7),
        Result("torch.index-put-accumulate", "torch", "cpu", False, 2, "deterministic", 1, 5),
    ]
    rep.expected = _compare.expectations(rep.results)
    assert rep.expected[f"{key}|cpu|off"] == "deterministic"
    bad = rep.contradictions()
    assert len(bad) == 1 and bad[0].startswith(
        f"{key} (cpu, 2 threads, switch off): catalog says deterministic, measured nondeterministic: 3 distinct"
    )
    assert "not observed" in _compare.unconfirmed(rep)[0]


def test_sibling_entry_covers_the_other_device():
    # put-accumulate-cuda is gpu only, but put-accumulate-cpu (same op, same condition)
    # is cpu: nondeterminism measured on cpu for the cuda entry is expected
    assert _compare.expected("torch.put-accumulate-cuda", "torch", "cpu", False) == "nondeterministic"


def test_a_device_that_is_not_there_is_a_clear_error():
    if torch.cuda.device_count() > 7:
        pytest.skip("this machine has a cuda:7")
    with pytest.raises(ConfigurationError, match="cuda:7 is not there"):
        probe("torch", device="cuda:7", switch="off", repeat=2, entries=["torch.index-add"])
    with pytest.raises(ConfigurationError, match="unknown device"):
        probe("torch", device="tpu9", repeat=2)
    with pytest.raises(ConfigurationError, match="no op entry"):
        probe("torch", repeat=2, entries=["torch.nope"])


def test_cli_probe_one_entry_json_and_no_overwrite(tmp_path, capsys):
    from fwd9m.cli import main

    out = tmp_path / "p.json"
    rc = main(
        [
            "probe",
            "-q",
            "-f",
            "torch",
            "--entry",
            "torch.put-overwrite",
            "--threads",
            "1",
            "-k",
            "2",
            "--json",
            str(out),
        ]
    )
    text = capsys.readouterr().out
    assert rc in (0, 1) and "torch.put-overwrite" in text
    data = json.loads(out.read_text())
    assert data["schema"] == "fwd9m.probe" and "packages" in data["environment"]
    on = [r for r in data["results"] if r["switch"]]
    assert on[0]["status"] == "raises" and on[0]["catalog"] == "raises"
    before = out.read_bytes()
    assert main(["probe", "-q", "-f", "torch", "--entry", "torch.put-overwrite", "--json", str(out)]) == 2
    assert out.read_bytes() == before
    assert "never overwrites" in capsys.readouterr().err


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs 2 CPU cores for a parallel kernel")
def test_index_put_accumulate_is_deterministic_under_the_switch():
    rep = probe("torch", switch="on", threads=[2], repeat=3, entries=["torch.index-put-accumulate"])
    assert [r.status for r in rep.results] == ["deterministic"]


def test_probe_trace_rebuilds_the_op_kinds_a_trace_ran(tmp_path):
    from fwd9m import debug
    from fwd9m.probe._trace import probe_trace, trace_items

    g = torch.Generator().manual_seed(0)
    x, i, v = torch.zeros(8, 4), torch.randint(0, 8, (1000,), generator=g), torch.randn(1000, 4, generator=g)
    path = tmp_path / "run.trace"
    with debug.record(path, framework="torch"):
        y = x.index_put((i,), v, accumulate=True)
        (y * 2.0).sum().item()
    fw, items, _ = trace_items(str(path))
    kinds = [it["op"] for it in items]
    assert fw == "torch" and "aten::index_put" in kinds and "aten::mul" in kinds
    rep = probe_trace(str(path), switch="on", threads=[1], repeat=2)
    assert rep.results and all(r.status == "deterministic" for r in rep.results), rep.render()


def test_probe_trace_of_another_framework_says_so(tmp_path):
    pytest.importorskip("jax")
    import jax.numpy as jnp

    from fwd9m import debug
    from fwd9m.probe._trace import trace_items

    path = tmp_path / "j.trace"
    with debug.record(path, framework="jax"):
        jnp.ones(3) + 1
    with pytest.raises(ConfigurationError, match="rebuilds PyTorch ops"):
        trace_items(str(path))
