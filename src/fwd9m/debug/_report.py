"""Render a :class:`~fwd9m.debug._compare.Report` as text, JSON, or a self-contained HTML
page (:mod:`fwd9m.debug._html`)."""

from __future__ import annotations

import json
import math

__all__ = ["render", "text", "to_json", "to_html"]


def render(report, fmt: str = "text") -> str:
    if fmt == "json":
        return to_json(report)
    if fmt == "html":
        return to_html(report)
    return text(report)


def to_json(report) -> str:
    def clean(o):
        if isinstance(o, float) and not math.isfinite(o):
            return str(o)
        if isinstance(o, dict):
            return {k: clean(v) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            return [clean(v) for v in o]
        return o

    return json.dumps(clean(report.to_dict()), indent=2, default=str)


def _fmt_mag(m: dict) -> str:
    if not m:
        return ""
    src = "exact" if m.get("exact") else "sampled"
    return f"max abs diff {m['max_abs']:.3g}, {m['max_ulp']} ULP ({src})"


def _node(framework: str, node: str) -> str:
    """The op line's suffix: the autograd node (torch, TF); for a JAX jit op the suspects
    inside it (``jit:pure_callback,scatter-add``, see fwd9m.jax._recorder)."""
    if not node or node == "random":
        return ""
    if framework == "jax":
        inside = node.partition(":")[2]
        return f"  (contains: {inside.replace(',', ', ')})" if inside else ""
    return f"  (autograd node {node})"


def text(report) -> str:
    """The human report, one fact a line. Every line is escaped
    (:func:`~fwd9m.compare.escape_control`): op names, modules, locations, paths and
    environment keys come from the recorded program and its files, and a name holding a
    newline or an escape sequence must not forge a line or act on the terminal."""
    from .._lint_hints import MAY_NOT_RUN_NOTE
    from ..compare import escape_control

    lines: list[str] = []
    add = lines.append
    f = report.first
    if report.reproducible:
        add(f"reproducible: all {report.spread.get('ops_compared', 0)} recorded ops agree bit "
            f"for bit ({report.a} vs {report.b})")
    if report.environment and not report.reproducible:
        add("ENVIRONMENT: the runs come from different environments; check these first:")
        for d in report.environment[:8]:
            add(f"  {d['key']}: {d['a']!r} -> {d['b']!r}  ({d['reason']})")
        if len(report.environment) > 8:
            add(f"  ... {len(report.environment) - 8} more (see --format json)")
    elif report.environment:
        add(f"note: the environments differ in {len(report.environment)} field(s) "
            f"(first: {report.environment[0]['key']}) but the results agree")
    if f is not None:
        ex = f.explanation or {}
        title = {"culprit": "CULPRIT OP", "external": "EXTERNAL SOURCE",
                 "structural": "STRUCTURAL DIFFERENCE"}[f.kind]
        if f.kind == "external":
            title += f" ({f.source})"
        add(f"{title}: first divergence at op #{f.seq} of {report.ops_a} (step {f.step})")
        if ex.get("headline"):
            add(f"  {ex['headline']}")
        add(f"  op:       {f.op}" + _node(report.framework, f.node))
        if f.module:
            add(f"  module:   {f.module}")
        add(f"  phase:    {f.phase or '-'}    device: {f.device or '-'}")
        add(f"  location: {f.location or '(no user frame)'}")
        if f.detail:
            add(f"  why:      {f.detail}")
        if f.magnitude:
            add(f"  size:     {_fmt_mag(f.magnitude)}")
        if f.kind == "structural" and (f.a_context or f.b_context):
            add("  run A:")
            lines.extend(f"    {s}" for s in f.a_context)
            add("  run B:")
            lines.extend(f"    {s}" for s in f.b_context)
        if ex.get("causes"):
            add("  likely causes:")
            lines.extend(f"    {i}. {c}" for i, c in enumerate(ex["causes"], 1))
        if ex.get("lint"):
            add("  in your code (fwd9m lint):")
            for x in ex["lint"][:8]:
                add(f"    {x['path']}:{x['line']} {x['code']} {x['message']}"
                    + (f" {MAY_NOT_RUN_NOTE}" if x.get("branch") else ""))
                if x.get("fix"):
                    add(f"      fix: {x['fix']}")
            if len(ex["lint"]) > 8:
                add(f"    ... {len(ex['lint']) - 8} more (fwd9m lint)")
        for e in ex.get("catalog", [])[:3]:
            ref = e["references"][0] if e.get("references") else ""
            add(f"  catalog: {e['id']}: {e['title']}" + (f"  <{ref}>" if ref else ""))
        if ex.get("fix"):
            add("  fix:")
            lines.extend(f"    {s}" for s in ex["fix"].splitlines())
        sp = report.spread
        if sp.get("ops_compared"):
            peak = sp.get("peak") or {}
            add(f"spread: {sp['ops_differing']} of {sp['ops_compared'] - f.seq} ops from the first "
                f"divergence on differ; steps with differences: {_steps_list(list(sp['steps_differing']))}")
            if peak.get("seq") is not None:
                add(f"  largest difference: {peak['max_abs']:.3g} abs, {peak['max_ulp']} ULP at "
                    f"op #{peak['seq']} (sampled values; --capture for exact)")
    for n in report.notes:
        add(f"note: {n}")
    return "\n".join(escape_control(line) for line in lines)


def to_html(report) -> str:
    from ._html import to_html as page

    return page(report)


def _steps_list(steps: list[str], limit: int = 10) -> str:
    """``0, 1, 2`` or, past ``limit`` steps, ``0, 1, ... 9, ... (16 steps, last 15)``."""
    if not steps:
        return "-"
    if len(steps) <= limit:
        return ", ".join(steps)
    return f"{', '.join(steps[:limit])}, ... ({len(steps)} steps, last {steps[-1]})"
