"""Fixes as edits of a script's text, found from its syntax tree (``ast``): each edit
replaces a span of the source, so the rest of the file (formatting, comments) is left
as it was.

- :func:`enable_after_imports`: ``import fwd9m`` and ``fwd9m.enable_determinism(seed=S)``
  after the script's imports (its frameworks are imported then, and no draw has run);
- :func:`fixed_clock_seeds`: a seed taken from the clock, the process id or the OS's
  entropy (``random.seed(time.time())``, ``jax.random.PRNGKey(int(time.time()))``)
  replaced by the script's own seed;
- :func:`hash_seeds`: a seed made with ``hash(x)`` (salted per process) derived from the
  script's seed and ``x`` instead (``fwd9m.derive_seed``);
- :func:`worker_seeding`: ``worker_init_fn=fwd9m.data.worker_init_fn`` added to each
  ``DataLoader(...)`` with workers and no ``worker_init_fn`` of its own;
- :func:`script_seed`: the seed the script already uses (the first integer literal
  given to a seeding call), so a fix keeps it.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

#: calls that take a seed (their last name)
SEED_CALLS = frozenset(
    {
        "seed",
        "manual_seed",
        "manual_seed_all",
        "set_seed",
        "set_random_seed",
        "seed_everything",
        "enable_determinism",
        "PRNGKey",
        "key",
        "default_rng",
        "RandomState",
        "Random",
        "Generator",
    }
)
#: what a seed must not come from: the clock, the process, the OS's entropy
_VOLATILE = frozenset(
    {"time", "time_ns", "perf_counter", "monotonic", "now", "utcnow", "getpid", "urandom", "token_hex"}
)


@dataclass(frozen=True)
class Edit:
    """Replace ``source[start:end]`` with ``text`` (offsets in characters)."""

    start: int
    end: int
    text: str


def _name(func: ast.expr) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _offsets(source: str) -> list[int]:
    """The offset at which each line (1-based, index 0 unused) starts."""
    # the line endings Python's tokenizer counts (str.splitlines also splits at \f, \x1c...)
    return [0, 0, *(m.end() for m in re.finditer(r"\r\n|\r|\n", source))]


def _span(node: ast.AST, lines: list[int]) -> tuple[int, int]:
    # ast columns count UTF-8 bytes; the scripts fwd9m edits are read as text, so the
    # columns are right for ASCII lines (a non-ASCII line before the column is skipped)
    return lines[node.lineno] + node.col_offset, lines[node.end_lineno] + node.end_col_offset


def script_seed(tree: ast.AST) -> int | None:
    """The first non-negative integer literal passed to a seeding call, or None."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _name(node.func) in SEED_CALLS:
            for arg in [*node.args, *(k.value for k in node.keywords if k.arg in ("seed", None))]:
                if isinstance(arg, ast.Constant) and type(arg.value) is int and 0 <= arg.value < 2**32:
                    return arg.value
    return None


def _volatile(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and _name(n.func) in _VOLATILE for n in ast.walk(node))


def fixed_clock_seeds(source: str, tree: ast.AST, seed: int) -> list[Edit]:
    """Each seeding call's argument that comes from the clock, the pid or the OS's
    entropy, replaced by ``seed``."""
    lines = _offsets(source)
    edits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _name(node.func) in SEED_CALLS:
            for arg in [*node.args, *(k.value for k in node.keywords if k.arg == "seed")]:
                if _volatile(arg) and source[_span(arg, lines)[0] : _span(arg, lines)[1]].isascii():
                    edits.append(Edit(*_span(arg, lines), str(seed)))
    return edits


def _clock_values(node: ast.expr) -> list[ast.expr]:
    """The parts of an assigned value that come from the clock: the value itself, or the
    branch of ``a if c else int(time.time())`` / ``a or int(time.time())`` that does."""
    if isinstance(node, ast.IfExp):
        return _clock_values(node.body) + _clock_values(node.orelse)
    if isinstance(node, ast.BoolOp):
        return [v for value in node.values for v in _clock_values(value)]
    return [node] if _volatile(node) else []


