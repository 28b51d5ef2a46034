"""FWD4xx: ordering and hashing."""

from __future__ import annotations

import ast

from .._helpers import call_name, literal
from .._rule import Rule, register

HASH_DOC = "https://docs.python.org/3/reference/datamodel.html#object.__hash__"

_LISTINGS = frozenset({
    "os.listdir", "os.scandir", "os.walk", "glob.glob", "glob.iglob", "tensorflow.io.gfile.listdir",
    "tensorflow.io.gfile.glob", "tensorflow.io.gfile.walk", "tensorflow.gfile.ListDirectory",
    "tensorflow.gfile.Glob", "tensorflow.compat.v1.gfile.ListDirectory", "tensorflow.compat.v1.gfile.Glob",
})
_LISTING_METHODS = frozenset({"iterdir", "glob", "rglob"})
#: consumers that make the order irrelevant
_ORDER_FREE = frozenset({"sorted", "set", "frozenset", "len", "any", "all", "sum", "max", "min",
                         "bool", "collections.Counter", "heapq.nsmallest", "heapq.nlargest"})


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


@register
class UnsortedDirectoryListing(Rule):
    """Uses a directory listing or glob in the order the file system returns.

    ## What it does
    Flags `os.listdir`, `os.scandir`, `os.walk`, `glob.glob`, `glob.iglob`,
    `Path.iterdir`, `Path.glob`, `Path.rglob` and `tf.io.gfile.listdir/glob` whose
    result is iterated, indexed, turned into a list or stored, unless it is passed to
    `sorted()` (or to an order-free consumer such as `set()`, `len()`, `any()`) or the
    stored list is sorted later.

    ## Why is this bad
    These functions return entries in file-system order, which is arbitrary: it differs
    between machines, file systems and even copies of the same folder. File order
    becomes example order, class ids or shard assignment.

    ## Example
    ```python
    files = glob.glob("data/*.png")
    ```

    ## Fix
    `files = sorted(glob.glob("data/*.png"))`; for `os.walk`, sort `dirs` in place and
    iterate `sorted(files)`.
    """

    code, name = "FWD401", "unsorted-directory-listing"
    triggers = ("listdir", "scandir", "walk", "glob", "iterdir", "ListDirectory", "Glob")
    references = ("https://docs.python.org/3/library/os.html#os.listdir",
                  "https://docs.python.org/3/library/glob.html#glob.glob")
    invalid = ("import os\nfor f in os.listdir('d'):\n    print(f)\n",
               "import glob\nfiles = glob.glob('*.png')\n",
               "from pathlib import Path\nnames = [p.name for p in Path('d').iterdir()]\n",
               "import os\nfor root, dirs, files in os.walk('d'):\n    print(files)\n")
    valid = ("import os\nfor f in sorted(os.listdir('d')):\n    print(f)\n",
             "import glob\nfiles = glob.glob('*.png')\nfiles.sort()\n",
             "import glob\nn = len(glob.glob('*.png'))\n",
             "import os\nfor root, dirs, files in os.walk('d'):\n    dirs.sort()\n"
             "    for f in sorted(files):\n        print(f)\n",
             "import glob\nif glob.glob('*.png'):\n    pass\n")

    def __init__(self, ctx):
        super().__init__(ctx)
        self.exempt: set[int] = set()
        self.stored: list[tuple[str, ast.Call, str]] = []
        self.walks: list[tuple[ast.For, ast.Call]] = []

    def _exempt_args(self, node):
        for a in node.args:
            self.exempt.add(id(a))
            if type(a) is ast.Call and call_name(a) in ("list", "tuple") :
                for b in a.args:
                    self.exempt.add(id(b))
            elif type(a) in (ast.GeneratorExp, ast.ListComp):
                for g in a.generators:
                    self.exempt.add(id(g.iter))

    def visit_If(self, node):
        self.exempt.add(id(node.test))

    visit_While = visit_If

    def visit_Assign(self, node):
        v = node.value
        what = _listing(self.ctx, v)
        if what and len(node.targets) == 1 and type(node.targets[0]) is ast.Name:
            self.exempt.add(id(v))
            self.stored.append((node.targets[0].id, v, what))

    def visit_For(self, node):
        what = _listing(self.ctx, node.iter)
        if what in ("os.walk", "tensorflow.io.gfile.walk") and type(node.target) is ast.Tuple:
            self.exempt.add(id(node.iter))
            self.walks.append((node, node.iter))

    def visit_Call(self, node, qn):
        if qn in _ORDER_FREE or call_name(node) in ("sort", "sorted"):
            self._exempt_args(node)
            return
        what = _listing(self.ctx, node)
        if what and id(node) not in self.exempt:
            self.report(node, f"{what} returns entries in arbitrary file-system order; wrap it in "
                        "sorted(...)")

    def _sorted_names(self) -> set[str]:
        names = set()
        for c in self.ctx.methods.get("sort", ()):
            if type(c.func.value) is ast.Name:
                names.add(c.func.value.id)
        for c in self.ctx.calls.get("sorted", ()):
            for a in c.args:
                if type(a) is ast.Name:
                    names.add(a.id)
        return names

    def finish(self):
        sorted_names = self._sorted_names()
        for name, node, what in self.stored:
            if name not in sorted_names:
                self.report(node, f"{what} returns entries in arbitrary file-system order and "
                            f"{name!r} is never sorted; wrap it in sorted(...)")
        for loop, call in self.walks:
            elts = [e.id for e in loop.target.elts if type(e) is ast.Name]
            if len(elts) == 3 and not {elts[1], elts[2]} & sorted_names:
                self.report(call, "os.walk yields directories and files in file-system order; sort "
                            "them (dirs.sort(); for f in sorted(files))")


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
        if all(type(e) is ast.Constant and isinstance(e.value, int) for e in node.elts):
            return None
        return "a set literal"
    if t is ast.BinOp and type(node.op) in (ast.BitOr, ast.BitAnd, ast.Sub, ast.BitXor):
        return _set_expr(ctx, node.left) or _set_expr(ctx, node.right)
    return None


