"""Every framework backend implements the whole :class:`fwd9m._backend.Backend`
protocol with the same signatures (as Keras 3's ``keras/src/ops/ops_test.py`` keeps its
backends aligned), the registry is the one list of frameworks, and frameworks' private
API is used only in the ``<framework>/_private.py`` files."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

import fwd9m
from fwd9m import _frameworks
from fwd9m._backend import Backend
from fwd9m.errors import ConfigurationError

SRC = Path(fwd9m.__file__).parent
NAMES = list(_frameworks.FRAMEWORKS)

#: what the protocol declares: attributes (annotations) and methods
ATTRIBUTES = dict(Backend.__annotations__)
METHODS = sorted(n for n, v in vars(Backend).items() if callable(v) and not n.startswith("_"))

_ATTR_TYPES = {
    "name": str,
    "module": str,
    "distributions": tuple,
    "libraries": tuple,
    "seeds_others": bool,
    "global_rng": bool,
    "type_roots": tuple,
    "optional_sources": tuple,
    "rng_kinds": tuple,
    "capture_rank": int,
    "state_roots": tuple,
}


def _shape(sig: inspect.Signature) -> list[tuple]:
    """Names, kinds and defaults of a signature (annotations are checked by mypy)."""
    return [(p.name, p.kind, p.default) for p in sig.parameters.values()]


def test_protocol_members_are_the_ones_checked_here():
    assert set(ATTRIBUTES) == set(_ATTR_TYPES)
    assert {
        "enable_determinism",
        "startup_env",
        "seed",
        "rng_sources",
        "rng_adapter",
        "to_numpy",
        "expand",
        "digest",
        "digest_partial",
        "runtime_info",
        "intra_op_threads",
        "recorded_by",
        "recorder",
        "keep_alive",
        "state_types",
        "final_state",
        "tree_leaves",
    } == set(METHODS)


@pytest.mark.parametrize("name", NAMES)
def test_backend_implements_the_whole_protocol(name):
    b = _frameworks.backend(name)
    assert isinstance(b, Backend)
    assert b.name == name and b.module == _frameworks.FRAMEWORKS[name].module
    for attr, kind in _ATTR_TYPES.items():
        assert isinstance(getattr(b, attr), kind), (name, attr)
    for method in METHODS:
        want = _shape(inspect.signature(getattr(Backend, method)))
        got = _shape(inspect.signature(getattr(type(b), method)))
        assert got == want, f"{name}.{method}{got} != protocol {want}"
    assert _frameworks.backend(name) is b  # created once


@pytest.mark.parametrize("name", NAMES)
def test_each_registered_framework_is_one_package(name):
    package = importlib.import_module(f"fwd9m.{name}")
    assert Path(package.__file__).name == "__init__.py"
    for public in ("enable_determinism", "startup_env"):
        assert callable(getattr(package, public))
    assert (SRC / name / "_backend.py").is_file()


def test_unknown_framework_lists_the_known_ones():
    with pytest.raises(ConfigurationError) as err:
        _frameworks.backend("mxnet")
    assert all(n in str(err.value) for n in NAMES)
    with pytest.raises(ConfigurationError):
        _frameworks.backends(["torch", "mxnet"])


def test_registry_imports_no_framework():
    import subprocess
    import sys

    code = (
        "import sys, fwd9m._frameworks as r\n"
        "[r.backend(n) for n in r.FRAMEWORKS]\n"
        "print(sorted(m for m in ('torch', 'tensorflow', 'jax', 'keras') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("name", ["torch", "jax", "tensorflow"])
def test_backend_round_trips_its_own_values(name):
    """The protocol on the real framework: to-NumPy and digests of its tensor, its RNG
    sources restore what they captured, runtime info names the version."""
    fw = pytest.importorskip(name)
    b = _frameworks.backend(name)
    make = {
        "torch": lambda: fw.arange(6, dtype=fw.float32),
        "jax": lambda: fw.numpy.arange(6, dtype="float32"),
        "tensorflow": lambda: fw.range(6, dtype=fw.float32),
    }[name]
    t = b.to_numpy(make())
    assert t is not None and t.dtype == "float32" and t.array.tolist() == [0, 1, 2, 3, 4, 5]
    assert b.to_numpy([1, 2]) is None
    digest = b.digest(make())
    assert digest is None or digest == b.digest(make())
    partial = b.digest_partial(make())
    if partial is not None:  # the device path, run on CPU here: the same digest
        from fwd9m.fingerprint import finalize

        assert finalize(int(partial[0]), partial[1]) == digest
    assert b.digest_partial([1, 2]) is None
    assert b.runtime_info()["version"] == fw.__version__
    assert b.rng_adapter([1, 2]) is None
    b.seed(3)
    for source, (capture, restore) in b.rng_sources().items():
        state = capture()
        if state is not None:
            restore(state)
            assert _same(capture(), state), source


def test_capture_members_do_nothing_without_their_framework():
    """Final-state capture asks every backend, imported or not: without its framework
    each has no state types, no final state, no tree leaves, and imports nothing."""
    import subprocess
    import sys

    code = (
        "import sys, fwd9m._frameworks as r\n"
        "for b in r.backends(list(r.FRAMEWORKS)):\n"
        "    assert b.state_types() == () and b.tree_leaves({'a': 1}) is None, b\n"
        "    assert b.final_state([], lambda o: None, lambda k, o: k, set()) == {}, b\n"
        "print(sorted(m for m in ('torch', 'tensorflow', 'jax', 'keras') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_torch_final_state_keeps_a_model_local_to_a_function():
    """The torch backend's capture on real torch: keep_alive holds a module from its
    construction, final_state saves the root (not its submodule) and the stepped
    optimizer, and takes their tensors."""
    torch = pytest.importorskip("torch")
    b = _frameworks.backend("torch")
    kept: dict[int, object] = {}
    on = [True]  # torch's global hooks cannot be removed here: they stop keeping after the test
    b.keep_alive(lambda o: on[0] and kept.setdefault(id(o), o))

    def train():
        m = torch.nn.Sequential(torch.nn.Linear(2, 1))
        opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        m(torch.ones(1, 2)).sum().backward()
        opt.step()

    try:
        train()
    finally:
        on[0] = False
    types = b.state_types()
    found = [o for o in kept.values() if isinstance(o, types)]
    kept.clear()
    taken: set[int] = set()
    out = b.final_state(found, lambda o: None, lambda kind, o: f"{kind}:{type(o).__name__}", taken)
    assert list(out) == ["torch:Sequential", "torch:SGD"]
    assert {id(p) for p in out["torch:Sequential"].parameters()} <= taken


def _same(a, b) -> bool:
    import numpy as np

    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return bool(np.array_equal(np.asarray(a), np.asarray(b)))


# ---------------------------------------------------------------------------- private API

PRIVATE = re.compile(r"^(torch\._C|torch\.utils\._|tensorflow\.python|jax\._src|keras\.src)(\.|$)")
#: private attributes of framework objects fwd9m reads (an OpOverload's schema and
#: overload name, a tensor's version counter): attribute names no fwd9m object has
PRIVATE_ATTRIBUTES = {"_schema", "_overloadname", "_version"}


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _private_uses(tree: ast.AST) -> list[tuple[int, str]]:
    """Imports, attribute chains and module paths in strings (``import_module("...")``,
    ``sys.modules.get("...")``) reaching private API; docstrings are not uses."""
    found = []
    docs = _docstrings(tree)
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Attribute):
            names = [_dotted(node) or ""]
            if node.attr in PRIVATE_ATTRIBUTES:
                found.append((node.lineno, f"<object>.{node.attr}"))
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docs
            and re.fullmatch(r"[\w.]+", node.value)
        ):
            names = [node.value]  # a module path to import or look up: "jax._src.xla_bridge"
        found += [(node.lineno, n) for n in names if PRIVATE.match(n)]
    return found


def _docstrings(tree: ast.AST) -> set[int]:
    return {
        id(n.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
    }


def test_private_framework_api_only_in_private_modules():
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        # lint's tables name the calls it looks for in users' code: names, not uses
        if path.name == "_private.py" or path.relative_to(SRC).parts[0] == "lint":
            continue
        for line, name in _private_uses(ast.parse(path.read_text(encoding="utf-8"))):
            offenders.append(f"{path.relative_to(SRC)}:{line} {name}")
    assert not offenders, "private framework API outside <framework>/_private.py:\n" + "\n".join(offenders)


def test_private_api_check_finds_each_form():
    code = (
        "import torch._C\nfrom tensorflow.python.eager import context\nimport jax\n"
        "jax._src.xla_bridge\nimportlib.import_module('keras.src.utils')\n"
        "from torch.utils import data\n'''tensorflow.python in a docstring'''\n"
        "sys.modules.get('tensorflow.python.ops.nn')\n'see tensorflow.python for more'\n"
        "func._schema.name\n"
    )
    assert sorted(n for _, n in _private_uses(ast.parse(code))) == [
        "<object>._schema",
        "jax._src",
        "jax._src.xla_bridge",
        "keras.src.utils",
        "tensorflow.python.eager",
        "tensorflow.python.eager.context",
        "tensorflow.python.ops.nn",
        "torch._C",
    ]


def test_unsupported_generator_lists_every_backends_kinds():
    """fwd9m.rng.register's TypeError names what each registered backend can adapt."""
    from fwd9m import rng

    with pytest.raises(TypeError, match="cannot register") as err:
        rng.register(object())
    for name in NAMES:
        for kind in _frameworks.backend(name).rng_kinds:
            assert kind in str(err.value), kind
