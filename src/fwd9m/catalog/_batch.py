"""Load ``catalog/data/batch.toml``: ops whose result for one sample depends on the
batch it runs in (deterministic run to run at one shape, different bits at another),
each with its conditions, sources and fixes. Kept apart from the framework files: an
op listed here is no source of run-to-run nondeterminism."""

from __future__ import annotations

import functools
from importlib import resources

from ..errors import FileFormatError

#: keys every entry has
REQUIRED = ("id", "framework", "title", "summary", "ops", "devices", "condition", "source", "references", "fixes")
FRAMEWORKS = ("torch", "tensorflow", "jax")


@functools.lru_cache(maxsize=1)
def _load() -> tuple[dict, ...]:
    try:
        import tomllib
    except ImportError:  # pragma: no cover - Python 3.10
        import tomli as tomllib

    text = resources.files(__package__).joinpath("data", "batch.toml").read_text(encoding="utf-8")
    entries = tomllib.loads(text).get("entry", [])
    seen: set[str] = set()
    for i, e in enumerate(entries):
        _check(e, f"catalog batch.toml entry #{i + 1} ({e.get('id', '?')})", seen)
    return tuple(entries)


def _check(e: dict, where: str, seen: set[str]) -> None:
    missing = [k for k in REQUIRED if k not in e]
    if missing:
        raise FileFormatError(f"{where}: missing required key(s) {', '.join(missing)}")
    if e["id"] in seen:
        raise FileFormatError(f"{where}: duplicate id")
    seen.add(e["id"])
    if e["framework"] not in FRAMEWORKS:
        raise FileFormatError(f"{where}: framework {e['framework']!r} not one of {FRAMEWORKS}")
    if not e["references"] or not all(str(r).startswith("https://") for r in e["references"]):
        raise FileFormatError(f"{where}: references must be https links, at least one")
    if not e["fixes"] or not all(isinstance(f, dict) and f.get("text") for f in e["fixes"]):
        raise FileFormatError(f"{where}: fixes must be tables with a text")


def batch_entries(framework: str | None = None) -> list[dict]:
    """The batch-invariance entries (of one framework)."""
    return [e for e in _load() if framework is None or e["framework"] == framework]
