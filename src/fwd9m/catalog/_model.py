"""The catalog's data model: :class:`Entry` and :class:`Solution`, plus version helpers.

Versions are compared with ``packaging`` (PEP 440); the local part (``+cpu``, ``+cu128``)
is ignored, pre-releases count as their release line.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from ..errors import CatalogError

__all__ = [
    "Entry",
    "Solution",
    "KINDS",
    "BEHAVIOURS",
    "DEVICES",
    "DIRECTIONS",
    "parse_version",
    "parse_specifier",
    "normalize_device",
]

KINDS = ("op", "setting", "seed", "data", "distributed", "compiler", "system")
#: behaviour under the framework's determinism switch
BEHAVIOURS = ("deterministic", "raises", "nondeterministic", "not-applicable")
DEVICES = ("cpu", "gpu", "tpu")
DIRECTIONS = ("forward", "backward", "both")
_DEVICE_ALIASES = {"cuda": "gpu", "rocm": "gpu", "gpu": "gpu", "cpu": "cpu", "tpu": "tpu"}


@functools.lru_cache(maxsize=1024)
def parse_version(text: str) -> Version:
    """PEP 440 version without its local part; :class:`CatalogError` if malformed."""
    try:
        return Version(Version(str(text).strip()).public)
    except InvalidVersion:
        raise CatalogError(
            f"malformed version {text!r}: expected a PEP 440 version such as '2.13' or '2.21.0'"
        ) from None


def parse_specifier(text: str) -> SpecifierSet:
    """PEP 440 specifier set (``">=2.0,<2.9"``; ``""`` means every version)."""
    try:
        return SpecifierSet(text)
    except InvalidSpecifier:
        raise CatalogError(f"malformed version specifier {text!r}: expected PEP 440 such as '>=2.0,<2.9'") from None


def normalize_device(device: str) -> str:
    """``"cuda"``/``"gpu"`` -> ``"gpu"``; ``"cpu"``; ``"tpu"``; CatalogError otherwise."""
    key = str(device).strip().lower().split(":", 1)[0]
    try:
        return _DEVICE_ALIASES[key]
    except KeyError:
        raise CatalogError(f"unknown device {device!r}; known devices: cpu, gpu (alias cuda), tpu") from None


@dataclass(frozen=True)
class Solution:
    """One way to fix or avoid a source: prose plus the exact code to paste."""

    text: str
    code: str = ""


@dataclass(frozen=True)
class Entry:
    """One known source of nondeterminism in one framework.

    ``behaviour`` is the behaviour under the framework's determinism switch
    (``tf.config.experimental.enable_op_determinism()``,
    ``torch.use_deterministic_algorithms(True)``, XLA's deterministic-ops flag; for
    sources no switch touches, "nondeterministic") for the version the entry was
    resolved for: the queried version, else the installed one, else the newest known.
    ``timeline`` keeps the whole history as ``(since_version, behaviour)`` pairs in
    version order; before the first pair the behaviour is "nondeterministic".
    """

    id: str
    framework: str
    title: str
    summary: str
    kind: str
    symbols: tuple[str, ...] = ()
    ops: tuple[str, ...] = ()
    direction: str | None = None
    devices: tuple[str, ...] = ()
    affected: str = ""
    behaviour: str = "nondeterministic"
    deterministic_since: str | None = None
    solutions: tuple[Solution, ...] = ()
    references: tuple[str, ...] = ()
    uncertain: str | None = None
    #: extra, optional
    condition: str | None = None  #: argument/dtype condition, e.g. "accumulate=True"
    #: settings that also fix it, "qualified.name=Value" (torch.backends.cudnn.deterministic=True)
    fixed_by: tuple[str, ...] = ()
    source: str | None = None  #: where in the framework's source the conditions come from
    #: what ``fwd9m probe`` measured (version, device, threads, repeats, result)
    measured: str | None = None
    #: op entries: True when device, direction, condition and behaviour were checked
    #: against the framework's own source (``source`` cites it); False with ``verified_why``
    verified: bool | None = None
    verified_why: str | None = None  #: what could not be checked, and why
    env: tuple[str, ...] = ()  #: environment variables involved
    ngc: str | None = None  #: NGC TF container versions (specifier) with the solution
    timeline: tuple[tuple[str, str], ...] = ()
    resolved_for: str | None = None  #: version ``behaviour`` was resolved for
    #: first release with any spelling of the framework's switch; before it, an entry whose
    #: data gives no dated timeline cannot be fixed by (or raise under) a switch
    switch_since: str | None = None
    _spec: SpecifierSet = field(default=None, repr=False, compare=False)  # type: ignore

    def __post_init__(self):
        if self._spec is None:
            object.__setattr__(self, "_spec", parse_specifier(self.affected))

    # -- version logic -----------------------------------------------------------------
    def applies_to(self, version: str | None = None, device: str | None = None) -> bool:
        """True when ``version`` (None: any) is in ``affected`` and ``device`` (None:
        any; "cuda" means "gpu") is one of ``devices``. CatalogError if malformed."""
        if device is not None and self.devices and normalize_device(device) not in self.devices:
            return False
        if version is None:
            return True
        return self._spec.contains(parse_version(version), prereleases=True)

    def behaviour_at(self, version: str | None) -> str:
        """Behaviour under the determinism switch at ``version`` (None: newest known)."""
        if version is not None and not self.applies_to(version):
            return "not-applicable"
        if not self.timeline:
            return "nondeterministic"
        if version is None:
            return self.timeline[-1][1]
        v = parse_version(version)
        undated = len(self.timeline) == 1 and self.timeline[0][0] == "0"
        if undated and self.switch_since and v < parse_version(self.switch_since):
            return "nondeterministic"  # no switch in this release
        current = "nondeterministic"
        for since, behaviour in self.timeline:
            if v >= parse_version(since):
                current = behaviour
        return current

    def at(self, version: str | None) -> Entry:
        """This entry with ``behaviour`` resolved for ``version``."""
        return dataclasses.replace(self, behaviour=self.behaviour_at(version), resolved_for=version, _spec=self._spec)

    @property
    def fix(self) -> str:
        """The first solution's code, ready to paste ("" if there is none)."""
        return self.solutions[0].code if self.solutions else ""

    def to_dict(self) -> dict:
        """JSON-ready dict (public fields only)."""
        out = {}
        for f in dataclasses.fields(self):
            if f.name.startswith("_"):
                continue
            value = getattr(self, f.name)
            if f.name == "solutions":
                value = [dataclasses.asdict(s) for s in value]
            elif f.name == "timeline":
                value = [list(t) for t in value]
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        return out
