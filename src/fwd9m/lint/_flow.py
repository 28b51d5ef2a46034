"""A small data-flow layer shared by rules: what a call reaches one level down.

Library knowledge lives in the tables at the top (seeding helpers, training entry
points), not in rules. Facts about a file are computed once and cached on its
:class:`~fwd9m.lint._engine.FileContext`:

- :func:`helper_seed_calls`: calls that seed through a helper the qualified-name tables
  do not list: a method such as Lightning Fabric's ``fabric.seed_everything(seed)``,
  ``RunConfig(tf_random_seed=...)``, a function of this file whose body seeds, or a
  function of a local module the file imports (``from timm import utils`` ->
  ``timm/utils/...``, found beside the file or up to three folders above it) whose body
  seeds; one level deep, following one re-export (``from .random import random_seed``).
  Only functions whose name contains "seed" are looked up in other files (each lookup
  reads a file; a seeding helper named otherwise is not seen).
- :func:`local_callees`: the calls a script runs into functions of local modules it
  imports (a data module's ``make_loader``), one level, so what they build counts for it.
- :func:`script_runs`: whether a call runs when the file is executed as a script: at
  module level, in a non-test ``__main__`` block, or in a function reached from either
  (called, or handed to ``absl.app.run(main)`` / ``tf.compat.v1.app.run()``), one call
  level at a time.
"""

from __future__ import annotations

import ast
import collections
import functools
import re
import sys
from pathlib import Path

from ._helpers import SEED_CALLS, TRAINING_CALL, walk

__all__ = [
    "SEED_METHODS",
    "ENTRY_POINTS",
    "GRADIENT_METHODS",
    "GRADIENT_CALLS",
    "helper_seed_calls",
    "local_callees",
    "local_training",
    "dotted",
    "script_runs",
    "runs",
    "local_function",
    "computes_gradients",
    "assigns",
    "is_test_file",
    "local_model_training",
    "fallback_calls",
    "importers",
    "importer_seeds",
    "importer_scripts",
    "project_mentions",
]

#: methods that seed every generator whatever the receiver (Lightning Fabric and
#: LightningModule-style objects: ``fabric.seed_everything(seed)``)
SEED_METHODS = frozenset({"seed_everything", "set_seed", "set_random_seed"})
#: calls that take a seed keyword for the framework they configure
SEED_KEYWORDS = {"RunConfig": "tf_random_seed"}
#: calls that run ``main`` (their first argument, or the module's ``main`` when none)
ENTRY_POINTS = frozenset(
    {"absl.app.run", "tensorflow.app.run", "tensorflow.compat.v1.app.run", "tensorflow.python.platform.app.run"}
)
#: methods and calls that compute gradients (a backward pass runs in this file)
GRADIENT_METHODS = frozenset({"backward", "fit", "train_on_batch", "apply_gradients", "gradient", "minimize", "train"})
GRADIENT_CALLS = frozenset(
    {
        "jax.grad",
        "jax.value_and_grad",
        "jax.vjp",
        "jax.jacrev",
        "torch.autograd.grad",
        "torch.autograd.backward",
        "tensorflow.gradients",
    }
)
_TEST_MAINS = frozenset({"main", "run"})  # unittest.main(), absltest.main(), tf.test.main()
_LOCAL_DEPTH = 3  #: folders above the file searched for a local package


_BLOCKS = frozenset({"body", "orelse", "finalbody", "handlers", "cases"})  #: fields that hold statements


def _statements(tree) -> list:
    """Every statement of ``tree`` (and the except handlers and match cases between
    them), nested ones too, in the order ``ast.walk`` yields them, without walking
    expressions: imports, definitions, assignments, ``if`` and ``try`` are statements,
    and no statement sits inside an expression."""
    out, todo = [], collections.deque([tree])
    while todo:
        n = todo.popleft()
        out.append(n)
        for f in n._fields:
            if f in _BLOCKS:
                v = getattr(n, f, None)
                if type(v) is list:
                    todo.extend(v)
    return out


def statements(ctx) -> list:
    """:func:`_statements` of the linted file, computed once per file: for rules that
    look for a definition, an assignment, an ``if`` or a ``try`` anywhere in the file."""
    cached = ctx.__dict__.get("_flow_statements")
    if cached is None:
        cached = ctx.__dict__["_flow_statements"] = _statements(ctx.tree) if ctx.tree is not None else []
    return cached


