"""FWD4xx: ordering and hashing."""

from __future__ import annotations

import ast
import re

from .._flow import statements
from .._helpers import call_name
from .._helpers import walk as _walk
from .._rule import Rule, register

HASH_DOC = "https://docs.python.org/3/reference/datamodel.html#object.__hash__"

_LISTINGS = frozenset(
    {
        "os.listdir",
        "os.scandir",
        "os.walk",
        "glob.glob",
        "glob.iglob",
        "tensorflow.io.gfile.listdir",
        "tensorflow.io.gfile.glob",
        "tensorflow.io.gfile.walk",
        "tensorflow.gfile.ListDirectory",
        "tensorflow.gfile.Glob",
        "tensorflow.compat.v1.gfile.ListDirectory",
        "tensorflow.compat.v1.gfile.Glob",
    }
)
_WALKS = frozenset({"os.walk", "tensorflow.io.gfile.walk"})
_LISTING_METHODS = frozenset({"iterdir", "glob", "rglob"})

#: calls whose result keeps the order of an iterable argument: ids, arrays, datasets, draws
ORDER_CONSUMERS = frozenset(
    {
        "enumerate",
        "zip",
        "reversed",
        "dict.fromkeys",
        "itertools.cycle",
        "itertools.islice",
        "numpy.array",
        "numpy.asarray",
        "numpy.stack",
        "numpy.concatenate",
        "numpy.fromiter",
        "torch.tensor",
        "torch.as_tensor",
        "torch.stack",
        "torch.cat",
        "tensorflow.constant",
        "tensorflow.convert_to_tensor",
        "tensorflow.stack",
        "tensorflow.concat",
        "tensorflow.data.Dataset.from_tensor_slices",
        "tensorflow.data.Dataset.from_tensors",
        "tensorflow.data.TFRecordDataset",
        "tensorflow.data.TextLineDataset",
        "jax.numpy.array",
        "jax.numpy.asarray",
        "random.choice",
        "random.choices",
        "random.shuffle",
        "random.sample",
        "numpy.random.choice",
        "numpy.random.shuffle",
        "numpy.random.permutation",
    }
)
#: methods of the same kind (``"".join(x)``, ``rng.choice(x)``, ``rng.shuffle(x)``)
ORDER_METHODS = frozenset({"join", "choice", "choices", "shuffle", "permutation", "sample", "from_tensor_slices"})
#: a loop body that builds a sequence, accumulates, yields or draws depends on the order
_BODY_METHODS = frozenset({"append", "extend", "insert", "write", "writelines", "put", "appendleft"})


#: calls whose arguments are text for people: the order there changes no result
_MESSAGE_CALLS = frozenset({"print", "warnings.warn", "repr", "str", "format"})
_LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical", "log"})


def _numbers_in_order(value, table) -> bool:
    """True when ``value`` hands out the next id: ``len(table)`` of the mapping being
    filled, or ``next(counter)``."""
    for c in _walk(value):
        if type(c) is ast.Call and type(c.func) is ast.Name and len(c.args) == 1:
            if c.func.id == "next" or (c.func.id == "len" and table is not None and _name_key(c.args[0]) == table):
                return True
    return False


def sensitive_body(ctx, stmts, augassign: bool = True) -> bool:
    """True when a loop body's result depends on iteration order: it appends to a list,
    writes, yields, accumulates (``+=``; only when ``augassign``), draws random numbers,
    or numbers the items (``ids[w] = len(ids)``, ``ids.setdefault(w, len(ids))``,
    ``ids[w] = next(counter)``)."""
    from ._common import is_stateful_random

    for st in stmts:
        for n in _walk(st):
            t = type(n)
            if t in (ast.Yield, ast.YieldFrom):
                return True
            if augassign and t is ast.AugAssign and type(n.target) is not ast.Subscript:
                return True  # total += x accumulates in order; counts[x] += 1 does not
            if t is ast.Assign and any(
                type(g) is ast.Subscript and _numbers_in_order(n.value, _name_key(g.value)) for g in n.targets
            ):
                return True
            if t is ast.Call:
                f = n.func
                if type(f) is ast.Attribute and f.attr in _BODY_METHODS:
                    return True
                if (
                    type(f) is ast.Attribute
                    and f.attr == "setdefault"
                    and len(n.args) == 2
                    and _numbers_in_order(n.args[1], _name_key(f.value))
                ):
                    return True
                if is_stateful_random(ctx.qualname(f)):
                    return True
    return False


def _name_key(node) -> str | None:
    """``"x"`` for a name, ``"self.x"`` for an attribute of a name (one level), else None."""
    if type(node) is ast.Name:
        return node.id
    if type(node) is ast.Attribute and type(node.value) is ast.Name:
        return f"{node.value.id}.{node.attr}"
    return None


def _call_inputs(node: ast.Call):
    """The argument nodes of a call: positional ones, then keyword values (``data=``)."""
    return [*node.args, *(k.value for k in node.keywords if k.arg is not None)]


class _OrderUses:
    """Where a name's order reaches something that keeps it (see ORDER_CONSUMERS):
    collected during the pass, judged in ``finish``. Names are keys of :func:`_name_key`;
    ``self.x`` attributes are one name for the whole file (methods share them)."""

    FILE = 0  #: the scope of attribute keys

    def __init__(self, ctx, in_order):
        self.ctx = ctx
        #: ``in_order(loop, scope_node)``: whether a loop's effect depends on its order
        self.in_order = in_order
        self.used: dict[tuple[int, str], ast.AST] = {}  # names passed to a consumer -> first call
        self.subscripted: dict[tuple[int, str], ast.AST] = {}
        #: for-loops over a name, with the function (or module) they are in
        self.loops: list[tuple[int, str, ast.AST, ast.AST | None]] = []

    def scope(self, key: str | None = None) -> int:
        if key is not None and "." in key:
            return self.FILE
        return id(self.ctx.function_stack[-1]) if self.ctx.function_stack else 0

    def consumer(self, node, qn) -> bool:
        f = node.func
        if (
            type(f) is ast.Attribute
            and f.attr == "join"
            and type(f.value) is ast.Constant
            and isinstance(f.value.value, str)
            and any(c in f.value.value for c in (", ", "; ", "\n"))
        ):
            return False  # ", ".join(names): a list for people to read
        return qn in ORDER_CONSUMERS or (
            type(f) is ast.Attribute and f.attr in ORDER_METHODS and (qn is None or qn in ORDER_CONSUMERS)
        )

    def note_call(self, node, qn):
        f = node.func
        if type(f) is ast.Attribute and f.attr == "index" and len(node.args) == 1:
            key = _name_key(f.value)  # ``labels.index(c)``: an item's position is its id
            if key:
                self.subscripted.setdefault((self.scope(key), key), node)
        if self.consumer(node, qn):
            for a in _call_inputs(node):
                key = _name_key(_unwrap_list(a))
                if key:
                    self.used.setdefault((self.scope(key), key), node)

    def note_subscript(self, node):
        key = _name_key(node.value)
        if key and type(node.ctx) is ast.Load:
            self.subscripted.setdefault((self.scope(key), key), node)

    def note_for(self, node):
        key = _name_key(_unwrap_list(node.iter))
        if key and not self.ctx.in_function("__iter__"):  # a container yielding its items
            fn = self.ctx.function_stack[-1] if self.ctx.function_stack else self.ctx.tree
            self.loops.append((self.scope(key), key, node, fn))

    def first_use(self, scope: int, name: str, subscripts: bool = True) -> ast.AST | None:
        """The first node where the order of ``name`` is kept, or None."""
        found = [self.used.get((scope, name))]
        if subscripts:
            found.append(self.subscripted.get((scope, name)))
        found += [loop.iter for s, n, loop, fn in self.loops if s == scope and n == name and self.in_order(loop, fn)]
        found = [f for f in found if f is not None]
        return min(found, key=lambda f: (f.lineno, f.col_offset)) if found else None

    def sensitive(self, scope: int, name: str, subscripts: bool = True) -> bool:
        return self.first_use(scope, name, subscripts) is not None


