"""FWD4xx: ordering and hashing."""

from __future__ import annotations

import ast

from .._helpers import call_name
from .._rule import Rule, register

HASH_DOC = "https://docs.python.org/3/reference/datamodel.html#object.__hash__"

_LISTINGS = frozenset({
    "os.listdir", "os.scandir", "os.walk", "glob.glob", "glob.iglob", "tensorflow.io.gfile.listdir",
    "tensorflow.io.gfile.glob", "tensorflow.io.gfile.walk", "tensorflow.gfile.ListDirectory",
    "tensorflow.gfile.Glob", "tensorflow.compat.v1.gfile.ListDirectory", "tensorflow.compat.v1.gfile.Glob",
})
_WALKS = frozenset({"os.walk", "tensorflow.io.gfile.walk"})
_LISTING_METHODS = frozenset({"iterdir", "glob", "rglob"})

#: calls whose result keeps the order of an iterable argument: ids, arrays, datasets, draws
ORDER_CONSUMERS = frozenset({
    "enumerate", "zip", "reversed", "dict.fromkeys", "itertools.cycle",
    "itertools.islice", "numpy.array", "numpy.asarray", "numpy.stack", "numpy.concatenate",
    "numpy.fromiter", "torch.tensor", "torch.as_tensor", "torch.stack", "torch.cat",
    "tensorflow.constant", "tensorflow.convert_to_tensor", "tensorflow.stack", "tensorflow.concat",
    "tensorflow.data.Dataset.from_tensor_slices", "tensorflow.data.Dataset.from_tensors",
    "tensorflow.data.TFRecordDataset", "tensorflow.data.TextLineDataset", "jax.numpy.array",
    "jax.numpy.asarray", "random.choice", "random.choices", "random.shuffle", "random.sample",
    "numpy.random.choice", "numpy.random.shuffle", "numpy.random.permutation",
})
#: methods of the same kind (``"".join(x)``, ``rng.choice(x)``, ``rng.shuffle(x)``)
ORDER_METHODS = frozenset({"join", "choice", "choices", "shuffle", "permutation", "sample",
                           "from_tensor_slices"})
#: a loop body that builds a sequence, accumulates, yields or draws depends on the order
_BODY_METHODS = frozenset({"append", "extend", "insert", "write", "writelines", "put", "appendleft"})


#: calls whose arguments are text for people: the order there changes no result
_MESSAGE_CALLS = frozenset({"print", "warnings.warn", "repr", "str", "format"})
_LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical", "log"})


def sensitive_body(ctx, stmts) -> bool:
    """True when a loop body's result depends on iteration order: it appends to a list,
    writes, yields, accumulates (``+=``) or draws random numbers."""
    from ._common import is_stateful_random

    for st in stmts:
        for n in ast.walk(st):
            t = type(n)
            if t in (ast.Yield, ast.YieldFrom):
                return True
            if t is ast.AugAssign and type(n.target) is not ast.Subscript:
                return True  # total += x accumulates in order; counts[x] += 1 does not
            if t is ast.Call:
                f = n.func
                if type(f) is ast.Attribute and f.attr in _BODY_METHODS:
                    return True
                if is_stateful_random(ctx.qualname(f)):
                    return True
    return False