def _qualnames(tree) -> dict[str, str]:
    """Import aliases of a module: local name -> dotted target."""
    out = {}
    for n in sorted(
        (s for s in _statements(tree) if type(s) in (ast.Import, ast.ImportFrom)),
        key=lambda s: (s.lineno, s.col_offset),
    ):
        if type(n) is ast.Import:
            for a in n.names:
                out[(a.asname or a.name).split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif type(n) is ast.ImportFrom and n.module and not n.level:
            for a in n.names:
                out[a.asname or a.name] = f"{n.module}.{a.name}"
    return out


def module_aliases(ctx) -> dict[str, str]:
    """:func:`_qualnames` of the linted file's tree, computed once per file."""
    cached = ctx.__dict__.get("_flow_aliases")
    if cached is None:
        cached = ctx.__dict__["_flow_aliases"] = _qualnames(ctx.tree)
    return cached


def dotted(node, aliases) -> str | None:
    """``node``'s qualified name under a module's import ``aliases`` (None: not an import)."""
    return _dotted(node, aliases)


def _dotted(node, aliases) -> str | None:
    attrs = []
    while type(node) is ast.Attribute:
        attrs.append(node.attr)
        node = node.value
    if type(node) is not ast.Name or node.id not in aliases:
        return None
    return ".".join([aliases[node.id], *reversed(attrs)])


#: what a seeding method or keyword stands for, as a call of the qualified-name tables
_METHOD_SEEDS = frozenset({"lightning.seed_everything"})
_KEYWORD_SEEDS = frozenset({"tensorflow.random.set_seed"})


def _body_seeds(fn, aliases) -> frozenset[str]:
    """The seeding calls (qualified names of the tables) function ``fn`` makes in its
    own body; a seeding method counts as Lightning's ``seed_everything``."""
    out = set()
    for n in walk(fn):
        if type(n) is ast.Call:
            qn = _dotted(n.func, aliases)
            if qn in SEED_CALLS:
                out.add(qn)
            elif (
                qn is None and type(n.func) is ast.Attribute and n.func.attr in SEED_METHODS and (n.args or n.keywords)
            ):
                out |= _METHOD_SEEDS
    return frozenset(out)


def _module_file(start: Path, dotted: str) -> Path | None:
    parts = dotted.split(".")
    for folder in [start, *list(start.parents)[:_LOCAL_DEPTH]]:
        base = folder.joinpath(*parts)
        for cand in (base.with_suffix(".py"), base / "__init__.py"):
            if cand.is_file():
                return cand
    return None


def _parse(path: Path):
    """The syntax tree of a local module, cached while the file is unchanged."""
    try:
        st = path.stat()
    except OSError:
        return None
    return _parse_cached(path, st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=64)
def _parse_cached(path: Path, mtime_ns: int, size: int):
    try:
        return ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError, RecursionError):
        return None


def _aliases(path: Path) -> dict[str, str]:
    """The import aliases of a local module, cached with its tree (every file of a
    folder that imports the module asks again)."""
    try:
        st = path.stat()
    except OSError:
        return {}
    return _aliases_cached(path, st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=64)
def _aliases_cached(path: Path, mtime_ns: int, size: int) -> dict[str, str]:
    tree = _parse_cached(path, mtime_ns, size)
    return _qualnames(tree) if tree is not None else {}


def local_function(ctx, qualname: str, classes: bool = False):
    """``(FunctionDef, aliases)`` of ``pkg.mod.func`` defined in a local module beside
    the linted file or up to three folders above it (following one ``from .x import
    func`` re-export), else None; ``classes``: a class (``ClassDef``) too."""
    if "." not in qualname or ctx.path in ("-", "<stdin>"):
        return None
    kinds = (
        (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef) if classes else (ast.FunctionDef, ast.AsyncFunctionDef)
    )
    cache = ctx.__dict__.setdefault("_flow_local", {})
    key = (qualname, classes)
    if key in cache:
        return cache[key]
    cache[key] = None
    mod, name = qualname.rsplit(".", 1)
    path = _module_file(Path(ctx.path).resolve().parent, mod)
    for _ in range(2):  # the module, then one re-export
        tree = _parse(path) if path else None
        if tree is None:
            break
        fn = next((s for s in tree.body if type(s) in kinds and s.name == name), None)
        if fn is not None:
            cache[key] = (fn, _aliases(path), path)[: 3 if classes else 2]
            break
        src = next(
            (
                s
                for s in tree.body
                if type(s) is ast.ImportFrom
                and s.module
                and (s.level == 1 or s.level == 0 and s.module.split(".")[0] == mod.split(".")[0] != s.module)
                and any((a.asname or a.name) == name for a in s.names)
            ),
            None,
        )
        if src is None:
            break
        base = path.parent
        # ``from .tcn import f`` or the package's own absolute ``from tcn.tcn import f``
        path = _module_file(base if src.level else Path(ctx.path).resolve().parent, src.module) if base else None
        path = path if path and path.parent == base or path and path.parent.parent == base else None
    return cache[key]


def _module_defs(ctx) -> dict[str, ast.AST]:
    """The module's functions: defined at module level, also under a module-level
    ``if``/``with``/``try`` (``with strategy.scope(): def train_step(...)``), not in a
    class or another function."""
    out, todo = {}, list(getattr(ctx.tree, "body", ()))
    while todo:
        s = todo.pop(0)
        if type(s) in (ast.FunctionDef, ast.AsyncFunctionDef):
            out.setdefault(s.name, s)
        elif type(s) is not ast.ClassDef:
            todo += [c for c in ast.iter_child_nodes(s) if isinstance(c, ast.stmt)]
    return out


def _enclosing_def(defs, line):
    for fn in defs.values():
        if fn.lineno <= line <= (fn.end_lineno or fn.lineno):
            return fn
    return None