def _listing(ctx, node) -> str | None:
    if type(node) is not ast.Call:
        return None
    qn = ctx.qualname(node.func)
    if qn in _LISTINGS:
        return qn
    f = node.func
    if qn is None and type(f) is ast.Attribute and f.attr in _LISTING_METHODS:
        if f.attr == "glob" and not node.args and not node.keywords:
            return None
        return f".{f.attr}()"
    return None


_PASS_ORDER = frozenset({"list", "tuple", "iter", "map", "filter"})


def _unwrap_list(node):
    """The iterable whose order ``node`` keeps: ``x`` for ``list(x)``, ``tuple(x)``,
    ``iter(x)``, ``[*x]``, ``map(f, x)`` and ``filter(f, x)`` (also nested); for a list
    comprehension or generator, its first iterable; else ``node``."""
    for _ in range(8):
        t = type(node)
        if t is ast.Call and type(node.func) is ast.Name and node.func.id in _PASS_ORDER and not node.keywords:
            want = 2 if node.func.id in ("map", "filter") else 1
            if len(node.args) != want or type(node.args[-1]) is ast.Starred:
                return node
            node = node.args[-1]
        elif t in (ast.List, ast.Tuple) and len(node.elts) == 1 and type(node.elts[0]) is ast.Starred:
            node = node.elts[0].value
        elif t in (ast.ListComp, ast.GeneratorExp):
            node = node.generators[0].iter
        else:
            return node
    return node


def _sorted_names(ctx) -> set[str]:
    """Name keys sorted somewhere in the file (``x.sort()``, ``sorted(x)``)."""
    names = set()
    for c in ctx.methods.get("sort", ()):
        key = _name_key(c.func.value)
        if key:
            names.add(key)
    for c in ctx.calls.get("sorted", ()):
        for a in c.args:
            key = _name_key(a)
            if key:
                names.add(key)
    return names


class _OrderRule(Rule):
    """Shared mechanics of FWD401/FWD402: a source of arbitrary order (``self.source``)
    is reported where its order reaches a sequence, id, accumulation or draw."""

    def source(self, node) -> str | None:  # pragma: no cover - abstract
        raise NotImplementedError

    def annotated(self, annotation) -> str | None:
        """What an annotation says a name holds, when that has no fixed order."""
        return None

    def in_order(self, loop, scope_node) -> bool:
        """Whether the effect of ``loop`` (over a source) depends on its order;
        ``scope_node`` is the function (or module) it is in."""
        return sensitive_body(self.ctx, loop.body)

    def __init__(self, ctx):
        super().__init__(ctx)
        self.uses = _OrderUses(ctx, self.in_order)
        #: (scope, name key, source node or None (report at the first use), what, indexable)
        self.stored: list[tuple[int, str, ast.AST | None, str, bool]] = []
        #: (scope, name key) -> (node, what, indexable) of names bound to a source, for
        #: copies such as ``itos = list(vocab_set)``
        self.holders: dict[tuple[int, str], tuple[ast.AST | None, str, bool]] = {}
        self.reported: set[int] = set()
        self.raises: list[tuple[int, int]] = []
        self.msg_end = (0, 0)

    def _message_span(self, node):
        self.raises.append((node.lineno, node.end_lineno or node.lineno))
        end = (node.end_lineno or node.lineno, node.end_col_offset or 0)
        if end > self.msg_end:
            self.msg_end = end

    visit_Raise = _message_span
    visit_JoinedStr = _message_span  # f"...{', '.join(s)}..." is text for people
    visit_Assert = _message_span

    def _in_message(self, node) -> bool:
        """During the pass (source order): inside the last message node entered."""
        return (node.lineno, node.col_offset) <= self.msg_end

    def _in_any_message(self, node) -> bool:
        return any(lo <= node.lineno <= hi for lo, hi in self.raises)

    def flag(self, node, what, how):
        if self._in_any_message(node):
            return  # the text of an error message
        if id(node) not in self.reported:
            self.reported.add(id(node))
            self.report(node, self.message_for(what, how))

    def _bind(self, key: str, node, what: str, as_list: bool) -> None:
        scope = self.uses.scope(key)
        self.holders[(scope, key)] = (node, what, as_list)
        self.stored.append((scope, key, node, what, as_list))

    def _store(self, target, value) -> None:
        key = _name_key(target)
        if key is None:
            return
        inner = _unwrap_list(value)
        # a stored set (not a list made from it) cannot be indexed: only its
        # consumers and order-sensitive loops count (see finish)
        as_list = inner is not value
        what = self.source(inner)
        if what:
            self._bind(key, inner, what, as_list)
            return
        held_key = _name_key(inner)
        held = self.holders.get((self.uses.scope(held_key), held_key)) if held_key else None
        if held is not None:  # a copy of a name bound to a source: ``itos = list(vocab_set)``
            self._bind(key, held[0], held[1], as_list or held[2])
        else:
            self.holders.pop((self.uses.scope(key), key), None)  # bound to something else now

    def visit_Assign(self, node):
        if len(node.targets) == 1:
            self._store(node.targets[0], node.value)

    def visit_AnnAssign(self, node):
        what = self.annotated(node.annotation)
        if what == "":
            return  # ``ids: set[int] = set()``: its order is the same in every run
        key = _name_key(node.target)
        if what and key and (node.value is None or not self.source(_unwrap_list(node.value))):
            # ``names: set[str] = load()``: reported where the value comes in, or, for a
            # bare declaration, where its order is first kept
            self._bind(key, node.value, f"a value annotated {what}", False)
        elif node.value is not None:
            self._store(node.target, node.value)

    def visit_arg(self, node):
        what = self.annotated(node.annotation)
        if what:  # a parameter: reported where its order is first kept
            self._bind(node.arg, None, f"parameter {node.arg!r}, annotated {what}", False)

    def visit_Subscript(self, node):
        self.uses.note_subscript(node)
        if type(node.ctx) is ast.Load:
            inner = _unwrap_list(node.value)
            what = self.source(inner)
            if what:
                self.flag(inner, what, "indexed")

    def visit_For(self, node):
        self.uses.note_for(node)
        what = self.source(_unwrap_list(node.iter))
        if what and self.in_order(node, self.ctx.function_stack[-1] if self.ctx.function_stack else self.ctx.tree):
            self.flag(_unwrap_list(node.iter), what, "loop over")

    visit_AsyncFor = visit_For

    def visit_Call(self, node, qn):
        if (
            qn in _MESSAGE_CALLS
            or (qn and qn.startswith(("logging.", "warnings.")))
            or (type(node.func) is ast.Attribute and node.func.attr in _LOG_METHODS)
        ):
            self._message_span(node)
            return
        if self._in_message(node):
            return
        self.uses.note_call(node, qn)
        if self.uses.consumer(node, qn):
            for a in _call_inputs(node):
                inner = _unwrap_list(a)
                what = self.source(inner)
                if what:
                    self.flag(inner, what, f"{qn or node.func.attr}() over")

    def finish(self):
        sorted_names = _sorted_names(self.ctx)
        for scope, name, node, what, as_list in self.stored:
            if name in sorted_names:
                continue
            use = self.uses.first_use(scope, name, subscripts=as_list)
            if use is not None:
                self.flag(use if node is None else node, what, f"{name!r} (indexed, enumerated or looped over) from")


