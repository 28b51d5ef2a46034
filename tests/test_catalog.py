"""The catalog: schema of the data files, the query API, and the CLI."""

from __future__ import annotations

import json

import pytest
from conftest import run_fwd9m
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from fwd9m import catalog
from fwd9m.errors import CatalogError

ALL = catalog.entries()


def test_every_framework_has_entries():
    for fw in catalog.FRAMEWORKS:
        assert catalog.entries(fw), fw


def test_schema():
    ids = [e.id for e in ALL]
    assert len(ids) == len(set(ids)), "duplicate ids"
    for e in ALL:
        assert e.id.startswith(e.framework + "."), e.id
        assert e.title and e.summary and e.solutions, e.id
        assert e.kind in catalog.KINDS and e.behaviour in catalog.BEHAVIOURS, e.id
        assert set(e.devices) <= set(catalog.DEVICES), e.id
        SpecifierSet(e.affected)
        if e.ngc:
            SpecifierSet(e.ngc)
        for since, behaviour in e.timeline:
            Version(since)
            assert behaviour in catalog.BEHAVIOURS
        assert [Version(s) for s, _ in e.timeline] == sorted(Version(s) for s, _ in e.timeline), e.id
        assert e.references and all(r.startswith("https://") for r in e.references), e.id
        if e.kind == "op":
            assert e.ops or e.symbols, e.id


def test_lookup_by_op_and_symbol():
    assert [e.id for e in catalog.for_op("torch", "aten::index_add_")] == ["torch.index-add"]
    assert catalog.for_op("torch", "index_add") == catalog.for_op("torch", "aten.index_add_.default")
    ids = {e.id for e in catalog.for_op("torch", "aten::index_put_")}
    assert "torch.index-put-accumulate" in ids
    assert "tensorflow.segment-reduction" in {e.id for e in catalog.for_op("tensorflow", "UnsortedSegmentSum")}
    assert catalog.for_symbol("tensorflow.math.unsorted_segment_sum") == catalog.for_symbol(
        "tf.math.unsorted_segment_sum"
    )
    assert {e.id for e in catalog.for_symbol("torch.Tensor.index_add_")} == {"torch.index-add"}


def test_behaviour_follows_version():
    (e,) = catalog.for_symbol("tf.math.unsorted_segment_sum", version="2.4")
    assert e.behaviour == "nondeterministic"
    (e,) = catalog.for_symbol("tf.math.unsorted_segment_sum", version="2.6.1")
    assert e.behaviour == "raises"
    (e,) = catalog.for_symbol("tf.math.unsorted_segment_sum", version="2.21.0")
    assert e.behaviour == "deterministic" and e.deterministic_since == "2.7"
    e = catalog.get("torch.index-add")
    assert e.applies_to("2.13.0+cpu", "cuda") and not e.applies_to("2.13", "cpu")
    assert e.at("1.8.1").behaviour == "raises"
    assert e.fix == "torch.use_deterministic_algorithms(True)"


def test_query_filters_and_errors():
    found = catalog.query("index_add")
    assert found[0].id == "torch.index-add"  # exact symbol match ranks first
    assert "torch.index-select-backward" in {e.id for e in found}  # its backward uses index_add
    assert all(e.framework == "torch" for e in catalog.query(framework="torch"))
    assert all("gpu" in e.devices for e in catalog.query(framework="torch", device="cuda"))
    assert catalog.query("framework:torch op:aten::index_add_") == catalog.for_op("torch", "index_add_")
    for bad in (
        dict(framework="caffe"),
        dict(device="fpga"),
        dict(framework="torch", version="1.x"),
        dict(version="2.0"),
        dict(kind="nope"),
        dict(text="foo:bar"),
    ):
        with pytest.raises(CatalogError):
            catalog.query(**bad)
    with pytest.raises(CatalogError, match="did you mean"):
        catalog.get("torch.index-ad")