def helper_seed_calls(ctx) -> list[tuple[ast.Call, frozenset[str]]]:
    """``(call, seeds)`` for each call of this file that seeds through a helper (see the
    module docstring); ``seeds``: the table calls it amounts to (``torch.manual_seed``
    for a local helper whose body calls it, Lightning's ``seed_everything`` for a
    seeding method). Built from the engine's call tables; the tree is walked only when
    the file defines a seeding function."""
    cached = ctx.__dict__.get("_flow_seed_calls")
    if cached is not None:
        return cached
    # a method on an object of the script (fabric.seed_everything), not a module function
    methods = [
        c
        for m in SEED_METHODS
        for c in ctx.methods.get(m, ())
        if (c.args or c.keywords) and ctx.qualname(c.func) is None
    ]
    out = [(c, _METHOD_SEEDS) for c in methods]
    for qn, calls in ctx.calls.items():
        last = qn.rsplit(".", 1)[-1]
        if last in SEED_KEYWORDS:
            out.extend((c, _KEYWORD_SEEDS) for c in calls if any(k.arg == SEED_KEYWORDS[last] for k in c.keywords))
        elif "seed" in last.lower() and qn not in SEED_CALLS and "." in qn and qn.split(".", 1)[0] not in _FOREIGN:
            found = local_function(ctx, qn)
            got = _body_seeds(*found) if found is not None else frozenset()
            if got:
                out.extend((c, got) for c in calls)
        elif "." in qn and _trains(ctx) and qn.split(".", 1)[0] in _local_roots(ctx):
            # a setup helper of the repository that seeds further down (dinov2's
            # setup(args) -> default_setup(args) -> utils.fix_random_seeds(seed))
            # only where a script always runs it: a seed under `if args.seed != -1:` is
            # optional, and a library module's caller seeds (and would cost a walk each)
            always = [c for c in calls if id(c) not in _conditional_calls(ctx) and runs(ctx, c)]
            found = local_function(ctx, qn) if always else None
            ctx.__dict__["_flow_deep_budget"] = [30]  # local lookups for this helper
            got = _deep_seeds(ctx, found[0], found[1], qn.rsplit(".", 1)[0], 4) if found is not None else frozenset()
            if got:
                out.extend((c, got) for c in always)
    defs = _module_defs(ctx)
    seeding_defs: dict[str, set[str]] = {}
    if defs:
        sites = [(c, qn) for qn in SEED_CALLS for c in ctx.calls.get(qn, ())]
        sites += [(c, "lightning.seed_everything") for c in methods]
        for c, qn in sites:
            fn = _enclosing_def(defs, c.lineno)
            if fn is not None:
                seeding_defs.setdefault(fn.name, set()).add(qn)
    if seeding_defs:
        for call in walk(ctx.tree):
            if (
                type(call) is ast.Call
                and type(call.func) is ast.Name
                and call.func.id in seeding_defs
                and ctx.lookup(call.func.id) is None
            ):
                out.append((call, frozenset(seeding_defs[call.func.id])))
    ctx.__dict__["_flow_seed_calls"] = out
    return out


def _local_roots(ctx) -> frozenset[str]:
    """Top-level names of this file's calls that are packages or modules of the
    repository (beside the file or up to :data:`_LOCAL_DEPTH` folders above it)."""
    cached = ctx.__dict__.get("_flow_local_roots")
    if cached is None:
        start = Path(ctx.path).resolve().parent if ctx.path not in ("-", "<stdin>") else None
        roots = {qn.split(".", 1)[0] for qn in ctx.calls if "." in qn} - _FOREIGN
        cached = frozenset(r for r in roots if start is not None and _module_file(start, r) is not None)
        ctx.__dict__["_flow_local_roots"] = cached
    return cached


def _trains(ctx) -> bool:
    """Whether the file's text calls a training function (:data:`TRAINING_CALL`)."""
    found = ctx.__dict__.get("_flow_trains")
    if found is None:
        found = ctx.__dict__["_flow_trains"] = TRAINING_CALL.search(ctx.text) is not None
    return found


def _conditional_calls(ctx) -> frozenset[int]:
    """Ids of the calls under an ``if`` (in its test, body or ``else``) of this file."""
    cached = ctx.__dict__.get("_flow_conditional_calls")
    if cached is None:
        out, done = set(), set()
        for s in statements(ctx):
            if type(s) is ast.If and id(s) not in done:
                for n in walk(s):
                    if type(n) is ast.Call:
                        out.add(id(n))
                    elif type(n) is ast.If:
                        done.add(id(n))  # nested: its calls are in already
        cached = ctx.__dict__["_flow_conditional_calls"] = frozenset(out)
    return cached


def _deep_seeds(ctx, fn, aliases, module: str, depth: int) -> frozenset[str]:
    """The seeding calls function ``fn`` (of local module ``module``) makes in its body or
    through the functions of local modules it calls, ``depth`` levels deep."""
    got = set(_body_seeds(fn, aliases))
    budget = ctx.__dict__.setdefault("_flow_deep_budget", [30])  # local lookups per helper
    if got or depth <= 1 or budget[0] <= 0:
        return frozenset(got)
    for n in walk(fn):
        if type(n) is not ast.Call:
            continue
        qn = _dotted(n.func, aliases) or (f"{module}.{n.func.id}" if type(n.func) is ast.Name else None)
        if qn is None or qn in SEED_CALLS or "." not in qn or qn.split(".", 1)[0] in _FOREIGN:
            continue
        budget[0] -= 1
        found = local_function(ctx, qn) if budget[0] > 0 else None
        if found is not None and found[0] is not fn:
            got |= _deep_seeds(ctx, found[0], found[1], qn.rsplit(".", 1)[0], depth - 1)
            if got:
                break
    return frozenset(got)


