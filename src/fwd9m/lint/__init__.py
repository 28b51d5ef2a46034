"""``fwd9m.lint``: static rules that catch reproducibility pitfalls before the run.

>>> from fwd9m import lint
>>> [f.code for f in lint.lint_source("import numpy as np\\nrng = np.random.default_rng()\\n")]
['FWD103']

Rules are grouped by hundreds: FWD1xx seeding, FWD2xx configuration, FWD3xx data
pipelines, FWD4xx ordering and hashing, FWD5xx checkpoints and RNG state, FWD6xx JAX
keys, FWD7xx known nondeterministic ops (generated from :mod:`fwd9m.catalog`);
FWD0xx are engine diagnostics (syntax error, undecodable, too large, rule failure).
Nothing here imports a deep-learning framework.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigurationError
from ._config import Config, expand_codes, find_pyproject, load_config
from ._engine import ENGINE_CODES, Finding, few_collections, lint_bytes, too_large
from ._engine import lint_source as _lint_source
from ._rule import SECTIONS, Rule

__all__ = [
    "Finding",
    "Config",
    "Rule",
    "Report",
    "lint_source",
    "lint_paths",
    "iter_files",
    "all_rules",
    "get_rule",
    "load_config",
    "find_pyproject",
    "ENGINE_CODES",
    "SECTIONS",
]

#: folder names never entered when walking a folder (a path given explicitly is linted)
DEFAULT_EXCLUDE = (
    ".git",
    ".hg",
    ".svn",
    ".venv",
    "venv",
    ".tox",
    ".nox",
    "__pycache__",
    "build",
    "dist",
    "node_modules",
    ".eggs",
    "*.egg-info",
    ".mypy_cache",
    ".pytest_cache",
)


def all_rules() -> dict[str, type[Rule]]:
    """Every rule, code -> class (default and opt-in)."""
    from .rules import all_rules as _all

    return _all()


def get_rule(code: str) -> type[Rule]:
    """The rule for a code or name; ConfigurationError (with a suggestion) if unknown."""
    if not str(code).strip():
        raise ConfigurationError(
            "--explain needs a rule code or name, e.g. --explain FWD101 (`--explain ALL` lists the rules)"
        )
    matches = sorted(expand_codes([code], "--explain"))
    if len(matches) > 1:  # a prefix (FWD1) or ALL
        shown = ", ".join(matches[:8]) + (", ..." if len(matches) > 8 else "")
        raise ConfigurationError(
            f"{code!r} matches {len(matches)} rules ({shown}); name one, or "
            f"list them all with `fwd9m lint --explain ALL`"
        )
    found = matches[0] if matches else None
    if found is None or found not in all_rules():
        raise ConfigurationError(
            f"{code!r} is an engine diagnostic, not a rule: {ENGINE_CODES.get(found, ('', ''))[1]}"
        )
    return all_rules()[found]


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _trigger_re(rule_classes) -> re.Pattern | None:
    """The prefilter: finds the identifiers of a text (rules whose trigger words are all
    absent are skipped; with no active rule the file is only parsed, for FWD001)."""
    return _IDENTIFIER


class _Selection:
    def __init__(self, config: Config):
        self.config = config
        self.rules = config.rules()
        self.trigger_re = _trigger_re(self.rules)
        self.ignored_engine = config.ignored_engine_codes()

    def filter(self, findings: list[Finding], path: str) -> list[Finding]:
        drop = self.ignored_engine | self.config.ignored_for(path)
        if not drop:
            return findings
        return [f for f in findings if f.code not in drop]


def lint_source(source: str | bytes, path: str = "<string>", config: Config | None = None) -> list[Finding]:
    """Findings for one source text (``str``, or ``bytes`` decoded per PEP 263)."""
    sel = _Selection(config or Config())
    if isinstance(source, bytes):
        found = lint_bytes(source, path, sel.rules, trigger_re=sel.trigger_re, max_bytes=sel.config.max_file_size)
    else:
        found = _lint_source(source, path, sel.rules, trigger_re=sel.trigger_re)
    return sel.filter(found, path)


def _excluded(name: str, rel: str, patterns) -> bool:
    import fnmatch

    return any(fnmatch.fnmatch(name, p) or fnmatch.fnmatch(rel, p) for p in patterns)


def iter_files(paths: Iterable[str | os.PathLike], exclude: Iterable[str] = ()) -> Iterator[Path]:
    """``.py`` files under ``paths`` in sorted order (a file given explicitly is always
    yielded). FileNotFoundError for a path that does not exist."""
    patterns = (*DEFAULT_EXCLUDE, *exclude)
    for raw in paths:
        p = Path(raw)
        if p.is_file():
            yield p
            continue
        if not p.is_dir():
            if p.exists():  # a pipe, socket or device: reading it could block or never end
                raise ConfigurationError(
                    f"{raw} is not a regular file or folder; pipe source code in with `fwd9m lint -`"
                )
            raise FileNotFoundError(f"no such file or folder: {raw}")
        for root, dirs, files in os.walk(p):
            rel_root = os.path.relpath(root, p)
            dirs[:] = sorted(d for d in dirs if not _excluded(d, os.path.join(rel_root, d), patterns))
            for f in sorted(files):
                if (
                    f.endswith(".py")
                    and not _excluded(f, os.path.join(rel_root, f), patterns)
                    and not _special(os.path.join(root, f))
                ):
                    yield Path(root, f)


def _special(path: str) -> bool:
    """A pipe, socket or device named ``*.py`` (skipped: reading it could block); a file
    that cannot be stat'ed (a dangling link) is not special: reading it reports why."""
    import stat

    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