def test_cli_query_status_and_errors():
    out = run_fwd9m("catalog", "index_add")
    assert out.returncode == 0 and "torch.index-add" in out.stdout
    out = run_fwd9m("catalog", "--framework", "tensorflow", "--format", "json")
    assert out.returncode == 0
    assert {e["framework"] for e in json.loads(out.stdout)} == {"tensorflow"}
    out = run_fwd9m("catalog", "--status", "--format", "json")
    assert out.returncode == 0, out.stderr  # a listing is a report, even with entries
    report = json.loads(out.stdout)
    assert {r["framework"] for r in report} >= {"python"}
    for args in (("--framework", "caffe"), ("foo:bar",), ("-f", "torch", "-V", "x.y")):
        out = run_fwd9m("catalog", *args)
        assert out.returncode == 2 and "Traceback" not in out.stderr and "error" in out.stderr


def test_committed_status_docs_are_up_to_date():
    """docs/status/*.md must equal what scripts/gen-docs generates from the data."""
    from conftest import REPO

    from fwd9m.catalog._render import status_docs

    stale = [
        name
        for name, text in status_docs().items()
        if not (REPO / "docs" / "status" / name).exists()
        or (REPO / "docs" / "status" / name).read_text(encoding="utf-8") != text
    ]
    assert not stale, f"run scripts/gen-docs: stale pages {stale}"