def local_callees(ctx) -> list[tuple[ast.Call, ast.AST, dict, str]]:
    """``(call, function, its module's aliases, qualified name)`` for each call this
    script runs (:func:`runs`) into a function of a local module it imports (``from data
    import make_loader`` -> ``data.py`` beside it): one level into local modules, so a
    loader or shuffle built there counts for the script. Cached; empty for a test module
    and for calls into installed or standard-library packages."""
    cached = ctx.__dict__.get("_flow_local_callees")
    if cached is not None:
        return cached
    out = []
    if ctx.tree is not None and not is_test_file(ctx):
        for qn, calls in ctx.calls.items():
            root = qn.split(".", 1)[0]
            if "." not in qn or root in _FOREIGN or root in sys.stdlib_module_names:
                continue
            ran = [c for c in calls if runs(ctx, c)]
            found = local_function(ctx, qn) if ran else None
            if found is not None:
                out.extend((c, found[0], found[1], qn) for c in ran)
    ctx.__dict__["_flow_local_callees"] = out
    return out


_FRAMEWORK_IMPORT = re.compile(r"^\s*(?:import|from)\s+(?:torch|tensorflow|keras|jax|flax)\b", re.M)


def local_training(ctx, methods) -> tuple[list[ast.Call], str | None]:
    """``([call], "Name of module.py")``: the first call this script runs (:func:`runs`)
    into a class or function of a local module (beside the script or up to three folders
    above it: an installed-in-place package) whose body calls a training method
    (``methods``: ``loss.backward()``, ``model.fit``) and whose module seeds nothing,
    read textually; ``([], None)`` otherwise. A training loop kept in a library class
    (``TrainLoop(...).run_loop()``) makes its script a training script."""
    if ctx.tree is None or is_test_file(ctx):
        return [], None
    for qn, calls in sorted(ctx.calls.items()):
        root = qn.split(".", 1)[0]
        if "." not in qn or root in _FOREIGN or root in sys.stdlib_module_names:
            continue
        path = _module_file(Path(ctx.path).resolve().parent, qn.rsplit(".", 1)[0])
        if path is None or not _may_train(path, tuple(methods)):
            continue  # read, not parsed: most local modules do not train
        ran = [c for c in calls if runs(ctx, c)]
        found = local_function(ctx, qn, classes=True) if ran else None
        if found is None:
            continue
        node, aliases, path = found
        text = _text(path)  # the defining module, also behind a re-export
        if _SEED_TEXT.search(text) or not _FRAMEWORK_IMPORT.search(text):
            continue
        if type(node) is ast.ClassDef and _seeding_trainer(ctx, node, aliases, qn.rsplit(".", 1)[0], path):
            continue
        if any(type(c) is ast.Call and type(c.func) is ast.Attribute and c.func.attr in methods for c in walk(node)):
            return ran[:1], f"{node.name} of {path.name}"
    return [], None


def local_model_training(ctx, methods) -> tuple[list[ast.Call], str | None]:
    """``([call], "name of module.py")``: the first ``model.fit(...)`` (``methods``) this
    script runs on a name it assigned from a call into a local module that imports a
    framework and seeds nothing (``model = compiled_tcn(...)`` from the repository's own
    ``tcn`` package), when the script imports no framework itself; ``([], None)``
    otherwise. The model's weights are drawn in that module, from the unseeded framework."""
    if ctx.tree is None or is_test_file(ctx):
        return [], None
    built: dict[str, str] = {}
    for n in statements(ctx):
        if type(n) is ast.Assign and type(n.value) is ast.Call and len(n.targets) == 1:
            qn = ctx.qualname(n.value.func)
            if type(n.targets[0]) is ast.Name and qn and "." in qn and qn.split(".", 1)[0] not in _FOREIGN:
                built[n.targets[0].id] = qn
    for m in methods:
        for c in ctx.methods.get(m, ()):
            recv = c.func.value if type(c.func) is ast.Attribute else None
            qn = built.get(recv.id) if type(recv) is ast.Name else None
            found = local_function(ctx, qn, classes=True) if qn and runs(ctx, c) else None
            if found is None:
                continue
            text = _text(found[2])
            if _FRAMEWORK_IMPORT.search(text) and not _SEED_TEXT.search(text):
                return [c], f"{found[0].name} of {found[2].name}"
    return [], None


def local_session_subclasses(ctx) -> list[ast.ClassDef]:
    """This file's top-level classes whose base class is defined in a local module that
    opens a TF1 session (``tf.Session(``, ``MonitoredTrainingSession(``): the
    repository's own trainer runs the graph the subclass builds (MixMatch's
    ``FSBaseline(ClassifyFullySupervised)`` builds ``minimize``; ``libml`` runs it)."""
    if ctx.tree is None:
        return []
    return [s for s in ctx.tree.body if type(s) is ast.ClassDef and _session_base(ctx, s.bases, ctx.qualname, 3)]


