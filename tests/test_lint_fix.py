"""``fwd9m lint --fix``: safe fixes by default, the rest with ``--unsafe-fixes``, ``--diff``
without writing; files replaced whole, only when unchanged since read, through links."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from fwd9m.fix._lint import apply, plan_paths
from fwd9m.lint import lint_paths
from fwd9m.lint._config import Config

SCRIPT = """import random
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset


class Aug(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return np.random.rand() + i


random.seed(time.time())  # the clock
rng = np.random.default_rng()
loader = DataLoader(Aug(), batch_size=2, num_workers=2)
model = torch.nn.Linear(4, 1)
for x in loader:
    loss = model(torch.ones(4)).sum() * x.sum()
    loss.backward()
"""

ORDER = (
    'words = {"b", "a", "c"}\nfor w in words:\n    print(w)\n'
    'names = set(open("f").read().split())\nfor n in names:\n    print(n)\n'
)


def _lint(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fwd9m", "lint", "--isolated", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_diff_shows_the_safe_fixes_and_writes_nothing(tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT)
    out = _lint(tmp_path, "--extend-select", "FWD306,FWD104", "--diff", "train.py")  # both opt-in
    assert out.returncode == 1, out.stdout + out.stderr
    assert (
        "+loader = DataLoader(Aug(), batch_size=2, num_workers=2, worker_init_fn=fwd9m.data.worker_init_fn)"
        in out.stdout
    )
    assert "+import fwd9m.data" in out.stdout and "random.seed(0)" not in out.stdout  # the clock seed: unsafe
    assert "would fix 1 finding in 1 file; 3 more with --unsafe-fixes" in out.stderr
    assert (tmp_path / "train.py").read_text() == SCRIPT
    out = _lint(tmp_path, "--extend-select", "FWD306,FWD104", "--diff", "--unsafe-fixes", "train.py")
    assert "+random.seed(0)  # the clock" in out.stdout and "+rng = np.random.default_rng(0)" in out.stdout
    assert "+fwd9m.enable_determinism(seed=0)" in out.stdout and "+import fwd9m.data" not in out.stdout
    assert (tmp_path / "train.py").read_text() == SCRIPT


def test_fix_writes_the_safe_fixes_keeps_the_mode_and_reports_what_is_left(tmp_path):
    script = tmp_path / "order.py"
    script.write_text(ORDER)
    os.chmod(script, 0o640)
    out = _lint(tmp_path, "--extend-select", "FWD402", "--fix", "order.py")
    assert out.returncode == 1, out.stdout + out.stderr  # the set from a file: its fix is unsafe
    assert "order.py:1: FWD402 fixed: sorted() over the set" in out.stderr
    assert script.read_text() == ORDER.replace("for w in words", "for w in sorted(words)")
    assert (script.stat().st_mode & 0o777) == 0o640 and sorted(p.name for p in tmp_path.iterdir()) == ["order.py"]
    assert "order.py:4:" in out.stdout and "order.py:1:" not in out.stdout  # what is left, linted again
    out = _lint(tmp_path, "--extend-select", "FWD402", "--fix", "--unsafe-fixes", "order.py")
    assert out.returncode == 0 and "for n in sorted(names)" in script.read_text(), out.stdout + out.stderr


def test_fix_goes_through_a_link_to_its_target(tmp_path):
    (tmp_path / "src").mkdir()
    real = tmp_path / "src" / "order.py"
    real.write_text(ORDER)
    (tmp_path / "order.py").symlink_to(real)
    out = _lint(tmp_path, "--extend-select", "FWD402", "--fix", "order.py")
    assert "fixed 1 finding in 1 file" in out.stderr, out.stderr
    assert (tmp_path / "order.py").is_symlink() and "for w in sorted(words)" in real.read_text()


def test_a_file_changed_since_it_was_read_is_not_written(tmp_path):
    script = tmp_path / "order.py"
    script.write_text(ORDER)
    config = Config(extend_select=["FWD402"])
    fixes = plan_paths(lint_paths([str(script)], config).findings, config)
    assert fixes and "sorted(words)" in fixes[0].after
    script.write_text(ORDER + "# edited meanwhile\n")
    refused = apply(fixes)
    assert refused and "changed since it was read" in refused[0]
    assert script.read_text() == ORDER + "# edited meanwhile\n"


def test_a_file_without_fixable_findings_is_left_alone(tmp_path):
    (tmp_path / "ok.py").write_text("import random\nrandom.seed(1)\n")
    before = (tmp_path / "ok.py").stat().st_mtime_ns
    out = _lint(tmp_path, "--fix", "ok.py")
    assert out.returncode == 0 and "fixed 0 findings in 0 files" in out.stderr, out.stderr
    assert (tmp_path / "ok.py").stat().st_mtime_ns == before


def test_sorted_replaces_list_and_wraps_a_set_made_where_it_is_iterated():
    import ast

    from fwd9m.fix import _edits

    source = "s = {'b', 'a'}\nids = list(s)\nt = tuple(s)\nv = dict(enumerate(set(words)))\n"
    tree = ast.parse(source)
    out = _edits.apply(source, _edits.sorted_sets(source, tree))
    assert out == "s = {'b', 'a'}\nids = sorted(s)\nt = tuple(sorted(s))\nv = dict(enumerate(sorted(set(words))))\n"
    safe = _edits.apply(source, _edits.sorted_sets(source, tree, strings_only=True))
    assert "enumerate(set(words))" in safe and "ids = sorted(s)" in safe  # set(words) may not sort: unsafe


def test_fix_and_diff_refuse_standard_input_and_write_nothing(tmp_path):
    (tmp_path / "order.py").write_text(ORDER)
    for flag in ("--fix", "--diff"):
        for args in (["-"], ["--stdin-filename", "order.py", "-"]):
            out = subprocess.run(
                [sys.executable, "-m", "fwd9m", "lint", "--isolated", "--extend-select", "FWD402", flag, *args],
                cwd=tmp_path,
                input=ORDER,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert out.returncode == 2 and "standard input" in out.stderr, out.stdout + out.stderr
    assert (tmp_path / "order.py").read_text() == ORDER


def test_fix_keeps_line_endings_and_a_bom_and_skips_what_does_not_parse(tmp_path):
    crlf = ORDER.replace("\n", "\r\n").encode()
    (tmp_path / "crlf.py").write_bytes(crlf)
    (tmp_path / "bom.py").write_bytes(b"\xef\xbb\xbf" + ORDER.encode())
    (tmp_path / "latin.py").write_bytes(
        b"# -*- coding: latin-1 -*-\n" + ORDER.replace('"c"', '"\xe9"').encode("latin-1")
    )
    out = _lint(tmp_path, "--extend-select", "FWD402", "--fix", "crlf.py", "bom.py", "latin.py")
    assert "fixed 3 findings in 3 files" in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert (tmp_path / "crlf.py").read_bytes() == crlf.replace(b"for w in words", b"for w in sorted(words)")
    assert (tmp_path / "bom.py").read_bytes() == b"\xef\xbb\xbf" + ORDER.replace(
        "in words", "in sorted(words)"
    ).encode()
    assert b'"\xe9"' in (tmp_path / "latin.py").read_bytes()
    from fwd9m.fix._lint import plan

    fix = plan(tmp_path / "bad\x1b.py", "\ufeffx = 1\n", [])
    assert "does not parse" in fix.skipped and "\x1b" not in fix.skipped and fix.after == fix.before


def test_fix_writes_only_files_named_or_found_in_a_folder_named(tmp_path):
    (tmp_path / "train.py").write_text("import helpers\n")
    (tmp_path / "helpers.py").write_text(ORDER)
    out = _lint(tmp_path, "--extend-select", "FWD402", "--fix", "train.py")
    assert "helpers.py: not fixed: read as a module a script imports" in out.stderr, out.stderr
    assert (tmp_path / "helpers.py").read_text() == ORDER and "helpers.py:1:" in out.stdout
    (tmp_path / "outside").mkdir()
    (tmp_path / "proj").mkdir()
    (tmp_path / "outside" / "o.py").write_text(ORDER)
    (tmp_path / "proj" / "link.py").symlink_to(tmp_path / "outside" / "o.py")
    (tmp_path / "proj" / "own.py").write_text(ORDER)
    out = _lint(tmp_path, "--extend-select", "FWD402", "--fix", "proj")
    assert "proj/link.py: not fixed: a link to a file outside proj" in out.stderr, out.stderr
    assert (tmp_path / "outside" / "o.py").read_text() == ORDER
    assert "sorted(words)" in (tmp_path / "proj" / "own.py").read_text()
    assert sorted(p.name for p in (tmp_path / "proj").iterdir()) == ["link.py", "own.py"]


def test_two_fixes_of_one_file_use_temporary_files_of_their_own(tmp_path, monkeypatch):
    import tempfile

    from fwd9m.fix import _replace_all

    script = tmp_path / "a.py"
    script.write_text("x = 1\n")
    made = []
    real = tempfile.mkstemp

    def spy(*args, **kwargs):
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(tempfile, "mkstemp", spy)
    _replace_all([(script, b"x = 2\r\n")])
    _replace_all([(script, b"x = 3\r\n")])
    assert len({name for _, name in made}) == 2 and all(Path(n).parent == tmp_path for _, n in made)
    assert script.read_bytes() == b"x = 3\r\n" and sorted(p.name for p in tmp_path.iterdir()) == ["a.py"]


def test_the_safe_sorted_fix_needs_one_binding_of_a_string_set_iterated_in_its_scope():
    import ast

    from fwd9m.fix import _edits

    def fixed(source: str, strings_only: bool = True) -> str:
        return _edits.apply(source, _edits.sorted_sets(source, ast.parse(source), strings_only=strings_only))

    once = "def f():\n    tags = {'b', 'a'}\n    return list(tags)\n"
    assert fixed(once) == once.replace("list(tags)", "sorted(tags)")
    elsewhere = (  # the same name a set in one function, a list of dicts in another: left alone
        "def f():\n    rows = {'b', 'a'}\n    for r in rows:\n        print(r)\n"
        "def g():\n    rows = [{'k': 1}, {'k': 0}]\n    for r in rows:\n        print(r)\n"
    )
    assert fixed(elsewhere) == elsewhere
    assert fixed(elsewhere, strings_only=False).count("in sorted(rows)") == 2  # unsafe: both
    other_scope = "tags = {'b', 'a'}\ndef f():\n    return list(tags)\n"
    assert fixed(other_scope) == other_scope
    added_to = "tags = {'b', 'a'}\ntags.add(1)\nfor t in tags:\n    print(t)\n"
    assert fixed(added_to) == added_to
    rebound = "tags = {'b', 'a'}\nfor tags in [[2], [1]]:\n    print(list(tags))\n"
    assert fixed(rebound) == rebound


def test_lint_fix_leaves_a_name_bound_twice_to_the_unsafe_fixes(tmp_path):
    source = (
        'def f():\n    rows = {"b", "a"}\n    for r in rows:\n        print(r)\n\n\n'
        "def g():\n    rows = [3, 1, 2]\n    for r in rows:\n        print(r)\n"
    )
    (tmp_path / "two.py").write_text(source)
    out = _lint(tmp_path, "--extend-select", "FWD402", "--fix", "two.py")
    assert (tmp_path / "two.py").read_text() == source and "1 more with --unsafe-fixes" in out.stderr, out.stderr
    out = _lint(tmp_path, "--extend-select", "FWD402", "--fix", "--unsafe-fixes", "two.py")
    fixed = source.replace("for r in rows:\n        print(r)\n\n", "for r in sorted(rows):\n        print(r)\n\n", 1)
    assert (tmp_path / "two.py").read_text() == fixed, out.stderr  # g's list, of the same name: not sorted