def test_catalog_cli_imports_no_framework():
    """`fwd9m catalog --status` reads versions from package metadata, never imports."""
    import subprocess
    import sys

    code = (
        "import runpy, sys\nsys.argv = ['fwd9m', 'catalog', '--status', '--format', 'json']\n"
        "try:\n    runpy.run_module('fwd9m', run_name='__main__')\nexcept SystemExit:\n    pass\n"
        "mods = ('tensorflow', 'torch', 'jax', 'keras', 'jaxlib')\n"
        "sys.stderr.write('IMPORTED:' + ','.join(m for m in mods if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stderr.strip().endswith("IMPORTED:"), out.stderr[-500:]


def test_unsolved_matches_behaviour():
    for e in catalog.unsolved("torch", "2.13.0", "gpu"):
        assert e.behaviour in ("raises", "nondeterministic") and "gpu" in e.devices
    ids = {e.id for e in catalog.unsolved("tensorflow", "2.6.0", "gpu")}
    assert "tensorflow.segment-reduction" in ids  # raised in 2.5-2.6
    assert "tensorflow.segment-reduction" not in {e.id for e in catalog.unsolved("tensorflow", "2.21.0")}
    with pytest.raises(CatalogError):
        catalog.unsolved("caffe")


def test_switch_and_advice_follow_version():
    sw = catalog.switch("tensorflow")
    assert sw.code_for("2.21") == sw.code == "tf.config.experimental.enable_op_determinism()"
    assert "TF_DETERMINISTIC_OPS" in sw.code_for("2.6.2")
    assert sw.code_for("1.15") is None
    assert catalog.switch("python") is None
    seg = catalog.get("tensorflow.segment-reduction")
    fix = catalog.advice(seg, "2.6")
    assert "2.7" in fix.text and "tensorflow>=2.7" in fix.code and "TF_DETERMINISTIC_OPS" in fix.code
    assert catalog.advice(seg, "2.21").code == sw.code
    put = catalog.get("torch.put-accumulate-cuda")
    assert catalog.advice(put, "2.13") == put.solutions[0]


@pytest.mark.parametrize(
    "bad,match",
    [
        ({"id": "torch.x"}, "missing required"),
        ({"id": "Torch X"}, "kebab"),
        ({"kind": "weird"}, "kind"),
        ({"affected": ">=one"}, "specifier"),
        ({"references": ["http://example.com"]}, "https"),
        ({"timeline": [["1.x", "raises"]]}, "version"),
        ({"timeline": [["1.8", "sometimes"]]}, "behaviour"),
        ({"devices": ["fpga"]}, "devices"),
        ({"colour": "red"}, "unknown keys"),
    ],
)
def test_loader_rejects_malformed_entries(bad, match):
    from fwd9m.catalog._load import _entry
    from fwd9m.errors import FileFormatError

    raw = {
        "id": "torch.x",
        "title": "t",
        "summary": "s",
        "kind": "op",
        "affected": "",
        "references": ["https://example.com"],
        "solutions": [{"text": "fix", "code": "x"}],
    }
    if match == "missing required":
        raw = {"id": "torch.x"}
    else:
        raw.update(bad)
    with pytest.raises(FileFormatError, match=match):
        _entry("torch", raw, "test entry")


def test_no_switch_before_its_first_release():
    """An undated 'raises' entry cannot raise in a release that had no switch at all."""
    e = catalog.get("torch.histc-cuda")
    assert e.switch_since == "1.7"
    assert e.behaviour_at("1.5") == "nondeterministic" and e.behaviour_at("2.0") == "raises"
    assert catalog.get("python.hash-seed").switch_since is None


def test_query_conflicting_or_empty_fields_are_errors():
    with pytest.raises(CatalogError, match="given twice"):
        catalog.query("framework:jax", framework="torch")  # was: silently the torch entries
    with pytest.raises(CatalogError, match="empty"):
        catalog.query(framework="torch", version="")  # was: silently no version filter
    assert catalog.query("framework:torch index_put", framework="TORCH")  # the same twice is fine
    assert catalog.query("device:cuda", device="gpu")  # aliases are not a conflict


def test_cli_status_framework_field_narrows_like_the_option():
    out = run_fwd9m("catalog", "--status", "--format", "json", "framework:python")
    assert out.returncode == 0, out.stderr
    assert [r["framework"] for r in json.loads(out.stdout)] == ["python"]
    out = run_fwd9m("catalog", "--status", "framework:nope")
    assert out.returncode == 2 and "unknown framework" in out.stderr and "Traceback" not in out.stderr


def test_status_is_a_report_and_fail_on_unsolved_is_the_gate(capsys):
    """--status exited 1 whenever anything was listed, which is always (every release
    has unsolved sources): a listing now exits 0, and --fail-on-unsolved makes it a check."""
    from fwd9m.cli import main

    assert catalog.unsolved("python", "3.11")  # so the gate below has something to fail on
    assert main(["catalog", "--status", "-f", "python"]) == 0
    assert "known source(s)" in capsys.readouterr().out
    assert main(["catalog", "--status", "--fail-on-unsolved", "-f", "python"]) == 1
    assert main(["catalog", "--status", "--fail-on-unsolved", "-f", "python", "no-such-word-xyz"]) == 0
    assert main(["catalog", "--fail-on-unsolved", "index_add"]) == 2
    assert "applies to --status only" in capsys.readouterr().err


def test_status_version_needs_one_framework_and_a_value(capsys):
    """`--status -V 2.13` applied 2.13 to every framework (python 2.13 ...); an empty
    -V silently meant the installed version."""
    from fwd9m.cli import main

    for args, message in ((("-V", "2.13"), "needs a framework"), (("-f", "torch", "-V", ""), "--version is empty")):
        assert main(["catalog", "--status", *args]) == 2
        assert message in capsys.readouterr().err
    assert main(["catalog", "--status", "-V", "3.11", "framework:python"]) == 0


def test_every_op_entry_says_whether_its_conditions_were_verified():
    """Issue 15: each op entry is verified against the framework's source (and cites it)
    or says what could not be checked."""
    from fwd9m import catalog

    for fw in ("torch", "tensorflow", "jax"):
        for e in catalog.entries(fw):
            if e.kind != "op":
                continue
            assert e.verified is not None, e.id
            assert (e.verified and e.source) or (not e.verified and e.verified_why), e.id


def test_an_op_entry_without_verified_is_a_file_format_error(tmp_path):
    from fwd9m.catalog import _load
    from fwd9m.errors import FileFormatError

    raw = {
        "id": "torch.x",
        "title": "t",
        "summary": "s",
        "kind": "op",
        "affected": "",
        "references": ["https://example.org"],
        "solutions": [{"text": "t"}],
    }
    with pytest.raises(FileFormatError, match="verified"):
        _load._entry("torch", raw, "torch.toml entry torch.x")