@register
class UnsortedDirectoryListing(_OrderRule):
    """Uses a directory listing or glob in the order the file system returns.

    ## What it does
    Flags `os.listdir`, `os.scandir`, `os.walk`, `glob.glob`, `glob.iglob`,
    `Path.iterdir`, `Path.glob`, `Path.rglob` and `tf.io.gfile.listdir/glob` whose order
    reaches something that keeps it: a loop that appends, yields, accumulates or draws
    random numbers; `enumerate`/`zip`; an array, tensor or `tf.data` dataset; a random
    choice; or indexing. A list that is sorted (`sorted(...)`, `.sort()`) is fine, and
    uses where order cannot matter (`len`, `in`, deleting files) are not reported.

    ## Why is this bad
    These functions return entries in file-system order, which is arbitrary: it differs
    between machines, file systems and even copies of the same folder. File order
    becomes example order, class ids or shard assignment.

    ## Example
    ```python
    files = glob.glob("data/*.png")
    dataset = tf.data.Dataset.from_tensor_slices(files)
    ```

    ## Fix
    `files = sorted(glob.glob("data/*.png"))`; for `os.walk`, sort `dirs` in place and
    iterate `sorted(files)`.
    """

    code, name = "FWD401", "unsorted-directory-listing"
    triggers = ("listdir", "scandir", "walk", "glob", "iglob", "iterdir", "rglob", "ListDirectory", "Glob")
    references = (
        "https://docs.python.org/3/library/os.html#os.listdir",
        "https://docs.python.org/3/library/glob.html#glob.glob",
    )
    invalid = (
        "import os\nout = []\nfor f in os.listdir('d'):\n    out.append(f)\n",
        "import glob\nimport numpy as np\nfiles = glob.glob('*.png')\nx = np.array(files)\n",
        "from pathlib import Path\nclasses = {p.name: i for i, p in enumerate(Path('d').iterdir())}\n",
        "import os\nfor root, dirs, files in os.walk('d'):\n    for f in files:\n        yield f\n",
        "import glob\nfirst = glob.glob('*.png')[0]\n",
    )
    valid = (
        "import os\nout = []\nfor f in sorted(os.listdir('d')):\n    out.append(f)\n",
        "import glob\nfiles = glob.glob('*.png')\nfiles.sort()\nfirst = files[0]\n",
        "import glob\nn = len(glob.glob('*.png'))\n",
        "import os\nfor root, dirs, files in os.walk('d'):\n    dirs.sort()\n"
        "    for f in sorted(files):\n        yield f\n",
        "import os\nfor f in os.listdir('d'):\n    os.remove(f)\n",
        "import os\nassert 'a' in os.listdir('d')\n",
    )

    def source(self, node):
        return _listing(self.ctx, node)

    def message_for(self, what, how):
        return f"{how} {what}: entries come in arbitrary file-system order; wrap it in sorted(...)"

    def visit_For(self, node):
        what = _listing(self.ctx, node.iter)
        if what in _WALKS or what == "os.walk":
            self.walks.append(node)
            return
        super().visit_For(node)

    visit_AsyncFor = visit_For

    def __init__(self, ctx):
        super().__init__(ctx)
        self.walks: list[ast.For] = []

    def finish(self):
        super().finish()
        sorted_names = _sorted_names(self.ctx)
        for loop in self.walks:
            t = loop.target
            elts = [e.id if type(e) is ast.Name else None for e in t.elts] if type(t) is ast.Tuple else []
            if len(elts) != 3 or {elts[1], elts[2]} & sorted_names:
                continue
            files = elts[2]
            body_uses_files = any(
                type(n) is ast.For
                and type(n.iter) is ast.Name
                and n.iter.id == files
                and sensitive_body(self.ctx, n.body)
                for st in loop.body
                for n in _walk(st)
            )
            if body_uses_files or sensitive_body(self.ctx, loop.body):
                self.flag(loop.iter, "os.walk", "loop over")


def _fixed_hash(node) -> bool:
    if type(node) is ast.Constant:
        return not isinstance(node.value, (str, bytes))
    if type(node) is ast.UnaryOp and type(node.operand) is ast.Constant:
        return True
    if type(node) is ast.Tuple:
        return all(_fixed_hash(e) for e in node.elts)
    return False


_INT_NAME = re.compile(r"(^|_)(index|idx|id|ids|rank|count|step|epoch|num|size|len|length)$")


def _int_like(node, names: re.Pattern[str] = _INT_NAME) -> bool:
    """An expression whose value is an int (ints hash to themselves, so a set of them has
    the same order in every run): an int literal, ``len``/``int``/``ord`` of anything,
    arithmetic on ints, or a name whose last word ``names`` matches, by default one that
    says it counts or indexes (``p.process_index``, ``token_id``, ``rank``): a naming heuristic."""
    t = type(node)
    if t is ast.Constant:
        return type(node.value) is int
    if t is ast.Call:
        return call_name(node) in ("len", "int", "ord")
    if t is ast.BinOp and type(node.op) in (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod):
        return _int_like(node.left, names) and _int_like(node.right, names)
    name = node.attr if t is ast.Attribute else node.id if t is ast.Name else None
    return bool(name) and bool(names.search(name.lower()))


def _ints_added(scope_node, key: str) -> bool:
    """Whether every ``KEY.add(x)`` / ``KEY.update(...)`` in ``scope_node`` adds int-like
    values, and there is at least one."""
    adds = [
        n
        for n in _walk(scope_node)
        if type(n) is ast.Call
        and type(n.func) is ast.Attribute
        and n.func.attr in ("add", "update")
        and _name_key(n.func.value) == key
    ]
    return bool(adds) and all(n.func.attr == "add" and n.args and _int_like(n.args[0]) for n in adds)