class _OrderUses:
    """Where a name's order reaches something that keeps it (see ORDER_CONSUMERS):
    collected during the pass, judged in ``finish``."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.used: set[tuple[int, str]] = set()  # names passed to a consumer
        self.subscripted: set[tuple[int, str]] = set()
        self.loops: list[tuple[int, str, ast.AST]] = []  # for-loops over a name

    def scope(self) -> int:
        return id(self.ctx.function_stack[-1]) if self.ctx.function_stack else 0

    def consumer(self, node, qn) -> bool:
        f = node.func
        return qn in ORDER_CONSUMERS or (type(f) is ast.Attribute and f.attr in ORDER_METHODS and
                                        (qn is None or qn in ORDER_CONSUMERS))

    def note_call(self, node, qn):
        if self.consumer(node, qn):
            for a in node.args:
                if type(a) is ast.Name:
                    self.used.add((self.scope(), a.id))

    def note_subscript(self, node):
        if type(node.value) is ast.Name and type(node.ctx) is ast.Load:
            self.subscripted.add((self.scope(), node.value.id))

    def note_for(self, node):
        if type(node.iter) is ast.Name:
            self.loops.append((self.scope(), node.iter.id, node))

    def sensitive(self, scope: int, name: str, subscripts: bool = True) -> bool:
        if (scope, name) in self.used or (subscripts and (scope, name) in self.subscripted):
            return True
        return any(s == scope and n == name and sensitive_body(self.ctx, loop.body)
                   for s, n, loop in self.loops)


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


def _unwrap_list(node):
    """``x`` for ``list(x)``/``tuple(x)``, else ``node``; for a list comprehension or
    generator, its first iterable."""
    if type(node) is ast.Call and type(node.func) is ast.Name and node.func.id in ("list", "tuple") \
            and len(node.args) == 1:
        return node.args[0]
    if type(node) in (ast.ListComp, ast.GeneratorExp):
        return node.generators[0].iter
    return node


def _sorted_names(ctx) -> set[str]:
    names = set()
    for c in ctx.methods.get("sort", ()):
        if type(c.func.value) is ast.Name:
            names.add(c.func.value.id)
    for c in ctx.calls.get("sorted", ()):
        for a in c.args:
            if type(a) is ast.Name:
                names.add(a.id)
    return names


class _OrderRule(Rule):
    """Shared mechanics of FWD401/FWD402: a source of arbitrary order (``self.source``)
    is reported where its order reaches a sequence, id, accumulation or draw."""

    def source(self, node) -> str | None:  # pragma: no cover - abstract
        raise NotImplementedError

    def __init__(self, ctx):
        super().__init__(ctx)
        self.uses = _OrderUses(ctx)
        self.stored: list[tuple[int, str, ast.AST, str]] = []
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

    def visit_Assign(self, node):
        if len(node.targets) == 1 and type(node.targets[0]) is ast.Name:
            inner = _unwrap_list(node.value)
            what = self.source(inner)
            if what:
                # a stored set (not a list made from it) cannot be indexed: only its
                # consumers and order-sensitive loops count (see finish)
                as_list = inner is not node.value
                self.stored.append((self.uses.scope(), node.targets[0].id, inner, what, as_list))

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
        if what and sensitive_body(self.ctx, node.body):
            self.flag(_unwrap_list(node.iter), what, "loop over")

    visit_AsyncFor = visit_For

    def visit_Call(self, node, qn):
        if qn in _MESSAGE_CALLS or (qn and qn.startswith(("logging.", "warnings."))) or \
                (type(node.func) is ast.Attribute and node.func.attr in _LOG_METHODS):
            self._message_span(node)
            return
        if self._in_message(node):
            return
        self.uses.note_call(node, qn)
        if self.uses.consumer(node, qn):
            for a in node.args:
                inner = _unwrap_list(a)
                what = self.source(inner)
                if what:
                    self.flag(inner, what, f"{qn or node.func.attr}() over")

    def finish(self):
        sorted_names = _sorted_names(self.ctx)
        for scope, name, node, what, as_list in self.stored:
            if name not in sorted_names and self.uses.sensitive(scope, name, subscripts=as_list):
                self.flag(node, what, f"{name!r} (indexed, enumerated or looped over) from")


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
    references = ("https://docs.python.org/3/library/os.html#os.listdir",
                  "https://docs.python.org/3/library/glob.html#glob.glob")
    invalid = ("import os\nout = []\nfor f in os.listdir('d'):\n    out.append(f)\n",
               "import glob\nimport numpy as np\nfiles = glob.glob('*.png')\nx = np.array(files)\n",
               "from pathlib import Path\nclasses = {p.name: i for i, p in enumerate(Path('d').iterdir())}\n",
               "import os\nfor root, dirs, files in os.walk('d'):\n    for f in files:\n        yield f\n",
               "import glob\nfirst = glob.glob('*.png')[0]\n")
    valid = ("import os\nout = []\nfor f in sorted(os.listdir('d')):\n    out.append(f)\n",
             "import glob\nfiles = glob.glob('*.png')\nfiles.sort()\nfirst = files[0]\n",
             "import glob\nn = len(glob.glob('*.png'))\n",
             "import os\nfor root, dirs, files in os.walk('d'):\n    dirs.sort()\n"
             "    for f in sorted(files):\n        yield f\n",
             "import os\nfor f in os.listdir('d'):\n    os.remove(f)\n",
             "import os\nassert 'a' in os.listdir('d')\n")

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
            body_uses_files = any(type(n) is ast.For and type(n.iter) is ast.Name and n.iter.id == files
                                  and sensitive_body(self.ctx, n.body)
                                  for st in loop.body for n in ast.walk(st))
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


def _set_expr(ctx, node) -> str | None:
    """'set(...)' etc. when ``node`` evaluates to a set whose order may vary."""
    t = type(node)
    if t is ast.Call:
        qn = ctx.qualname(node.func)
        if qn in ("set", "frozenset"):
            if node.args and type(node.args[0]) is ast.Call and call_name(node.args[0]) == "range":
                return None  # small ints hash to themselves
            return f"{qn}(...)"
        if type(node.func) is ast.Attribute and node.func.attr in ("union", "intersection", "difference",
                                                                    "symmetric_difference") \
                and _set_expr(ctx, node.func.value):
            return "a set"
        return None
    if t is ast.SetComp:
        return "a set comprehension"
    if t is ast.Set:
        # one element, or only numbers/None/bools and tuples of them (hashes that do not
        # vary between runs): a fixed order
        if len(node.elts) <= 1 or all(_fixed_hash(e) for e in node.elts):
            return None
        return "a set literal"
    if t is ast.BinOp and type(node.op) in (ast.BitOr, ast.BitAnd, ast.Sub, ast.BitXor):
        return _set_expr(ctx, node.left) or _set_expr(ctx, node.right)
    return None


@register
class SetIterationOrder(_OrderRule):
    """Turns a set into ids, arrays, sequences or random draws without sorting.

    ## What it does
    Flags a set expression (`set(...)`, a set literal or comprehension, `a | b`) whose
    iteration order reaches something that keeps it: `enumerate`/`zip`, `"".join`, an
    array or tensor, a `tf.data` dataset, a random choice, indexing
    (`list(set(x))[0]`), a loop that appends, yields, accumulates or draws, or a
    `list(set(...))` stored in a variable that is later used that way. Sets of small
    ints (`set(range(n))`, `{1, 2}`) are not reported.

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
    """

    code, name = "FWD402", "set-iteration-order"
    triggers = ()  # set literals and comprehensions have no name: always runs
    references = (HASH_DOC, "https://docs.python.org/3/using/cmdline.html#envvar-PYTHONHASHSEED")
    invalid = ("vocab = {w: i for i, w in enumerate(set(words))}\n",
               "ids = list(set(names))\nfirst = ids[0]\n",
               "out = []\nfor label in {'cat', 'dog'}:\n    out.append(label)\n",
               "import random\npick = random.choice(list(set(a) | set(b)))\n",
               "s = ''.join(set(chars))\n")
    valid = ("vocab = {w: i for i, w in enumerate(sorted(set(words)))}\n",
             "n = len(set(names))\n",
             "out = []\nfor i in {1, 2, 3}:\n    out.append(i)\n",
             "ok = 'a' in set(names)\n",
             "names = list(set(names))\nassert 'a' in names\n",
             "for k in set(a) | set(b):\n    d.pop(k, None)\n",
             "keys = set(d)\nif 'x' not in keys:\n    raise KeyError(f\"known: {', '.join(keys)}\")\n",
             "import logging\nlogging.info('tags: %s', ','.join(set(tags)))\n")

    def source(self, node):
        return _set_expr(self.ctx, node)

    def message_for(self, what, how):
        return (f"{how} {what}: set order depends on hashing (salted per process for strings), "
                "so it changes between runs; sort it first (sorted(...))")

    def visit_comprehension(self, node):
        pass  # a comprehension's order matters only where its result goes (consumers, stores)
_SEED_WORDS = ("seed", "random_state")


@register
class HashForIds(Rule):
    """Uses the builtin `hash()` for ids, buckets or seeds.

    ## What it does
    Flags `hash(...)` whose result is reduced to a bucket or id (`hash(x) % n`,
    `hash(x) & mask`, `abs(hash(x))`, `int(hash(x))`) or passed as a seed, outside a
    `__hash__` method.

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
    invalid = ("bucket = hash(token) % 100\n", "i = abs(hash(name))\n",
               "import numpy as np\nrng = np.random.default_rng(hash('a'))\n")
    valid = ("class K:\n    def __hash__(self):\n        return hash((self.a, self.b)) % 7\n",
             "key = hash(token)\n", "import zlib\nbucket = zlib.crc32(token.encode()) % 100\n")

    def _is_hash(self, node) -> bool:
        return type(node) is ast.Call and type(node.func) is ast.Name and node.func.id == "hash" \
            and self.ctx.lookup("hash") == "hash"

    def _ok_scope(self) -> bool:
        return not self.ctx.in_function("__hash__")

    def visit_BinOp(self, node):
        if type(node.op) in (ast.Mod, ast.BitAnd) and self._is_hash(node.left) and self._ok_scope():
            self.report(node.left, "hash() changes between runs (salted per process for str/bytes, from the "
                        "address for objects without their own __hash__); use hashlib or zlib.crc32 for stable buckets and ids")

    def visit_Call(self, node, qn):
        if qn in ("abs", "int", "str") and node.args and self._is_hash(node.args[0]) and self._ok_scope():
            self.report(node.args[0], "hash() changes between runs (salted per process for str/bytes, from the "
                        "address for objects without their own __hash__); use hashlib or zlib.crc32 for stable ids")
            return
        for k in node.keywords:
            if k.arg in _SEED_WORDS and self._is_hash(k.value):
                self.report(k.value, "seed from hash() changes between runs; use fwd9m.derive_seed")
        if qn and ("seed" in qn.rsplit(".", 1)[-1] or qn in ("numpy.random.default_rng", "random.Random",
                                                              "numpy.random.RandomState", "jax.random.PRNGKey",
                                                              "jax.random.key")):
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
                self.report(k.value, "ordering by id() (a memory address) changes between runs; sort "
                            "by a stable key")


@register
class CompletionOrder(Rule):
    """Collects parallel results in completion order.

    ## What it does
    Flags `concurrent.futures.as_completed(...)` and `Pool.imap_unordered(...)`.

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
    references = ("https://docs.python.org/3/library/concurrent.futures.html#concurrent.futures.as_completed",
                  "https://docs.python.org/3/library/multiprocessing.html#multiprocessing.pool.Pool.imap_unordered")
    invalid = ("from concurrent.futures import as_completed\nfor f in as_completed(fs):\n    out.append(f.result())\n",
               "r = list(pool.imap_unordered(work, items))\n")
    valid = ("r = list(pool.imap(work, items))\n",)

    def visit_Call(self, node, qn):
        if qn in ("concurrent.futures.as_completed", "asyncio.as_completed"):
            self.report(node, "as_completed yields results in completion order, which varies between "
                        "runs; iterate the futures in submission order")
        elif type(node.func) is ast.Attribute and node.func.attr == "imap_unordered":
            self.report(node, "imap_unordered yields results in completion order; use imap")