def _session_base(ctx, bases, name_of, depth: int) -> bool:
    """Whether one of ``bases``, or of their own bases (``depth`` levels), is a local
    class whose module opens a TF1 session; not when a module on the way seeds (a
    trainer that calls ``tf.set_random_seed`` itself)."""
    for b in bases:
        qn = name_of(b)
        found = local_function(ctx, qn, classes=True) if qn else None
        if found is None:
            continue
        text = _text(found[2])
        if _SEED_TEXT.search(text):
            return False
        if "Session(" in text:
            return True
        if depth > 1 and _session_base(ctx, found[0].bases, _namer(found[1], qn.rsplit(".", 1)[0]), depth - 1):
            return True
    return False


def _relative_class(path: Path, name: str):
    """``(ClassDef, aliases, path)`` of class ``name`` that module ``path`` imports with a
    relative import (``from ...trainer.base_trainer import _BaseTrainer``), else None."""
    tree = _parse(path)
    for s in tree.body if tree is not None else ():
        if type(s) is not ast.ImportFrom or not s.level or not any((a.asname or a.name) == name for a in s.names):
            continue
        alias = next(a for a in s.names if (a.asname or a.name) == name)
        base = path.parent
        for _ in range(s.level - 1):
            base = base.parent
        target = base.joinpath(*s.module.split(".")) if s.module else base
        for file in (target.with_suffix(".py"), target / "__init__.py"):
            found = _parse(file) if file.is_file() else None
            cls = (
                next((c for c in found.body if type(c) is ast.ClassDef and c.name == alias.name), None)
                if found
                else None
            )
            if cls is not None:
                return cls, _aliases(file), file
    return None


def _transformers_trainer_base(ctx, cls: ast.ClassDef, aliases: dict, module: str, path: Path, depth: int) -> bool:
    """Whether a base of ``cls`` (defined in ``path``), or of the local classes among its
    bases (``depth`` levels), is a ``transformers`` trainer (``Trainer``,
    ``Seq2SeqTrainer``)."""
    name_of = _namer(aliases, module)
    for b in cls.bases:
        qn = name_of(b)
        if qn and qn.split(".", 1)[0] == "transformers" and qn.endswith("Trainer"):
            return True
        if depth <= 1:
            continue
        found = _relative_class(path, b.id) if type(b) is ast.Name else None
        if found is None and qn:
            found = local_function(ctx, qn, classes=True)
        if found is not None and type(found[0]) is ast.ClassDef:
            sub = qn.rsplit(".", 1)[0] if qn and "." in qn else module
            if _transformers_trainer_base(ctx, found[0], found[1], sub, found[2], depth - 1):
                return True
    return False


def _seeding_trainer(ctx, cls: ast.ClassDef, aliases: dict, module: str, path: Path) -> bool:
    """A local trainer class derived (up to three levels) from ``transformers.Trainer``,
    whose ``__init__`` calls ``set_seed(args.seed)`` (42 by default) before training
    (issue 29, seventh held-out round: trl's ``OnlineDPOTrainer``), in a script that
    builds no model from scratch before it (``from_config``, ``torch.nn`` layers: their
    weights would be drawn before that seed)."""
    if any(q.endswith(".from_config") or q.startswith("torch.nn.") for q in ctx.calls):
        return False
    return _transformers_trainer_base(ctx, cls, aliases, module, path, 3)


def _namer(aliases: dict, module: str):
    """Qualified names of base classes written in ``module``: imported ones through its
    aliases, classes of the module itself as ``module.Name``."""

    def name_of(node) -> str | None:
        return dotted(node, aliases) or (f"{module}.{node.id}" if type(node) is ast.Name else None)

    return name_of


def _may_train(path: Path, methods: tuple[str, ...]) -> bool:
    """A local module that imports a framework, calls one of ``methods`` and seeds
    nothing, read textually (a re-export is let through: :func:`local_function` follows
    it)."""
    try:
        st = path.stat()
    except OSError:
        return False
    return _may_train_cached(path, st.st_mtime_ns, methods)


@functools.lru_cache(maxsize=256)
def _may_train_cached(path: Path, mtime_ns: int, methods: tuple[str, ...]) -> bool:
    text = _text(path)
    calls_one = re.search(rf"\.(?:{'|'.join(methods)})\(", text) is not None
    reexports = re.search(r"^\s*from\s+\.", text, re.M) is not None
    return (calls_one and _FRAMEWORK_IMPORT.search(text) is not None or reexports) and not _SEED_TEXT.search(text)


#: top-level packages never searched for as local modules
_FOREIGN = frozenset(
    {
        "torch",
        "tensorflow",
        "jax",
        "keras",
        "numpy",
        "os",
        "sys",
        "random",
        "flax",
        "optax",
        "absl",
        "tf_keras",
        "lightning",
        "pytorch_lightning",
        "transformers",
        "accelerate",
        "fwd9m",
    }
)