def _set_expr(ctx, node) -> str | None:
    """'set(...)' etc. when ``node`` evaluates to a set whose order may vary."""
    t = type(node)
    if t is ast.Call:
        qn = ctx.qualname(node.func)
        if qn in ("set", "frozenset"):
            if node.args and type(node.args[0]) is ast.Call and call_name(node.args[0]) == "range":
                return None  # small ints hash to themselves
            if node.args and type(node.args[0]) in (ast.GeneratorExp, ast.ListComp) and _int_like(node.args[0].elt):
                return None  # a set of ints
            return f"{qn}(...)"
        if qn in _SET_CLASS_METHODS:
            return f"{qn}(...)"
        if type(node.func) is ast.Attribute and node.func.attr in _SET_METHODS and _set_expr(ctx, node.func.value):
            return "a set"
        return None
    if t is ast.SetComp:
        return None if _int_like(node.elt) else "a set comprehension"
    if t is ast.Set:
        # one element, or only numbers/None/bools and tuples of them (hashes that do not
        # vary between runs): a fixed order
        if (len(node.elts) <= 1 and not any(type(e) is ast.Starred for e in node.elts)) or all(
            _fixed_hash(e) for e in node.elts
        ):
            return None
        return "a set literal"
    if t is ast.BinOp and type(node.op) in (ast.BitOr, ast.BitAnd, ast.Sub, ast.BitXor):
        found = _set_expr(ctx, node.left) or _set_expr(ctx, node.right)
        if not found and (_dict_view(node.left) or _dict_view(node.right)):
            return "a set of dict keys"  # d.keys() - e.keys(): a set, not a view
        return found
    return None


_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _local_nodes(stmts):
    """The nodes of ``stmts`` outside nested functions and classes (in no set order)."""
    todo = list(stmts)
    while todo:
        n = todo.pop()
        yield n
        todo.extend(c for c in ast.iter_child_nodes(n) if not isinstance(c, _NESTED))


def _loads(node) -> set[str]:
    """Name keys read in ``node`` (``x``, ``self.x``)."""
    out = set()
    for c in _walk(node):
        if type(c) is ast.Name and type(c.ctx) is ast.Load:
            out.add(c.id)
        elif type(c) is ast.Attribute and type(c.ctx) is ast.Load and type(c.value) is ast.Name:
            out.add(f"{c.value.id}.{c.attr}")
    return out


def _store_keys(target) -> set[str]:
    """Name keys bound by an assignment or loop target (through tuples and ``*rest``)."""
    if type(target) in (ast.Tuple, ast.List):
        return set().union(*(_store_keys(e) for e in target.elts)) if target.elts else set()
    if type(target) is ast.Starred:
        return _store_keys(target.value)
    key = _name_key(target)
    return {key} if key else set()


def _own_breaks(stmts) -> bool:
    """A ``break`` of this loop (not of a loop nested in it)."""
    for st in stmts:
        t = type(st)
        if t is ast.Break:
            return True
        if isinstance(st, _NESTED):
            continue
        if t in (ast.For, ast.AsyncFor, ast.While):
            if _own_breaks(st.orelse):  # the else of an inner loop is still this loop's
                return True
            continue
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            block = getattr(st, field, None)
            if block and type(block) is list and _own_breaks(block):
                return True
    return False


def _is_print(ctx, node) -> bool:
    return type(node) is ast.Call and ctx.qualname(node.func) == "print"


def _printed(node) -> set[str]:
    """Name keys read by the arguments of a ``print(...)`` call (not ``file=``, ``sep=``)."""
    return set().union(*(_loads(a) for a in node.args)) if node.args else set()


def _first_wins_or_output(ctx, loop) -> bool:
    """A loop whose effect depends on which element comes first: it prints the elements,
    returns one (``return w``), or keeps one and stops (``found = w; break``). Conditions
    alone (``if w in other: return False``) do not count."""
    element = _store_keys(loop.target)
    derived = set(element)
    assigns = [
        n
        for n in _local_nodes(loop.body)
        if type(n) in (ast.Assign, ast.AnnAssign, ast.AugAssign) and n.value is not None
    ]
    for _ in range(2):  # names computed from the element (``name = w.upper()``)
        for n in assigns:
            if _loads(n.value) & derived:
                for g in n.targets if type(n) is ast.Assign else [n.target]:
                    derived |= _store_keys(g)
    for n in _local_nodes(loop.body):
        if type(n) is ast.Return and n.value is not None and _loads(n.value) & derived:
            return True
        if _is_print(ctx, n) and _printed(n) & derived:
            return True
    return _own_breaks(loop.body) and bool(derived - element)


#: an accumulated value of one of these types depends on the order of the terms
_ORDERED_TYPES = frozenset({"float", "str", "list", "bytes", "complex"})


def _ordered_type(node) -> bool:
    """``node`` (an increment or a starting value) is a float, string or list expression:
    a float or string literal, a true division, an f-string, a list or ``float(...)``,
    alone or in arithmetic (not inside other calls or subscripts: ``len(d["k"])`` is an int)."""
    t = type(node)
    if t is ast.BinOp:
        return type(node.op) is ast.Div or _ordered_type(node.left) or _ordered_type(node.right)
    if t is ast.UnaryOp:
        return _ordered_type(node.operand)
    if t is ast.IfExp:
        return _ordered_type(node.body) or _ordered_type(node.orelse)
    if t is ast.Constant:
        return isinstance(node.value, (float, complex, str, bytes))
    if t is ast.Call:
        return type(node.func) is ast.Name and node.func.id in _ORDERED_TYPES
    return t in (ast.JoinedStr, ast.List, ast.ListComp)


def _binop_leaves(node):
    """The operands of a tree of binary operations (``a * 1.1 + b / 7`` -> a, 1.1, b, 7)."""
    if type(node) is ast.BinOp:
        return [*_binop_leaves(node.left), *_binop_leaves(node.right)]
    return [node]


def _accumulations(loop):
    """(name key, increments) of each ``x += ...`` and ``x = x <op> ...`` in a loop body,
    for names that are not the loop's own target (``counts[w] += 1`` is not one)."""
    element = _store_keys(loop.target)
    for n in _local_nodes(loop.body):
        t = type(n)
        if t is ast.AugAssign:
            key = _name_key(n.target)
            if key and key not in element:
                yield key, [n.value]
        elif t is ast.Assign and len(n.targets) == 1 and type(n.value) is ast.BinOp:
            key = _name_key(n.targets[0])
            leaves = _binop_leaves(n.value)
            if key and key not in element and any(_name_key(v) == key for v in leaves):
                yield key, [v for v in leaves if _name_key(v) != key]


def _ordered_accumulation(ctx, loop, scope_node) -> bool:
    """A loop that accumulates a float, string or list: ``total += w / 7``,
    ``text = text + w``, ``total = total * 1.1 + len(w)``. Integer counts
    (``n += 1``, ``n += len(w)``) add up to the same in any order and are not reported;
    when the type is unknown, the accumulator counts when it starts as a float, string or
    list (``total = 0.0``) or is printed in the same function."""
    found = list(_accumulations(loop))
    if not found:
        return False
    if any(_ordered_type(v) for _, incs in found for v in incs):
        return True
    keys = {k for k, _ in found}
    inside = range(loop.lineno, (loop.end_lineno or loop.lineno) + 1)
    for n in _local_nodes(getattr(scope_node, "body", None) or ()):
        t = type(n)
        if t in (ast.Assign, ast.AnnAssign) and n.value is not None and n.lineno not in inside:
            targets = n.targets if t is ast.Assign else [n.target]
            if any(_name_key(g) in keys for g in targets) and _ordered_type(n.value):
                return True
        elif _is_print(ctx, n) and _printed(n) & keys:
            return True
    return False


