"""The copy-on-write layers of the runs (:mod:`fwd9m._runtime.isolation`): which folders
are covered, and what a run wrote through each, by the name the user knows."""

from __future__ import annotations

import subprocess

import pytest

from fwd9m._runtime import isolation


def _project(tmp_path):
    proj, elsewhere = tmp_path / "proj", tmp_path / "disk"
    (proj / "data").mkdir(parents=True)
    (elsewhere / "outputs" / "deeper").mkdir(parents=True)
    (elsewhere / "ckpt.pt").write_bytes(b"weights")
    (proj / "outputs").symlink_to(elsewhere / "outputs")
    (proj / "best.pt").symlink_to(elsewhere / "ckpt.pt")
    (proj / "inside").symlink_to(proj / "data")  # inside the directory: covered already
    (elsewhere / "outputs" / "loop").symlink_to(elsewhere / "outputs")  # a loop
    return proj, elsewhere


def test_the_plan_covers_links_to_folders_and_files_elsewhere_once(tmp_path):
    proj, elsewhere = _project(tmp_path)
    iso, why = isolation.plan(proj, None, str(tmp_path / "own"))
    assert why == "" and iso is not None
    layers = {layer.name: layer for layer in iso.layers}
    assert set(layers) == {"", "outputs", "best.pt"}
    assert layers["outputs"].lower == str(elsewhere / "outputs")
    assert layers["best.pt"].lower == str(elsewhere) and layers["best.pt"].only == "ckpt.pt"
    assert iso.layers[0].name == ""  # outer folders first


def test_a_folder_holding_fwd9m_s_own_cannot_be_covered(tmp_path):
    proj, _ = _project(tmp_path)
    assert isolation.plan(proj, None, str(proj / "tmp"))[0] is None
    (proj / "scratch").symlink_to(tmp_path)  # holds fwd9m's folder: named, not covered
    iso, _ = isolation.plan(proj, None, str(tmp_path / "own"))
    assert iso is not None and any(s.startswith("scratch ->") for s in iso.skipped)


def test_what_a_run_writes_lands_in_its_layers_and_is_named_as_the_user_knows_it(tmp_path):
    proj, elsewhere = _project(tmp_path)
    iso, _ = isolation.plan(proj, None, str(tmp_path / "own"))
    if isolation.probe(iso, tmp_path / "own" / "probe"):
        pytest.skip("this machine forbids the namespaces (the runs fall back to --cwd link)")
    upper = tmp_path / "own" / "run1" / "cwd"
    cmd = isolation.wrap(
        ["sh", "-c", "echo r > outputs/deeper/r.txt; echo w > best.pt; echo n > new.txt; rm -r data; pwd"],
        iso,
        upper,
    )
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == str(proj), done.stderr
    assert (elsewhere / "ckpt.pt").read_bytes() == b"weights" and (proj / "data").is_dir()
    assert not (elsewhere / "outputs" / "deeper" / "r.txt").exists() and not (proj / "new.txt").exists()
    assert (upper / "new.txt").read_text() == "n\n"
    assert sorted(isolation.written(iso, upper)) == ["best.pt", "outputs/deeper/r.txt"]


def test_a_failed_set_up_is_exit_125_with_the_reason(tmp_path):
    iso = isolation.Isolation(str(tmp_path), [isolation.Layer(str(tmp_path / "missing"), "")])
    why = isolation.probe(iso, tmp_path / "probe")
    assert why and "No such file" in why and not (tmp_path / "probe").exists()