_IMPORTERS_MAX_FILES = 300  #: a larger tree is not searched for importers (speed)
#: a script's seed call, read textually; also a project's own seeding helper called with
#: an argument (``fix_random_seeds(args.seed)``, ``init_seeds(0)``, ``seed_all(seed)``)
_SEED_TEXT = re.compile(
    r"\b(?:set_seed|set_random_seed|manual_seed|seed_everything|enable_determinism|"
    r"enable_op_determinism|use_deterministic_algorithms|PRNGKey|random\.key)\s*\(|\btf_random_seed\s*=\s*(?!None\b)\w"
    r"|(?<!\w)(?:\w+_seeds?|seed_\w+)\(\s*[\w.\[\]'\"]+\s*\)"
)
#: ... and an Estimator's ``RunConfig(tf_random_seed=230)``, which sets the graph seed
_TF_SEED_TEXT = re.compile(
    r"\b(?:set_seed|set_random_seed|seed_everything|enable_determinism)\s*\(|\btf_random_seed\s*=\s*(?!None\b)\w"
)


_IMPORT_LINE = re.compile(r"^\s*(?:from\s+([\w.]*)\s+import\s+([\w, ()]+)|import\s+([\w., ]+))", re.M)


def _import_index(root: Path) -> dict[str, tuple[Path, ...]]:
    """Module name (each dotted part) -> the ``.py`` files under ``root`` importing it,
    read once per folder (again when a file is added or removed there); {} when the
    folder holds too many files."""
    try:
        mtime = root.stat().st_mtime_ns
    except OSError:
        return {}
    return _import_index_cached(root, mtime)


@functools.lru_cache(maxsize=32)
def _import_index_cached(root: Path, mtime_ns: int) -> dict[str, tuple[Path, ...]]:
    files = []
    for path in root.rglob("*.py"):
        files.append(path)
        if len(files) > _IMPORTERS_MAX_FILES:
            return {}
    index: dict[str, set[Path]] = collections.defaultdict(set)
    for path in files:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for m in _IMPORT_LINE.finditer(text):
            names = " ".join(g for g in m.groups() if g).replace(",", " ").replace(".", " ")
            for name in names.replace("(", " ").replace(")", " ").split():
                index[name].add(path)
    return {k: tuple(sorted(v)) for k, v in index.items()}


def importers(ctx, depth: int = 3) -> list[Path]:
    """The files of the project (the linted file's folder, or the folder above its top
    package) that import this module, directly or through up to ``depth`` local modules, read
    textually (``import data``, ``from .data import f``, ``from pkg.data import f``). The
    whole-program view of a library module: its callers. Cached per file."""
    cached = ctx.__dict__.get("_flow_importers")
    if cached is not None:
        return cached
    out: list[Path] = []
    if ctx.path not in ("-", "<stdin>"):
        me = Path(ctx.path).resolve()
        root = me.parent
        while (root / "__init__.py").is_file() and root.parent != root:
            root = root.parent  # the folder that holds the top package: where scripts live
        index = _import_index(root)
        if root == me.parent and root.name.isidentifier():
            index = _with_namespace_importers(index, root)
        ctx.__dict__["_flow_import_index"] = index
        todo, seen = [me], {me}
        for _ in range(depth):
            nxt = []
            for mod in todo:
                stem = mod.parent.name if mod.name == "__init__.py" else mod.stem
                for p in index.get(stem, ()):
                    if p not in seen:
                        seen.add(p)
                        nxt.append(p)
            out += nxt
            todo = nxt
    ctx.__dict__["_flow_importers"] = out
    return out


def _with_namespace_importers(index: dict, root: Path) -> dict:
    """``index`` plus the scripts right beside ``root`` (a folder without
    ``__init__.py``) that import it as a namespace package: ``import src.resnet50`` or
    ``from src import resnet50`` in ``main.py`` next to ``src/``."""
    mention = re.compile(rf"^\s*(?:import\s+{root.name}\.|from\s+{root.name}(?:\.|\s+import))", re.M)
    beside = [p for p in sorted(root.parent.glob("*.py"))[:_IMPORTERS_MAX_FILES] if mention.search(_text(p))]
    if not beside:
        return index
    out = {k: list(v) for k, v in index.items()}
    for path in beside:
        for m in _IMPORT_LINE.finditer(_text(path)):
            names = " ".join(g for g in m.groups() if g).replace(",", " ").replace(".", " ")
            for name in names.replace("(", " ").replace(")", " ").split():
                if path not in out.setdefault(name, []):
                    out[name].append(path)
    return {k: tuple(v) for k, v in out.items()}


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def importer_scripts(ctx, near: bool = False) -> list[str]:
    """The texts of the scripts among :func:`importers`: files with a ``__main__`` block
    or ``app.run``, or that no other file imports (test modules left out); ``near``: only those in the module's
    folder or the one above it (``train.py`` beside ``model.py`` or its package), so a
    library's own source is not judged by its examples."""
    if near:
        here = Path(ctx.path).resolve().parent
        return [t for p, t in _importer_script_paths(ctx) if p.parent in (here, here.parent)]
    return [t for _, t in _importer_script_paths(ctx)]


def _importer_script_paths(ctx) -> list[tuple[Path, str]]:
    cached = ctx.__dict__.get("_flow_importer_scripts")
    if cached is not None:
        return cached
    found = importers(ctx)
    index = ctx.__dict__.get("_flow_import_index", {})

    def imported(p: Path) -> bool:
        return any(q != p for q in index.get(p.stem, ()))

    texts = {p: _text(p) for p in found}
    out = [
        (p, t)
        for p, t in texts.items()
        if not _test_name(str(p)) and ("__main__" in t or "app.run(" in t or not imported(p))
    ]
    ctx.__dict__["_flow_importer_scripts"] = out
    return out