def _seed_args(tree: ast.AST) -> list[ast.expr]:
    """The arguments given to a seeding call as its seed."""
    return [
        arg
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and _name(node.func) in SEED_CALLS
        for arg in [*node.args, *(k.value for k in node.keywords if k.arg == "seed")]
    ]


def _seed_values(tree: ast.AST) -> list[ast.expr]:
    """What a seeding call takes as its seed: its arguments, and the values assigned to
    a variable that one of them is (``seed = ...``, then ``PRNGKey(seed)``)."""
    args = _seed_args(tree)
    names = {arg.id for arg in args if isinstance(arg, ast.Name)}
    assigned = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in names for t in node.targets)
    ]
    return args + assigned


def hash_seeds(source: str, tree: ast.AST, seed: int) -> list[Edit]:
    """A seed made with the builtin ``hash()`` (salted per process for ``str`` and
    ``bytes``), given to a seeding call directly or through a variable: each ``hash(x)``
    in it replaced by ``fwd9m.derive_seed(seed, x, bits=63)``, one seed per ``x`` as
    before (two names still get two keys), in the range of ``hash`` on 64-bit Python,
    whatever ``PYTHONHASHSEED``."""
    lines = _offsets(source)
    edits: list[Edit] = []
    for value in _seed_values(tree):
        for node in ast.walk(value):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "hash"):
                continue
            if len(node.args) != 1 or node.keywords or isinstance(node.args[0], ast.Starred):
                continue
            start, end = _span(node.args[0], lines)
            edit = Edit(*_span(node, lines), f"fwd9m.derive_seed({seed}, {source[start:end]}, bits=63)")
            if source[edit.start : edit.end].isascii() and edit not in edits:
                edits.append(edit)
    return edits


def clock_seed_variables(source: str, tree: ast.AST, seed: int) -> list[Edit]:
    """A seed that reaches the seeding call through a variable (``seed = args.seed if ...
    else int(time.time())``, then ``PRNGKey(seed)``): the clock part of each assignment
    to that variable replaced by ``seed``."""
    names = {arg.id for arg in _seed_args(tree) if isinstance(arg, ast.Name)}
    lines = _offsets(source)
    edits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in names for t in node.targets):
            for part in _clock_values(node.value):
                start, end = _span(part, lines)
                if source[start:end].isascii():
                    edits.append(Edit(start, end, str(seed)))
    return edits


#: generator constructors that, without a seed, take one from the OS
_GENERATORS = frozenset({"default_rng", "RandomState", "Random", "PCG64", "Philox", "SFC64", "MT19937"})


def seeded_generators(source: str, tree: ast.AST, seed: int) -> list[Edit]:
    """``np.random.default_rng()``, ``random.Random()``, ``np.random.RandomState()`` with no
    seed (each draws one from the OS, whatever the global seeds): given ``seed``."""
    lines = _offsets(source)
    edits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _name(node.func) in _GENERATORS and not node.args and not node.keywords:
            end = _span(node, lines)[1] - 1  # the closing parenthesis
            if source[end] == ")":
                edits.append(Edit(end, end, str(seed)))
    return edits


