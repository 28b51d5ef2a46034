"""Point a runtime finding at the lines that cause it: the findings of fwd9m's own lint
rules (:mod:`fwd9m.lint`) on the script that was run, filtered to the rules that fit
the cause class ``fwd9m debug`` found (or, for ``fwd9m check``, every rule about seeds,
settings, data, ordering, JAX keys and catalog ops).

Only the script given and the local modules it imports by name (``import helpers`` with
``helpers.py`` beside it) are read: a static pass over a few files, no framework import.
"""

from __future__ import annotations

import ast
import dataclasses
import os
from pathlib import Path
from typing import Any

from ._log import logger

__all__ = ["CAUSE_CODES", "HASH_CODES", "relevant", "findings", "check_hints", "uses_loader_workers"]

#: cause class (fwd9m.debug's external sources, "op" for a culprit op, None for a check
#: that does not know the cause) -> lint codes or code prefixes (FWD1 = every FWD1xx)
CAUSE_CODES: dict[str | None, tuple[str, ...]] = {
    "rng": ("FWD1", "FWD6", "FWD306", "FWD307"),
    "seed": ("FWD1", "FWD6"),
    "initializer": ("FWD1", "FWD6"),
    "data": ("FWD1", "FWD3", "FWD4"),
    "python": ("FWD1", "FWD3", "FWD4"),
    "hashseed": ("FWD204", "FWD402", "FWD403"),
    "op": ("FWD2", "FWD7"),
    None: ("FWD1", "FWD2", "FWD3", "FWD4", "FWD6", "FWD7"),
}

#: rules about string hashing: dropped once the hash seed is ruled out
HASH_CODES = ("FWD204", "FWD402", "FWD403")

#: files read at most (the script plus the local modules it imports)
MAX_FILES = 8


def relevant(code: str, cause: str | None) -> bool:
    """Whether lint rule ``code`` (``"FWD103"``) can explain cause class ``cause``."""
    return any(code.startswith(p) for p in CAUSE_CODES.get(cause, CAUSE_CODES[None]))


def _tree(path: Path) -> ast.AST | None:
    try:
        return ast.parse(path.read_bytes(), str(path))
    except (OSError, SyntaxError, ValueError):
        return None


def local_modules(script: str | os.PathLike) -> list[Path]:
    """``NAME.py`` files beside ``script`` that it imports (``import NAME``, ``from NAME
    import x``, ``from . import NAME``), in the order imported; [] when unreadable."""
    script = Path(script)
    tree = _tree(script)
    if tree is None:
        return []
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.module:
                names.append(node.module.split(".")[0])
            elif node.level:
                names += [a.name for a in node.names]
    out: list[Path] = []
    for n in dict.fromkeys(names):
        p = script.parent / f"{n}.py"
        if p.is_file() and p.resolve() != script.resolve():
            out.append(p)
    return out[:MAX_FILES - 1]


def _shown(path: str) -> str:
    """A path relative to the working directory when it is below it."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive
        return path
    return path if rel.startswith("..") else rel


def findings(script: str | os.PathLike | None, cause: str | None = None, *,
             exclude: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Lint findings in ``script`` (and its local modules) that fit ``cause``, in file and
    line order: dicts with ``path``, ``line``, ``code``, ``message`` and ``fix`` (code to
    paste, "" when the message says it). The project's lint configuration
    (``[tool.fwd9m.lint]`` in the nearest pyproject.toml, ``# noqa``) applies. Codes
    starting with an entry of ``exclude`` are left out. Never raises: [] when the script
    is missing (a trace from another machine) or unreadable; a bad configuration is logged
    as a warning and the default rules are used."""
    if not script or not Path(script).is_file():
        return []
    try:
        from .lint import find_pyproject, lint_paths, load_config

        from .errors import ConfigurationError, FileFormatError

        files = [Path(script), *local_modules(script)]
        pyproject = find_pyproject(Path(script))
        try:
            config = load_config(pyproject)
        except (ConfigurationError, FileFormatError) as exc:  # say so, and still point at the lines
            logger.warning("fwd9m lint configuration in %s is invalid (%s); the 'in your code' "
                           "hints use the default rules", pyproject, str(exc).splitlines()[0])
            config = load_config(None)
        # the runs already differ: rules kept opt-in for CI precision still point at causes
        from .lint._measured import OPT_IN

        config = dataclasses.replace(config, extend_select=[*config.extend_select, *OPT_IN])
        report = lint_paths([str(f) for f in files], config)
    except Exception as exc:  # noqa: BLE001 - a lint problem must not hide the runtime finding
        logger.debug("lint of %s for hints failed: %s", script, exc)
        return []
    return [{"path": _shown(f.path), "line": f.line, "code": f.code, "message": f.message, "fix": f.fix}
            for f in sorted(report.findings, key=lambda f: f.sort_key())
            if relevant(f.code, cause) and not any(f.code.startswith(x) for x in exclude)]


def check_hints(script: str | os.PathLike | None, hash_seed: bool = True) -> list[dict[str, Any]]:
    """For ``fwd9m check`` when runs differ: the script's relevant lint findings shaped
    like its catalog hints (``id`` = the rule code, ``kind`` = ``"lint"``, ``title`` =
    ``"in your code: FILE:LINE message"``). ``hash_seed`` False (the string-hash seed did
    not differ, or was ruled out) leaves out the hash-order rules."""
    return [{"id": f["code"], "title": f"in your code: {f['path']}:{f['line']} {f['message']}",
             "kind": "lint", "fix": f["fix"], "references": []}
            for f in findings(script, None, exclude=() if hash_seed else HASH_CODES)]


def uses_loader_workers(script: str | os.PathLike | None) -> bool:
    """Whether ``script`` creates a ``DataLoader(..., num_workers=N)`` with N not the
    literal 0 (worker processes, each with a copy of the dataset and its generators)."""
    tree = _tree(Path(script)) if script and Path(script).is_file() else None
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name == "DataLoader":
                for k in node.keywords:
                    if k.arg == "num_workers" and not (isinstance(k.value, ast.Constant) and not k.value.value):
                        return True
    return False
