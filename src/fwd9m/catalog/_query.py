"""Queries over the catalog: by framework, text, symbol, op name, device and version.

Every function returns entries whose ``behaviour`` is resolved for the queried version,
else the installed version of that framework (package metadata, no import), else the
newest known version.
"""

from __future__ import annotations

import functools
import platform
import re

from ..errors import CatalogError
from ._load import FRAMEWORKS, _check_framework, load
from ._model import KINDS, Entry, normalize_device, parse_version

__all__ = ["entries", "get", "query", "for_op", "for_symbol", "installed_version", "normalize_op", "normalize_symbol"]

#: spellings of a symbol's top-level module that mean the same thing
_SYMBOL_PREFIXES = {"tensorflow.": "tf.", "jax.numpy.": "jnp.", "numpy.": "np."}
_QUERY_KEYS = ("framework", "device", "version", "symbol", "op", "kind", "id")


def installed_version(framework: str) -> str | None:
    """Installed version of a catalog framework from package metadata (no import);
    for "python", the running interpreter's version. Cached per process."""
    return _installed_version(_check_framework(framework))


@functools.cache
def _installed_version(framework: str) -> str | None:
    if framework == "python":
        return platform.python_version()
    from .._frameworks import installed_version as _iv

    return _iv(framework)


@functools.lru_cache(maxsize=8192)
def _at(entry: Entry, version: str) -> Entry:
    return entry.at(version)


def _resolve(entries, version: str | None) -> list[Entry]:
    """Entries with behaviour resolved for ``version``, else each framework's installed
    version, else left at the newest known."""
    out = []
    for e in entries:
        v = version if version is not None else _installed_version(e.framework)
        out.append(_at(e, v) if v is not None else e)
    return out


def _all(framework: str | None):
    if framework is None:
        return [e for fw in FRAMEWORKS for e in load(fw)]
    return list(load(_check_framework(str(framework).lower())))


def entries(framework: str | None = None) -> list[Entry]:
    """Every entry (of ``framework``), behaviour resolved for the installed version."""
    return _resolve(_all(framework), None)