def importer_seeds(ctx, tf_only: bool = False, near: bool = False, name: str = "") -> tuple[bool, bool]:
    """``(any, all)``: whether any / every script among :func:`importers` (a file with a
    ``__main__`` block or ``app.run``, or one no other file imports) seeds, read
    textually; ``tf_only``: a seed call that sets TensorFlow's global seed; ``name``: only
    the scripts that name this function of the module, when any does (``train.py`` calls
    ``train_input_fn``, ``evaluate.py`` only ``test_input_fn``). (False, False) when no
    script imports the module."""
    pattern = _TF_SEED_TEXT if tf_only else _SEED_TEXT
    scripts = importer_scripts(ctx, near)
    if name:
        word = re.compile(rf"\b{re.escape(name)}\b")
        scripts = [t for t in scripts if word.search(t)] or scripts
    if not scripts:
        return False, False
    hits = [pattern.search(t) is not None for t in scripts]
    return any(hits), all(hits)


def main_block(tree):
    """The ``if __name__ == "__main__":`` statement of a module, if any."""
    for stmt in getattr(tree, "body", ()):
        if (
            type(stmt) is ast.If
            and type(stmt.test) is ast.Compare
            and type(stmt.test.left) is ast.Name
            and stmt.test.left.id == "__name__"
        ):
            return stmt
    return None


def _called_names(nodes, ctx) -> set[str]:
    """Names of module functions called (or handed to an entry point) under ``nodes``."""
    out = set()
    for root in nodes:
        for n in walk(root):
            if type(n) is not ast.Call:
                continue
            if type(n.func) is ast.Name:
                out.add(n.func.id)
            qn = ctx.qualname(n.func)
            if qn in ENTRY_POINTS:
                target = n.args[0] if n.args else next((k.value for k in n.keywords if k.arg == "main"), None)
                out.add(target.id if type(target) is ast.Name else "main")
            for a in n.args:  # fabric.launch(main, ...), spawn(main_worker, ...)
                if type(a) is ast.Name:
                    out.add(a.id)
    return out


def script_roots(ctx) -> list[ast.AST] | None:
    """The statements a script runs (module level, non-test ``__main__`` block), or
    None for a test module (its ``__main__`` block runs a test runner)."""
    tree = ctx.tree
    main = main_block(tree)
    if main is not None and any(
        type(c) is ast.Call
        and type(c.func) is ast.Attribute
        and c.func.attr in _TEST_MAINS
        and ctx.qualname(c.func) not in ENTRY_POINTS
        for c in walk(main)
    ):
        return None
    return [
        s for s in getattr(tree, "body", ()) if type(s) not in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    ]


def script_runs(ctx) -> set[int]:
    """``id`` of every module-level function reached when the file is executed as a
    script (see :func:`runs`), cached; empty for a test module."""
    cached = ctx.__dict__.get("_flow_script_defs")
    if cached is not None:
        return cached
    roots = script_roots(ctx)
    reached: set[int] = set()
    if roots is not None:
        defs = _module_defs(ctx)
        todo, seen = list(roots), set()
        while todo:
            node = todo.pop()
            for name in _called_names([node], ctx):
                if name in defs and name not in seen:
                    seen.add(name)
                    reached.add(id(defs[name]))
                    todo.append(defs[name])
    ctx.__dict__["_flow_script_defs"] = reached
    ctx.__dict__["_flow_is_script"] = roots is not None
    return reached


def _defs_under(ctx, stmt) -> list[ast.AST]:
    """The functions and classes anywhere under module-level statement ``stmt``, in
    ``ast.walk`` order; cached per file (:func:`runs` asks for every call)."""
    cache = ctx.__dict__.setdefault("_flow_defs_under", {})
    found = cache.get(id(stmt))
    if found is None:
        kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        found = cache[id(stmt)] = [d for d in walk(stmt) if type(d) in kinds]
    return found


def runs(ctx, node) -> bool:
    """Whether ``node`` runs when the file is executed as a script: at module level (not
    in a function or class body), in a non-test ``__main__`` block, or in a module
    function reached from those by calls (transitively, within the file), including
    ``absl.app.run(main)`` / ``tf.compat.v1.app.run()``."""
    reached = script_runs(ctx)
    if not ctx.__dict__.get("_flow_is_script"):
        return False
    line = node.lineno
    for s in getattr(ctx.tree, "body", ()):
        if s.lineno <= line <= (s.end_lineno or s.lineno):
            if type(s) in (ast.FunctionDef, ast.AsyncFunctionDef):
                return id(s) in reached
            if type(s) is ast.ClassDef:
                return False
            # under a module-level if/try: a def or class there runs only when reached
            inner = [d for d in _defs_under(ctx, s) if d.lineno <= line <= (d.end_lineno or d.lineno)]
            if any(type(d) is ast.ClassDef for d in inner):
                return False
            return not inner or all(id(d) in reached for d in inner)
    return False


def computes_gradients(ctx) -> bool:
    """Whether the file runs a backward pass (``loss.backward()``, ``model.fit``,
    ``tape.gradient``, ``jax.grad``, ...)."""
    return any(ctx.methods.get(m) for m in GRADIENT_METHODS) or any(ctx.calls.get(q) for q in GRADIENT_CALLS)


