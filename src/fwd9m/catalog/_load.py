"""Load and validate ``catalog/data/<framework>.toml`` (through ``importlib.resources``).

File layout::

    framework = "torch"
    [switch]                       # the framework's determinism switch
    name = "torch.use_deterministic_algorithms"
    code = "torch.use_deterministic_algorithms(True)"
    since = "1.8"
    references = ["https://..."]

    [[entry]]
    id = "torch.index-add"         # "<framework>.<kebab-slug>"
    title = "..."; summary = "..."; kind = "op"
    symbols = ["torch.index_add"]; ops = ["aten::index_add_"]
    direction = "forward"; devices = ["gpu"]; affected = ">=1.0"
    timeline = [["1.12", "deterministic"]]   # or: behaviour = "nondeterministic"
    references = ["https://..."]
    uncertain = "..."              # optional
    [[entry.solutions]]
    text = "..."; code = "..."

``condition`` (optional) narrows an entry to some arguments; lint checks these forms
against literal keyword arguments: ``kw=value``, ``kw=value or kw=value``,
``kw in (v1, v2)``, ``kw given``; anything else is prose for people (lint then does not
flag the call: it cannot tell whether the condition holds). ``fixed_by`` (optional)
lists settings that make the entry deterministic besides the switch, as
``"qualified.name=Value"`` (``"torch.backends.cudnn.deterministic=True"``): lint does
not flag a file that makes that assignment. ``source`` (optional) says where in the
framework's source the conditions were read (file, function, line), and what was not.
Every op entry says ``verified = true`` (its device, direction, condition and behaviour
were checked against that source) or ``verified = false`` with ``verified_why`` (what
could not be checked, and why).

Any problem in a file raises :class:`fwd9m.errors.FileFormatError` naming the file and
the entry.
"""

from __future__ import annotations

import functools
import re
import sys
from dataclasses import dataclass
from importlib import resources

from .. import _frameworks
from ..errors import CatalogError, FileFormatError
from ._model import BEHAVIOURS, DEVICES, DIRECTIONS, KINDS, Entry, Solution, parse_specifier, parse_version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["FRAMEWORKS", "Switch", "load", "switch"]

#: catalog frameworks, one data file each: the registry's, and Python itself
FRAMEWORKS = (*_frameworks.FRAMEWORKS, "python")

_ID = re.compile(r"^[a-z]+\.[a-z0-9]+(?:-[a-z0-9]+)*$")
_REQUIRED = ("id", "title", "summary", "kind", "affected", "references", "solutions")
_OPTIONAL = (
    "symbols",
    "ops",
    "direction",
    "devices",
    "behaviour",
    "timeline",
    "deterministic_since",
    "uncertain",
    "condition",
    "env",
    "ngc",
    "fixed_by",
    "source",
    "measured",
    "verified",
    "verified_why",
)


@dataclass(frozen=True)
class Switch:
    """A framework's determinism switch: what to call and since which version.
    ``older`` lists the earlier spellings as ``(since, until, code)``, newest first
    (e.g. TF_DETERMINISTIC_OPS=1 for TF 2.1-2.7)."""

    framework: str
    name: str
    code: str
    since: str | None
    references: tuple[str, ...]
    older: tuple[tuple[str, str, str], ...] = ()

    def code_for(self, version: str | None) -> str | None:
        """The switch's code at ``version`` (None: newest); None if that version has none.
        CatalogError if ``version`` is malformed."""
        if version is None:
            return self.code
        v = parse_version(version)
        if self.since is None or v >= parse_version(self.since):
            return self.code
        for since, until, code in self.older:
            if parse_version(since) <= v < parse_version(until):
                return code
        return None


def _check_framework(framework: str) -> str:
    if framework not in FRAMEWORKS:
        raise CatalogError(f"unknown framework {framework!r}; known: {', '.join(FRAMEWORKS)}")
    return framework


@functools.cache
def _read(framework: str) -> dict:
    name = f"{framework}.toml"
    try:
        text = resources.files(__package__).joinpath("data", name).read_text(encoding="utf-8")
    except FileNotFoundError:
        return {"framework": framework, "entry": []}
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise FileFormatError(f"catalog data file {name} is not valid TOML: {exc}") from None


def _squash(text: str | None) -> str | None:
    return " ".join(text.split()) if text else None


