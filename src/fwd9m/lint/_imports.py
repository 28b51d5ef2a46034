"""The local modules a script imports: the files of its own folder that its ``import``
statements name (``import helpers``, ``from helpers.seeding import set_seed``), not
site-packages. ``fwd9m lint train.py`` reads them too, as ``check`` and ``debug`` run
them; ``fwd9m fix`` patches them."""

from __future__ import annotations

import ast
import errno
import os
import stat
from pathlib import Path

#: the fields of a statement (or ``except``/``case`` clause) that hold statements
_BODIES = frozenset({"body", "orelse", "finalbody", "handlers", "cases"})
_CLAUSES = (ast.stmt, ast.excepthandler, ast.match_case)


def import_names(tree: ast.AST) -> list[str]:
    """The dotted names the ``import`` statements of ``tree`` name, in ``ast.walk``'s
    order (breadth first): ``import a.b`` gives ``a.b``; ``from a import b, c`` gives ``a``,
    ``a.b``, ``a.c``; relative imports give nothing. Imports are statements, and a
    statement's ancestors are statements, so only statement lists are walked: the same
    imports, in the same order, as a walk of every node, in a fraction of the time."""
    out: list[str] = []
    level = [tree]
    while level:
        nxt = []
        for node in level:
            t = type(node)
            if t is ast.Import:
                out.extend(a.name for a in node.names)
            elif t is ast.ImportFrom:
                if node.module and not node.level:
                    out.append(node.module)
                    out.extend(f"{node.module}.{a.name}" for a in node.names)
            else:
                for name in t._fields:
                    if name in _BODIES:
                        v = getattr(node, name, None)
                        if type(v) is list:
                            nxt.extend(c for c in v if isinstance(c, _CLAUSES))
        level = nxt
    return out


def _local_files(folder: Path, names: list[str], is_file: dict[str, bool] | None = None) -> dict[str, Path]:
    """``{path relative to folder: file}`` of the modules ``names`` that are files in
    ``folder`` (not links); ``is_file`` caches the file tests of one run."""
    out: dict[str, Path] = {}
    base = os.fspath(folder)
    for name in names:
        rel = "/".join(name.split("."))  # the parts are identifiers: Path(*parts) as text
        for candidate in (rel + ".py", rel + "/__init__.py"):
            full = os.path.join(base, candidate)
            found = is_file.get(full) if is_file is not None else None
            if found is None:
                found = _plain_file(full)
                if is_file is not None:
                    is_file[full] = found
            if found:
                out[candidate] = folder / candidate
    return out


#: the errors ``Path.is_file`` and ``Path.is_symlink`` read as "no" (others propagate)
_NO = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP})


def _plain_file(path: str) -> bool:
    """``Path(path).is_file() and not Path(path).is_symlink()`` (the same errors read as
    "no", the others raised), without building paths."""
    try:
        st = os.stat(path)
    except OSError as exc:
        if getattr(exc, "errno", None) not in _NO:
            raise
        return False
    except ValueError:
        return False
    if not stat.S_ISREG(st.st_mode):
        return False
    try:
        return not stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError as exc:
        if getattr(exc, "errno", None) not in _NO:
            raise
        return True
    except ValueError:
        return True


def local_modules(script: Path, tree: ast.AST) -> dict[str, Path]:
    """``{path relative to the script's folder: file}`` of the modules ``tree`` (the
    script's syntax tree) imports from the script's folder."""
    return _local_files(script.parent, import_names(tree))


def imported_files(scripts: list[Path], depth: int = 3, known: dict[str, list[str]] | None = None) -> list[Path]:
    """The local modules ``scripts`` import, and the ones those import (``depth`` levels),
    each once, not the scripts themselves, in the order found. ``known``: the
    :func:`import_names` of files already parsed (``{str(path): names}``, as
    :func:`fwd9m.lint.lint_paths` fills it), so that they are not parsed again."""
    known = known or {}
    is_file: dict[Path, bool] = {}
    seen = {s.resolve() for s in scripts}
    out: list[Path] = []
    todo = [(s, s.parent, 0) for s in scripts]
    while todo:
        path, root, level = todo.pop(0)
        names = known.get(str(path))
        if names is None:
            try:
                names = import_names(ast.parse(path.read_bytes()))
            except (OSError, SyntaxError, ValueError):
                continue
        for f in _local_files(root, names, is_file).values():
            r = f.resolve()
            if r not in seen:
                seen.add(r)
                out.append(f)
                if level + 1 < depth:
                    todo.append((f, root, level + 1))
    return out
