"""Text renderings of catalog entries: plain table, Markdown, JSON, status pages.

Pure functions of the entries (no framework import, no printing); used by
``fwd9m catalog`` and by ``scripts/gen-docs`` (``docs/status/<framework>.md``).
"""

from __future__ import annotations

import json

from ._model import Entry

__all__ = ["table", "markdown", "details", "to_json", "status_page", "BEHAVIOUR_LABELS"]

BEHAVIOUR_LABELS = {
    "deterministic": "fixed by the switch",
    "raises": "raises under the switch",
    "nondeterministic": "not fixed by the switch",
    "not-applicable": "not affected",
}


def _since(e: Entry) -> str:
    return e.deterministic_since or ""


def table(entries: list[Entry], width: int | None = None) -> str:
    """A plain-text table: id, devices, behaviour (for the resolved version), title; lines
    cut at ``width`` characters (default: the terminal's, at least 100)."""
    if not entries:
        return "no matching catalog entries"
    if width is None:
        import shutil

        width = max(100, shutil.get_terminal_size((120, 24)).columns)
    rows = [("ID", "DEVICES", "UNDER SWITCH", "TITLE")]
    for e in entries:
        rows.append((e.id, ",".join(e.devices) or "-", e.behaviour, e.title))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = []
    for r in rows:
        line = "  ".join(c.ljust(w) for c, w in zip(r[:3], widths)) + "  " + r[3]
        lines.append(line if len(line) <= width else line[: width - 1] + "…")
    versions = sorted({(e.framework, e.resolved_for or "newest known") for e in entries})
    lines.append(
        "UNDER SWITCH is for " + ", ".join(f"{fw} {v}" for fw, v in versions) + " (--version to ask about another)"
    )
    return "\n".join(lines)


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", "<br>")


def _code_cell(symbols) -> str:
    return "<br>".join(f"`{s}`" for s in symbols)


def markdown(entries: list[Entry]) -> str:
    """A Markdown table like the old status page, one row per entry, then the fixes."""
    if not entries:
        return "_No matching catalog entries._\n"
    head = (
        "| Source | Symbols / ops | Direction | Devices | Affected | Under the switch "
        "| Deterministic since | Fix |\n|:--|:--|:--|:--|:--|:--|:--|:--|\n"
    )
    rows = []
    for e in entries:
        reached = _code_cell(e.symbols or e.ops or e.env)
        fix = f"`{_md_cell(e.fix)}`" if e.fix and "\n" not in e.fix else (f"see [{e.id}](#{e.id.replace('.', '')})")
        since = _since(e)
        if e.ngc:
            since = f"{since} (NGC {e.ngc})".strip()
        rows.append(
            "| "
            + " | ".join(
                [
                    f"[{_md_cell(e.title)}](#{e.id.replace('.', '')})" + (" ⚠" if e.uncertain else ""),
                    reached,
                    e.direction or "",
                    ", ".join(e.devices),
                    e.affected or "all",
                    BEHAVIOUR_LABELS[e.behaviour],
                    since,
                    fix,
                ]
            )
            + " |"
        )
    return head + "\n".join(rows) + "\n"


def details(e: Entry) -> str:
    """One entry as a Markdown section (summary, fixes, references, uncertainty)."""
    out = [f"### {e.id}", "", f"**{e.title}**" + (f" (when {e.condition})" if e.condition else ""), "", e.summary, ""]
    facts = [
        f"kind: {e.kind}",
        f"devices: {', '.join(e.devices) or '-'}",
        f"affected: `{e.affected or 'all versions'}`",
    ]
    if e.timeline:
        facts.append("under the switch: " + ", then ".join(f"{b} from {s}" if s != "0" else b for s, b in e.timeline))
    if e.ngc:
        facts.append(f"NGC containers: `{e.ngc}`")
    if e.env:
        facts.append("environment: " + ", ".join(f"`{v}`" for v in e.env))
    if e.ops:
        facts.append("ops: " + ", ".join(f"`{o}`" for o in e.ops))
    out += [f"- {f}" for f in facts] + [""]
    for s in e.solutions:
        out.append(f"Fix: {s.text}")
        if s.code:
            out += ["", "```python", s.code, "```"]
        out.append("")
    if e.source:
        out += [f"Conditions from: {e.source}", ""]
    if e.verified is not None:
        out += ["Verified against the framework's source: " + ("yes" if e.verified else f"no: {e.verified_why}"), ""]
    if e.uncertain:
        out += [f"Uncertain: {e.uncertain}", ""]
    out.append("References: " + ", ".join(f"<{r}>" for r in e.references))
    out.append("")
    return "\n".join(out)


