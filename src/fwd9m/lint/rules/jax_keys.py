"""FWD6xx: JAX PRNG keys.

Key tracking runs per function body (and the module body), statement by statement,
when the engine's pass reaches the ``def``: keys are names bound from
``jax.random.key/PRNGKey/split/fold_in`` or parameters passed to ``jax.random``
functions. A key is consumed when it is passed to a ``jax.random`` sampler or
``split``, or to any other call (a function that draws from it), except
``fold_in`` and inspection helpers. Branches of an ``if`` are exclusive; a key
consumed inside a loop (or comprehension) but bound outside it is consumed again on
every iteration.
"""

from __future__ import annotations

import ast

from .._flow import is_test_file, statements
from .._helpers import walk as _walk
from .._rule import Rule, register

JAX_PRNG = "https://docs.jax.dev/en/latest/random-numbers.html"
JAX_SHARP = "https://docs.jax.dev/en/latest/notebooks/Common_Gotchas_in_JAX.html#random-numbers"

_MAKERS = frozenset({"PRNGKey", "key", "split", "fold_in", "clone", "wrap_key_data"})
_SEED_TAKING = ("PRNGKey", "key", "wrap_key_data", "key_data", "key_impl", "default_prng_impl")
_NON_CONSUMING = (
    frozenset(
        {
            "fold_in",
            "key_data",
            "key_impl",
            "wrap_key_data",
            "clone",
            "PRNGKey",
            "key",
            "print",
            "len",
            "isinstance",
            "type",
            "repr",
            "str",
            "id",
            "hash",
            "debug",
            "info",
            "warning",
            "assert_equal",
            "device_put",
            "block_until_ready",
        }
    )
    | frozenset(
        {  # abstract evaluation, compilation and placement: they read no random bits
            "eval_shape",
            "fast_eval_shape",
            "make_jaxpr",
            "lower",
            "reshard",
            "device_put_replicated",
            "device_put_sharded",
            "replicate",
            "put_cpu",
            "process_allgather",
        }
    )
    | frozenset(
        # storing a key in a flax struct or dataclass (``state.replace(rng=rng)`` before a
        # checkpoint, score_sde's run_lib.py) reads no random bits
        {"replace"}
    )
)


def _constructor(name: str | None) -> bool:
    """``LoopState(...)``, ``TrainState(...)``: a CamelCase class call stores the key in
    a container; it is consumed where the container's field is used (not followed)."""
    return bool(name) and name[0].isupper() and not name.isupper() and "_" not in name


