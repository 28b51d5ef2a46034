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
    if node.startswith("compiled graph"):  # torch.compile (fwd9m.debug._compiled)
        return f"  ({node}: recorded as one op)"
    if framework == "tensorflow" and node in ("xla", "function"):  # fwd9m.tensorflow._recorder
        what = "compiled by XLA" if node == "xla" else "a tf.function traced before recording started"
        return f"  ({what}: recorded as one op)"
    return f"  (autograd node {node})"


def _environment_lines(report) -> list[str]:
    if report.environment and not report.reproducible:
        lines = ["ENVIRONMENT: the runs come from different environments; check these first:"]
        lines += [f"  {d['key']}: {d['a']!r} -> {d['b']!r}  ({d['reason']})" for d in report.environment[:8]]
        if len(report.environment) > 8:
            lines.append(f"  ... {len(report.environment) - 8} more (see --format json)")
        return lines
    if report.environment:
        return [
            f"note: the environments differ in {len(report.environment)} field(s) "
            f"(first: {report.environment[0]['key']}) but the results agree"
        ]
    return []


def _divergence_lines(report, f) -> list[str]:
    """The first divergence: its kind, the op, where it ran, why, how large; for a
    structural one the ops around it in both runs."""
    ex = f.explanation or {}
    title = {"culprit": "CULPRIT OP", "external": "EXTERNAL SOURCE", "structural": "STRUCTURAL DIFFERENCE"}[f.kind]
    if f.kind == "external":  # unconfirmed: the likely source was not replayed (a parallel draw)
        source = ex.get("source") or f.source  # the explanation may name it better (a Keras seed state)
        title += f" ({source}, unconfirmed)" if ex.get("unconfirmed") else f" ({source})"
    elif ex.get("unconfirmed"):  # its replay alone did not vary (fwd9m.debug._explain.unconfirmed)
        title += " (unconfirmed)"
    if report.harmless:
        n = len(report.harmless)
        lines = [
            f"{title}: first divergence that reaches the results at op #{f.seq} of {report.ops_a} "
            f"(step {f.step}); {n} earlier {'one is' if n == 1 else 'ones are'} harmless (below)"
        ]
    else:
        lines = [f"{title}: first divergence at op #{f.seq} of {report.ops_a} (step {f.step})"]
    if ex.get("headline"):
        lines.append(f"  {ex['headline']}")
    lines.append(f"  op:       {f.op}" + _node(report.framework, f.node))
    if f.module:
        lines.append(f"  module:   {f.module}")
    lines.append(f"  phase:    {f.phase or '-'}    device: {f.device or '-'}")
    lines.append(f"  location: {f.location or '(no user frame)'}")
    if ex.get("why") or f.detail:  # the explanation may say better what the value is
        lines.append(f"  why:      {ex.get('why') or f.detail}")
    if f.magnitude:
        lines.append(f"  size:     {_fmt_mag(f.magnitude)}")
    if f.kind == "structural" and (f.a_context or f.b_context):
        lines += ["  run A:", *(f"    {s}" for s in f.a_context), "  run B:", *(f"    {s}" for s in f.b_context)]
    return lines


def _explanation_lines(ex: dict) -> list[str]:
    """The likely causes, the script's own lines (fwd9m lint), the catalog and the fix."""
    from .._lint_hints import MAY_NOT_RUN_NOTE

    lines = []
    replay = ex.get("replay")
    if isinstance(replay, dict) and replay.get("text"):
        lines += ["  proof: " + replay["text"].splitlines()[0], *("  " + s for s in replay["text"].splitlines()[1:])]
    if ex.get("causes"):
        lines.append("  likely causes:")
        lines.extend(f"    {i}. {c}" for i, c in enumerate(ex["causes"], 1))
    if ex.get("lint"):
        lines.append("  in your code (fwd9m lint):")
        for x in ex["lint"][:8]:
            message = x["message"]
            if x.get("fix"):  # the fix is printed as code below, not inside the message
                message = message.split("; fix: ", 1)[0]
            message = " ".join(message.split())  # one line
            lines.append(
                f"    {x['path']}:{x['line']} {x['code']} {message}"
                + (f" {MAY_NOT_RUN_NOTE}" if x.get("branch") else "")
            )
            fix = str(x.get("fix") or "").splitlines()
            if len(fix) == 1:
                lines.append(f"      fix: {fix[0]}")
            elif fix:  # code on its own lines
                lines += ["      fix:", *(f"        {c}" for c in fix)]
        if len(ex["lint"]) > 8:
            lines.append(f"    ... {len(ex['lint']) - 8} more (fwd9m lint)")
    for e in ex.get("catalog", [])[:3]:
        ref = e["references"][0] if e.get("references") else ""
        lines.append(f"  catalog: {e['id']}: {e['title']}" + (f"  <{ref}>" if ref else ""))
    if ex.get("fix"):
        lines += ["  fix:", *(f"    {s}" for s in ex["fix"].splitlines())]
    return lines


def _harmless_lines(report) -> list[str]:
    """The earlier divergences whose values reach no result, each with why
    (:func:`fwd9m.debug._flow.harmless`)."""
    lines = []
    for h in report.harmless[:_HARMLESS_SHOWN]:
        what = f"{h['kind'].upper()}" + (f" ({h['source']})" if h.get("source") else "")
        where = f" in {h['module']}" if h.get("module") else ""
        lines.append(
            f"harmless: {what} at op #{h['seq']} {h['op']}{where} [{h['phase'] or '-'}] at "
            f"{h['location'] or '(no user frame)'}: {h['why']}"
        )
    if len(report.harmless) > _HARMLESS_SHOWN:
        lines.append(f"harmless: ... {len(report.harmless) - _HARMLESS_SHOWN} more (see --format json)")
    return lines


#: harmless divergences listed in the text report
_HARMLESS_SHOWN = 5


def _spread_lines(report, f) -> list[str]:
    sp = report.spread
    if not sp.get("ops_compared"):
        return []
    peak = sp.get("peak") or {}
    lines = [
        f"spread: {sp['ops_differing']} of {sp['ops_compared'] - (sp.get('first_seq') or f.seq)} ops from the first "
        f"divergence on differ; steps with differences: {_steps_list(list(sp['steps_differing']))}"
    ]
    if peak.get("seq") is not None:
        lines.append(
            f"  largest difference: {peak['max_abs']:.3g} abs, {peak['max_ulp']} ULP at "
            f"op #{peak['seq']} (sampled values; --capture for exact)"
        )
    return lines


def text(report) -> str:
    """The human report, one fact a line. Every line is escaped
    (:func:`~fwd9m.compare.escape_control`): op names, modules, locations, paths and
    environment keys come from the recorded program and its files, and a name holding a
    newline or an escape sequence must not forge a line or act on the terminal."""
    from ..compare import escape_control

    lines: list[str] = []
    f = report.first
    if report.reproducible:
        lines.append(
            f"reproducible: all {report.spread.get('ops_compared', 0)} recorded ops agree bit "
            f"for bit ({report.a} vs {report.b})"
        )
    lines += _environment_lines(report)
    if f is not None:
        lines += _divergence_lines(report, f) + _explanation_lines(f.explanation or {})
        lines += _harmless_lines(report) + _spread_lines(report, f)
    lines += [f"note: {n}" for n in report.notes]
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
