"""The catalog: known sources of nondeterminism, by framework, version, device and op.

Data lives in ``fwd9m/catalog/data/<framework>.toml`` (tensorflow, keras, torch, jax,
python), one entry per source, each with the affected versions (PEP 440 specifiers),
the behaviour under the framework's determinism switch, the fix to paste and the
upstream references it rests on. Importing this package imports no framework.

>>> from fwd9m import catalog
>>> [e.id for e in catalog.for_op("torch", "aten::index_add_")]   # doctest: +SKIP
['torch.index-add']

Functions raise :class:`fwd9m.errors.CatalogError` for an unknown framework, device,
entry id or a malformed version or query, and :class:`fwd9m.errors.FileFormatError`
when a data file is broken.
"""

from __future__ import annotations

from ._load import FRAMEWORKS, Switch, switch
from ._model import BEHAVIOURS, DEVICES, DIRECTIONS, KINDS, Entry, Solution
from ._query import entries, for_op, for_symbol, get, installed_version, normalize_op, normalize_symbol, query

__all__ = [
    "FRAMEWORKS",
    "KINDS",
    "BEHAVIOURS",
    "DEVICES",
    "DIRECTIONS",
    "Entry",
    "Solution",
    "Switch",
    "entries",
    "get",
    "query",
    "for_op",
    "for_symbol",
    "switch",
    "installed_version",
    "normalize_op",
    "normalize_symbol",
    "unsolved",
    "advice",
]

#: pip distribution to upgrade, per catalog framework
_DIST = {"tensorflow": "tensorflow", "keras": "keras", "torch": "torch", "jax": "jax[cuda12]"}


def unsolved(framework: str, version: str | None = None, device: str | None = None) -> list[Entry]:
    """Entries of ``framework`` that apply to ``version`` (None: the installed one) and
    ``device`` and that the determinism switch does not fix: behaviour "raises" or
    "nondeterministic". CatalogError if the framework is unknown or not installed
    and no version is given."""
    from ._query import _version_filter

    if version is None:
        version = installed_version(framework)
        if version is None:
            from ..errors import CatalogError

            raise CatalogError(f"{framework} is not installed here; pass a version")
    found = _version_filter(entries(framework), version, device)
    return [e.at(version) for e in found if e.behaviour_at(version) in ("raises", "nondeterministic")]


def advice(entry: Entry, version: str | None = None) -> Solution | None:
    """What to do about ``entry`` at framework ``version``: its first solution, except
    when that solution is just the determinism switch and the switch only fixes the
    entry in a later release (``deterministic_since``); then: upgrade."""
    from ._model import parse_version

    sw = switch(entry.framework)
    first = entry.solutions[0] if entry.solutions else None
    since = entry.deterministic_since
    if (
        version is not None
        and since is not None
        and first is not None
        and sw is not None
        and first.code == sw.code
        and entry.behaviour_at(version) != "deterministic"
        and parse_version(version) < parse_version(since)
    ):
        dist = _DIST.get(entry.framework, entry.framework)
        return Solution(
            text=f"Upgrade to {entry.framework} {since} or newer, where the determinism switch "
            f"fixes this; then turn the switch on.",
            code=f"pip install '{dist}>={since}'\n{sw.code_for(since) or sw.code}",
        )
    return first