class _KeyAnalysis:
    """Shared by FWD601 and FWD602: finds every reuse once per function."""

    def __init__(self, ctx, fn):
        self.ctx = ctx
        self.fn = fn
        self.found: list[tuple[str, ast.AST, str]] = []  # (kind, node, message)
        self.params: set[str] = set()
        if type(fn) in (ast.FunctionDef, ast.AsyncFunctionDef):
            a = fn.args
            names = {p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)}
            self.params = names & self._passed_to_jax_random(fn)

    def _is_jax_random(self, call: ast.Call) -> str | None:
        qn = self.ctx.qualname(call.func)
        if qn and qn.startswith("jax.random."):
            return qn.rsplit(".", 1)[1]
        return None

    def _passed_to_jax_random(self, fn) -> set[str]:
        """Names passed as the key (first argument) of a jax.random sampler or split in
        ``fn`` (not a seed passed to ``key``/``PRNGKey``)."""
        return {
            n.args[0].id
            for n in _walk(fn)
            if type(n) is ast.Call
            and n.args
            and type(n.args[0]) is ast.Name
            and self._is_jax_random(n) not in (None, *_SEED_TAKING)
        }

    # -- one level into a callee defined in this file ---------------------------------------
    def _local_def(self, call):
        if type(call.func) is not ast.Name:
            return None
        defs = self.ctx.__dict__.get("_jax_local_defs")
        if defs is None:
            defs = {n.name: n for n in statements(self.ctx) if type(n) in (ast.FunctionDef, ast.AsyncFunctionDef)}
            self.ctx.__dict__["_jax_local_defs"] = defs
        return defs.get(call.func.id)

    def _callee_consumes(self, fn, index, keyword) -> bool:
        """Whether ``fn`` consumes the key it receives as positional ``index`` (or
        ``keyword``): it passes that parameter to a call other than ``fold_in`` and the
        non-consuming helpers. Unknown parameters (``*args``) count as consumed. Cached
        per file."""
        cache = self.ctx.__dict__.setdefault("_jax_consumes", {})
        key = (id(fn), index, keyword)
        if key not in cache:
            cache[key] = self._consumes(fn, index, keyword)
        return cache[key]

    def _consumes(self, fn, index, keyword) -> bool:
        params = [p.arg for p in (*fn.args.posonlyargs, *fn.args.args)]
        if keyword is not None:
            name = keyword if keyword in params or keyword in {p.arg for p in fn.args.kwonlyargs} else None
        else:  # index None: passed in **kwargs, which parameter it binds is unknown
            name = params[index] if index is not None and index < len(params) else None
        if name is None:
            return True
        # uses up to the first rebinding (rng = jax.random.fold_in(rng, step)) see the argument
        stores = [n.lineno for n in _walk(fn) if type(n) is ast.Name and n.id == name and type(n.ctx) is ast.Store]
        last = min(stores) if stores else float("inf")
        for n in _walk(fn):
            if type(n) is ast.Call and n.lineno <= last:
                fname = self._is_jax_random(n)
                callee = fname or (
                    n.func.attr if type(n.func) is ast.Attribute else n.func.id if type(n.func) is ast.Name else None
                )
                if callee in _NON_CONSUMING:
                    continue
                if any(type(a) is ast.Name and a.id == name for a in (*n.args, *(k.value for k in n.keywords))):
                    return True
        return False

    # -- expression scanning -------------------------------------------------------------
    def _uses(self, expr, keys, in_loop=False):
        """(name, node, how, looped) for each key consumed in ``expr``, in source order."""
        out = []
        stack = [(expr, in_loop, keys)]
        while stack:
            node, looped, keys = stack.pop()
            t = type(node)
            if t in (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
                continue
            if t is ast.Call:
                fname = self._is_jax_random(node)
                callee = fname or (
                    node.func.attr
                    if type(node.func) is ast.Attribute
                    else node.func.id
                    if type(node.func) is ast.Name
                    else None
                )
                if callee not in _NON_CONSUMING and not (fname is None and _constructor(callee)):
                    local = self._local_def(node) if fname is None else None
                    args = [(i, None, a) for i, a in enumerate(node.args)] + [
                        (None, k.arg, k.value) for k in node.keywords
                    ]
                    for i, kw, a in args:
                        leaves = [
                            leaf
                            for leaf in ([a] if type(a) is ast.Name else a.values if type(a) is ast.Dict else ())
                            if type(leaf) is ast.Name and leaf.id in keys
                        ]
                        if not leaves or (local is not None and not self._callee_consumes(local, i, kw)):
                            continue  # not a key, or one level into the callee: it only folds it in
                        out.extend((leaf.id, leaf, fname or callee or "a call", looped) for leaf in leaves)
            if t in (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp):
                bound = {n.id for g in node.generators for n in _walk(g.target) if type(n) is ast.Name}
                inner = keys - bound  # a comprehension target shadows an outer key
                for g in node.generators:
                    stack.append((g.iter, looped, keys))
                    stack.extend((c, True, inner) for c in g.ifs)
                for child in ast.iter_child_nodes(node):
                    if type(child) is not ast.comprehension:
                        stack.append((child, True, inner))
                continue
            for child in ast.iter_child_nodes(node):
                stack.append((child, looped, keys))
        out.sort(key=lambda u: (u[1].lineno, u[1].col_offset))
        return out

    def _consume(self, state, name, node, how, looped, loop_line=None):
        if looped:
            self.found.append(
                (
                    "reuse",
                    node,
                    f"key {name!r} is consumed by {how} on every iteration "
                    f"of a loop{f' (line {loop_line})' if loop_line else ''} without being "
                    "split or replaced; split a fresh key per iteration (or fold_in the step)",
                )
            )
            state[name] = ("used", node.lineno, how)
            return
        prev = state.get(name)
        if prev is not None and prev[0] == "used":
            kind = "split-after-use" if how == "split" and prev[2] != "split" else "reuse"
            if kind == "split-after-use":
                msg = (
                    f"key {name!r} is split on line {node.lineno} after it was used by {prev[2]} on "
                    f"line {prev[1]}: the new keys are correlated with that draw; split first and "
                    "use only the new keys"
                )
            else:
                msg = (
                    f"key {name!r} is used again by {how} after {prev[2]} on line {prev[1]}: both "
                    "get the same random bits; split it and use each key once"
                )
            self.found.append((kind, node, msg))
        state[name] = ("used", node.lineno, how)

    def _bind(self, state, targets, value):
        is_maker = (
            type(value) is ast.Call
            and self._is_jax_random(value) in _MAKERS
            or type(value) is ast.Subscript
            and type(value.value) is ast.Call
            and self._is_jax_random(value.value) in _MAKERS
        )
        for t in targets:
            for n in _walk(t):
                if type(n) is ast.Name:
                    if is_maker:
                        state[n.id] = ("fresh", n.lineno, "")
                    else:
                        state.pop(n.id, None)

    # -- statements ----------------------------------------------------------------------
    def run(self):
        state = {p: ("fresh", self.fn.lineno, "") for p in self.params}
        self._block(self.fn.body, state, None)
        return self.found

    def _stmt_exprs(self, s):
        t = type(s)
        if t in (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return):
            return [s.value] if s.value is not None else []
        if t in (ast.If, ast.While):
            return [s.test]
        if t in (ast.For, ast.AsyncFor):
            return [s.iter]
        if t in (ast.With, ast.AsyncWith):
            return [i.context_expr for i in s.items]
        return []

    def _block(self, stmts, state, loop):
        for s in stmts:
            t = type(s)
            if t in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
                state.pop(s.name, None)
                continue
            keys = set(state)
            if keys:
                for expr in self._stmt_exprs(s):
                    for name, node, how, looped in self._uses(expr, keys):
                        if loop is not None and name not in loop[1]:
                            self._consume(state, name, node, how, True, loop[0])
                        else:
                            self._consume(state, name, node, how, looped)
            if t is ast.Assign:
                self._bind(state, s.targets, s.value)
            elif t in (ast.AugAssign, ast.AnnAssign) and s.value is not None:
                self._bind(state, [s.target], s.value)
            elif t is ast.If:
                a, b = dict(state), dict(state)
                self._block(s.body, a, loop)
                self._block(s.orelse, b, loop)
                state.clear()
                for name in set(a) | set(b):
                    va, vb = a.get(name), b.get(name)
                    state[name] = va if va and va[0] == "used" else vb if vb else va
            elif t in (ast.For, ast.AsyncFor, ast.While):
                assigned = {
                    n.id for st in s.body for n in _walk(st) if type(n) is ast.Name and type(n.ctx) is ast.Store
                }
                if t is not ast.While:
                    assigned |= {n.id for n in _walk(s.target) if type(n) is ast.Name}
                    self._bind(state, [s.target], None)
                self._block(s.body, state, (s.lineno, assigned))
                self._block(s.orelse, state, loop)
            elif t in (ast.With, ast.AsyncWith):
                self._block(s.body, state, loop)
            elif t is ast.Try or t.__name__ == "TryStar":
                self._block(s.body, state, loop)
                for h in s.handlers:
                    self._block(h.body, dict(state), loop)
                self._block(s.orelse, state, loop)
                self._block(s.finalbody, state, loop)


class _JaxRule(Rule):
    kind = ""
    triggers = ("jax",)
    references = (JAX_PRNG, JAX_SHARP)

    def __init__(self, ctx):
        super().__init__(ctx)
        self.bodies: dict[int, ast.AST] = {}  # bodies that call jax.random directly

    def visit_Call(self, node, qn):
        if qn is not None and qn.startswith("jax.random."):
            stack = self.ctx.function_stack
            body = stack[-1] if stack else self.ctx.tree
            self.bodies.setdefault(id(body), body)

    def finish(self):
        # after the pass: every import is known (names resolve in the module scope)
        if not self.bodies or (self.kind == "split-after-use" and is_test_file(self.ctx)):
            return  # a test's key is checked or split for one assertion, not a run
        cache = self.ctx.__dict__.setdefault("_jax_key_analysis", {})
        for fn in self.bodies.values():
            if id(fn) not in cache:
                cache[id(fn)] = _KeyAnalysis(self.ctx, fn).run()
            for kind, node, msg in cache[id(fn)]:
                if kind == self.kind:
                    self.report(node, msg)


@register
class KeyReuse(_JaxRule):
    """Uses the same JAX PRNG key twice.

    ## What it does
    Flags a key passed to a second `jax.random` function (or to any function that draws
    from it) without being split in between, including a key bound outside a loop and
    consumed inside it on every iteration. Calls that read no random bits do not count:
    `jax.eval_shape`, `jit(f).lower`, placement (`device_put`, `reshard`), a class
    constructor that stores the key (`TrainState(params, key)`), and a function of the
    same file that only `fold_in`s the key (looked into one level).

    ## Why is this bad
    JAX random functions are pure: the same key gives the same bits. Two draws from one
    key are identical or correlated (the same dropout mask every step, the same noise
    for two layers), which is a silent modelling bug and makes results depend on how
    the code happens to reuse keys.

    ## Example
    ```python
    key = jax.random.key(0)
    params = init(key)
    for step in range(steps):
        params = train_step(params, key)
    ```

    ## Fix
    Split before each use: `key, sub = jax.random.split(key)` and pass `sub`; in a loop,
    `step_key = jax.random.fold_in(key, step)`.
    """

    code, name = "FWD601", "jax-key-reuse"
    kind = "reuse"
    invalid = (
        "import jax\nkey = jax.random.key(0)\na = jax.random.normal(key, (3,))\nb = jax.random.uniform(key, (3,))\n",
        "import jax\ndef f(steps):\n    key = jax.random.PRNGKey(0)\n    for _ in range(steps):\n"
        "        x = jax.random.normal(key, (3,))\n",
        "import jax\nkey = jax.random.key(0)\nxs = [jax.random.normal(key) for _ in range(3)]\n",
        # the callee draws from the key itself: two calls get the same bits
        "import jax\ndef noise(k):\n    return jax.random.normal(k, (3,))\n"
        "key = jax.random.key(0)\na = noise(key)\nb = noise(key)\n",
    )
    valid = (
        "import jax\nkey = jax.random.key(0)\nkey, sub = jax.random.split(key)\na = jax.random.normal(sub)\n"
        "key, sub = jax.random.split(key)\nb = jax.random.normal(sub)\n",
        "import jax\ndef f(key, steps):\n    for i in range(steps):\n        k = jax.random.fold_in(key, i)\n"
        "        x = jax.random.normal(k)\n",
        "import jax\ndef f(key, train):\n    if train:\n        return jax.random.normal(key)\n"
        "    else:\n        return jax.random.uniform(key)\n",
        "import jax\ndef f(key, n):\n    for _ in range(n):\n        key, sub = jax.random.split(key)\n"
        "        x = jax.random.normal(sub)\n",
        # eval_shape reads no random bits; the key is then used once
        "import jax\nkey = jax.random.key(0)\nshapes = jax.eval_shape(init, key)\nparams = init(key)\n",
        # a container stores the key, it draws nothing
        "import jax\nkey = jax.random.key(0)\nparams = init(key)\nstate = TrainState(params, key)\n",
        # the Flax idiom: the callee folds the step into the key
        "import jax\ndef train_step(state, rng):\n    rng = jax.random.fold_in(rng, state.step)\n"
        "    return jax.random.normal(rng)\n"
        "def main(steps):\n    rng = jax.random.key(0)\n    for _ in range(steps):\n"
        "        state = train_step(state, rng)\n",
    )


@register
class KeyUsedThenSplit(_JaxRule):
    """Splits a JAX PRNG key after already drawing from it.

    ## What it does
    Flags `jax.random.split(key)` when `key` was already passed to a sampler or another
    function that draws from it. Test files (`test_*.py`, `*_test.py`, `conftest.py`)
    are not checked.

    ## Why is this bad
    The keys produced by the split are derived from the same key as the earlier draw,
    so that draw and later ones are not independent; JAX's guidance is to never reuse
    a key, and to split it before using it.

    ## Example
    ```python
    x = jax.random.normal(key, (3,))
    key, sub = jax.random.split(key)
    ```

    ## Fix
    Split first: `key, sub = jax.random.split(key)`, then `jax.random.normal(sub, ...)`.
    """

    code, name = "FWD602", "jax-key-used-then-split"
    kind = "split-after-use"
    invalid = (
        "import jax\nkey = jax.random.key(0)\nx = jax.random.normal(key, (3,))\nkey, sub = jax.random.split(key)\n",
    )
    valid = (
        "import jax\nkey = jax.random.key(0)\nkey, sub = jax.random.split(key)\nx = jax.random.normal(sub, (3,))\n",
    )
