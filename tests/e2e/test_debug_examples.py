"""`fwd9m debug` on the broken examples: the documented cause class (culprit op /
external source / structural) and the right op, source and line.

Each case records two (torch_text: four) instrumented runs, so these are the slowest
end-to-end tests. jax_keys: the unseeded NumPy batch order is found where the first
batch enters JAX, and its fixed variant is reproducible.
"""

from __future__ import annotations

import pytest
from _examples_spec import BY_NAME, DEBUG_CASES, DebugCase, explain, fwd9m, parse_json, require_cli, require_modules

# JAX: the batch indices from the unseeded NumPy generator are the first differing input,
# at the first batch, on the line that indexes the data with them (external: data)
JAX_KEYS = DebugCase(
    "jax_keys",
    "jax_keys",
    "external",
    {"source": "data", "headline": "data pipeline", "catalog": "python.numpy-unseeded"},
    line="params, loss = train_step(params, x[idx], y[idx], key)",
    options=("--no-hashseed-check",),
)
CASES = (*DEBUG_CASES, *(() if any(c.example == "jax_keys" for c in DEBUG_CASES) else (JAX_KEYS,)))


def _field(first: dict, name: str) -> str:
    explanation = first.get("explanation") or {}
    if name == "headline":
        return str(explanation.get("headline", ""))
    if name == "catalog":
        return " ".join(str(c.get("id")) for c in explanation.get("catalog") or [])
    return str(first.get(name) or "")


def _brief(first: dict) -> str:
    """The first divergence without its long parts, for assertion messages."""
    keep = ("kind", "op", "module", "phase", "location", "source", "detail")
    return str(
        {k: first.get(k) for k in keep} | {"headline": _field(first, "headline"), "catalog": _field(first, "catalog")}
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "case",
    [
        pytest.param(c, id=c.id, marks=[pytest.mark.xfail(reason=c.flaky, strict=False)] if c.flaky else [])
        for c in CASES
    ],
)
def test_debug_reports_documented_cause(case):
    require_cli("debug")
    example = BY_NAME[case.example]
    require_modules(example)
    proc = fwd9m("debug", "--format", "json", *case.options, example.rel("broken"), env=case.env)
    assert proc.returncode == 1, explain(proc)
    report = parse_json(proc)
    first = report.get("first") or {}
    kinds = case.kind.split("|")
    assert report.get("kind") in kinds and first.get("kind") in kinds, (
        f"expected a {case.kind} cause, got {report.get('kind')}: {_brief(first)}"
    )
    for name, expected in case.expect.items():
        assert any(e in _field(first, name) for e in expected.split("|")), (
            f"{name}: expected {expected!r} in {_field(first, name)!r}: {_brief(first)}"
        )
    if case.line:
        where = [f"{example.rel('broken')}:{example.line_of(snippet)}" for snippet in case.line.split("|")]
        assert first.get("location") in where, (
            f"expected the divergence at {' or '.join(where)}, got {first.get('location')}: {_brief(first)}"
        )


@pytest.mark.slow
def test_debug_jax_keys_fixed_is_reproducible():
    require_cli("debug")
    example = BY_NAME["jax_keys"]
    require_modules(example)
    proc = fwd9m("debug", "--format", "json", example.rel("fixed"))
    assert proc.returncode == 0, explain(proc)
    report = parse_json(proc)
    assert report.get("reproducible") is True and report.get("framework") == "jax", report.get("kind")
    assert report.get("ops_a") == report.get("ops_b") > 100