def assigns(ctx, setting: str) -> bool:
    """Whether the file assigns ``"qualified.name=Value"`` (``torch.backends.cudnn.
    deterministic=True``), however the module was imported: the value itself, or a
    command-line option whose default is that value (``cudnn.deterministic =
    args.torch_deterministic`` with ``torch_deterministic: bool = True``)."""
    name, _, value = setting.partition("=")
    for n in statements(ctx):
        if type(n) is not ast.Assign or not any(ctx.qualname(t) == name.strip() for t in n.targets):
            continue
        v = n.value
        if type(v) is ast.Constant and repr(v.value) == value.strip():
            return True
        option = v.attr if type(v) is ast.Attribute else v.id if type(v) is ast.Name else None
        if option is not None and repr(option_default(ctx, option)) == value.strip():
            return True
    return False


_NO_DEFAULT = object()


def option_default(ctx, name: str):
    """The default of the command-line option ``name`` defined in the file, when it is a
    literal: ``add_argument("--name", default=X)`` (``action="store_true"``: False),
    ``flags.DEFINE_*("name", X, ...)``, or a field ``name: T = X`` of a ``@dataclass``
    (the argument classes of tyro / simple-parsing / HfArgumentParser). Else a sentinel
    that equals nothing."""
    dashed = name.replace("_", "-")
    for c in ctx.methods.get("add_argument", ()):
        opts = [a.value for a in c.args if type(a) is ast.Constant and isinstance(a.value, str)]
        dest = next((k.value for k in c.keywords if k.arg == "dest"), None)
        if not any(o.lstrip("-") in (name, dashed) for o in opts) and not (
            type(dest) is ast.Constant and dest.value == name
        ):
            continue
        kw = {k.arg: k.value for k in c.keywords}
        action = kw.get("action")
        if type(action) is ast.Constant and action.value in ("store_true", "store_false") and "default" not in kw:
            return action.value == "store_false"
        return kw["default"].value if type(kw.get("default")) is ast.Constant else _NO_DEFAULT
    for qn, cs in ctx.calls.items():
        if ".flags.DEFINE_" in f".{qn}" or qn.startswith("flags.DEFINE_"):
            for c in cs:
                if len(c.args) > 1 and type(c.args[0]) is ast.Constant and c.args[0].value == name:
                    return c.args[1].value if type(c.args[1]) is ast.Constant else _NO_DEFAULT
    for cls in (s for s in statements(ctx) if type(s) is ast.ClassDef):
        if not any(ast.unparse(d).split("(")[0].endswith("dataclass") for d in cls.decorator_list):
            continue
        for f in cls.body:
            if type(f) is ast.AnnAssign and type(f.target) is ast.Name and f.target.id == name:
                return f.value.value if type(f.value) is ast.Constant else _NO_DEFAULT
    return _NO_DEFAULT


def is_test_file(ctx) -> bool:
    """A pytest/unittest module by its name (``test_*.py``, ``*_test.py``, ``conftest.py``):
    its random draws and seeds set up one test, not a training run."""
    return _test_name(ctx.path)


@functools.lru_cache(maxsize=256)
def _test_name(path: str) -> bool:
    name = Path(path).name
    return name == "conftest.py" or (name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py")))


def fallback_calls(ctx) -> set[int]:
    """``id`` of calls that only run when the caller gave nothing: ``rng = rng or
    np.random.default_rng()`` and ``if rng is None: rng = random.Random()``."""
    out: set[int] = set()
    for n in walk(ctx.tree) if ctx.tree is not None else ():
        if type(n) is ast.BoolOp and type(n.op) is ast.Or and type(n.values[-1]) is ast.Call:
            out.add(id(n.values[-1]))
        elif (
            type(n) is ast.If
            and type(n.test) is ast.Compare
            and len(n.test.ops) == 1
            and type(n.test.ops[0]) is ast.Is
            and type(n.test.comparators[0]) is ast.Constant
            and n.test.comparators[0].value is None
        ):
            tested = ast.unparse(n.test.left)
            for st in n.body:
                if (
                    type(st) is ast.Assign
                    and type(st.value) is ast.Call
                    and any(ast.unparse(t) == tested for t in st.targets)
                ):
                    out.add(id(st.value))
    return out


def project_mentions(ctx, pattern: str) -> bool:
    """Whether ``pattern`` (a regex) occurs in this file or in any ``.py`` file of its
    project (the folder above its top package, as for :func:`importers`); True when the
    project holds too many files to read. A file not on disk: its own text only."""
    if re.search(pattern, ctx.text):
        return True
    me = Path(ctx.path)
    if ctx.path in ("-", "<stdin>") or not me.is_file():
        return False
    root = me.resolve().parent
    while (root / "__init__.py").is_file() and root.parent != root:
        root = root.parent
    try:
        mtime = root.stat().st_mtime_ns
    except OSError:
        return True
    return _project_mentions_cached(root, mtime, pattern)


@functools.lru_cache(maxsize=64)
def _project_mentions_cached(root: Path, mtime_ns: int, pattern: str) -> bool:
    rx = re.compile(pattern)
    for n, path in enumerate(root.rglob("*.py")):
        if n > _IMPORTERS_MAX_FILES or rx.search(_text(path)):
            return True
    return False
