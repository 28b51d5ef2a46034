"""The debug report as one self-contained HTML page: inline CSS, SVG and one small
script, no network (a Content-Security-Policy forbids every load and every script but
the page's own, whose hash it names).

The page, top to bottom: the verdict; the first divergence as a card (op, module,
file:line, which inputs and outputs differ, the replay result when the report has one,
the catalog entries and the fix); the environment differences; the run as a timeline
by op with step boundaries; a heat map of module (or layer) by step where outputs
differ; the values of the first diverging op side by side; the notes; then the text
report and the raw JSON, collapsed.

Every string that comes from a trace (op names, modules, locations, paths, values,
notes) goes through :func:`_esc`: HTML-escaped, control characters written as
escapes. Sizes are bounded by the report itself (400 series points, a timeline of at
most 40 x 64 cells, 12 values per tensor), so a page stays small for any trace.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import math
from typing import Any

from ..compare import printable

__all__ = ["to_html"]

TITLE = "fwd9m debug report"  # within the first 256 bytes: how --html recognises its own page

_KIND_TITLE = {
    "culprit": "CULPRIT OP",
    "external": "EXTERNAL SOURCE",
    "structural": "STRUCTURAL DIFFERENCE",
    "environment": "ENVIRONMENT DIFFERS",
    "reproducible": "REPRODUCIBLE",
}

_CSS = """
:root{--bad:#c62828;--ok:#2e7d32;--ink:#1d2330;--mute:#5f6675;--line:#d9dde5;--bg:#f6f7f9}
*{box-sizing:border-box}
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--ink);
margin:0 auto;padding:1.5em 2em 3em;max-width:1100px}
h1{font-size:1.6em;margin:.2em 0}h2{font-size:1.2em;margin:1.6em 0 .5em}
.sub,.legend,.muted{color:var(--mute)}.legend{font-size:.85em;margin:.3em 0}
.badge{display:inline-block;padding:.1em .55em;border-radius:.3em;color:#fff;background:var(--bad);
font-size:.8em;vertical-align:middle;letter-spacing:.03em}
.badge.reproducible{background:var(--ok)}
.card{border:1px solid var(--line);border-left:6px solid var(--bad);border-radius:6px;
padding:1em 1.3em;background:#fff;box-shadow:0 1px 3px rgba(0,0,0,.06)}
.card.reproducible{border-left-color:var(--ok)}
.card h2{margin-top:0}
dl.facts{display:grid;grid-template-columns:9em 1fr;gap:.25em 1em;margin:.6em 0}
dl.facts dt{color:var(--mute)}dl.facts dd{margin:0;overflow-wrap:anywhere}
code,pre{font:13px/1.4 ui-monospace,"DejaVu Sans Mono",Menlo,Consolas,monospace}
pre{background:var(--bg);padding:.8em 1em;border-radius:4px;white-space:pre-wrap;
overflow-wrap:anywhere;margin:.4em 0}
.agree{color:var(--ok);font-weight:600}.differ{color:var(--bad);font-weight:600}
.proof{margin:.8em 0;padding:.6em .9em;background:var(--bg);border-radius:4px}
.proof h3{font-size:1em;margin:0 0 .3em}
table{border-collapse:collapse;margin:.4em 0 1em;font-size:.9em}
th,td{border-bottom:1px solid var(--line);padding:.2em .7em;text-align:left;vertical-align:top}
td.num{font-family:ui-monospace,"DejaVu Sans Mono",monospace;text-align:right}
tr.d td{background:#fdecea}
svg{display:block;max-width:100%;height:auto}
svg text{font:11px system-ui,sans-serif;fill:#333}
svg .axis{stroke:#555}svg .same{fill:#dfe9df}svg .h0{fill:#f3b6b3}svg .h1{fill:#e98480}svg .h2{fill:#dc5a55}
svg .h3{fill:#c93a35}svg .h4{fill:#a01f1b}svg .grid{stroke:#e6e8ee}
svg .step{stroke:#c9ced8;stroke-dasharray:2 3}
details{margin:1em 0}#tip{position:fixed;background:#222;color:#fff;padding:.2em .5em;border-radius:3px;
font-size:12px;pointer-events:none;max-width:40em}summary{cursor:pointer;font-weight:600}
"""

#: Marks the page as rendered (for the headless-browser test and for a user's tooling),
#: counting the parts drawn and the heat map cells read back from the raw data, with the
#: milliseconds from navigation to the end of the page (parsed, before paint); shows a
#: heat map cell's counts under the pointer (as text: nothing from the data is parsed
#: as HTML).
_SCRIPT = """(function(){var d=document.documentElement;try{
var n=document.querySelectorAll('[data-part]').length,g=document.getElementById('heatmap-grid'),
tip=document.getElementById('tip'),cells={},k=0;
if(g){var tl=JSON.parse(document.getElementById('raw-data').textContent).spread.timeline;
tl.rows.forEach(function(r,i){r.cells.forEach(function(c){cells[i+','+c[0]]=c;k++;});});
var x0=+g.dataset.x0,y0=+g.dataset.y0,cw=+g.dataset.cw,ch=+g.dataset.ch;
g.addEventListener('mousemove',function(e){var b=g.getBoundingClientRect(),s=g.viewBox.baseVal.width/b.width,
c=Math.floor(((e.clientX-b.left)*s-x0)/cw),r=Math.floor(((e.clientY-b.top)*s-y0)/ch),v=cells[r+','+c];
if(!v){tip.hidden=true;return;}var w=tl.step_width,t=tl.columns[c];
tip.textContent=tl.rows[r].name+', '+(w>1?'steps '+t+'..'+(t+w-1):'step '+t)+': '+v[2]+' of '+v[1]+
' ops differ'+(v[2]?', max '+v[4]+' ULP':'');tip.style.left=(e.clientX+12)+'px';
tip.style.top=(e.clientY+12)+'px';tip.hidden=false;});
g.addEventListener('mouseleave',function(){tip.hidden=true;});g.setAttribute('data-fwd9m-cells',String(k));}
d.setAttribute('data-fwd9m-parts',String(n));
d.setAttribute('data-fwd9m-ms',String(Math.round(performance.now())));
d.setAttribute('data-fwd9m-rendered',n?'ok':'empty');
}catch(e){d.setAttribute('data-fwd9m-rendered','error: '+e);}})();"""


def _esc(value: Any) -> str:
    """A value from a trace or report, safe in HTML text and in quoted attributes."""
    return html.escape(printable(str(value)), quote=True)


def _pre(value: Any) -> str:
    """A block of text for a ``<pre>`` (quotes need no escape there: the raw JSON stays small)."""
    return html.escape(printable(str(value)), quote=False)


def _csp() -> str:
    digest = base64.b64encode(hashlib.sha256(_SCRIPT.encode()).digest()).decode()
    return (
        f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        f"script-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'"
    )


def to_html(report) -> str:
    from ._report import text, to_json

    summary = f"<details id='text-report'><summary>Text report</summary><pre>{_pre(text(report))}</pre></details>"
    parts = [
        _header(report),
        _card(report),
        _harmless(report),
        _environment(report),
        _chart(report),
        _heatmap(report),
        _values(report),
        _notes(report),
        summary,
        _raw(_compact(json.loads(to_json(report)))),
    ]
    return (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{TITLE}</title>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{_csp()}\">"
        "<meta name='viewport' content='width=device-width,initial-scale=1'>"
        f"<style>{_CSS}</style></head><body>{''.join(parts)}<div id='tip' hidden></div>"
        f"<script>{_SCRIPT}</script></body></html>"
    )


def _raw(raw: str) -> str:
    """The raw data, collapsed; the page's script reads the heat map's counts back from it."""
    return (
        f"<details id='raw-json'><summary>Raw data (as --format json)</summary>"
        f"<pre id='raw-data'>{_pre(raw)}</pre></details>"
    )


def _compact(value: Any, indent: str = "") -> str:
    """JSON with one line per list of numbers or strings (the plot series, the cells),
    so the raw data stays a few lines long."""
    if isinstance(value, dict) and value:
        inner = indent + "  "
        items = [f"{inner}{json.dumps(k)}: {_compact(v, inner)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{indent}}}"
    if isinstance(value, list) and any(isinstance(v, dict) for v in value):
        inner = indent + "  "
        return "[\n" + ",\n".join(inner + _compact(v, inner) for v in value) + f"\n{indent}]"
    return json.dumps(value, separators=(",", ":"))


# -- the verdict and the first divergence ------------------------------------------


def _header(report) -> str:
    kind = report.kind if report.kind in _KIND_TITLE else "culprit"
    sp = report.spread or {}
    f = report.first
    where = ""
    if f is not None and f.seq is not None:
        where = f" at op #{f.seq} of {report.ops_a}" + (f" (step {f.step})" if f.step >= 0 else "")
    unconfirmed = " (unconfirmed)" if f is not None and (f.explanation or {}).get("unconfirmed") else ""
    return (
        f"<header data-part='header'><h1>fwd9m debug <span class='badge {_esc(kind)}'>"
        f"{_KIND_TITLE[kind]}{unconfirmed}</span></h1><p class='sub'>{_esc(report.framework)}: "
        f"<code>{_esc(report.a)}</code> vs <code>{_esc(report.b)}</code>; "
        f"{_esc(sp.get('ops_compared', 0))} ops compared{_esc(where)}</p></header>"
    )


def _card(report) -> str:
    f = report.first
    if f is None:
        return (
            f"<section class='card reproducible' id='verdict' data-part='verdict'><h2>Every "
            f"recorded op agrees bit for bit</h2><p>{_esc(report.ops_a)} ops in run A, "
            f"{_esc(report.ops_b)} in run B.</p></section>"
        )
    ex = f.explanation or {}
    source = ex.get("source") or f.source  # as the text report: a Keras seed state, unconfirmed
    title = _KIND_TITLE.get(f.kind, f.kind) + (f" ({source})" if source else "")
    if ex.get("unconfirmed"):
        title = title[:-1] + ", unconfirmed)" if source else title + " (unconfirmed)"
    rows = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in _facts(f))
    body = [f"<section class='card' id='first-divergence' data-part='card'><h2>{_esc(title)}</h2>"]
    if ex.get("headline"):
        body.append(f"<p><strong>{_esc(ex['headline'])}</strong></p>")
    body.append(f"<dl class='facts'>{rows}</dl>")
    if f.detail:
        body.append(f"<p>{_esc(f.detail)}</p>")
    if f.kind == "structural" and (f.a_context or f.b_context):
        body.append(
            "<table><tr><th>run A</th><th>run B</th></tr><tr>"
            f"<td><pre>{_esc(chr(10).join(f.a_context))}</pre></td>"
            f"<td><pre>{_esc(chr(10).join(f.b_context))}</pre></td></tr></table>"
        )
    body.append(_replay(f))
    body.extend(_advice(ex))
    body.append("</section>")
    return "".join(body)


def _facts(f) -> list[tuple[str, str]]:
    """The first divergence's facts, (label, HTML) pairs: the op, where and when it ran,
    which inputs and outputs differ, and by how much."""
    facts = [
        (
            "op",
            f"<code>{_esc(f.op)}</code>"
            + (f" <span class='muted'>({_esc(f.node)})</span>" if f.node and f.node != "random" else ""),
        ),
        ("module", _esc(f.module or "-")),
        ("phase", _esc(f.phase or "-")),
        ("device", _esc(f.device or "-")),
        ("location", f"<code>{_esc(f.location or '(no user frame)')}</code>"),
        ("op / step", f"#{_esc(f.seq)} / {_esc(f.step if f.step >= 0 else '-')}"),
    ]
    if f.kind != "structural":
        facts.append(("inputs", _io(f.inputs_differ, "inputs")))
        facts.append(("outputs", _io(f.outputs_differ, "outputs")))
    if f.magnitude:
        m = f.magnitude
        facts.append(
            (
                "size",
                _esc(
                    f"max abs diff {m.get('max_abs', 0):.3g}, {m.get('max_ulp')} ULP "
                    f"({'exact' if m.get('exact') else 'sampled values'})"
                ),
            )
        )
    return facts


def _advice(ex: dict) -> list[str]:
    """The explanation's likely causes, lint findings, catalog entries and fix, as HTML."""
    body = []
    if ex.get("causes"):
        body.append("<h3>Likely causes</h3><ol>" + "".join(f"<li>{_esc(c)}</li>" for c in ex["causes"]) + "</ol>")
    if ex.get("lint"):
        body.append(
            "<h3>In your code (fwd9m lint)</h3><ul>"
            + "".join(
                f"<li><code>{_esc(x.get('path'))}:{_esc(x.get('line'))}</code> {_esc(x.get('code'))} "
                f"{_esc(x.get('message'))}" + (f"<pre>{_esc(x['fix'])}</pre>" if x.get("fix") else "") + "</li>"
                for x in ex["lint"][:8]
            )
            + "</ul>"
        )
    body.extend(_catalog(e) for e in ex.get("catalog", [])[:3])
    if ex.get("fix"):
        body.append(f"<h3>Fix</h3><pre id='fix'>{_esc(ex['fix'])}</pre>")
    return body


def _io(differ: list[int], what: str) -> str:
    if not differ:
        return f"<span class='agree'>all {what} agree</span>"
    one = len(differ) == 1
    return (
        f"<span class='differ'>{what[:-1] if one else what} {_esc(', '.join(map(str, differ)))} "
        f"differ{'s' if one else ''}</span>"
    )


def replay_result(first) -> dict | None:
    """The isolated replay of the culprit (``fwd9m debug replay``), where the report has
    one: ``first.replay`` or ``first.explanation["replay"]``, a dict with ``distinct``,
    ``replays``, ``max_ulp`` and ``switch``."""
    r = getattr(first, "replay", None) or (first.explanation or {}).get("replay")
    return r if isinstance(r, dict) else None


def _replay(first) -> str:
    r = replay_result(first)
    if r is None:
        if first.kind != "culprit":
            return ""
        return (
            "<div class='proof' id='replay' data-part='replay'><h3>Replay</h3><p class='muted'>"
            "Not replayed: this report infers the culprit from its inputs agreeing and its "
            "outputs differing; an isolated replay of the op is the proof.</p></div>"
        )
    distinct, replays = r.get("distinct"), r.get("replays")
    if isinstance(distinct, int) and distinct > 1:
        verdict = (
            f"<span class='differ'>confirmed</span>: {_esc(distinct)} distinct outputs in "
            f"{_esc(replays)} replays (max {_esc(r.get('max_ulp'))} ULP)"
        )
    else:
        verdict = (
            f"<span class='agree'>not reproduced in isolation</span>: {_esc(replays)} replays "
            f"gave {_esc(distinct)} distinct output(s)"
        )
    switch = r.get("switch")
    if isinstance(switch, dict):
        switch = ", ".join(f"{k}: {v}" for k, v in switch.items())
    more = f"<p>with the determinism switch: {_esc(switch)}</p>" if switch is not None else ""
    return (
        f"<div class='proof' id='replay' data-part='replay'><h3>Replay of the op alone</h3><p>{verdict}</p>{more}</div>"
    )


def _catalog(e: dict) -> str:
    refs = [r for r in e.get("references") or [] if isinstance(r, str)]
    links = " ".join(
        f"<a href='{_esc(r)}' rel='noreferrer'>{_esc(r)}</a>" if r.startswith("https://") else _esc(r) for r in refs[:3]
    )
    parts = [
        (
            f"<div class='proof catalog' data-part='catalog'><h3>catalog "
            f"<code>{_esc(e.get('id'))}</code>: {_esc(e.get('title'))}</h3>"
        )
    ]
    if e.get("summary"):
        parts.append(f"<p>{_esc(e['summary'])}</p>")
    if e.get("behaviour"):
        parts.append(f"<p>under the determinism switch: <strong>{_esc(e['behaviour'])}</strong></p>")
    if links:
        parts.append(f"<p class='legend'>sources: {links}</p>")
    return "".join(parts) + "</div>"


def _environment(report) -> str:
    if not report.environment:
        return ""
    rows = "".join(
        f"<tr><td><code>{_esc(d.get('key'))}</code></td><td>{_esc(d.get('a'))}</td>"
        f"<td>{_esc(d.get('b'))}</td><td>{_esc(d.get('reason'))}</td></tr>"
        for d in report.environment[:40]
    )
    more = (
        f"<p class='muted'>... {len(report.environment) - 40} more in the raw data</p>"
        if len(report.environment) > 40
        else ""
    )
    return (
        "<section id='environment' data-part='environment'><h2>Environment differences</h2>"
        "<table><tr><th>key</th><th>run A</th><th>run B</th><th>why it matters</th></tr>"
        f"{rows}</table>{more}</section>"
    )


# -- axes ------------------------------------------------------------------------------


def _nice_ticks(lo: float, hi: float, count: int = 8) -> list[float]:
    """Round whole tick values (1, 2, 5 x 10^k, at least 1 apart: op indices) covering
    [lo, hi], about ``count`` of them."""
    if hi <= lo:
        return [lo]
    raw = max(1.0, (hi - lo) / max(1, count))
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step) + 1)]


def _thin(positions: list[float], gap: float) -> list[int]:
    """Indices of positions kept so that kept neighbours are at least ``gap`` apart."""
    kept: list[int] = []
    for i, x in enumerate(positions):
        if not kept or x - positions[kept[-1]] >= gap:
            kept.append(i)
    return kept


def _num(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 1 or v == 0 else f"{v:.3g}"


# -- the timeline by op ------------------------------------------------------------------


def _chart(report, width: int = 1000) -> str:
    sp = report.spread or {}
    pts = sp.get("series") or []
    if not pts:
        return (
            "<section id='timeline' data-part='timeline'><h2>Timeline</h2>"
            "<p class='muted'>No ops compared.</p></section>"
        )
    bucket = max(1, sp.get("series_bucket_ops", 1))
    g = _Plot(width, bucket, max(p[0] for p in pts) + bucket)
    out = [
        (
            f"<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 {width} {g.height}' width='{width}' "
            f"height='{g.height}' role='img' aria-label='differences along the run, by op'>"
        )
    ]
    g.scale([p[2] for p in pts if p[2] > 0 and math.isfinite(p[2])])
    out.append(_magnitudes(g, pts))
    out.append(_bars(g, pts))
    out.append(_step_marks(pts, g.x, g.top, g.base, width - g.right))
    out.append(_op_axis(g))
    out.append(_first_mark(g, report.first))
    out.append("</svg>")
    return (
        "<section id='timeline' data-part='timeline'><h2>Timeline of the run</h2>"
        "<p class='legend'>Top: the largest difference between the runs per group of ops (log "
        "scale; from 4 sampled values per float output, or the full tensors where captured, so a "
        "lower bound). Bottom: how many ops have outputs that differ. Dotted lines: training "
        "steps. Dashed red line: the first divergence.</p>" + "".join(out) + "</section>"
    )


class _Plot:
    """The timeline's geometry: margins, panel heights, op index -> x, and (after
    :meth:`scale`) the magnitude panel's log scale, decades ``lo`` to ``hi``."""

    left, right, top = 70, 20, 16
    mag_h, bar_h, gap, bottom = 130, 60, 18, 58

    def __init__(self, width: int, bucket: int, last: int) -> None:
        self.width, self.bucket, self.last = width, bucket, last
        self.height = self.top + self.mag_h + self.gap + self.bar_h + self.bottom
        self.plot_w = width - self.left - self.right
        self.base = self.top + self.mag_h + self.gap + self.bar_h  # the bars' baseline
        self.lo, self.hi = -8, 0

    def scale(self, vals: list[float]) -> None:
        lo = math.floor(math.log10(min(vals))) if vals else -8
        hi = math.ceil(math.log10(max(vals))) if vals else 0
        if hi - lo < 2:
            lo, hi = lo - 1, hi + 1
        self.lo, self.hi = lo, hi

    def x(self, seq: float) -> float:
        return self.left + self.plot_w * seq / max(1, self.last)

    def y(self, v: float) -> float:
        return self.top + self.mag_h * (1 - (math.log10(v) - self.lo) / (self.hi - self.lo))


def _magnitudes(g: _Plot, pts: list) -> str:
    """The top panel: decade grid lines, one dot per group of ops that differ, its label."""
    left, right, width, top, mag_h, y = g.left, g.right, g.width, g.top, g.mag_h, g.y
    out = []
    decades = list(range(g.lo, g.hi + 1))
    stride = max(1, math.ceil(len(decades) / 6))  # at most 6 labels, at least 18 px apart
    for e in decades[::stride]:
        out.append(
            f"<line class='grid' x1='{left}' x2='{width - right}' y1='{y(10.0**e):.1f}' "
            f"y2='{y(10.0**e):.1f}'/><text x='{left - 6}' y='{y(10.0**e) + 4:.1f}' "
            f"text-anchor='end'>1e{e}</text>"
        )
    dots = []  # one path of round dots: small for any number of points
    for p in pts:
        if p[2] > 0:
            v = min(p[2], 10.0**g.hi) if math.isfinite(p[2]) else 10.0**g.hi
            dots.append(f"M{g.x(p[0] + g.bucket / 2):.1f},{y(v):.1f}h0")
    if dots:
        out.append(f"<path d='{''.join(dots)}' stroke='#1f5fbf' stroke-width='4' stroke-linecap='round'/>")
    out.append(
        f"<text x='14' y='{top + mag_h / 2:.0f}' transform='rotate(-90 14 {top + mag_h / 2:.0f})' "
        f"text-anchor='middle'>max abs diff (log)</text>"
    )
    return "".join(out)


def _bars(g: _Plot, pts: list) -> str:
    """The bottom panel: how many ops differ in each bucket, with its scale and label."""
    left, base, bar_h, x = g.left, g.base, g.bar_h, g.x
    out = []
    most = max(p[1] for p in pts) or 1
    bw = max(1.0, g.plot_w * g.bucket / g.last - 0.5)
    bars = "".join(f"M{x(p[0]):.1f},{base}v{-bar_h * p[1] / most:.1f}h{bw:.1f}V{base}z" for p in pts if p[1])
    if bars:
        out.append(f"<path d='{bars}' fill='#e57373'/>")
    out.append(
        f"<text x='{left - 6}' y='{base - bar_h + 8:.1f}' text-anchor='end'>{most}</text>"
        f"<text x='{left - 6}' y='{base + 3:.1f}' text-anchor='end'>0</text>"
        f"<text x='14' y='{base - bar_h / 2:.0f}' transform='rotate(-90 14 {base - bar_h / 2:.0f})' "
        f"text-anchor='middle'>ops differ</text>"
    )
    return "".join(out)


def _op_axis(g: _Plot) -> str:
    """The op-index axis under the bars: its line, ticks and title."""
    left, right, width, base, x = g.left, g.right, g.width, g.base, g.x
    out = [f"<line class='axis' x1='{left}' x2='{width - right}' y1='{base}' y2='{base}'/>"]
    ticks = _nice_ticks(0, g.last, 10)
    for t in ticks:
        anchor = "end" if x(t) > width - right - 30 else "middle"  # the last label stays inside
        out.append(
            f"<line class='axis' x1='{x(t):.1f}' x2='{x(t):.1f}' y1='{base}' y2='{base + 4}'/>"
            f"<text x='{x(t):.1f}' y='{base + 16}' text-anchor='{anchor}'>{_num(t)}</text>"
        )
    out.append(
        f"<text x='{left + g.plot_w / 2:.0f}' y='{g.height - 6}' text-anchor='middle'>op index "
        f"(each point: {g.bucket} op{'s' if g.bucket > 1 else ''})</text>"
    )
    return "".join(out)


def _first_mark(g: _Plot, f) -> str:
    """The dashed red line at the first divergence and its label ('' without one)."""
    if f is None or f.seq is None or not 0 <= f.seq <= g.last:
        return ""
    fx = g.x(f.seq)
    anchor = "end" if fx > g.left + g.plot_w * 0.7 else "start"
    tx = fx - 4 if anchor == "end" else fx + 4
    return (
        f"<line x1='{fx:.1f}' x2='{fx:.1f}' y1='{g.top}' y2='{g.base}' stroke='#c62828' "
        f"stroke-width='1.5' stroke-dasharray='5 3'/><text id='first-mark' x='{tx:.1f}' "
        f"y='{g.top + 10}' text-anchor='{anchor}' style='fill:#c62828'>first divergence: "
        f"op #{_esc(f.seq)} {_esc(_short(f.op, 40))}</text>"
    )


def _step_marks(pts: list, x, top: float, base: float, end: float) -> str:
    """A dotted line where each training step starts, labelled where there is room."""
    starts = [(p[0], p[4]) for i, p in enumerate(pts) if i == 0 or p[4] != pts[i - 1][4]]
    if len(starts) < 2:
        return ""
    xs = [x(s) for s, _ in starts]
    shown = set(_thin(xs, 56))
    out = []
    for i, ((_, step), px) in enumerate(zip(starts, xs, strict=True)):
        if i not in shown:  # a line and a label only where there is room: few elements
            continue
        if i:
            out.append(f"<line class='step' x1='{px:.1f}' x2='{px:.1f}' y1='{top}' y2='{base}'/>")
        if px + 48 <= end:
            out.append(f"<text x='{px + 3:.1f}' y='{base + 30}' style='fill:#777'>step {_esc(step)}</text>")
    return "".join(out)


def _short(s: str, n: int) -> str:
    s = str(s)
    return s if len(s) <= n else s[: n // 2 - 1] + "…" + s[-(n - n // 2) :]


# -- the heat map: module by step --------------------------------------------------------


def _heatmap(report, width: int = 1000) -> str:
    tl = (report.spread or {}).get("timeline")
    if not tl or not tl.get("rows") or not tl.get("columns"):
        return ""
    cols, rows, w = tl["columns"], tl["rows"], max(1, tl.get("step_width", 1))
    label_w, top, right = 250, 30, 10
    cell_w = max(4.0, min(44.0, (width - label_w - right) / len(cols)))
    cell_h = 16
    height = top + cell_h * len(rows) + 40
    width = int(label_w + cell_w * len(cols) + right)
    mark = tl.get("first")
    out = [
        (
            f"<svg id='heatmap-grid' xmlns='http://www.w3.org/2000/svg' viewBox='0 0 {width} {height}' "
            f"width='{width}' height='{height}' role='img' aria-label='where outputs differ, by module "
            f"and step' data-x0='{label_w}' data-y0='{top}' data-cw='{cell_w:.3f}' data-ch='{cell_h}'>"
        )
    ]
    shades: dict[str, list[str]] = {}  # one path per shade: small for any number of cells
    for r, row in enumerate(rows):
        y = top + r * cell_h
        out.append(
            f"<g><title>{_esc(row['name'])}</title><text x='{label_w - 8}' y='{y + cell_h - 4}' "
            f"text-anchor='end'>{_esc(_short(row['name'], 34))}</text></g>"
        )
        for c, ops, differ, _abs, _ulp in row["cells"]:
            shade = f"h{min(4, 4 * differ // ops)}" if differ else "same"
            shades.setdefault(shade, []).append(
                f"M{label_w + c * cell_w:.1f},{y + 1}h{cell_w - 1:.1f}v{cell_h - 2}h{1 - cell_w:.1f}z"
            )
    out.extend(f"<path class='{k}' d='{''.join(v)}'/>" for k, v in sorted(shades.items()))
    if mark is not None:
        r, c = mark
        out.append(
            f"<rect id='first-cell' x='{label_w + c * cell_w - 1:.1f}' y='{top + r * cell_h:.1f}' "
            f"width='{cell_w + 1:.1f}' height='{cell_h}' fill='none' stroke='#111' "
            f"stroke-width='2'/>"
        )
    xs = [label_w + (i + 0.5) * cell_w for i in range(len(cols))]
    base = top + cell_h * len(rows)
    for i in _thin(xs, 34):
        out.append(f"<text x='{xs[i]:.1f}' y='{base + 14}' text-anchor='middle'>{_esc(cols[i])}</text>")
    out.append(
        f"<text x='{label_w + cell_w * len(cols) / 2:.0f}' y='{base + 32}' text-anchor='middle'>"
        f"training step{'' if w == 1 else f' (each column: {w} steps)'}</text>"
        f"<text x='{label_w - 8}' y='{top - 10}' text-anchor='end' style='font-weight:600'>"
        f"module / layer</text></svg>"
    )
    grouped = " Module paths are shortened to their parents to fit." if tl.get("grouped") else ""
    return (
        "<section id='heatmap' data-part='heatmap'><h2>Where outputs differ: module by step</h2>"
        "<p class='legend'>Each cell: the ops of one module (or layer; in parentheses, ops "
        "outside any module, by phase) in one training step. Green: every output agrees; red: "
        f"some differ (darker: a larger share). Black outline: the first divergence. Point at a cell "
        f"for its counts.{grouped}</p>" + "".join(out) + "</section>"
    )


# -- values side by side ---------------------------------------------------------------


def _value(v: Any) -> str:
    if isinstance(v, float):
        return repr(v)  # the shortest text that reads back as the same float
    return str(v)


def _values(report) -> str:
    f = report.first
    vals = getattr(f, "values", None) if f is not None else None
    if not vals:
        if f is None or f.kind == "structural":
            return ""
        return (
            "<section id='values' data-part='values'><h2>Values side by side</h2><p class='muted'>"
            "No sampled or captured values for this op's differing tensors; record them in full "
            f"with <code>--capture {_esc(f.op.split('::')[-1])}</code>.</p></section>"
        )
    out = [
        (
            f"<section id='values' data-part='values'><h2>Values side by side: op #{_esc(f.seq)} "
            f"<code>{_esc(f.op)}</code></h2>"
        )
    ]
    for t in vals:
        src = (
            "captured in full"
            if t.get("source") == "captured"
            else "4 sampled values (first, one third, two thirds, last)"
        )
        total = t.get("values")
        cut = (
            f" (the first {t['compared']:,} of {total:,})"
            if isinstance(total, int) and total > t.get("compared", 0) and t.get("source") == "captured"
            else ""
        )
        out.append(
            f"<h3>{_esc(t.get('tensor'))} <code>{_esc(t.get('meta'))}</code></h3>"
            f"<p class='legend'>{_esc(src)}: {_esc(t.get('differ'))} of {_esc(t.get('compared'))} "
            f"values compared differ{_esc(cut)}" + ("; the rows that differ most" if t.get("differ") else "") + "</p>"
            f"<table class='values'><tr><th>index</th><th>run A</th><th>run B</th>"
            f"<th>{_esc(t.get('unit', 'ULP'))}</th></tr>"
        )
        for idx, a, b, d in t.get("rows", []):
            cls = " class='d'" if _value(a) != _value(b) else ""
            out.append(
                f"<tr{cls}><td class='num'>{_esc(idx)}</td><td class='num'>{_esc(_value(a))}</td>"
                f"<td class='num'>{_esc(_value(b))}</td><td class='num'>{_esc(d)}</td></tr>"
            )
        out.append("</table>")
    return "".join(out) + "</section>"


def _harmless(report) -> str:
    """The earlier divergences whose values reach no result, as the text report lists
    them (:func:`fwd9m.debug._report._harmless_lines`), after the one that matters."""
    from ._report import _harmless_lines

    if not report.harmless:
        return ""
    n = len(report.harmless)
    return (
        "<section id='harmless' data-part='harmless'><h2>Harmless divergences</h2><p>"
        f"{n} earlier {'divergence reaches' if n == 1 else 'divergences reach'} no result (overwritten, "
        "never used, or only read into Python); the card above is the first that matters.</p><ul>"
        + "".join(f"<li>{_esc(line.removeprefix('harmless: '))}</li>" for line in _harmless_lines(report))
        + "</ul></section>"
    )


def _notes(report) -> str:
    if not report.notes:
        return ""
    return (
        "<section id='notes' data-part='notes'><h2>Notes</h2><ul>"
        + "".join(f"<li>{_esc(n)}</li>" for n in report.notes)
        + "</ul></section>"
    )