_ORDER_KEEPING = frozenset({"list", "tuple", "enumerate", "zip", "iter", "next", "reversed",
                            "numpy.array", "numpy.asarray", "numpy.fromiter", "torch.tensor",
                            "tensorflow.constant", "jax.numpy.array", "dict.fromkeys"})


@register
class SetIterationOrder(Rule):
    """Turns a set into an ordered sequence (list, ids, loop) without sorting.

    ## What it does
    Flags `list(set(...))`, `tuple(...)`, `enumerate(...)`, `zip(...)`, `"".join(...)`,
    `np.array(...)` of a set, and `for` loops and comprehensions that iterate directly
    over a set expression (`set(...)`, a set literal or comprehension, `a | b`).

    ## Why is this bad
    A set's iteration order follows the hashes of its elements; for `str` and `bytes`
    those are salted per process (unless `PYTHONHASHSEED` is fixed), so the order,
    and any vocabulary, class ids or random draws built from it, changes between runs.

    ## Example
    ```python
    vocab = {w: i for i, w in enumerate(set(words))}
    ```

    ## Fix
    Sort first: `enumerate(sorted(set(words)))`; or keep insertion order with
    `dict.fromkeys(words)`.
    """

    code, name = "FWD402", "set-iteration-order"
    triggers = ("set(", "{")
    references = (HASH_DOC, "https://docs.python.org/3/using/cmdline.html#envvar-PYTHONHASHSEED")
    invalid = ("vocab = {w: i for i, w in enumerate(set(words))}\n",
               "ids = list(set(names))\n",
               "for label in {'cat', 'dog'}:\n    print(label)\n",
               "x = [w for w in set(a) | set(b)]\n")
    valid = ("vocab = {w: i for i, w in enumerate(sorted(set(words)))}\n",
             "n = len(set(names))\n",
             "for i in {1, 2, 3}:\n    print(i)\n",
             "ok = 'a' in set(names)\n")

    def _check(self, node, how):
        what = _set_expr(self.ctx, node)
        if what:
            self.report(node, f"{how} {what}: set order depends on string hashing, which changes "
                        "between runs; sort it first (sorted(...))")

    def visit_Call(self, node, qn):
        name = qn or (node.func.attr if type(node.func) is ast.Attribute else None)
        if name in _ORDER_KEEPING or name == "join" or name == "fromkeys":
            for a in node.args:
                self._check(a, f"{name}() over")

    def visit_For(self, node):
        self._check(node.iter, "loop over")

    def visit_comprehension(self, node):
        self._check(node.iter, "comprehension over")


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
    triggers = ("hash(",)
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
            self.report(node.left, "hash() of str/bytes changes between runs (salted per process); "
                        "use hashlib or zlib.crc32 for stable buckets and ids")

    def visit_Call(self, node, qn):
        if qn in ("abs", "int", "str") and node.args and self._is_hash(node.args[0]) and self._ok_scope():
            self.report(node.args[0], "hash() of str/bytes changes between runs (salted per process); "
                        "use hashlib or zlib.crc32 for stable ids")
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