def get(entry_id: str) -> Entry:
    """The entry with id ``entry_id``; CatalogError (with close matches) if unknown."""
    fw = entry_id.split(".", 1)[0]
    pool = _all(fw) if fw in FRAMEWORKS else _all(None)
    for e in pool:
        if e.id == entry_id:
            return _resolve([e], None)[0]
    import difflib

    close = difflib.get_close_matches(entry_id, [e.id for e in _all(None)], n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else "; list ids with `fwd9m catalog`"
    raise CatalogError(f"unknown catalog entry {entry_id!r}{hint}")


def normalize_op(name: str) -> str:
    """Canonical form of an op name for matching: case-folded, ``aten::``/``aten.``
    prefix and overload suffix (``.default``) and trailing ``_`` dropped, ``-`` -> ``_``
    (JAX primitives print as ``scatter-add``)."""
    n = name.strip()
    for prefix in ("aten::", "aten.", "torch.ops.aten."):
        if n.startswith(prefix):
            n = n[len(prefix) :].split(".", 1)[0]
            break
    return n.replace("-", "_").rstrip("_").lower()


def normalize_symbol(name: str) -> str:
    """Canonical form of a public symbol (``tensorflow.x`` -> ``tf.x``)."""
    n = name.strip()
    for long, short in _SYMBOL_PREFIXES.items():
        if n.startswith(long):
            return short + n[len(long) :]
    return n


def _version_filter(found, version: str | None, device: str | None):
    if device is not None:
        normalize_device(device)
    if version is not None:
        parse_version(version)
    return [e for e in found if e.applies_to(version, device)]


@functools.cache
def _op_index(framework: str) -> dict[str, tuple[Entry, ...]]:
    index: dict[str, list[Entry]] = {}
    for e in load(framework):
        for key in dict.fromkeys(normalize_op(o) for o in e.ops):
            index.setdefault(key, []).append(e)
    return {k: tuple(v) for k, v in index.items()}


@functools.cache
def _symbol_index() -> dict[str, tuple[Entry, ...]]:
    index: dict[str, list[Entry]] = {}
    for e in _all(None):
        for key in dict.fromkeys(normalize_symbol(s) for s in e.symbols):
            index.setdefault(key, []).append(e)
    return {k: tuple(v) for k, v in index.items()}


def for_op(framework: str, op_name: str, version: str | None = None, device: str | None = None) -> list[Entry]:
    """Entries whose low-level ops include ``op_name`` as a trace shows it: TF op type
    ("UnsortedSegmentSum"), aten op ("aten::index_put_", "index_put_",
    "aten.index_put_.default"), JAX primitive ("scatter-add"). Indexed and memoised:
    a repeated look-up costs one cache hit."""
    return list(_for_op(framework, op_name, version, device))


@functools.lru_cache(maxsize=4096)
def _for_op(framework: str, op_name: str, version: str | None, device: str | None):
    found = _op_index(_check_framework(str(framework).lower())).get(normalize_op(op_name), ())
    return tuple(_resolve(_version_filter(found, version, device), version))


def for_symbol(qualified_name: str, version: str | None = None, device: str | None = None) -> list[Entry]:
    """Entries reached through public symbol ``qualified_name`` ("torch.index_add",
    "torch.Tensor.index_add_", "tf.math.unsorted_segment_sum"; "tensorflow." is
    accepted for "tf.")."""
    found = _symbol_index().get(normalize_symbol(qualified_name), ())
    return _resolve(_version_filter(found, version, device), version)


def _parse_text(text: str) -> tuple[list[str], dict[str, str]]:
    words, keys = [], {}
    for token in text.split():
        m = re.match(r"^([A-Za-z_]+):(?!:)(.*)$", token)
        if m:
            key, value = m.group(1).lower(), m.group(2)
            if key not in _QUERY_KEYS:
                raise CatalogError(
                    f"malformed query {text!r}: unknown field {key!r}; use plain words or "
                    f"{', '.join(k + ':VALUE' for k in _QUERY_KEYS)}"
                )
            if not value:
                raise CatalogError(f"malformed query {text!r}: {key}: needs a value")
            keys[key] = value
        else:
            words.append(token.lower())
    return words, keys


def _haystack(e: Entry) -> str:
    parts = [e.id, e.title, e.summary, e.condition or "", *e.symbols, *e.ops, *e.env]
    return " ".join(parts).lower()


def query(
    text: str | None = None,
    *,
    framework: str | None = None,
    device: str | None = None,
    version: str | None = None,
    symbol: str | None = None,
    op: str | None = None,
    kind: str | None = None,
) -> list[Entry]:
    """Filter the catalog. ``text``: words that must all occur (case-insensitive) in an
    entry's id, title, summary, symbols, ops or env; ``_`` and ``-`` and ``.`` count as
    word characters, so ``index_add`` finds ``torch.index_add``. ``text`` may also
    carry ``framework:``, ``device:``, ``version:``, ``symbol:``, ``op:``, ``kind:``,
    ``id:`` fields. ``version`` needs a framework. With words, the best matches come
    first (exact op or symbol name, then id/title, then prose). Raises CatalogError for an
    unknown framework, device or kind, a malformed version or query."""
    words, keys = _parse_text(text or "")
    given = {"framework": framework, "device": device, "version": version, "symbol": symbol, "op": op, "kind": kind}
    for name, value in given.items():
        if value is not None and not str(value).strip():
            raise CatalogError(f"{name} is empty; give a value or leave it out")
        if (
            value is not None
            and name != "device"
            and keys.get(name) is not None  # (devices have aliases)
            and keys[name].lower() != str(value).lower()
        ):
            raise CatalogError(f"{name} given twice, as {value!r} and in the query as {name}:{keys[name]}; keep one")
    framework = framework or keys.get("framework")
    device = device or keys.get("device")
    version = version or keys.get("version")
    symbol = symbol or keys.get("symbol")
    op = op or keys.get("op")
    kind = kind or keys.get("kind")
    if framework is not None:
        framework = _check_framework(framework.lower())
    if kind is not None and kind not in KINDS:
        raise CatalogError(f"unknown kind {kind!r}; known kinds: {', '.join(KINDS)}")
    if version is not None and framework is None:
        raise CatalogError(
            f"version {version!r} needs a framework (versions differ per framework): add --framework or framework:NAME"
        )
    found = _all(framework)
    if "id" in keys:
        found = [e for e in found if e.id == keys["id"] or e.id.startswith(keys["id"])]
    if symbol is not None:
        s = normalize_symbol(symbol)
        found = [e for e in found if s in (normalize_symbol(x) for x in e.symbols)]
    if op is not None:
        o = normalize_op(op)
        found = [e for e in found if o in (normalize_op(x) for x in e.ops)]
    if kind is not None:
        found = [e for e in found if e.kind == kind]
    for w in words:
        found = [e for e in found if w in _haystack(e)]
    if words:  # best matches first: exact op/symbol names, then id/title, then prose
        found.sort(key=lambda e: -sum(_score(e, w) for w in words))
    return _resolve(_version_filter(found, version, device), version)


def _score(e: Entry, word: str) -> int:
    key = normalize_op(word)
    names = {normalize_op(o) for o in e.ops}
    names |= {normalize_op(s.rsplit(".", 1)[-1]) for s in e.symbols}
    if key in names:
        return 3
    if word in " ".join([e.id, e.title, *e.symbols, *e.ops]).lower():
        return 2
    return 1