def _strs(value, where: str, key: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise FileFormatError(f"{where}: {key!r} must be a list of strings")
    return tuple(value)


def _switch_since(framework: str) -> str | None:
    """Earliest release with any spelling of the framework's switch (None: no switch)."""
    sw = switch(framework)
    if sw is None or sw.since is None:
        return None
    return min([sw.since, *(o[0] for o in sw.older)], key=parse_version)


def _entry(framework: str, raw: dict, where: str) -> Entry:
    _check_keys(framework, raw, where)
    eid = raw["id"]
    direction = raw.get("direction")
    devices = _strs(raw.get("devices", []), where, "devices")
    if not set(devices) <= set(DEVICES):
        raise FileFormatError(f"{where}: devices {devices} not within {DEVICES}")
    timeline, since = _versions(raw, where)
    solutions = _solutions(raw["solutions"], where)
    refs = _strs(raw["references"], where, "references")
    if not refs or not all(r.startswith("https://") for r in refs):
        raise FileFormatError(f"{where}: needs at least one reference, all https:// URLs")
    verified = _verified(raw, where)
    entry = Entry(
        id=eid,
        framework=framework,
        title=raw["title"].strip(),
        summary=" ".join(raw["summary"].split()),
        kind=raw["kind"],
        symbols=_strs(raw.get("symbols", []), where, "symbols"),
        ops=_strs(raw.get("ops", []), where, "ops"),
        direction=direction,
        devices=devices,
        affected=raw["affected"],
        deterministic_since=since,
        solutions=tuple(solutions),
        references=refs,
        uncertain=_squash(raw.get("uncertain")),
        condition=raw.get("condition"),
        fixed_by=_strs(raw.get("fixed_by", []), where, "fixed_by"),
        source=_squash(raw.get("source")),
        measured=_squash(raw.get("measured")),
        verified=verified,
        verified_why=_squash(raw.get("verified_why")),
        env=_strs(raw.get("env", []), where, "env"),
        ngc=raw.get("ngc"),
        timeline=tuple(timeline),
        switch_since=_switch_since(framework),
    )
    return entry


def _check_keys(framework: str, raw: dict, where: str) -> None:
    """An entry's keys are known and complete; its id, kind and direction well formed.

    Raises:
        FileFormatError: the first key or value that is not.
    """
    unknown = set(raw) - set(_REQUIRED) - set(_OPTIONAL)
    if unknown:
        raise FileFormatError(f"{where}: unknown keys {sorted(unknown)}")
    missing = [k for k in _REQUIRED if k not in raw]
    if missing:
        raise FileFormatError(f"{where}: missing required keys {missing}")
    eid = raw["id"]
    if not isinstance(eid, str) or not _ID.match(eid) or not eid.startswith(framework + "."):
        raise FileFormatError(f"{where}: id {eid!r} must look like '{framework}.kebab-slug'")
    if raw["kind"] not in KINDS:
        raise FileFormatError(f"{where}: kind {raw['kind']!r} not one of {KINDS}")
    direction = raw.get("direction")
    if direction is not None and direction not in DIRECTIONS:
        raise FileFormatError(f"{where}: direction {direction!r} not one of {DIRECTIONS}")


def _versions(raw: dict, where: str) -> tuple[list[tuple[str, str]], str | None]:
    """An entry's behaviour timeline, [(since, behaviour)], and the version from which it
    is deterministic (``deterministic_since``, else the timeline's first "deterministic"
    after "0"); its version specifiers checked.

    Raises:
        FileFormatError: a bad specifier, version or behaviour, both ``behaviour`` and
            ``timeline``, or a timeline item that is not [version, behaviour].
    """
    try:
        parse_specifier(raw["affected"])
        if raw.get("ngc"):
            parse_specifier(raw["ngc"])
        timeline = []
        if "timeline" in raw and "behaviour" in raw:
            raise FileFormatError(f"{where}: give 'behaviour' or 'timeline', not both")
        if "behaviour" in raw:
            timeline = [("0", raw["behaviour"])]
        for item in raw.get("timeline", []):
            since, behaviour = item
            parse_version(since)
            timeline.append((str(since), behaviour))
        for _, behaviour in timeline:
            if behaviour not in BEHAVIOURS:
                raise FileFormatError(f"{where}: behaviour {behaviour!r} not one of {BEHAVIOURS}")
        since = raw.get("deterministic_since")
        if since is not None:
            parse_version(since)
        else:
            since = next((s for s, b in timeline if b == "deterministic" and s != "0"), None)
    except CatalogError as exc:
        raise FileFormatError(f"{where}: {exc}") from None
    except (TypeError, ValueError):
        raise FileFormatError(f"{where}: timeline items must be [version, behaviour]") from None
    return timeline, since


def _solutions(raw_solutions, where: str) -> list[Solution]:
    """An entry's solutions, their text on one line and their code stripped.

    Raises:
        FileFormatError: a solution that is not a table of 'text' and optional 'code'.
    """
    solutions = []
    for s in raw_solutions:
        if not isinstance(s, dict) or "text" not in s or set(s) - {"text", "code"}:
            raise FileFormatError(f"{where}: each solution needs 'text' (and optional 'code')")
        solutions.append(Solution(text=" ".join(s["text"].split()), code=s.get("code", "").strip()))
    return solutions


def _verified(raw: dict, where: str) -> bool | None:
    """An entry's ``verified`` flag, with what each value requires.

    Raises:
        FileFormatError: an op entry without the flag, false without verified_why, true
            without source.
    """
    verified = raw.get("verified")
    if raw["kind"] == "op" and not isinstance(verified, bool):
        raise FileFormatError(f"{where}: an op entry needs verified = true or false")
    if verified is False and not raw.get("verified_why"):
        raise FileFormatError(f"{where}: verified = false needs verified_why (what was not checked)")
    if verified is True and not raw.get("source"):
        raise FileFormatError(f"{where}: verified = true needs source (file and line read)")
    return verified


@functools.cache
def load(framework: str) -> tuple[Entry, ...]:
    """All entries of ``framework``'s data file, unresolved (behaviour = newest known).

    Raises CatalogError for an unknown framework, FileFormatError for a bad file.
    """
    _check_framework(framework)
    data = _read(framework)
    if data.get("framework", framework) != framework:
        raise FileFormatError(f"{framework}.toml declares framework {data.get('framework')!r}")
    out, seen = [], set()
    for i, raw in enumerate(data.get("entry", [])):
        where = f"catalog {framework}.toml entry #{i + 1} ({raw.get('id', '?')})"
        entry = _entry(framework, raw, where)
        if entry.id in seen:
            raise FileFormatError(f"{where}: duplicate id {entry.id!r}")
        seen.add(entry.id)
        out.append(entry.at(None))
    return tuple(out)


@functools.cache
def switch(framework: str) -> Switch | None:
    """The framework's determinism switch from its data file's ``[switch]`` table."""
    raw = _read(_check_framework(framework)).get("switch")
    if not raw:
        return None
    older = tuple((o["since"], o["until"], o["code"].strip()) for o in raw.get("older", ()))
    return Switch(
        framework, raw["name"], raw["code"].strip(), raw.get("since"), tuple(raw.get("references", ())), older
    )