def _one_or_worklist(scope_node, key: str, node) -> bool:
    """Whether taking "the first" element of set ``key`` at ``node`` picks no order: the
    function checks the set holds one element (``len(s) == 1``, ``if len(s) > 1: raise``),
    or ``node`` is in ``while s:`` draining the set as a work list."""
    for n in _local_nodes(getattr(scope_node, "body", None) or ()):
        t = type(n)
        if t is ast.Compare:
            sides = [n.left, *n.comparators]
            if any(type(c) is ast.Constant and c.value in (1, 2) and type(c.value) is int for c in sides) and any(
                type(c) is ast.Call
                and type(c.func) is ast.Name
                and c.func.id == "len"
                and len(c.args) == 1
                and _name_key(c.args[0]) == key
                for c in sides
            ):
                return True
        elif t is ast.While and key in _loads(n.test) and n.lineno <= node.lineno <= (n.end_lineno or n.lineno):
            return True
    return False


def _dict_view(node) -> bool:
    return (
        type(node) is ast.Call
        and type(node.func) is ast.Attribute
        and node.func.attr in ("keys", "items")
        and not node.args
        and not node.keywords
    )


_SET_METHODS = ("union", "intersection", "difference", "symmetric_difference")
#: ``set.union(*sets)``: the unbound methods, called on the class
_SET_CLASS_METHODS = frozenset(f"{cls}.{m}" for cls in ("set", "frozenset") for m in _SET_METHODS)
_NUMBER_TYPES = frozenset({"int", "bool", "float", "complex"})
_SET_TYPES = frozenset(
    {
        "set",
        "frozenset",
        "typing.Set",
        "typing.FrozenSet",
        "typing.AbstractSet",
        "typing.MutableSet",
        "collections.abc.Set",
        "collections.abc.MutableSet",
    }
)


def _fixed_hash_type(ctx, node) -> bool:
    """An element annotation whose values hash the same in every run (numbers, tuples of them)."""
    if type(node) is ast.Subscript and ctx.qualname(node.value) in ("tuple", "typing.Tuple"):
        elts = node.slice.elts if type(node.slice) is ast.Tuple else [node.slice]
        return all(type(e) is ast.Constant and e.value is Ellipsis or _fixed_hash_type(ctx, e) for e in elts)
    return ctx.qualname(node) in _NUMBER_TYPES


def _set_annotation(ctx, node) -> str | None:
    """The annotation's text when it says "a set of strings or objects" (``set[str]``,
    ``typing.AbstractSet[Path]``, ``frozenset``, ``set[str] | None``); ``""`` for a set of
    numbers (``set[int]``), whose order is the same in every run; else None."""
    t = type(node)
    if t is ast.BinOp and type(node.op) is ast.BitOr:
        sides = (_set_annotation(ctx, node.left), _set_annotation(ctx, node.right))
        return max(sides, key=lambda w: -1 if w is None else len(w))
    if t is ast.Subscript:
        base = ctx.qualname(node.value)
        if base == "typing.Optional":
            return _set_annotation(ctx, node.slice)
        if base in _SET_TYPES:
            return "" if _fixed_hash_type(ctx, node.slice) else ast.unparse(node)
        return None
    if ctx.qualname(node) in _SET_TYPES:
        return ast.unparse(node)
    return None


