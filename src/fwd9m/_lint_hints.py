"""Point a runtime finding at the lines that cause it: the findings of fwd9m's own lint
rules (:mod:`fwd9m.lint`) on the script that was run, filtered to the rules that fit
the cause class ``fwd9m debug`` found (or, for ``fwd9m check``, every rule about seeds,
settings, data, ordering, JAX keys and catalog ops).

Only the script given and the local modules it imports by name (``import helpers`` with
``helpers.py`` beside it) are read: a static pass over a few files, no framework import.

A hint must point at code that ran. Each flagged line is placed on its branches
(:func:`branch`): the conditions of the ``if`` statements, conditional expressions,
``and``/``or`` operands, ``while`` loops and ``except`` handlers around it. A condition
on the run's own command line or environment (``"noseed" in sys.argv``,
``os.environ.get("SEED")``, ``__name__ == "__main__"``) is evaluated with the values the
checked runs had: a line on the branch not taken is not a hint. A condition fwd9m cannot
evaluate (``args.noseed`` from argparse, a value computed at run time) leaves the hint
marked "(on a branch that may not have run)". This is static, so it costs the runs
nothing and changes nothing in them; a function that is never called is not detected.
(Why not trace the runs: on Python 3.11 a ``sys.settrace`` hook puts every frame of the
program on the interpreter's slow tracing path, and would displace a debugger or
coverage tool the user runs; PEP 669's ``sys.monitoring``, Python 3.12+, could record
the flagged lines alone at no cost and is the way to make this exact.)
"""

from __future__ import annotations

import ast
import dataclasses
import os
import re
from pathlib import Path
from typing import Any

from ._log import logger

__all__ = [
    "CAUSE_CODES",
    "HASH_CODES",
    "relevant",
    "findings",
    "script_frameworks",
    "check_hints",
    "uses_loader_workers",
    "branch",
    "MAY_NOT_RUN",
    "NOT_TAKEN",
]

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


#: :func:`branch` verdicts (None: the line runs whenever the code around it runs)
MAY_NOT_RUN, NOT_TAKEN = "may-not-run", "not-taken"
#: appended to a hint on a branch whose condition fwd9m could not evaluate
MAY_NOT_RUN_NOTE = "(on a branch that may not have run)"


class _Unknown(Exception):
    """A condition fwd9m cannot evaluate before the run."""


_COMPARE = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
    ast.Is: lambda a, b: a is b,
    ast.IsNot: lambda a, b: a is not b,
}


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


class _Condition:
    """Evaluates the few expressions whose value is known before a run: literals,
    ``__name__``, ``sys.argv`` (indexing, slicing, ``len``, ``in``), ``os.environ``
    (``get``, ``[]``, ``in``) and ``os.getenv``, combined with ``not``, ``and``/``or``
    and comparisons. Anything else raises :class:`_Unknown`."""

    def __init__(self, name: str, argv: list[str] | None, env):
        self.name, self.argv, self.env = name, argv, env

    def value(self, node: ast.AST):
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.Tuple, ast.List)):
            return [self.value(e) for e in node.elts]
        dotted = _dotted(node)
        if dotted == "__name__":
            return self.name
        if dotted == "sys.argv":
            return self._known(self.argv)
        if dotted == "os.environ":
            return self._known(self.env)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return not self.value(node.operand)
        if isinstance(node, ast.BoolOp):
            v = None
            for operand in node.values:
                v = self.value(operand)
                if bool(v) == isinstance(node.op, ast.Or):  # short-circuit
                    return v
            return v
        if isinstance(node, ast.Compare):
            left = self.value(node.left)
            for op, right in zip(node.ops, node.comparators):
                r = self.value(right)
                try:
                    if not _COMPARE[type(op)](left, r):
                        return False
                except (TypeError, KeyError):
                    raise _Unknown from None
                left = r
            return True
        if isinstance(node, ast.Subscript):
            seq, key = self.value(node.value), node.slice
            try:
                if isinstance(key, ast.Slice):
                    return seq[slice(*(None if k is None else self.value(k) for k in (key.lower, key.upper, key.step)))]
                return seq[self.value(key)]
            except (IndexError, KeyError, TypeError):
                raise _Unknown from None  # the run raised there, or fwd9m cannot say
        if isinstance(node, ast.Call) and not node.keywords:
            f = _dotted(node.func)
            args = [self.value(a) for a in node.args]
            if f == "len" and len(args) == 1:
                return len(args[0])
            if f in ("os.environ.get", "os.getenv") and 1 <= len(args) <= 2:
                return self._known(self.env).get(*args)
        raise _Unknown

    @staticmethod
    def _known(value):
        if value is None:
            raise _Unknown
        return value

    def holds(self, node: ast.AST) -> bool | None:
        try:
            return bool(self.value(node))
        except (_Unknown, RecursionError):
            return None
        except Exception:  # noqa: BLE001 - e.g. a comparison a user type would make: unknown
            return None


