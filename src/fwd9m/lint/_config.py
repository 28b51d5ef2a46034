"""Lint configuration: ``[tool.fwd9m.lint]`` in ``pyproject.toml`` plus command-line
overrides, and the selection of rules it implies.

Keys (kebab-case or snake_case): ``select`` and ``ignore`` (codes such as ``FWD101``,
prefixes such as ``FWD1``/``FWD``, rule names such as ``unseeded-generator``, or
``ALL``), ``extend-select``, ``per-file-ignores`` (a table ``"glob" = ["FWD4"]``),
``exclude`` (extra folder/file globs to skip when walking folders) and
``max-file-size`` (bytes; larger files give FWD003).
"""

from __future__ import annotations

import difflib
import fnmatch
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .._files import read_regular_file, shown
from ..errors import ConfigurationError, FileFormatError
from ._engine import DEFAULT_MAX_BYTES, ENGINE_CODES

__all__ = ["Config", "load_config", "find_pyproject", "expand_codes"]


@dataclass
class Config:
    select: list[str] | None = None  #: None: the default set
    ignore: list[str] = field(default_factory=list)
    extend_select: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    exclude: list[str] = field(default_factory=list)
    max_file_size: int = DEFAULT_MAX_BYTES
    root: Path | None = None  #: folder of the pyproject.toml it came from

    def rules(self):
        """Rule classes selected by this configuration, in code order."""
        from .rules import all_rules

        rules = all_rules()
        if self.select is None:
            chosen = {c for c, r in rules.items() if r.default}
        else:
            chosen = expand_codes(self.select, "select")
        chosen |= expand_codes(self.extend_select, "extend-select")
        chosen -= expand_codes(self.ignore, "ignore")
        return [rules[c] for c in sorted(chosen) if c in rules]

    def ignored_engine_codes(self) -> set[str]:
        return {c for c in expand_codes(self.ignore, "ignore") if c in ENGINE_CODES}

    def ignored_for(self, path: str) -> set[str]:
        """Codes ignored for ``path`` by ``per-file-ignores``."""
        if not self.per_file_ignores:
            return set()
        p = Path(path)
        rel = p.as_posix()
        if self.root is not None:
            try:
                rel = p.resolve().relative_to(self.root.resolve()).as_posix()
            except (ValueError, OSError):
                pass
        out: set[str] = set()
        for pattern, codes in self.per_file_ignores.items():
            if fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(p.name, pattern):
                out |= expand_codes(codes, f"per-file-ignores[{pattern!r}]")
        return out


def _known() -> dict[str, str]:
    """Every selectable spelling -> its code."""
    from .rules import all_rules

    out = {code: code for code in ENGINE_CODES}
    out.update({name: code for code, (name, _) in ENGINE_CODES.items()})
    for code, rule in all_rules().items():
        out[code] = code
        out[rule.name] = code
    return out


def expand_codes(items, where: str) -> set[str]:
    """Codes meant by ``items`` (codes, prefixes, names, ``ALL``); ConfigurationError
    naming the closest known code for anything unknown."""
    if isinstance(items, str):
        items = [items]
    known = _known()
    codes = set(known.values())
    out: set[str] = set()
    for raw in items or ():
        item = str(raw).strip()
        if not item:
            continue
        up = item.upper()
        if up == "ALL":
            out |= codes
        elif item in known:
            out.add(known[item])
        elif up in known:
            out.add(known[up])
        elif up.startswith("FWD") and any(c.startswith(up) for c in codes):
            out |= {c for c in codes if c.startswith(up)}
        else:
            close = difflib.get_close_matches(item, list(known), n=3, cutoff=0.6)
            hint = f"; did you mean {' or '.join(close)}?" if close else ""
            raise ConfigurationError(
                f"unknown rule {item!r} in {where}{hint}\n"
                "List the rules with `fwd9m lint --explain ALL` or see docs/rules.md."
            )
    return out


def find_pyproject(start: Path) -> Path | None:
    """The nearest ``pyproject.toml`` at or above ``start`` that has ``[tool.fwd9m.lint]``
    (else None)."""
    start = start.resolve()
    for folder in (start, *start.parents) if start.is_dir() else start.parents:
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            try:
                text = candidate.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            if "fwd9m" in text:
                return candidate
    return None


def _toml():
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    return tomllib


def _strings(value) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


#: the largest pyproject.toml read (a named pipe or a device such as /dev/zero is
#: refused before reading: either would hang the command)
MAX_PYPROJECT_BYTES = 16 << 20


def _read_toml(pyproject: Path) -> dict:
    """The TOML document ``pyproject``: a regular file of at most
    :data:`MAX_PYPROJECT_BYTES`. FileFormatError when it cannot be read or parsed, arrays
    nested too deep for the parser (RecursionError) included."""
    hint = "name a pyproject.toml file (--config), or --isolated to ignore it"
    data = read_regular_file(pyproject, "pyproject.toml", hint, MAX_PYPROJECT_BYTES)
    try:
        return _toml().loads(data.decode("utf-8"))
    except ValueError as exc:  # UnicodeDecodeError, TOMLDecodeError are ValueErrors
        raise FileFormatError(f"cannot read {shown(pyproject)}: {exc}") from None
    except RecursionError:
        raise FileFormatError(f"cannot read {shown(pyproject)}: its arrays or tables are nested too deep") from None


def load_config(pyproject: Path | None) -> Config:
    """Config from ``pyproject`` (None: defaults). FileFormatError if unreadable,
    ConfigurationError for unknown keys or codes."""
    if pyproject is None:
        return Config()
    data = _read_toml(Path(pyproject))
    table, names = data, []
    for part in ("tool", "fwd9m", "lint"):
        table = table.get(part, {})
        names.append(part)
        if not isinstance(table, dict):
            raise ConfigurationError(f"[{'.'.join(names)}] in {pyproject} must be a table")
    cfg = Config(root=Path(pyproject).parent)
    allowed = {"select", "ignore", "extend_select", "per_file_ignores", "exclude", "max_file_size"}
    for key, value in table.items():
        norm = key.replace("-", "_")
        if norm not in allowed:
            close = difflib.get_close_matches(norm, sorted(allowed), n=1)
            hint = f"; did you mean {close[0].replace('_', '-')!r}?" if close else ""
            raise ConfigurationError(f"unknown key {key!r} in [tool.fwd9m.lint] of {pyproject}{hint}")
        if norm == "per_file_ignores":
            if not isinstance(value, dict):
                raise ConfigurationError(f'per-file-ignores in {pyproject} must be a table "glob" = ["FWD4"]')
            value = {k: [v] if isinstance(v, str) else v for k, v in value.items()}
            if not all(_strings(v) for v in value.values()):
                raise ConfigurationError(
                    f'per-file-ignores in {pyproject}: each value must be a code or a list of codes, "glob" = ["FWD4"]'
                )
        elif norm == "max_file_size":
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigurationError(f"max-file-size in {pyproject} must be a byte count")
        elif isinstance(value, str):
            value = [value]
        if norm in ("select", "ignore", "extend_select", "exclude") and not _strings(value):
            raise ConfigurationError(
                f"{key} in {pyproject} must be a string or a list of strings, "
                f'for example {key} = ["{"build/*" if norm == "exclude" else "FWD1"}"]'
            )
        setattr(cfg, norm, value)
    # validate codes now, so a typo is reported once, before any file is read
    cfg.rules()
    for pattern, codes in cfg.per_file_ignores.items():
        expand_codes(codes, f"per-file-ignores[{pattern!r}]")
    return cfg