@register
class SetIterationOrder(_OrderRule):
    """Turns a set into ids, arrays, sequences or random draws without sorting.

    ## What it does
    Flags a set expression (`set(...)`, a set literal or comprehension, `a | b`,
    `set.union(*sets)`, `d.keys() - e.keys()`) whose iteration order reaches something
    that keeps it: `enumerate`/`zip`, `"".join`, an array or tensor (`np.array`,
    `torch.tensor`, `tf.constant`, also through `list(...)`, `[*s]`, `map(f, s)` or a
    keyword such as `data=`), a `tf.data` dataset, a random choice, indexing
    (`list(set(x))[0]`), or a loop that appends, writes, yields, draws, or numbers the
    items (`ids[w] = len(ids)`, `ids.setdefault(w, len(ids))`, `next(counter)`).
    Also flagged: a loop that prints the elements, returns one (`return w`), keeps one and
    stops (`found = w; break`), or accumulates a float, string or list (`total += w / 7`,
    `total = total * 1.1 + len(w)`, `text += w`; an accumulator of unknown type counts
    when it starts as one, `total = 0.0`, or is printed); `next(iter(s))` and `s.pop()`
    (which element comes first, unless the function checks `len(s) == 1` or drains the
    set in `while s:`); `print(s)`, `print(list(s))`; and `list(s)`, `tuple(s)` or
    `[*s]` returned or written (`f.write`, `json.dump`).
    The set may also be held in a variable, an attribute (`self.words`), a copy
    (`itos = list(vocab_set)`) or a parameter or variable annotated as a set
    (`tags: set[str]`); then the binding is reported (a parameter: its first use).
    Sets of small ints (`set(range(n))`, `{1, 2}`, `set[int]`), text for people (error
    messages, logging, `", ".join(...)`) and a container's own `__iter__` are not
    reported, nor are loops whose effect is the same in any order: integer counts
    (`if w in other: n += 1`, `n += len(w)`), conditions alone (`if not w: return False`),
    filling a dict or deleting keys.

    ## Why is this bad
    A set's iteration order follows the hashes of its elements; for `str` and `bytes`
    those are salted per process (unless `PYTHONHASHSEED` is fixed), and for most
    objects they come from memory addresses, so the order, and any vocabulary, class
    ids, batches or random draws built from it, changes between runs.

    ## Example
    ```python
    vocab = {w: i for i, w in enumerate(set(words))}
    ```

    ## Fix
    Sort first: `enumerate(sorted(set(words)))`; or keep first-seen order with
    `dict.fromkeys(words)`.

    ## Automatic fix (safe for a set of strings written out, else unsafe)
    `fwd9m lint --fix` writes `sorted(s)` where the set `s` is iterated (`for x in s`,
    `list(s)`, `tuple(s)`, `enumerate(s)`, a comprehension). Safe when `s` is a literal
    of strings: their order came from the per-process string-hash seed, so the fix
    only picks one of the orders the program could already see. For any other set it is
    unsafe (`--unsafe-fixes`): `sorted` raises on items that do not compare.
    """

    autofix = "sorted_sets"
    code, name = "FWD402", "set-iteration-order"
    triggers = ()  # set literals and comprehensions have no name: always runs
    references = (HASH_DOC, "https://docs.python.org/3/using/cmdline.html#envvar-PYTHONHASHSEED")
    invalid = (
        "vocab = {w: i for i, w in enumerate(set(words))}\n",
        "ids = list(set(names))\nfirst = ids[0]\n",
        "out = []\nfor label in {'cat', 'dog'}:\n    out.append(label)\n",
        "import random\npick = random.choice(list(set(a) | set(b)))\n",
        "s = ''.join(set(chars))\n",
        "text = ' '.join(set(words))\n",
        # a set held in a variable, through list(...)
        "import numpy as np\nset_of_strings = set(words)\nx = np.array(list(set_of_strings))\n",
        "import torch\nt = torch.tensor(data=list(set(labels)))\n",
        "import tensorflow as tf\nc = tf.constant([*set(words)])\n",
        # vocabularies: a copy of the set, a loop numbering the items, an attribute
        "uniq = set(words)\nitos = list(uniq)\nstoi = {s: i for i, s in enumerate(itos)}\n",
        "vocab = {}\nfor w in set(words):\n    vocab[w] = len(vocab)\n",
        "class Vocab:\n    def __init__(self, words):\n        self.words = set(words)\n"
        "        self.ids = {w: i for i, w in enumerate(self.words)}\n",
        # a parameter annotated as a set of strings
        "import numpy as np\ndef encode(tags: set[str]):\n    return np.array(list(tags))\n",
        "import numpy as np\nx = np.array(list(a.keys() - b.keys()))\n",
        # the order reaches the output: float accumulation, first element, printing
        "words = {'alpha', 'beta', 'gamma'}\ntotal = 0.0\nfor w in words:\n    total = total * 1.1 + len(w) / 7\n",
        "words = {'alpha', 'beta'}\nprint('first word:', next(iter(words)))\n",
        "print(list({'a', 'b'}))\n",
        "s = set(names)\nfirst = s.pop()\n",
        "text = ''\nfor w in set(words):\n    text += w\n",
        "def f(items):\n    for w in set(items):\n        print(w)\n",
        "def f(items):\n    for w in set(items):\n        if w.startswith('a'):\n            return w\n",
        "found = None\nfor w in set(items):\n    if w.endswith('x'):\n        found = w\n        break\n",
        "def f(tags: set[str]):\n    return list(tags)\n",
        "import json\njson.dump([*set(words)], fp)\n",
        # an item's position in a list made from the set is its id
        "labels = list(set(names))\nids = [labels.index(n) for n in names]\n",
    )
    valid = (
        "vocab = {w: i for i, w in enumerate(sorted(set(words)))}\n",
        "n = len(set(names))\n",
        "out = []\nfor i in {1, 2, 3}:\n    out.append(i)\n",
        "ok = 'a' in set(names)\n",
        "names = list(set(names))\nassert 'a' in names\n",
        "for k in set(a) | set(b):\n    d.pop(k, None)\n",
        "keys = set(d)\nif 'x' not in keys:\n    raise KeyError(f\"known: {', '.join(keys)}\")\n",
        "import logging\nlogging.info('tags: %s', ','.join(set(tags)))\n",
        "names = [str(n) for n in set(nodes)]\nmsg = ', '.join(names)\n",
        "class Bag:\n    def __init__(self, items):\n        self.items = set(items)\n"
        "    def __iter__(self):\n        for x in self.items:\n            yield x\n",
        "import numpy as np\nset_of_strings = set(words)\nx = np.array(sorted(set_of_strings))\n",
        "uniq = set(words)\nitos = sorted(uniq)\nstoi = {s: i for i, s in enumerate(itos)}\n",
        "lengths = {}\nfor w in set(words):\n    lengths[w] = len(w)\n",
        "import numpy as np\ndef encode(ids: set[int]):\n    return np.array(list(ids))\n",
        "def known(tags: set[str]):\n    return 'a' in tags\n",
        "import numpy as np\nx = np.array(list({word}))\n",
        # effects that are the same in any order: int counts, conditions, int sets
        "count = 0\nfor w in {'a', 'b'}:\n    if w in other:\n        count += 1\n",
        "n = 0\nfor w in set(words):\n    n += len(w)\n",
        "def f(items):\n    for w in set(items):\n        if not w:\n            return False\n    return True\n",
        "for w in set(items):\n    if w in bad:\n        ok = False\n        break\n",
        "print(list({1, 2, 3}))\n",
        "def f(ids: set[int]):\n    return list(ids)\n",
        # ints added one by one (MaxText's process indices): ints hash to themselves
        "def hosts(shards):\n    used = set()\n    for p in shards:\n        used.add(p.process_index)\n"
        "    return list(used)\n",
        "def ids(rows):\n    return list(set(len(r) for r in rows))\n",
        "def f(items):\n    return set(items)\n",
        "s = set(names)\nprint(sorted(s), len(s))\n",
        "s = list(set(names))\ns.sort()\nprint(s.pop())\n",
        "total = 0.0\nfor w in set(words):\n    assert w, 'empty'\n",
        # the one element of a set checked to hold one; a set drained as a work list
        "devices = {p.device for p in params}\nif len(devices) > 1:\n"
        "    raise ValueError('mixed')\ndevice = next(iter(devices))\n",
        "todo = set(roots)\nseen = set()\nwhile todo:\n    n = todo.pop()\n    seen.add(n)\n",
    )

    def __init__(self, ctx):
        super().__init__(ctx)
        #: (node, name key or None, what, how, function or module) where an order reaches
        #: output: judged in finish
        self.outputs: list[tuple[ast.AST, str | None, str, str, ast.AST | None]] = []
        self.errors: list[tuple[int, int]] = []  # raise and assert statements

    def _error_span(self, node):
        self.errors.append((node.lineno, node.end_lineno or node.lineno))
        self._message_span(node)

    visit_Raise = visit_Assert = _error_span

    def source(self, node):
        return _set_expr(self.ctx, node)

    def _bind(self, key, node, what, as_list):
        # ``s = set()`` then only ``s.add(p.process_index)``: a set of ints, fixed order
        if type(node) is ast.Call and not node.args and self.ctx.qualname(node.func) in ("set", "frozenset"):
            scope_node = self.ctx.function_stack[-1] if self.ctx.function_stack else self.ctx.tree
            if _ints_added(scope_node, key):
                return
        super()._bind(key, node, what, as_list)

    def annotated(self, annotation):
        return _set_annotation(self.ctx, annotation) if annotation is not None else None

    def in_order(self, loop, scope_node):
        # ``+=`` counts only for floats, strings and lists: an int count is the same in any order
        return (
            sensitive_body(self.ctx, loop.body, augassign=False)
            or _first_wins_or_output(self.ctx, loop)
            or _ordered_accumulation(self.ctx, loop, scope_node)
        )

    def _set_like(self, node):
        """(what, name key or None, is a list copy) when ``node`` is a set expression or a
        name bound to one (or to a list made from one), else None."""
        what = self.source(node)
        if what:
            return what, None, False
        key = _name_key(node)
        held = self.holders.get((self.uses.scope(key), key)) if key else None
        return (held[1], key, held[2]) if held else None

    def _output(self, node, how, ordered_only: bool) -> None:
        """Note ``node`` when it hands a set's order on; with ``ordered_only``, only as a
        sequence (``list(s)``, ``tuple(s)``, ``[*s]``, a list copy), not the set itself."""
        inner = _unwrap_list(node)
        found = self._set_like(inner)
        if found and (not ordered_only or inner is not node or found[2]):
            fn = self.ctx.function_stack[-1] if self.ctx.function_stack else self.ctx.tree
            self.outputs.append((inner, found[1], found[0], how, fn))

    def visit_Call(self, node, qn):
        f = node.func
        if (
            qn == "next"
            and node.args
            and type(node.args[0]) is ast.Call
            and len(node.args[0].args) == 1
            and self.ctx.qualname(node.args[0].func) == "iter"
        ):
            self._output(node.args[0].args[0], "next(iter(...)) takes whichever element comes first in", False)
        elif type(f) is ast.Attribute and f.attr == "pop" and not node.args and not node.keywords:
            self._output(f.value, "pop() takes whichever element comes first in", False)
        elif qn == "print":
            for a in node.args:
                self._output(a, "print() shows the order of", False)
        elif (type(f) is ast.Attribute and f.attr in ("write", "writelines")) or qn in ("json.dump", "json.dumps"):
            for a in node.args[:1]:
                self._output(a, "writes the order of", f.attr != "writelines" if type(f) is ast.Attribute else True)
        super().visit_Call(node, qn)

    def visit_Return(self, node):
        if node.value is not None and not self.ctx.in_function("__iter__"):
            self._output(node.value, "returns the order of", True)

    def finish(self):
        super().finish()
        sorted_names = _sorted_names(self.ctx)
        for node, key, what, how, fn in self.outputs:
            if key in sorted_names or any(lo <= node.lineno <= hi for lo, hi in self.errors):
                continue
            if key is not None and how.startswith(("next", "pop")) and _one_or_worklist(fn, key, node):
                continue
            if id(node) not in self.reported:
                self.reported.add(id(node))
                self.report(node, self.message_for(what if key is None else f"{key!r}, bound to {what}", how))

    def message_for(self, what, how):
        return (
            f"{how} {what}: set order depends on hashing (salted per process for strings), "
            "so it changes between runs; sort it first (sorted(...))"
        )

    def visit_comprehension(self, node):
        pass  # a comprehension's order matters only where its result goes (consumers, stores)


