"""Next steps for a check that found differences: catalog entries that may explain
them, and the ``fwd9m debug`` command that localises them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .._log import logger


def _debug_can_record(fp: dict[str, Any] | None) -> bool:
    """False when the runs used JAX and neither framework ``fwd9m debug`` records."""
    names = set(((fp or {}).get("frameworks") or {}))
    return not ("jax" in names and not names & {"torch", "tensorflow", "keras"})


def _debug_args(display: str, command: bool) -> str:
    """``fwd9m debug`` arguments for what was checked: a command ``python X.py ARGS``
    becomes ``X.py ARGS``; other commands are named as the script they run."""
    if not command:
        return display
    parts = display.split()[1:]  # drop "--"
    if parts and Path(parts[0]).name.startswith("python") and len(parts) > 1:
        return " ".join(parts[1:])
    return "SCRIPT.py [ARGS] (the Python script this command runs)"


def _source_words(path: str | None) -> set[str]:
    """Identifiers in a script's source (empty when unreadable)."""
    import re

    if not path:
        return set()
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))


def _catalog_hints(fp: dict[str, Any] | None, device: str | None, python: bool = False,
                   source: str | None = None, limit: int = 5) -> list[dict[str, Any]]:
    """Catalog entries that may explain the differences, likeliest first: entries for
    the frameworks the runs imported (at their versions and device), ranked up when
    the script's source names one of their symbols, and Python's hash-seed entries
    when the hash seed differed. [] when the catalog is unavailable."""
    try:
        from .. import catalog
    except ImportError:
        return []
    if fp and fp.get("frameworks"):
        frameworks = {n: i.get("version") for n, i in fp["frameworks"].items()}
    else:
        from .. import _frameworks

        frameworks = {n: _frameworks.installed_version(n) for n in _frameworks.imported()}
    frameworks["python"] = None
    words = _source_words(source)
    # a script that seeds nothing at all: the global-seed entries come first
    unseeded = bool(words) and not any("seed" in w.lower() or w == "enable_determinism" for w in words)
    scored: list[tuple[int, str, Any]] = []
    try:
        for name, version in frameworks.items():
            for e in catalog.query(framework=name, version=version, device=device):
                if e.behaviour == "not-applicable":
                    continue
                short = {sym.rsplit(".", 1)[-1] for sym in e.symbols}
                named = any(w in words for w in short if not w.startswith("__") and (len(w) > 5 or "_" in w))
                score = (4 + 2 * (e.kind == "op")) * named + 3 * (python and "PYTHONHASHSEED" in e.env) \
                    + 6 * (unseeded and e.kind == "seed" and name != "python")
                if name == "python" and not score:
                    continue
                score += {"op": 0, "setting": 1, "seed": 1}.get(e.kind, 0)
                scored.append((score, e.id, e))
    except Exception as exc:  # a catalog still being built must not break a check
        logger.debug("catalog query failed: %s", exc)
    scored.sort(key=lambda t: (-t[0], t[1]))
    return [{"id": e.id, "title": e.title, "kind": e.kind, "fix": e.fix, "references": list(e.references)}
            for score, _, e in scored[:limit] if score > 0]