def _set_names(tree: ast.AST) -> set[str]:
    """Names assigned a set (a literal, a comprehension, ``set(...)``, ``frozenset(...)``)
    anywhere in the file, whatever else they are assigned (what the unsafe fix sorts)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _a_set(node.value, False):
            out.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return out


_SCOPES = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
#: set methods that add items (an item that is not a string could make ``sorted`` raise)
_ADDS = frozenset({"add", "update", "symmetric_difference_update", "__ior__", "__ixor__"})


def _scope_of(tree: ast.AST) -> dict[int, ast.AST]:
    """``{id(node): the module, function, lambda or class whose body it is in}``."""
    out: dict[int, ast.AST] = {}
    todo: list[tuple[ast.AST, ast.AST]] = [(tree, tree)]
    while todo:
        node, scope = todo.pop()
        out[id(node)] = scope
        for child in ast.iter_child_nodes(node):
            todo.append((child, child if isinstance(child, _SCOPES) else scope))
    return out


def _bound(node: ast.AST) -> list[str]:
    """The names ``node`` binds (or unbinds, or declares global or nonlocal); ``*`` for
    ``from m import *``, which may bind any."""
    if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
        return [node.id]
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [a.asname or a.name.split(".")[0] for a in node.names]
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return list(node.names)
    if isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)):
        return [node.name] if node.name else []
    if isinstance(node, ast.MatchMapping):
        return [node.rest] if node.rest else []
    return []


def _string_sets(tree: ast.AST, scope_of: dict[int, ast.AST]) -> dict[str, ast.AST]:
    """``{name: its scope}`` of the names bound once in the whole file, by ``name = {...}``
    (a literal of strings alone) in a module, function or class, and never added to
    (``name.add(...)``): a set ``sorted`` is sure to order."""
    count: dict[str, int] = {}
    candidates: dict[str, ast.AST] = {}
    for node in ast.walk(tree):
        for name in _bound(node):
            count[name] = count.get(name, 0) + 1
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.attr in _ADDS:
            count[node.value.id] = count.get(node.value.id, 0) + 1
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and _a_set(node.value, True)
        ):
            candidates[node.targets[0].id] = scope_of[id(node)]
    if "*" in count:
        return {}
    return {name: scope for name, scope in candidates.items() if count.get(name) == 1}


def sorted_sets(source: str, tree: ast.AST, strings_only: bool = False) -> list[Edit]:
    """A set of the script iterated in order (``list(s)``, ``tuple(s)``, ``enumerate(s)``,
    ``for x in s``, a comprehension over it): ``sorted(s)``, since a set of strings is
    ordered by the string-hash seed, which differs between processes. ``strings_only``
    (the safe fix): only a literal of strings iterated where it is written, or a name
    bound once in the file, to such a literal, iterated in the scope that binds it
    (:func:`_string_sets`: ``sorted`` cannot fail on it, nor reorder a list of the same
    name elsewhere). Otherwise every name ever assigned a set, wherever it is iterated."""
    scope_of = _scope_of(tree)
    strings = _string_sets(tree, scope_of) if strings_only else {}
    names = _set_names(tree)
    lines = _offsets(source)
    targets: list[tuple[ast.expr, ast.expr]] = []  # (the set, what the edit replaces)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("list", "tuple", "enumerate")
            and node.args
        ):
            whole = node.func.id == "list" and len(node.args) == 1 and not node.keywords  # list(s): sorted(s)
            targets.append((node.args[0], node if whole else node.args[0]))
        elif isinstance(node, (ast.For, ast.comprehension)):
            targets.append((node.iter, node.iter))
    edits = []
    for t, replaced in targets:
        start, end = _span(t, lines)
        if isinstance(t, ast.Name):
            mine = strings.get(t.id) is scope_of[id(t)] if strings_only else t.id in names
        else:
            mine = _a_set(t, strings_only)
        if mine:
            edits.append(Edit(*_span(replaced, lines), f"sorted({source[start:end]})"))
    return edits


def _a_set(node: ast.expr, strings_only: bool) -> bool:
    """A set made where it is iterated (``{...}``, ``{... for ...}``, ``set(...)``); with
    ``strings_only``, a literal of strings alone."""
    if strings_only:
        return isinstance(node, ast.Set) and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts
        )
    return isinstance(node, (ast.Set, ast.SetComp)) or (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("set", "frozenset")
    )


def _sets_up(stmt: ast.stmt) -> bool:
    """A statement that may come before the imports without drawing anything: a
    docstring, an import, a function or class, ``os.environ[...] = ...``, a call on
    ``os.environ``, ``sys.path``, ``warnings`` or ``logging``, a constant."""
    if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return True
    if isinstance(stmt, ast.Try):
        return all(_sets_up(s) for s in stmt.body)
    calls = [n for n in ast.walk(stmt) if isinstance(n, ast.Call)]
    return all(ast.unparse(c.func).startswith(("os.environ", "sys.path", "warnings.", "logging.")) for c in calls)


def _imports(stmt: ast.stmt) -> bool:
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return not (isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__")
    return isinstance(stmt, ast.Try) and any(isinstance(s, (ast.Import, ast.ImportFrom)) for s in stmt.body)


def after_imports(source: str, tree: ast.Module, text: str) -> list[Edit]:
    """``text`` (whole lines) on the lines after the last import that comes before
    anything that runs (or at the top, after a docstring and ``from __future__``
    imports, when the script imports nothing)."""
    after = 0  # line after which to insert
    for stmt in tree.body:
        if not _sets_up(stmt):
            break
        first = stmt is tree.body[0] and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
        if _imports(stmt) or first or (isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__"):
            after = stmt.end_lineno or after
    lines = _offsets(source)
    at = lines[after + 1] if after + 1 < len(lines) else len(source)
    eol = line_ending(source, at)
    newline = "" if not source or source.endswith(("\n", "\r")) or at < len(source) else eol
    return [Edit(at, at, newline + text.replace("\n", eol))]


def line_ending(source: str, at: int) -> str:
    """The line ending of the line that ends at offset ``at`` of ``source`` (the first
    line's when none does, ``\\n`` in a file of one line), so that lines inserted into a
    file with Windows (``\\r\\n``) line endings get them too, not a mix."""
    for m in re.finditer(r"\r\n|\r|\n", source):
        if m.end() == at or m.start() >= at:
            return m.group()
    first = re.search(r"\r\n|\r|\n", source)
    return first.group() if first else "\n"


def enable_after_imports(source: str, tree: ast.Module, seed: int) -> list[Edit]:
    """``import fwd9m`` and ``fwd9m.enable_determinism(seed=seed)`` after the imports
    (:func:`after_imports`)."""
    text = (
        "import fwd9m  # fwd9m fix: seeds every RNG, turns on deterministic kernels\n"
        f"fwd9m.enable_determinism(seed={seed})\n"
    )
    return after_imports(source, tree, text)


def imports_fwd9m(tree: ast.AST) -> bool:
    """Whether the module runs ``import fwd9m`` (or ``import fwd9m.x``) at its top level."""
    return any(
        isinstance(s, ast.Import) and any(a.name.split(".")[0] == "fwd9m" and a.asname is None for a in s.names)
        for s in getattr(tree, "body", [])
    )


def worker_seeding(source: str, tree: ast.AST) -> list[Edit]:
    """``worker_init_fn=fwd9m.data.worker_init_fn`` in each ``DataLoader(...)`` call that
    passes ``num_workers`` (other than a literal 0) and no ``worker_init_fn``."""
    lines = _offsets(source)
    edits = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _name(node.func) == "DataLoader"):
            continue
        kw = {k.arg: k.value for k in node.keywords}
        workers = kw.get("num_workers")
        if workers is None or isinstance(workers, ast.Constant) and workers.value == 0 or "worker_init_fn" in kw:
            continue
        end = _span(node, lines)[1] - 1  # the closing parenthesis
        inner = source[_span(node, lines)[0] : end].rstrip()
        sep = "" if inner.endswith((",", "(")) else ", "
        edits.append(Edit(end, end, f"{sep}worker_init_fn=fwd9m.data.worker_init_fn"))
    return edits


def apply(source: str, edits: list[Edit]) -> str:
    """``source`` with ``edits`` made (later ones first; overlapping ones after the
    first are left out)."""
    out, last = source, len(source) + 1
    for e in sorted(edits, key=lambda e: (e.start, e.end), reverse=True):
        if e.end > last:
            continue
        out = out[: e.start] + e.text + out[e.end :]
        last = e.start
    return out


def one_thread(source: str, tree: ast.Module) -> list[Edit]:
    """PyTorch on one CPU thread: each ``torch.set_num_threads(N)`` call's argument
    replaced by 1, or, when the script makes none, ``torch.set_num_threads(1)`` after the
    imports (an op whose parallel CPU kernel adds in the order its threads finish, such as
    ``index_put_(accumulate=True)``, then adds in one order). Nothing when the script
    does not import torch."""
    if not any(
        isinstance(s, ast.Import) and any(a.name.split(".")[0] == "torch" and a.asname is None for a in s.names)
        for s in ast.walk(tree)
    ):
        return []
    lines = _offsets(source)
    edits = [
        Edit(*_span(node.args[0], lines), "1")
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and _name(node.func) == "set_num_threads" and len(node.args) == 1
    ]
    return edits or after_imports(source, tree, "torch.set_num_threads(1)  # fwd9m fix: one CPU thread\n")