_SEED_WORDS = ("seed", "random_state")


#: names of ints a seed is derived from; not ``*_id``, which is often a string id
#: (``hash(example_id) % shards`` is salted)
_HASHED_INT_NAME = re.compile(r"(^|_)(seeds?|index|idx|rank|step|epoch|count|iteration)$")


def _unsalted_hash(call: ast.Call) -> bool:
    """``hash()`` of ints, or of a tuple of ints: ints hash to themselves and a tuple's
    hash combines its items' hashes without a per-process salt, so the value is the same
    in every run (dreamerv3 seeds each environment with ``hash((config.seed, index))``).
    An int is an int literal, ``len``/``int``/``ord`` of anything, arithmetic on ints,
    or a name whose last word is a seed, index, rank, step, epoch or count (a naming
    heuristic)."""
    if len(call.args) != 1 or call.keywords:
        return False
    a = call.args[0]
    items = a.elts if type(a) is ast.Tuple else [a]
    return bool(items) and all(_fixed_hash(e) or _int_like(e, _HASHED_INT_NAME) for e in items)


def _checked_slot(call: ast.Call, function) -> bool:
    """``hash(x) % n`` picks a slot of a cache whose stored key is compared with ``x``
    before its value is used (``key, value = cache[slot]; if key == x: return value``):
    a different slot changes only which lookups hit, never a result (issue 29, seventh
    held-out round: tensor2tensor's and trax's subword encoders). The check: an ``==``
    or ``!=`` in the same function with ``x`` itself on one side."""
    if function is None or len(call.args) != 1:
        return False
    hashed = ast.dump(call.args[0])
    for n in ast.walk(function):
        if type(n) is ast.Compare and all(type(o) in (ast.Eq, ast.NotEq) for o in n.ops):
            if any(ast.dump(side) == hashed for side in [n.left, *n.comparators]):
                return True
    return False


@register
class HashForIds(Rule):
    """Uses the builtin `hash()` for ids, buckets or seeds.

    ## What it does
    Flags `hash(...)` whose result is reduced to a bucket or id (`hash(x) % n`,
    `hash(x) & mask`, `abs(hash(x))`, `int(hash(x))`) or passed as a seed, outside a
    `__hash__` method; not a cache slot `hash(x) % n` in a function that compares `x`
    with the stored key (`if key == x:`) before using the cached value.

    ## Why is this bad
    `hash()` of `str` and `bytes` is salted per process unless `PYTHONHASHSEED` is set
    before start-up, so the same token lands in a different bucket, gets a different id,
    or seeds a different stream in every run.

    ## Example
    ```python
    bucket = hash(token) % num_buckets
    ```

    ## Fix
    Use a stable digest: `int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "little") % n`,
    or `zlib.crc32(token.encode()) % n`; for seeds, `fwd9m.derive_seed(seed, token)`.
    """

    code, name = "FWD403", "hash-for-ids"
    triggers = ("hash",)
    references = (HASH_DOC, "https://docs.python.org/3/library/hashlib.html")
    invalid = (
        "bucket = hash(token) % 100\n",
        "i = abs(hash(name))\n",
        "import numpy as np\nrng = np.random.default_rng(hash('a'))\n",
    )
    valid = (
        "class K:\n    def __hash__(self):\n        return hash((self.a, self.b)) % 7\n",
        "key = hash(token)\n",
        "import zlib\nbucket = zlib.crc32(token.encode()) % 100\n",
    )

    def _is_hash(self, node) -> bool:
        return (
            type(node) is ast.Call
            and type(node.func) is ast.Name
            and node.func.id == "hash"
            and self.ctx.lookup("hash") == "hash"
            and not _unsalted_hash(node)
        )

    def _ok_scope(self) -> bool:
        return not self.ctx.in_function("__hash__")

    def visit_BinOp(self, node):
        if type(node.op) in (ast.Mod, ast.BitAnd) and self._is_hash(node.left) and self._ok_scope():
            stack = self.ctx.function_stack
            if _checked_slot(node.left, stack[-1] if stack else None):
                return
            self.report(
                node.left,
                "hash() changes between runs (salted per process for str/bytes, from the "
                "address for objects without their own __hash__); use hashlib or zlib.crc32 for stable buckets and ids",
            )

    def visit_Call(self, node, qn):
        if qn in ("abs", "int", "str") and node.args and self._is_hash(node.args[0]) and self._ok_scope():
            self.report(
                node.args[0],
                "hash() changes between runs (salted per process for str/bytes, from the "
                "address for objects without their own __hash__); use hashlib or zlib.crc32 for stable ids",
            )
            return
        for k in node.keywords:
            if k.arg in _SEED_WORDS and self._is_hash(k.value):
                self.report(k.value, "seed from hash() changes between runs; use fwd9m.derive_seed")
        if qn and (
            "seed" in qn.rsplit(".", 1)[-1]
            or qn
            in (
                "numpy.random.default_rng",
                "random.Random",
                "numpy.random.RandomState",
                "jax.random.PRNGKey",
                "jax.random.key",
            )
        ):
            if node.args and self._is_hash(node.args[0]):
                self.report(node.args[0], "seed from hash() changes between runs; use fwd9m.derive_seed")


