"""What the catalog says for each probe, the contradictions, and the table."""

from __future__ import annotations

__all__ = ["contradictions", "expectations", "render"]


def _catalog_device(device: str) -> str:
    return "cpu" if device == "cpu" else "gpu"


def expected(key: str, framework: str, device: str, switch: bool) -> str | None:
    """The catalog's behaviour for entry ``key`` on ``device`` at the installed version:
    without the switch "nondeterministic" where the entry applies, else
    "deterministic"; with it, the entry's behaviour under the switch. None: no entry."""
    from .. import catalog
    from ..errors import CatalogError

    try:
        e = catalog.get(key)
    except CatalogError:
        return None
    version = catalog.installed_version(framework)
    dev = _catalog_device(device)
    for s in [e] + _siblings(e):  # the same op and condition, on other devices (put-accumulate-cpu/-cuda)
        if s.applies_to(version, dev) and s.behaviour_at(version) != "not-applicable":
            return s.behaviour_at(version) if switch else "nondeterministic"
    return "deterministic"


def _siblings(e) -> list:
    """Op entries of ``e``'s framework with an op in common and the same condition: the
    same probe measures them, so on a device one of them covers, that one is expected."""
    from .. import catalog

    return [
        s
        for s in catalog.entries(e.framework)
        if s.id != e.id and s.kind == "op" and set(s.ops) & set(e.ops) and s.condition == e.condition
    ]


def expectations(results) -> dict:
    from . import _ekey

    return {_ekey(r): expected(r.key, r.framework, r.device, r.switch) for r in results}


def _setting(r) -> str:
    return f"{r.device}, {r.threads} thread{'s' if r.threads != 1 else ''}, switch {'on' if r.switch else 'off'}"


def contradictions(report) -> list[str]:
    """Certain contradictions only: nondeterminism the catalog does not expect (seen is
    proof), a raise it does not expect, or no raise where it expects one (raising is
    itself deterministic). "Expected nondeterministic, not seen" is not listed here:
    K repeats cannot prove an absence (:func:`unconfirmed`)."""
    from . import _ekey

    out = []
    for r in report.results:
        want = report.expected.get(_ekey(r))
        if want is None or r.status == "error":
            continue
        certain = (
            (r.status == "nondeterministic" and want != "nondeterministic")
            or (r.status == "raises" and want != "raises")
            or (want == "raises" and r.status == "deterministic" and r.switch)
        )
        if certain:
            out.append(f"{r.key} ({_setting(r)}): catalog says {want}, measured {r.status}: {r.measured()}")
    return out


def unconfirmed(report) -> list[str]:
    """Expected nondeterministic, not observed in the repeats (weak evidence)."""
    from . import _ekey

    return [
        f"{r.key} ({_setting(r)}): catalog says nondeterministic, not observed: {r.measured()}"
        for r in report.results
        if report.expected.get(_ekey(r)) == "nondeterministic" and r.status == "deterministic"
    ]


def render(report) -> str:
    from ..compare._escape import escape_control

    rows: dict[tuple, dict] = {}
    for r in report.results:
        row = rows.setdefault((r.framework, r.key, r.device, r.threads), {})
        row["on" if r.switch else "off"] = r
    s = report.settings
    title = (
        f"fwd9m probe: {len(rows)} probe(s), {s['repeat']} repeats each, devices "
        f"{', '.join(s['devices'])}, threads {', '.join(map(str, s['threads']))}, switch {s['switch']}"
    )
    lines = [title, ""]
    width = min(100, max([44] + [len(k[1]) for k in rows]))
    head = f"{'entry':{width}} {'device':7} {'thr':>3}  {'switch off':18} {'switch on':18}"
    lines.append(head)
    lines.append("-" * len(head))
    for (_fw, key, dev, n), row in rows.items():
        cells = []
        for sw in ("off", "on"):
            r = row.get(sw)
            if r is None:
                cells.append("-")
            elif r.status == "nondeterministic":
                cells.append(f"NONDET {r.distinct}/{r.repeats}")
            else:
                cells.append({"deterministic": "det", "raises": "RAISES", "error": "error"}[r.status])
        lines.append(f"{key:{width}} {dev:7} {n:>3}  {cells[0]:18} {cells[1]:18}")
    found = [r for r in report.results if r.status == "nondeterministic"]
    if found:
        lines += ["", "Nondeterministic here:"]
        lines += [f"  {r.key} ({_setting(r)}): {r.measured()}" for r in found]
    errors = [r for r in report.results if r.status == "error"]
    if errors:
        lines += ["", "Probes that could not run (not a measurement):"]
        lines += [f"  {r.key} ({_setting(r)}): {escape_control(r.error or '')[:200]}" for r in errors]
    bad = contradictions(report)
    lines += ["", f"Catalog contradictions ({len(bad)}):" if bad else "Catalog contradictions: none"]
    lines += [f"  {c}" for c in bad]
    weak = unconfirmed(report)
    if weak:
        lines += [
            "",
            (
                "Catalog says nondeterministic, not observed here (more --repeat, other --threads "
                "or the entry's device may show it):"
            ),
        ]
        lines += [f"  {c}" for c in weak]
    if report.skipped:
        lines += ["", "Entries without a probe:"]
        lines += [f"  {k}: {why}" for k, why in sorted(report.skipped.items())]
    return "\n".join(lines)