@dataclass
class Report:
    """Findings of a run plus how many files were checked."""

    findings: list[Finding] = field(default_factory=list)
    files: int = 0

    def statistics(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for f in self.findings:
            out[f.code] = out.get(f.code, 0) + 1
        return dict(sorted(out.items()))


def lint_paths(
    paths: Iterable[str | os.PathLike],
    config: Config | None = None,
    *,
    stdin_name: str = "<stdin>",
    imports: dict[str, list[str]] | None = None,
) -> Report:
    """Lint files and folders (``-`` reads standard input). Unreadable files give an
    engine finding; a missing path raises ConfigurationError before anything runs.
    ``imports``: filled with ``{file: the names its imports name}`` of the files parsed
    (for :func:`fwd9m.lint._imports.imported_files`, which then parses none again)."""
    paths = list(paths)
    if config is None:
        first = next((Path(p) for p in paths if p != "-"), Path.cwd())
        config = load_config(find_pyproject(first if first.exists() else Path.cwd()))
    sel = _Selection(config)
    report = Report()
    for raw in paths:
        if raw != "-" and not Path(raw).exists():
            raise ConfigurationError(f"no such file or folder: {raw}")
    with few_collections():
        for raw in paths:
            _lint_path(raw, config, sel, report, stdin_name, imports)
    return report


def _lint_path(
    raw, config: Config, sel: _Selection, report: Report, stdin_name: str, imports: dict[str, list[str]] | None
) -> None:
    """Lint one path of :func:`lint_paths` (a file, a folder or ``-``) into ``report``."""
    if raw == "-":
        data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode()
        files = [(stdin_name, data)]
    else:
        files = ((str(f), None) for f in iter_files([raw], config.exclude))
    for name, data in files:
        report.files += 1
        if data is None:
            try:
                size = os.path.getsize(name)
                if config.max_file_size and size > config.max_file_size:
                    report.findings.extend(sel.filter([too_large(name, size, config.max_file_size)], name))
                    continue
                with open(name, "rb") as fh:
                    data = fh.read()
            except OSError as exc:
                report.findings.append(
                    Finding(name, 1, 1, "FWD002", "undecodable", f"cannot read the file: {exc.strerror or exc}")
                )
                continue
        found = lint_bytes(
            data,
            name,
            sel.rules,
            trigger_re=sel.trigger_re,
            max_bytes=config.max_file_size,
            on_tree=_keep(imports, name),
        )
        report.findings.extend(sel.filter(found, name))


def _keep(imports: dict[str, list[str]] | None, name: str):
    """The callback that records the import names of file ``name``'s tree in ``imports``."""
    if imports is None:
        return None
    from ._imports import import_names

    return lambda tree: imports.__setitem__(name, import_names(tree))