@register
class OrderById(Rule):
    """Orders objects by `id()`.

    ## What it does
    Flags `sorted(..., key=id)`, `.sort(key=id)`, `min/max(key=id)` and keys that are
    lambdas returning `id(x)`.

    ## Why is this bad
    `id()` is a memory address; it differs between runs, so the order (of parameters,
    layers, files) differs too.

    ## Example
    ```python
    params = sorted(params, key=id)
    ```

    ## Fix
    Sort by a stable property such as a name or an index: `sorted(named, key=lambda p: p[0])`.
    """

    code, name = "FWD404", "order-by-id"
    triggers = ("id",)
    references = ("https://docs.python.org/3/library/functions.html#id",)
    invalid = ("x = sorted(params, key=id)\n", "params.sort(key=lambda p: id(p))\n")
    valid = ("x = sorted(params, key=len)\n",)

    def visit_Call(self, node, qn):
        if call_name(node) not in ("sorted", "sort", "min", "max", "nsmallest", "nlargest"):
            return
        for k in node.keywords:
            if k.arg != "key":
                continue
            v = k.value
            if type(v) is ast.Lambda:
                v = v.body
                if type(v) is ast.Call and type(v.func) is ast.Name and v.func.id == "id":
                    v = v.func
            if type(v) is ast.Name and v.id == "id" and self.ctx.lookup("id") == "id":
                self.report(k.value, "ordering by id() (a memory address) changes between runs; sort by a stable key")


#: calls that only drain an iterator when their result is thrown away
_DRAINS = frozenset({"list", "tuple", "set", "deque", "any", "all"})
#: calls that pass an iterable's items on in the same order (a progress bar, a counter)
_WRAPS = frozenset({"tqdm", "enumerate", "iter"})
#: methods through which a loop's item reaches shared state in arrival order (a list, a
#: running statistic, a single output file)
_ACCUMULATES = frozenset({"append", "extend", "insert", "appendleft", "partial_fit", "update", "write", "writelines"})


def _drained(v):
    """The iterable inside progress bars and ``enumerate``: ``tqdm(pool.imap_unordered(f,
    xs))`` -> the ``imap_unordered`` call."""
    while type(v) is ast.Call and v.args:
        f = v.func
        name = f.id if type(f) is ast.Name else f.attr if type(f) is ast.Attribute else ""
        if name not in _WRAPS:
            break
        v = v.args[0]
    return v


def _order_free(loop, bound: set[str]) -> bool:
    """A loop whose body lets its items reach nothing in arrival order: each result is
    written under its own key or file (``txn.put(key_of(i), img)``,
    ``save_features_to_file(features)``), counters add constants. Not when an item is
    appended, summed (``+=`` of a loop value), fed to ``partial_fit``/``update`` or
    written to one stream, nor yielded."""
    for st in loop.body + loop.orelse:
        for n in _walk(st):
            t = type(n)
            if t in (ast.Yield, ast.YieldFrom, ast.Return, ast.Break):
                return False
            if t is ast.AugAssign and any(type(u) is ast.Name and u.id in bound for u in _walk(n.value)):
                return False
            if (
                t is ast.Call
                and type(n.func) is ast.Attribute
                and n.func.attr in _ACCUMULATES
                and any(type(u) is ast.Name and u.id in bound for a in n.args for u in _walk(a))
            ):
                return False
    return True


@register
class CompletionOrder(Rule):
    """Collects parallel results in completion order.

    ## What it does
    Flags `concurrent.futures.as_completed(...)` and `Pool.imap_unordered(...)`; not an
    `imap_unordered` whose results nothing reads (`list(pool.imap_unordered(write,
    shards))` as a statement, or a loop that never uses its variable).

    ## Why is this bad
    Results arrive in the order tasks finish, which depends on timing; anything built
    from them in that order (a list of examples, a sum of floats, a vocabulary) differs
    between runs.

    ## Example
    ```python
    for fut in as_completed(futures):
        results.append(fut.result())
    ```

    ## Fix
    Keep submission order: `results = [f.result() for f in futures]`, `executor.map`,
    or `pool.imap`; or sort the results by a stable key afterwards.
    """

    code, name = "FWD405", "completion-order"
    triggers = ("as_completed", "imap_unordered")
    references = (
        "https://docs.python.org/3/library/concurrent.futures.html#concurrent.futures.as_completed",
        "https://docs.python.org/3/library/multiprocessing.html#multiprocessing.pool.Pool.imap_unordered",
    )
    invalid = (
        "from concurrent.futures import as_completed\nfor f in as_completed(fs):\n    out.append(f.result())\n",
        "r = list(pool.imap_unordered(work, items))\n",
    )
    valid = ("r = list(pool.imap(work, items))\n", "list(pool.imap_unordered(write_shard, enumerate(shards)))\n")

    def visit_Call(self, node, qn):
        if qn in ("concurrent.futures.as_completed", "asyncio.as_completed"):
            self.report(
                node,
                "as_completed yields results in completion order, which varies between "
                "runs; iterate the futures in submission order",
            )
        elif (
            type(node.func) is ast.Attribute
            and node.func.attr == "imap_unordered"
            and id(node) not in self._discarded()
        ):
            self.report(node, "imap_unordered yields results in completion order; use imap")

    def _discarded(self) -> set[int]:
        """``id`` of calls whose results nothing reads: a statement of their own (also
        drained by ``list(...)``), or a loop whose body never uses its variable. Each task
        then only does its own work (writes its own file), in whatever order."""
        cached = self.ctx.__dict__.get("_completion_discarded")
        if cached is not None:
            return cached
        out: set[int] = set()
        # ``results = pool.imap_unordered(...)`` then ``for r in results:``
        named = {
            a.targets[0].id: a.value
            for a in statements(self.ctx)
            if type(a) is ast.Assign and len(a.targets) == 1 and type(a.targets[0]) is ast.Name
        }
        for n in _walk(self.ctx.tree):
            if type(n) is ast.Expr:
                v = n.value
                while type(v) is ast.Call and type(v.func) is ast.Name and v.func.id in _DRAINS and len(v.args) == 1:
                    v = v.args[0]
                out.add(id(v))
            elif type(n) in (ast.For, ast.AsyncFor):
                bound = {t.id for t in _walk(n.target) if type(t) is ast.Name}
                used = {u.id for st in n.body + n.orelse for u in _walk(st) if type(u) is ast.Name}
                if not bound & used or _order_free(n, bound):
                    it = _drained(n.iter)
                    out.add(id(_drained(named.get(it.id, it)) if type(it) is ast.Name else it))
        self.ctx.__dict__["_completion_discarded"] = out
        return out
