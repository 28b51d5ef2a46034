"""`fwd9m check` on the examples: exit 1 on every broken variant, 0 on every fixed one.

Each check runs the script twice in fresh interpreters (TensorFlow starts in ~5 s), in
an environment where the user set nothing (no PYTHONHASHSEED, no determinism switches).
"""

from __future__ import annotations

import pytest

from _spec import EXAMPLES, explain, fwd9m, ids, require_cli, require_fwd9m, require_modules


@pytest.mark.parametrize("example", EXAMPLES, ids=ids())
def test_check_says_broken_is_not_reproducible(example):
    require_cli("check")
    require_modules(example)
    proc = fwd9m("check", "--timeout", "240", example.rel("broken"), *example.args)
    assert proc.returncode == 1, explain(proc)


@pytest.mark.parametrize("example", EXAMPLES, ids=ids())
def test_check_says_fixed_is_reproducible(example):
    require_cli("check")
    require_modules(example)
    require_fwd9m(*example.fixed_needs)
    proc = fwd9m("check", "--timeout", "240", example.rel("fixed"), *example.args)
    assert proc.returncode == 0, explain(proc)


def test_check_demo_names_the_differing_weights():
    """The README's headline demo: the report on keras_custom_layer/broken.py names the
    layer weights that differ."""
    require_cli("check")
    example = next(e for e in EXAMPLES if e.name == "keras_custom_layer")
    require_modules(example)
    proc = fwd9m("check", "--timeout", "240", example.rel("broken"))
    assert proc.returncode == 1, explain(proc)
    assert "kernel" in proc.stdout, explain(proc)
