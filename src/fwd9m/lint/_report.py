"""Output formats for lint findings: text (flake8-style), JSON and SARIF 2.1.0."""

from __future__ import annotations

import json
from pathlib import Path

from .. import __version__
from ._engine import ENGINE_CODES, Finding

__all__ = ["render_text", "render_json", "render_sarif", "render_statistics"]

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def render_text(findings: list[Finding], *, show_fix: bool = True) -> str:
    lines = []
    for f in findings:
        # one line per finding: a file name or message with a newline or escape is shown escaped
        line = f"{f.path}:{f.line}:{f.col}: {f.code} {f.message}"
        if not line.isprintable():  # every character escape_control escapes is unprintable
            from ..compare._escape import escape_control  # here: fwd9m.compare costs start-up time

            line = escape_control(line)
        lines.append(line)
    return "\n".join(lines)


def render_statistics(counts: dict[str, int]) -> str:
    from .rules import all_rules

    rules = all_rules()
    lines = []
    for code, n in counts.items():
        name = rules[code].name if code in rules else ENGINE_CODES.get(code, (code,))[0]
        lines.append(f"{n:<6} {code} {name}")
    total = sum(counts.values())
    lines.append(f"{total:<6} total")
    return "\n".join(lines)


def render_json(findings: list[Finding], files: int) -> str:
    counts: dict[str, int] = {}
    for f in findings:
        counts[f.code] = counts.get(f.code, 0) + 1
    return json.dumps(
        {
            "version": __version__,
            "files": files,
            "findings": [f.to_dict() for f in findings],
            "statistics": dict(sorted(counts.items())),
        },
        indent=2,
    )


def render_sarif(findings: list[Finding], rule_classes) -> str:
    """A SARIF 2.1.0 log with one run; rules carry their docs, results 1-based regions."""
    descriptors, index = [], {}
    for code, (name, what) in ENGINE_CODES.items():
        index[code] = len(descriptors)
        descriptors.append(
            {"id": code, "name": name, "shortDescription": {"text": what}, "defaultConfiguration": {"level": "error"}}
        )
    for r in rule_classes:
        index[r.code] = len(descriptors)
        descriptors.append(
            {
                "id": r.code,
                "name": r.name,
                "shortDescription": {"text": r.summary()},
                "fullDescription": {"text": r.summary()},
                "help": {"text": r.doc(), "markdown": r.doc()},
                "defaultConfiguration": {"level": "warning"},
                "properties": {"tags": ["reproducibility"], "default": r.default},
            }
        )
    results = []
    for f in findings:
        region = {"startLine": f.line, "startColumn": f.col}
        if f.end_line:
            region["endLine"] = f.end_line
        if f.end_col:
            region["endColumn"] = f.end_col
        uri = f.path if f.path.startswith("<") else Path(f.path).as_posix()
        result = {
            "ruleId": f.code,
            "ruleIndex": index.get(f.code, 0),
            "level": "error" if f.code in ENGINE_CODES else "warning",
            "message": {"text": f.message},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": uri}, "region": region}}],
        }
        if f.fix:
            result["properties"] = {"fix": f.fix}
        results.append(result)
    log = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "fwd9m lint", "version": __version__, "rules": descriptors}},
                "results": results,
            }
        ],
    }
    return json.dumps(log, indent=2)
