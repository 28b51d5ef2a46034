"""The local modules a script imports: the files of its own folder that its ``import``
statements name (``import helpers``, ``from helpers.seeding import set_seed``), not
site-packages. ``fwd9m lint train.py`` reads them too, as ``check`` and ``debug`` run
them; ``fwd9m fix`` patches them."""

from __future__ import annotations

import ast
from pathlib import Path


def local_modules(script: Path, tree: ast.AST) -> dict[str, Path]:
    """``{path relative to the script's folder: file}`` of the modules ``tree`` (the
    script's syntax tree) imports from the script's folder."""
    out: dict[str, Path] = {}
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        for name in names:
            rel = Path(*name.split("."))
            for candidate in (rel.with_suffix(".py"), rel / "__init__.py"):
                f = script.parent / candidate
                if f.is_file() and not f.is_symlink():
                    out[str(candidate)] = f
    return out


def imported_files(scripts: list[Path], depth: int = 3) -> list[Path]:
    """The local modules ``scripts`` import, and the ones those import (``depth`` levels),
    each once, not the scripts themselves, in the order found."""
    seen = {s.resolve() for s in scripts}
    out: list[Path] = []
    todo = [(s, s.parent, 0) for s in scripts]
    while todo:
        path, root, level = todo.pop(0)
        try:
            tree = ast.parse(path.read_bytes())
        except (OSError, SyntaxError, ValueError):
            continue
        for f in local_modules(root / "x.py", tree).values():
            if f.resolve() not in seen:
                seen.add(f.resolve())
                out.append(f)
                if level + 1 < depth:
                    todo.append((f, root, level + 1))
    return out