def _contains(node: ast.AST, pos: tuple[int, int]) -> bool:
    end = (getattr(node, "end_lineno", None) or node.lineno, getattr(node, "end_col_offset", None) or 0)
    return (node.lineno, node.col_offset) <= pos < end


def _within(nodes: list[ast.AST], pos: tuple[int, int]) -> bool:
    return any(_contains(n, pos) for n in nodes)


def _child_at(node: ast.AST, pos: tuple[int, int]) -> ast.AST | None:
    """The child of ``node`` that holds ``pos``; nodes without a position of their own
    (a ``match`` case, a comprehension) are looked through."""
    for child in ast.iter_child_nodes(node):
        if hasattr(child, "lineno"):
            if _contains(child, pos):
                return child
        else:
            found = _child_at(child, pos)
            if found is not None:
                return found
    return None


def branch(
    tree: ast.AST, line: int, col: int, *, name: str = "__main__", argv: list[str] | None = None, env=None
) -> str | None:
    """Whether the code at ``line``, ``col`` (1-based, as lint findings give them) of the
    module ``tree`` runs: None when every condition on the way there holds for the run's
    ``argv`` (``sys.argv``: the script first) and ``env`` (its environment), or there is
    none; :data:`NOT_TAKEN` when one of them is false; :data:`MAY_NOT_RUN` when one
    cannot be evaluated (``argv``/``env`` None: unknown). ``name``: the module's
    ``__name__`` (``"__main__"`` for the script run)."""
    pos = (line, max(0, col - 1))
    cond = _Condition(name, argv, env)
    verdict = None
    node: ast.AST | None = tree
    while node is not None:
        here = _taken(node, pos, cond)
        if here == NOT_TAKEN:
            return NOT_TAKEN
        verdict = verdict or here
        node = _child_at(node, pos)
    return verdict


def _taken(node: ast.AST, pos: tuple[int, int], cond: _Condition) -> str | None:
    """The verdict of ``node``'s own condition for the part of it holding ``pos``."""
    if isinstance(node, (ast.If, ast.IfExp, ast.While)):
        body = node.body if isinstance(node.body, list) else [node.body]
        orelse = node.orelse if isinstance(node.orelse, list) else [node.orelse]
        held = cond.holds(node.test)
        if _within(body, pos):
            return NOT_TAKEN if held is False else None if held else MAY_NOT_RUN
        if _within(orelse, pos) and not isinstance(node, ast.While):
            return NOT_TAKEN if held is True else None if held is False else MAY_NOT_RUN
    elif isinstance(node, ast.BoolOp):
        for i, operand in enumerate(node.values[1:], 1):
            if _contains(operand, pos):
                before = ast.BoolOp(op=node.op, values=node.values[:i])
                held = cond.holds(before)
                reached = held is (isinstance(node.op, ast.And))  # and: reached if true so far
                return MAY_NOT_RUN if held is None else None if reached else NOT_TAKEN
    elif isinstance(node, ast.ExceptHandler):
        return MAY_NOT_RUN  # runs only when that exception is raised
    elif isinstance(node, ast.Match):
        return MAY_NOT_RUN if any(_within(c.body, pos) for c in node.cases) else None
    return None


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
    return out[: MAX_FILES - 1]


