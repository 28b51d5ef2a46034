"""The package's layering, read from its source (AST, nothing imported):

* no module imports another package's ``_private`` module (the one file of a framework
  package that touches the framework's private API: ``fwd9m/torch/_private.py`` may be
  imported by ``fwd9m/torch/*`` only), nor a name from it;
* no import cycle between the packages of ``fwd9m`` (``check``, ``debug``, ``_runtime``,
  top-level modules such as ``environment``...), counting the imports a module runs
  when it is imported. Imports inside functions are left out: they are how the package
  keeps ``import fwd9m`` light and imports a framework only when it is used.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "fwd9m"


def _modules() -> dict[str, tuple[Path, bool]]:
    """``{dotted name: (path, is a package __init__)}`` of every module under src/fwd9m."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    return out


MODULES = _modules()


def _base(module: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    """The module a ``from ... import`` names, relative imports resolved."""
    if not node.level:
        return node.module or ""
    parts = module.split(".") if is_pkg else module.split(".")[:-1]
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join([*parts, *([node.module] if node.module else [])])


def _imported(module: str, is_pkg: bool, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The fwd9m modules an import statement imports: ``from a import b`` is module
    ``a.b`` when that is a module, else the module ``a``."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = _base(module, is_pkg, node)
        subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in MODULES]
        names = subs + ([base] if len(subs) < len(node.names) else [])
    return [n for n in names if n == "fwd9m" or n.startswith("fwd9m.")]


def _is_private_module(name: str) -> bool:
    last = name.rsplit(".", 1)[-1]
    return last == "_private" or (last.startswith("_") and last.endswith("_private"))


def _owner(private: str) -> str:
    """The package whose modules may import ``private``: its parent package."""
    return private.rsplit(".", 1)[0]


def _every_import(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node


def _import_time(tree: ast.Module):
    """The imports a module runs when it is imported: its top level, also inside ``if``
    and ``try`` there, but not under ``if TYPE_CHECKING:`` and not inside functions or
    classes."""
    stack: list[ast.stmt] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If) and "TYPE_CHECKING" not in ast.unparse(node.test):
            stack += node.body + node.orelse
        elif isinstance(node, ast.Try):
            stack += node.body + node.orelse + node.finalbody + [s for h in node.handlers for s in h.body]


def private_imports() -> list[str]:
    out = []
    for module, (path, is_pkg) in MODULES.items():
        for node in _every_import(ast.parse(path.read_text(encoding="utf-8"))):
            for name in _imported(module, is_pkg, node):
                owner = _owner(name)
                if _is_private_module(name) and not (module == owner or module.startswith(owner + ".")):
                    out.append(f"{path.relative_to(SRC)}:{node.lineno} imports {name}")
    return out


def _unit(module: str) -> str:
    """The layer a module belongs to: ``fwd9m.check._runs`` -> ``check``; the root
    package ``fwd9m`` itself is ``fwd9m``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "fwd9m"


def package_graph() -> dict[str, dict[str, str]]:
    """``{unit: {imported unit: where (file:line)}}`` from the import-time imports."""
    graph: dict[str, dict[str, str]] = {}
    for module, (path, is_pkg) in MODULES.items():
        for node in _import_time(ast.parse(path.read_text(encoding="utf-8"))):
            for name in _imported(module, is_pkg, node):
                a, b = _unit(module), _unit(name)
                if a != b:
                    graph.setdefault(a, {}).setdefault(b, f"{path.relative_to(SRC)}:{node.lineno}")
    return graph


def cycles(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """The strongly connected components with more than one unit (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_module_imports_another_packages_private_module():
    assert not private_imports(), "\n".join(private_imports())


def test_the_private_rule_sees_every_form_of_import(tmp_path, monkeypatch):
    """The rule on stand-in modules: ``fwd9m/torch/_private.py`` (the layout of the
    framework packages) used from ``fwd9m/torch/`` is fine, from ``fwd9m/debug/`` it is
    not, whether by ``from ..torch._private import x``, ``from ..torch import _private``,
    ``import fwd9m.torch._private`` or inside a function."""
    pkg = tmp_path / "fwd9m"
    for folder in ("torch", "debug"):
        (pkg / folder).mkdir(parents=True)
        (pkg / folder / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "torch" / "_private.py").write_text("x = 1\n")
    (pkg / "torch" / "_enable.py").write_text("from ._private import x\n")
    (pkg / "debug" / "_a.py").write_text("from ..torch._private import x\n")
    (pkg / "debug" / "_b.py").write_text("from ..torch import _private\n")
    (pkg / "debug" / "_c.py").write_text("def f():\n    import fwd9m.torch._private\n")
    globals_ = globals()
    monkeypatch.setitem(globals_, "SRC", tmp_path)
    monkeypatch.setitem(globals_, "PACKAGE", pkg)
    monkeypatch.setitem(globals_, "MODULES", _modules())
    found = private_imports()
    assert sorted(f.split(":")[0] for f in found) == [f"fwd9m/debug/_{k}.py" for k in "abc"], found


def test_no_import_cycle_between_packages():
    graph = package_graph()
    found = cycles(graph)
    where = [
        "  "
        + " -> ".join(c)
        + ": "
        + "; ".join(f"{a}->{b} at {graph[a][b]}" for a in c for b in c if b in graph.get(a, {}))
        for c in found
    ]
    assert not found, "import cycles between packages:\n" + "\n".join(where)


def test_the_cycle_check_finds_a_cycle():
    assert cycles({"check": {"debug": "x"}, "debug": {"compare": "y"}, "compare": {"check": "z"}}) == [
        ["check", "compare", "debug"]
    ]
    assert cycles({"check": {"compare": "x"}, "debug": {"compare": "y"}}) == []