def status_page(framework: str, entries: list[Entry], switch=None) -> str:
    """``docs/status/<framework>.md``: table of every entry plus a detail section each.
    Behaviours are for the newest known version (entries must be unresolved)."""
    title = {
        "tensorflow": "TensorFlow",
        "keras": "Keras",
        "torch": "PyTorch",
        "jax": "JAX / XLA",
        "python": "Python and the system",
    }.get(framework, framework)
    out = [
        f"# Determinism status: {title}",
        "",
        f"<!-- Generated by scripts/gen-docs from src/fwd9m/catalog/data/{framework}.toml; do not edit. -->",
        "",
    ]
    if switch is not None:
        line = f"Determinism switch: `{switch.code}`" + (f" (since {switch.since})" if switch.since else "")
        for since, until, code in switch.older:
            line += f"; {since} to before {until}: `{code}`"
        out += [line + ".", ""]
    out += [
        '"Under the switch" is the behaviour with the switch on, in the newest version '
        "the catalog knows; see each entry for its history. ⚠ marks entries with "
        "unverified facts.",
        "",
        markdown(entries),
        "## Details",
        "",
    ]
    out += [details(e) for e in entries]
    return "\n".join(out).rstrip() + "\n"


def to_json(entries: list[Entry]) -> str:
    return json.dumps([e.to_dict() for e in entries], indent=2)


def status_docs() -> dict[str, str]:
    """File name -> text of every generated ``docs/status`` page (unresolved entries, so
    the pages do not depend on what is installed)."""
    from ._load import FRAMEWORKS, load, switch

    pages = {}
    index = [
        "# Determinism status by framework",
        "",
        "<!-- Generated by scripts/gen-docs; do not edit. -->",
        "",
        "| Framework | Entries | Fixed by the switch | Raise under the switch | Not fixed by the switch |",
        "|:--|--:|--:|--:|--:|",
    ]
    for fw in FRAMEWORKS:
        entries = list(load(fw))
        pages[f"{fw}.md"] = status_page(fw, entries, switch(fw))
        count = {b: sum(e.behaviour == b for e in entries) for b in BEHAVIOUR_LABELS}
        index.append(
            f"| [{fw}]({fw}.md) | {len(entries)} | {count['deterministic']} "
            f"| {count['raises']} | {count['nondeterministic']} |"
        )
    index += [
        "",
        "Regenerate with `scripts/gen-docs` after editing "
        "`src/fwd9m/catalog/data/*.toml`; a test fails while these pages are stale.",
        "",
    ]
    pages["README.md"] = "\n".join(index)
    return pages


def _main(argv=None) -> int:
    """``python -m fwd9m.catalog._render DIR [--check]``: write (or check) the pages."""
    import argparse
    import pathlib
    import sys

    p = argparse.ArgumentParser(prog="gen-docs", description="regenerate docs/status")
    p.add_argument("directory", nargs="?", default="docs/status")
    p.add_argument("--check", action="store_true", help="exit 1 if a page is stale")
    args = p.parse_args(argv)
    out = pathlib.Path(args.directory)
    stale = []
    for name, text in status_docs().items():
        path = out / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            stale.append(str(path))
            if not args.check:
                out.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
    verb = "stale" if args.check else "written"
    print(f"{len(stale)} page(s) {verb}" + (": " + ", ".join(stale) if stale else ""), file=sys.stderr)
    return 1 if (args.check and stale) else 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(_main())