def _shown(path: str) -> str:
    """A path relative to the working directory when it is below it."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive
        return path
    return path if rel.startswith("..") else rel


def findings(
    script: str | os.PathLike | None,
    cause: str | None = None,
    *,
    exclude: tuple[str, ...] = (),
    argv: list[str] | None = None,
    env=None,
) -> list[dict[str, Any]]:
    """Lint findings in ``script`` (and its local modules) that fit ``cause``, in file and
    line order: dicts with ``path``, ``line``, ``code``, ``message`` and ``fix`` (code to
    paste, "" when the message says it). The project's lint configuration
    (``[tool.fwd9m.lint]`` in the nearest pyproject.toml, ``# noqa``) applies. Codes
    starting with an entry of ``exclude`` are left out. Never raises: [] when the script
    is missing (a trace from another machine) or unreadable; a bad configuration is logged
    as a warning and the default rules are used.

    ``argv`` (the runs' ``sys.argv``, script first) and ``env`` (their environment), when
    known, decide the conditions around each line (:func:`branch`): a line on a branch
    the runs did not take is left out, and one whose condition cannot be decided gets
    ``"branch": "may-not-run"`` (None otherwise); ``col`` is the finding's column."""
    if not script or not Path(script).is_file():
        return []
    try:
        from .errors import ConfigurationError, FileFormatError
        from .lint import find_pyproject, lint_paths, load_config

        files = [Path(script), *local_modules(script)]
        pyproject = find_pyproject(Path(script))
        try:
            config = load_config(pyproject)
        except (ConfigurationError, FileFormatError) as exc:  # say so, and still point at the lines
            logger.warning(
                "fwd9m lint configuration in %s is invalid (%s); the 'in your code' hints use the default rules",
                pyproject,
                str(exc).splitlines()[0],
            )
            config = load_config(None)
        # the runs already differ: rules kept opt-in for CI precision still point at causes
        from .lint._measured import OPT_IN

        config = dataclasses.replace(config, extend_select=[*config.extend_select, *OPT_IN])
        report = lint_paths([str(f) for f in files], config)
    except Exception as exc:  # noqa: BLE001 - a lint problem must not hide the runtime finding
        logger.debug("lint of %s for hints failed: %s", script, exc)
        return []
    trees: dict[str, ast.AST | None] = {}
    out = []
    for f in sorted(report.findings, key=lambda f: f.sort_key()):
        if not relevant(f.code, cause) or any(f.code.startswith(x) for x in exclude):
            continue
        where = _branch_of(f, Path(script), trees, argv, env)
        if where != NOT_TAKEN:
            out.append(
                {
                    "path": _shown(f.path),
                    "line": f.line,
                    "col": f.col,
                    "code": f.code,
                    "message": f.message,
                    "fix": f.fix,
                    "branch": where,
                }
            )
    return out


def _branch_of(f, script: Path, trees: dict, argv, env) -> str | None:
    """:func:`branch` for lint finding ``f`` (in ``script`` or a local module of it);
    None when its file cannot be parsed (the hint is kept as it is)."""
    if f.path not in trees:
        trees[f.path] = _tree(Path(f.path))
    tree = trees[f.path]
    if tree is None or not f.line:
        return None
    try:
        main = Path(f.path).resolve() == script.resolve()
    except OSError:
        main = False
    name = "__main__" if main else Path(f.path).stem
    try:
        here = branch(tree, f.line, f.col or 1, name=name, argv=argv, env=env)
        if here == NOT_TAKEN:
            return here
        origin = _origin(tree, f.message, name, argv, env)
        return origin if origin == NOT_TAKEN else here or origin
    except RecursionError:  # a pathologically nested file: say it may not have run
        return MAY_NOT_RUN


#: FWD104 names the line where the variable it follows was set from entropy:
#: ``seed (set from entropy on line 6)``
_ORIGIN = re.compile(r"\(set from entropy on line (\d+)\)")


def _origin(tree: ast.AST, message: str, name: str, argv, env) -> str | None:
    """The branch verdict of the entropy a finding blames on another line (FWD104:
    ``seed = int(time.time()) if "noseed" in sys.argv else 7``, then
    ``torch.manual_seed(seed)``): NOT_TAKEN when every entropy call on that line is on a
    branch not taken (the seed was 7), MAY_NOT_RUN when one may not have run, else None."""
    m = _ORIGIN.search(message)
    if not m:
        return None
    from .lint.rules.seeding import _ENTROPY

    line, last = int(m.group(1)), {e.rsplit(".", 1)[-1] for e in _ENTROPY}
    calls = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and n.lineno == line and (_dotted(n.func).rsplit(".", 1)[-1] in last)
    ]
    verdicts = [branch(tree, c.lineno, c.col_offset + 1, name=name, argv=argv, env=env) for c in calls]
    if verdicts and all(v == NOT_TAKEN for v in verdicts):
        return NOT_TAKEN
    return MAY_NOT_RUN if MAY_NOT_RUN in verdicts else None


def check_hints(
    script: str | os.PathLike | None, hash_seed: bool = True, argv: list[str] | None = None, env=None
) -> list[dict[str, Any]]:
    """For ``fwd9m check`` when runs differ: the script's relevant lint findings shaped
    like its catalog hints (``id`` = the rule code, ``kind`` = ``"lint"``, ``title`` =
    ``"in your code: FILE:LINE message"``, plus :data:`MAY_NOT_RUN_NOTE` on a branch
    that may not have run). ``hash_seed`` False (the string-hash seed did not differ, or
    was ruled out) leaves out the hash-order rules. ``argv``, ``env``: as :func:`findings`."""
    return [
        {
            "id": f["code"],
            "title": f"in your code: {f['path']}:{f['line']} {f['message']}"
            + (f" {MAY_NOT_RUN_NOTE}" if f["branch"] else ""),
            "kind": "lint",
            "fix": f["fix"],
            "references": [],
            "branch": f["branch"],
        }
        for f in findings(script, None, exclude=() if hash_seed else HASH_CODES, argv=argv, env=env)
    ]


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


def _many_workers(call: ast.Call) -> bool:
    """Whether ``call`` passes ``workers`` other than the literal 0 or 1, or
    ``use_multiprocessing=True``."""
    for k in call.keywords:
        v = k.value
        if k.arg == "workers" and not (isinstance(v, ast.Constant) and v.value in (0, 1)):
            return True
        if k.arg == "use_multiprocessing" and isinstance(v, ast.Constant) and v.value is True:
            return True
    return False


def pydataset_workers(script: str | os.PathLike | None) -> tuple[int, str] | None:
    """(line, class name) of the first ``keras.utils.PyDataset`` (or ``Sequence``) of
    ``script`` made with several workers: a subclass instantiated with ``workers=N``
    (N not 0 or 1) or ``use_multiprocessing=True``, or whose ``__init__`` passes them to
    ``super().__init__``; None when there is none or the script is unreadable. Its
    ``__getitem__`` then runs on that many threads or processes."""
    tree = _tree(Path(script)) if script and Path(script).is_file() else None
    classes: dict[str, int] = {}
    for cls in ast.walk(tree) if tree is not None else ():
        if isinstance(cls, ast.ClassDef) and any(_dotted(b).endswith(("PyDataset", "Sequence")) for b in cls.bases):
            inner = [n for n in ast.walk(cls) if isinstance(n, ast.Call) and _dotted(n.func).endswith("__init__")]
            classes[cls.name] = next((n.lineno for n in inner if _many_workers(n)), 0)
    calls = sorted(
        (n.lineno, _dotted(n.func).rsplit(".", 1)[-1], _many_workers(n))
        for n in (ast.walk(tree) if classes else ())
        if isinstance(n, ast.Call) and _dotted(n.func).rsplit(".", 1)[-1] in classes
    )
    return next(((line, name) for line, name, many in calls if many or classes[name]), None)


#: methods a DataLoader calls in its worker processes (a map-style or iterable dataset's)
_WORKER_METHODS = ("__getitem__", "__getitems__", "__iter__", "__next__")
#: call names that draw random numbers: module functions, and a generator's methods
_DRAWS = ("np.random.", "numpy.random.", "random.", "torch.rand", "torch.normal", "torch.bernoulli")
_GENERATOR_METHODS = frozenset(
    {"normal", "uniform", "random", "integers", "choice", "shuffle", "permutation", "standard_normal", "randint"}
)


def worker_draws(script: str | os.PathLike | None) -> list[tuple[int, str, str]]:
    """Random draws in the methods a DataLoader's workers run (``Dataset.__getitem__``
    and the like) of ``script``: (line, ``Class.method``, call), in line order; [] when the
    script is not readable or has none. Values they draw are made in the worker
    processes, outside every recorded op."""
    tree = _tree(Path(script)) if script and Path(script).is_file() else None
    found: list[tuple[int, str, str]] = []
    for cls in ast.walk(tree) if tree is not None else ():
        if not isinstance(cls, ast.ClassDef):
            continue
        for fn in cls.body:
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name in _WORKER_METHODS:
                found += [(n.lineno, f"{cls.name}.{fn.name}", _dotted(n.func)) for n in ast.walk(fn) if _draws(n)]
    return sorted(set(found))


def _draws(node: ast.AST) -> bool:
    """Whether ``node`` is a call that draws random numbers (:data:`_DRAWS`, or a
    generator method such as ``self.rng.normal``)."""
    if not isinstance(node, ast.Call):
        return False
    name = _dotted(node.func)
    if name.startswith(_DRAWS):
        return True
    return isinstance(node.func, ast.Attribute) and node.func.attr in _GENERATOR_METHODS and "rng" in name.lower()


#: arguments that seed a library call's randomness (scikit-learn's ``random_state``,
#: NumPy's ``default_rng(seed)``)
_SEED_PARAMS = ("random_state", "seed")
#: libraries whose random ops are recorded op by op (never the origin of a value made outside them)
_RECORDED = ("torch", "tensorflow", "jax", "keras", "flax", "tf_keras")


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> dotted module path, from the script's imports."""
    out: dict[str, str] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            for a in n.names:
                out[a.asname or a.name.split(".", 1)[0]] = a.name if a.asname else a.name.split(".", 1)[0]
        elif isinstance(n, ast.ImportFrom) and n.module and not n.level:
            for a in n.names:
                out[a.asname or a.name] = f"{n.module}.{a.name}"
    return out


def _seed_param(path: str) -> str | None:
    """The seeding parameter (:data:`_SEED_PARAMS`) of the callable at dotted ``path``
    (imported to read its signature), or None when it has none or cannot be read."""
    import importlib
    import importlib.util
    import inspect

    parts = path.split(".")
    if parts[0] in _RECORDED:
        return None
    try:  # an installed library only: the script's own modules are never imported here
        origin = str(getattr(importlib.util.find_spec(parts[0]), "origin", "") or "")
    except (ImportError, ValueError):
        return None
    if "site-packages" not in origin and "dist-packages" not in origin:
        return None
    for k in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except Exception:  # noqa: BLE001 - not a module: a shorter prefix is
            continue
        try:
            for attr in parts[k:]:
                obj = getattr(obj, attr)
            params = inspect.signature(obj).parameters
        except Exception:  # noqa: BLE001 - not a callable whose signature can be read
            return None
        return next((p for p in _SEED_PARAMS if p in params), None)
    return None


def unseeded_origin(script: str | os.PathLike | None, line: int) -> tuple[int, str, str, str] | None:
    """Where a value read at ``line`` of ``script`` was made by a library call that
    takes a seed and was not given one (scikit-learn's ``KMeans(...)`` without
    ``random_state``, ``np.random.default_rng()``): the names read at that line are
    followed back to their assignments (a few hops). (line, call as written, the seeding
    parameter, the call rewritten with ``param=0``); None when none is found."""
    tree = _tree(Path(script)) if script and Path(script).is_file() else None
    if tree is None:
        return None
    aliases = _aliases(tree)
    assigned: dict[str, list[ast.stmt]] = {}
    for n in ast.walk(tree):
        if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None:
            for t in n.targets if isinstance(n, ast.Assign) else [n.target]:
                for name in (x.id for x in ast.walk(t) if isinstance(x, ast.Name)):
                    assigned.setdefault(name, []).append(n)
    todo = [(line, s) for s in ast.walk(tree) if isinstance(s, ast.stmt) and getattr(s, "lineno", 0) == line]
    seen: set[int] = set()
    for _ in range(4):  # hops back through assignments
        nxt = []
        for at, stmt in todo:
            if id(stmt) in seen:
                continue
            seen.add(id(stmt))
            got = _unseeded_call(stmt, aliases)
            if got is not None:
                return got
            names = {x.id for x in ast.walk(getattr(stmt, "value", stmt)) if isinstance(x, ast.Name)}
            for name in names:
                before = [a for a in assigned.get(name, []) if a.lineno < at]
                if before:
                    nxt.append((before[-1].lineno, before[-1]))
        todo = nxt
    return None


def _unseeded_call(stmt: ast.AST, aliases: dict[str, str]) -> tuple[int, str, str, str] | None:
    for call in (n for n in ast.walk(stmt) if isinstance(n, ast.Call)):
        name = _dotted(call.func)
        root, _, rest = name.partition(".")
        if not name or root not in aliases:
            continue
        param = _seed_param(f"{aliases[root]}.{rest}" if rest else aliases[root])
        if param is None or any(k.arg == param for k in call.keywords):
            continue
        if param == "seed" and call.args:  # default_rng(42): seeded by position
            continue
        fixed = ast.Call(call.func, call.args, [*call.keywords, ast.keyword(param, ast.Constant(0))])
        return call.lineno, ast.unparse(call), param, ast.unparse(fixed)
    return None


def script_frameworks(source: str | None, fp: dict[str, Any] | None) -> set[str] | None:
    """The frameworks the script (and the local modules it imports) trains with: those it
    imports, or imports a library of (``pytorch_lightning`` -> torch, ``flax`` -> jax), plus
    Keras' active backend when it imports Keras. None when that cannot be told (no
    readable source, or no import of a known framework or library): then every framework
    the runs imported counts. Here, not in :mod:`fwd9m.check`, so that ``fwd9m run`` asks
    it without importing the check package (0.08 CPU s)."""
    from . import _frameworks

    if not source or not Path(source).is_file():
        return None
    used: set[str] = set()
    for path in [Path(source), *local_modules(source)]:
        try:
            tree = ast.parse(path.read_bytes())
        except (OSError, SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                roots = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                roots = [node.module.split(".")[0]]
            else:
                continue
            used.update(n for n in map(_frameworks.of_module, roots) if n)
    if not used:
        return None
    if "keras" in used:
        backend = ((fp or {}).get("frameworks") or {}).get("keras", {}).get("backend")
        used.add(backend if backend in _frameworks.FRAMEWORKS else "tensorflow")
    return used
