"""The package's layering, read from its source (AST, nothing imported):

* no module imports another package's ``_private`` module (the one file of a framework
  package that touches the framework's private API: ``fwd9m/torch/_private.py`` may be
  imported by ``fwd9m/torch/*`` only), nor a name from it;
* no import cycle between the packages of ``fwd9m`` (``check``, ``debug``, ``_runtime``,
  top-level modules such as ``environment``...), counting the imports a module runs
  when it is imported;
* the same counting every import, those inside functions included (only the ones under
  ``if TYPE_CHECKING:`` are left out: they never run);
* import-linter's contracts in ``pyproject.toml`` (the layers of CONTRIBUTING.md, and
  the framework packages independent of each other) hold.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
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


def _type_checking_only(tree: ast.AST) -> set[int]:
    """The ids of the import statements under ``if TYPE_CHECKING:`` (never run)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            out.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return out


def full_package_graph() -> dict[str, dict[str, str]]:
    """:func:`package_graph` counting every import that can run, also inside functions."""
    graph: dict[str, dict[str, str]] = {}
    for module, (path, is_pkg) in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _type_checking_only(tree)
        for node in _every_import(tree):
            if id(node) in skip:
                continue
            for name in _imported(module, is_pkg, node):
                a, b = _unit(module), _unit(name)
                if a != b:
                    graph.setdefault(a, {}).setdefault(b, f"{path.relative_to(SRC)}:{node.lineno}")
    return graph


def _cycle_text(graph: dict[str, dict[str, str]], found: list[list[str]]) -> str:
    return "\n".join(
        "  "
        + " ".join(c)
        + ": "
        + "; ".join(f"{a}->{b} at {graph[a][b]}" for a in c for b in c if b in graph.get(a, {}))
        for c in found
    )


def test_no_import_cycle_between_packages_counting_every_import():
    graph = full_package_graph()
    found = cycles(graph)
    assert not found, "import cycles between packages:\n" + _cycle_text(graph, found)


def test_the_full_graph_sees_imports_inside_functions_but_not_type_checking_ones(tmp_path, monkeypatch):
    pkg = tmp_path / "fwd9m"
    for folder in ("check", "debug"):
        (pkg / folder).mkdir(parents=True)
        (pkg / folder / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "check" / "_a.py").write_text("def f():\n    from ..debug import x\n")
    (pkg / "debug" / "_b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..check import y\n"
    )
    monkeypatch.setitem(globals(), "SRC", tmp_path)
    monkeypatch.setitem(globals(), "PACKAGE", pkg)
    monkeypatch.setitem(globals(), "MODULES", _modules())
    assert full_package_graph() == {"check": {"debug": "fwd9m/check/_a.py:2"}}


def _import_linter_contracts() -> list[dict]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    config = tomllib.loads((SRC.parent / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    return config["contracts"]


def test_the_layers_contract_ignores_no_import():
    """No exception to the layers: a lower layer that needs something from above is
    handed it (a callback, a registry), never let import it (CONTRIBUTING.md, "Layers")."""
    (layers,) = [c for c in _import_linter_contracts() if c["type"] == "layers"]
    assert not layers.get("ignore_imports"), layers["ignore_imports"]


def test_every_package_has_a_layer_in_the_import_linter_contract():
    """A new package (or top-level module) is placed in a layer of ``pyproject.toml``
    (import-linter would otherwise leave it unchecked)."""
    (layers,) = [c["layers"] for c in _import_linter_contracts() if c["type"] == "layers"]
    placed = {name.strip() for layer in layers for name in layer.replace(":", "|").split("|")}
    units = {_unit(m) for m in MODULES} - {"fwd9m"}
    assert not units - placed, f"not in a layer of pyproject.toml's [tool.importlinter]: {sorted(units - placed)}"


def test_the_import_linter_contracts_hold():
    """``lint-imports`` (import-linter: grimp reads every import statement, those inside
    functions included) with the contracts of ``pyproject.toml``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    code = "import sys\nfrom importlinter.cli import lint_imports_command\nsys.exit(lint_imports_command())"
    result = subprocess.run(
        [sys.executable, "-c", code, "--config", str(SRC.parent / "pyproject.toml"), "--no-cache"],
        capture_output=True,
        text=True,
        cwd=SRC.parent,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
