"""`fwd9m lint` on the examples: each broken variant is flagged with its documented
codes, each fixed variant is clean. One `fwd9m lint examples` call serves every test
(lint imports no framework; the call takes well under a second)."""

from __future__ import annotations

import pytest
from _examples_spec import EXAMPLES, explain, fwd9m, ids, parse_json, require_cli

#: opt-in rules that the examples document
OPT_IN = ("FWD101", "FWD102", "FWD306", "FWD402", "FWD501", "FWD601", "FWD703")


@pytest.fixture(scope="module")
def findings():
    """code set per linted file (path relative to the repository, with /)."""
    require_cli("lint")
    # the opt-in rules the examples' READMEs name (measured below 0.9 on public code;
    # fwd9m check and debug use them for their hints all the same)
    proc = fwd9m("lint", "--format", "json", "--extend-select", ",".join(OPT_IN), "examples")
    assert proc.returncode == 1, explain(proc)
    report = parse_json(proc)
    by_path: dict[str, set[str]] = {}
    for f in report["findings"]:
        by_path.setdefault(f["path"].replace("\\", "/"), set()).add(f["code"])
    return by_path


@pytest.mark.parametrize("example", EXAMPLES, ids=ids())
def test_lint_flags_broken_with_documented_codes(example, findings):
    found = findings.get(example.rel("broken"), set())
    missing = example.lint_codes - found
    assert not missing, f"{example.rel('broken')}: expected {sorted(missing)}, got {sorted(found)}"


@pytest.mark.parametrize("example", EXAMPLES, ids=ids())
def test_lint_is_clean_on_fixed(example, findings):
    assert example.rel("fixed") not in findings, findings[example.rel("fixed")]


def test_lint_single_files_exit_status():
    """As a user runs it on one file: exit 1 on a broken variant, 0 on its fix; with the
    default rules, and with an opt-in rule as the example's README names it."""
    require_cli("lint")
    broken = fwd9m("lint", "examples/torch_cnn/broken.py")
    assert broken.returncode == 1 and "FWD103" in broken.stdout, explain(broken)
    fixed = fwd9m("lint", "examples/torch_cnn/fixed.py")
    assert fixed.returncode == 0, explain(fixed)
    broken = fwd9m("lint", "--extend-select", "FWD101", "examples/keras_custom_layer/broken.py")
    assert broken.returncode == 1 and "FWD101" in broken.stdout, explain(broken)
    fixed = fwd9m("lint", "--extend-select", "FWD101", "examples/keras_custom_layer/fixed.py")
    assert fixed.returncode == 0, explain(fixed)
