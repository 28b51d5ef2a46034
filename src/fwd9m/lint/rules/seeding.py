"""FWD1xx: seeding."""

from __future__ import annotations

import ast

from .._flow import (
    _FOREIGN,
    ENTRY_POINTS,
    _parse,
    dotted,
    fallback_calls,
    importer_scripts,
    importer_seeds,
    is_test_file,
    local_function,
    local_model_training,
    local_session_subclasses,
    local_training,
    main_block,
    module_aliases,
    runs,
    statements,
)
from .._helpers import TRAINING_CALL, arg, call_name, kwarg, literal
from .._helpers import walk as _walk
from .._rule import Rule, register
from ._common import (
    _NP_NOT_DRAWS,
    _PY_NOT_DRAWS,
    ALL_SEED_CALLS,
    FRAMEWORK_SEED_CALLS,
    NUMPY_SEED_CALLS,
    PYTHON_SEED_CALLS,
    SEED_CALLS,
    SWITCH_ON_CALLS,
    TF_SEED_CALLS,
    TORCH_SEED_CALLS,
    is_stateful_random,
    seeds,
    uses_numpy_global_random,
    uses_python_random,
)

KERAS_SEED_DOC = "https://keras.io/api/utils/python_utils/#setrandomseed-function"
TORCH_REPRO = "https://docs.pytorch.org/docs/stable/notes/randomness.html"


@register
class SeedsOneLibrary(Rule):
    """Seeds one framework but not Python, NumPy or Keras, which the file also uses.

    ## What it does
    Flags `tf.random.set_seed(...)` or `torch.manual_seed(...)` in a file that also
    draws from Python's `random` or NumPy's global `np.random` generator (or, for
    TensorFlow, uses Keras 3) without seeding them.

    ## Why is this bad
    Each library keeps its own generator. `tf.random.set_seed` seeds TensorFlow only and
    `torch.manual_seed` seeds PyTorch only; Python's `random` and NumPy's global generator
    start from OS entropy in every process, and Keras 3 draws the default seeds of its
    initializers and layers from Python's `random`
    (`keras/src/random/seed_generator.py`, `make_default_seed`). Anything drawn from the
    unseeded ones changes from run to run.

    ## Example
    ```python
    import numpy as np, tensorflow as tf
    tf.random.set_seed(0)
    noise = np.random.normal(size=10)
    ```

    ## Fix
    Seed every generator at once: `keras.utils.set_random_seed(0)` (Python, NumPy and
    the backend) or `fwd9m.seed_everything(0)`; or add `random.seed(0)` and
    `np.random.seed(0)`.
    """

    code, name = "FWD101", "seeds-one-library"
    triggers = frozenset(q.rsplit(".", 1)[-1] for q in FRAMEWORK_SEED_CALLS)
    fix_code = "fwd9m.seed_everything(0)"
    references = (
        KERAS_SEED_DOC,
        TORCH_REPRO,
        "https://github.com/keras-team/keras/blob/master/keras/src/random/seed_generator.py",
    )
    invalid = (
        "import random, torch\ntorch.manual_seed(0)\nx = random.random()\n",
        "import numpy as np\nimport tensorflow as tf\ntf.random.set_seed(0)\nx = np.random.rand(3)\n",
        "import tensorflow as tf\nimport keras\ntf.random.set_seed(1)\nm = keras.layers.Dense(3)\n",
    )
    valid = (
        "import torch\ntorch.manual_seed(0)\nx = torch.rand(3)\n",
        "import random, torch\nimport numpy as np\nrandom.seed(0)\nnp.random.seed(0)\n"
        "torch.manual_seed(0)\nx = random.random() + np.random.rand()\n",
        "import keras, numpy as np\nkeras.utils.set_random_seed(0)\nx = np.random.rand(3)\n",
    )

    def finish(self):
        ctx = self.ctx
        framework_seeds = ctx.called(sorted(FRAMEWORK_SEED_CALLS))
        if not framework_seeds or seeds(ctx, ALL_SEED_CALLS):
            return
        missing = []
        py = uses_python_random(ctx)
        if py and not seeds(ctx, PYTHON_SEED_CALLS):
            missing.append(f"Python's random (used on line {py[0].lineno})")
        npy = uses_numpy_global_random(ctx)
        if npy and not seeds(ctx, NUMPY_SEED_CALLS):
            missing.append(f"NumPy's global generator (used on line {npy[0].lineno})")
        tf_only = all(ctx.qualname(c.func) in TF_SEED_CALLS for c in framework_seeds)
        if tf_only and ctx.imports_any("keras") and not seeds(ctx, PYTHON_SEED_CALLS):
            missing.append("Keras 3, which draws its default seeds from Python's random")
        if missing:
            first = framework_seeds[0]
            what = ctx.qualname(first.func)
            keras = ctx.imports_any("keras") or ctx.imports_any("tensorflow")
            at_once = (
                "keras.utils.set_random_seed(SEED) or fwd9m.seed_everything(SEED)"
                if keras
                else "fwd9m.seed_everything(SEED) (or add random.seed(SEED) and np.random.seed(SEED))"
            )
            self.report(
                first,
                f"{what} seeds one library only; not seeded: {'; '.join(missing)}. Seed all at once with {at_once}",
            )


#: calls that draw from a framework's global generator or create state that does
_TF_CONSUMER_PREFIXES = (
    "tensorflow.keras.layers.",
    "keras.layers.",
    "tensorflow.keras.initializers.",
    "keras.initializers.",
    "keras.random.",
    "tensorflow.data.Dataset.",
)
_TF_CONSUMERS = frozenset(
    {
        "tensorflow.keras.Sequential",
        "tensorflow.keras.Model",
        "keras.Sequential",
        "keras.Model",
        "tensorflow.Variable",
        "keras.models.Sequential",
        "tensorflow.keras.models.Sequential",
        "keras.applications",
    }
)
_TORCH_RANDOM = frozenset(
    {
        "torch.rand",
        "torch.randn",
        "torch.randint",
        "torch.randperm",
        "torch.normal",
        "torch.bernoulli",
        "torch.multinomial",
        "torch.rand_like",
        "torch.randn_like",
        "torch.randint_like",
        "torch.utils.data.random_split",
    }
)


def _consumer(qn: str | None, seed_qn: str) -> bool:
    if not qn:
        return False
    if seed_qn in TF_SEED_CALLS or seed_qn in ALL_SEED_CALLS:
        if qn in _TF_CONSUMERS or qn.startswith(_TF_CONSUMER_PREFIXES) and qn.rsplit(".", 1)[1][:1].isupper():
            return True
        if qn.startswith(("tensorflow.random.", "keras.random.")) and "seed" not in qn:
            return True
    if seed_qn in TORCH_SEED_CALLS:
        if qn in _TORCH_RANDOM:
            return True
        if qn.startswith("torch.nn.") and qn.count(".") == 2 and qn.rsplit(".", 1)[1][:1].isupper():
            return True
    if seed_qn in NUMPY_SEED_CALLS or seed_qn in ALL_SEED_CALLS:
        if (
            qn.startswith("numpy.random.")
            and qn.count(".") == 2
            and qn.rsplit(".", 1)[1]
            not in ("seed", "default_rng", "RandomState", "SeedSequence", "Generator", "get_state", "set_state")
        ):
            return True
    if seed_qn in PYTHON_SEED_CALLS or seed_qn in ALL_SEED_CALLS:
        if (
            qn.startswith("random.")
            and qn.count(".") == 1
            and qn not in ("random.seed", "random.Random", "random.getstate", "random.setstate", "random.SystemRandom")
        ):
            return True
    return False


@register
class SeedAfterUse(Rule):
    """Sets a seed after the model, layers, dataset or random draws that needed it.

    ## What it does
    Flags a global seed call (`tf.random.set_seed`, `keras.utils.set_random_seed`,
    `torch.manual_seed`, `np.random.seed`, `random.seed`) that comes after, in the same
    function or module body, a call that already drew from that generator: building
    layers or a model, creating a dataset, drawing random numbers, or calling a function
    of this file that does. Test files (`test_*.py`, `*_test.py`,
    `conftest.py`) are not checked, nor a call, as a statement of its own, to a
    self-check of this file that keeps nothing it drew (no return value, no store
    outside its own names): the seed after it resets the generator. Nor is a draw made
    inside a `print(...)`: only the printed value depends on it. A `np.random.seed()` or
    `random.seed()` **without a seed** is flagged wherever it is: it reseeds the
    generator from OS entropy, so every draw after it differs in every run.

    ## Why is this bad
    A seed only fixes what is drawn after it. Layers built before the seed got their
    initial weights (Keras 3: their default seeds, drawn from Python's `random`) from an
    unseeded generator, so they differ from run to run although the file "sets the seed".

    ## Example
    ```python
    model = build_model()
    keras.utils.set_random_seed(0)
    ```

    ## Fix
    Seed first, at the top of the program, before building anything:
    `keras.utils.set_random_seed(0)` then `model = build_model()`.
    """

    code, name = "FWD102", "seed-after-use"
    triggers = frozenset(q.rsplit(".", 1)[-1] for q in SEED_CALLS)
    references = (KERAS_SEED_DOC, TORCH_REPRO)
    invalid = (
        "import torch\nnet = torch.nn.Linear(3, 3)\ntorch.manual_seed(0)\n",
        "import keras\ndef build():\n    return keras.Sequential([keras.layers.Dense(3)])\n"
        "def main():\n    m = build()\n    keras.utils.set_random_seed(0)\n",
        "import numpy as np\nx = np.random.rand(3)\nnp.random.seed(0)\n",
        # reseeding from OS entropy in a function the training loop calls every epoch
        "import numpy as np\ndef show(epoch):\n    np.random.seed()\n    return np.random.choice(8, 4)\n",
    )
    valid = (
        # a draw that is only printed, then the seed (a teaching demo)
        "import numpy as np\nprint(np.random.rand(5))\nnp.random.seed(42)\nx = np.random.rand(5)\n",
        "import torch\ntorch.manual_seed(0)\nnet = torch.nn.Linear(3, 3)\n",
        "import keras\ndef build():\n    return keras.Sequential([keras.layers.Dense(3)])\n"
        "def main():\n    keras.utils.set_random_seed(0)\n    m = build()\n",
        "import torch\ndef f():\n    return torch.nn.Linear(3, 3)\ntorch.manual_seed(0)\n",
        "import random\nseed = random.randint(0, 100)\nrandom.seed(seed)\n",
        # draw a seed, print it, then seed with it (pytorch/examples dcgan)
        "import random, torch\nif opt.manualSeed is None:\n    opt.manualSeed = random.randint(1, 10000)\n"
        "print(opt.manualSeed)\nrandom.seed(opt.manualSeed)\ntorch.manual_seed(opt.manualSeed)\n",
        "import numpy as np\nnp.random.seed(1)\na = np.random.rand()\nnp.random.seed(1)\nb = np.random.rand()\n",
    )

    def __init__(self, ctx):
        super().__init__(ctx)
        self.seeds = []  # (scope, call, qn)
        self.calls = []  # (scope, call, qn) of resolved calls and local-function calls
        self.functions: dict[str, ast.AST] = {}
        self.assigns: list[tuple[int, int, set[str]]] = []  # value line span, target names

    def visit_Assign(self, node):
        names = {ast.unparse(t) for t in node.targets if type(t) in (ast.Name, ast.Attribute)}
        if names:  # a name or an attribute (opt.manualSeed = random.randint(...))
            self.assigns.append((node.value.lineno, node.value.end_lineno, names))

    def _feeds(self, call, seed) -> bool:
        """``s = random.randint(...); random.seed(s)`` (also ``opt.seed = ...``): the draw
        only makes the seed."""
        used = {
            ast.unparse(n)
            for a in (*seed.args, *(k.value for k in seed.keywords))
            for n in _walk(a)
            if type(n) in (ast.Name, ast.Attribute)
        }
        if not used:
            return False
        if any(call is n for a in seed.args for n in _walk(a)):
            return True
        return any(lo <= call.lineno <= hi and names & used for lo, hi, names in self.assigns)

    def visit_FunctionDef(self, node):
        if not self.ctx.function_stack:  # a module-level def (handlers run before its scope)
            self.functions.setdefault(node.name, node)

    def visit_Call(self, node, qn):
        scope = self.ctx.function_stack[-1] if self.ctx.function_stack else None
        if qn in SEED_CALLS:
            self.seeds.append((scope, node, qn))
        elif qn is not None or type(node.func) is ast.Name:
            self.calls.append((scope, node, qn))

    def _function_consumes(self, name: str, seed_qn: str):
        fn = self.functions.get(name)
        if fn is None:
            return None
        for scope, call, qn in self.calls:
            if scope is fn and _consumer(qn, seed_qn):
                return call
        return None

    def _discarded(self, call: ast.Call, fn) -> bool:
        """``check()`` as a statement of its own, no arguments, into a function of this
        file that keeps nothing of what it draws: no return value, no ``global``, no
        store into an attribute or item, no in-place method (``x.add_()``), no method
        call on a name it did not make, and only calls to library functions or to this
        file's functions that store nothing outside themselves either. Its draws end
        with it, and the seed after it resets the generator."""
        stmt_ids = self.ctx.__dict__.get("_seeding_stmt_calls")
        if stmt_ids is None:
            stmt_ids = self.ctx.__dict__["_seeding_stmt_calls"] = {
                id(n.value) for n in _walk(self.ctx.tree) if type(n) is ast.Expr and type(n.value) is ast.Call
            }
        if id(call) not in stmt_ids or call.args or call.keywords or fn.args.args or fn.args.vararg:
            return False
        if any(type(n) is ast.Return and n.value is not None for n in _walk(fn)):
            return False
        return _keeps_nothing(self.ctx, fn, self.functions, depth=0)

    def _printed(self) -> set[int]:
        """``id`` of the nodes inside the arguments of a ``print(...)`` call."""
        out = set()
        for c in self.ctx.calls.get("print", ()):
            for a in (*c.args, *(k.value for k in c.keywords)):
                out.update(id(n) for n in _walk(a))
        return out

    def finish(self):
        if is_test_file(self.ctx):
            return  # a test seeds for its own assertions; an earlier draw sets up shapes
        printed = self._printed()
        for scope, seed, seed_qn in self.seeds:
            if not seed.args and not seed.keywords and seed_qn in _ENTROPY_RESEEDS:
                self.report(
                    seed,
                    f"{seed_qn}() without a seed reseeds the generator from OS entropy: every draw "
                    "after it differs in every run; pass a fixed seed (or remove the call)",
                    fix=f"{ast.unparse(seed.func)}(0)",
                )
                continue
            for cscope, call, qn in self.calls:
                if cscope is not scope or call.lineno >= seed.lineno or self._feeds(call, seed):
                    continue
                if id(call) in printed:
                    continue  # only the printed value depends on this draw
                if any(
                    s_scope is scope and s_qn == seed_qn and s.lineno < call.lineno for s_scope, s, s_qn in self.seeds
                ):
                    continue  # drawn after an earlier seed: re-seeding, not seeding late
                hit = None
                if _consumer(qn, seed_qn):
                    hit = f"{qn} on line {call.lineno}"
                elif qn is None or qn not in SEED_CALLS:
                    name = call.func.id if type(call.func) is ast.Name else None
                    inner = self._function_consumes(name, seed_qn) if name else None
                    if inner is not None and self._discarded(call, self.functions[name]):
                        continue  # a self-check: what it drew is gone before the seed
                    if inner is not None:
                        hit = (
                            f"{name}() on line {call.lineno} (which calls "
                            f"{self.ctx.qualname(inner.func)} on line {inner.lineno})"
                        )
                if hit:
                    self.report(
                        seed,
                        f"{seed_qn} comes after {hit} already drew from the "
                        "unseeded generator; seed first, before building models, "
                        "layers or datasets",
                        fix=f"# move line {seed.lineno} ({seed_qn}) above line {call.lineno}",
                    )
                    break


#: seeding calls that, given no seed, reseed from OS entropy (``torch.manual_seed`` needs one)
_ENTROPY_RESEEDS = frozenset({"numpy.random.seed", "random.seed"})


def _keeps_nothing(ctx, fn, functions: dict, depth: int) -> bool:
    """Whether ``fn`` stores nothing outside its own local names (see
    :meth:`SeedAfterUse._discarded`); this file's functions it calls are checked the same
    way, two levels deep."""
    local = {n.id for n in _walk(fn) if type(n) is ast.Name and type(n.ctx) is ast.Store}
    local |= {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
    for n in _walk(fn):
        t = type(n)
        if t in (ast.Global, ast.Nonlocal, ast.Yield, ast.YieldFrom, ast.Delete):
            return False
        if t in (ast.Attribute, ast.Subscript) and type(n.ctx) is ast.Store:
            return False
        if t is not ast.Call:
            continue
        f = n.func
        name = f.attr if type(f) is ast.Attribute else f.id if type(f) is ast.Name else ""
        if name.endswith("_") and not name.endswith("__"):
            return False  # in place: x.add_(), torch.nn.init.normal_(w)
        if type(f) is ast.Name and f.id in functions:
            if depth >= 2 or not _keeps_nothing(ctx, functions[f.id], functions, depth + 1):
                return False
        elif type(f) is ast.Attribute and ctx.qualname(f) is None:
            root = f.value
            while type(root) in (ast.Attribute, ast.Subscript, ast.Call):
                root = root.func if type(root) is ast.Call else root.value
            if type(root) is not ast.Name or (root.id not in local and root.id not in functions):
                return False  # a method of something it did not make (a result of its own call is)
    return True


_UNSEEDED_WHEN_NO_ARG = {
    "numpy.random.default_rng": "seed",
    "numpy.random.RandomState": "seed",
    "numpy.random.SeedSequence": "entropy",
    "numpy.random.PCG64": "seed",
    "numpy.random.PCG64DXSM": "seed",
    "numpy.random.Philox": "seed",
    "numpy.random.MT19937": "seed",
    "numpy.random.SFC64": "seed",
    "random.Random": "x",
}
_ALWAYS_ENTROPY = {
    "random.SystemRandom": "random.SystemRandom draws from os.urandom and cannot be seeded",
    "secrets.SystemRandom": "secrets.SystemRandom draws from os.urandom and cannot be seeded",
    "tensorflow.random.Generator.from_non_deterministic_state": (
        "tf.random.Generator.from_non_deterministic_state() takes its seed from the OS"
    ),
    "tensorflow.random.experimental.Generator.from_non_deterministic_state": (
        "tf.random.experimental.Generator.from_non_deterministic_state() takes its seed from the OS"
    ),
    "torch.seed": "torch.seed() re-seeds PyTorch with a non-deterministic random number",
    "torch.random.seed": "torch.random.seed() re-seeds PyTorch with a non-deterministic random number",
    "torch.cuda.seed": "torch.cuda.seed() seeds the GPU generator with a non-deterministic number",
    "torch.cuda.seed_all": "torch.cuda.seed_all() seeds every GPU generator with a non-deterministic number",
}


#: PyTorch's default generators: ``.seed()`` on one re-seeds it from OS entropy (SlowFast's
#: reversible MViT calls ``torch.cuda.default_generators[i].seed()`` in every forward)
_DEFAULT_GENERATORS = frozenset(
    {"torch.default_generator", "torch.random.default_generator", "torch.cuda.default_generators"}
)


@register
class UnseededGenerator(Rule):
    """Creates a random generator without a seed.

    ## What it does
    Flags `np.random.default_rng()`, `np.random.RandomState()`, `random.Random()` and
    NumPy bit generators created without a seed, generators that always take OS entropy
    (`random.SystemRandom`, `tf.random.Generator.from_non_deterministic_state()`,
    `torch.seed()`, `Generator.seed()`, `torch.cuda.default_generators[i].seed()`), and,
    in a file that calls `torch.manual_seed`,
    a `torch.Generator()` that is never given `manual_seed`. A generator assigned to a
    name or attribute that is later seeded (`rng.seed(s)`, `g.manual_seed(s)`) or
    replaced by a seeded one (`self.rng = random.Random(seed + epoch)`) is fine, and so
    is a fallback for a caller that passes none (`rng = rng or np.random.default_rng()`,
    `if rng is None: rng = random.Random()`). Test files (`test_*.py`, `*_test.py`,
    `conftest.py`) are not checked.

    ## Why is this bad
    Without a seed, NumPy and Python take fresh OS entropy for each new generator, so
    every run draws different numbers; no global `np.random.seed` reaches them. A
    `torch.Generator()` instead starts from the fixed default seed 67280421310721
    (`c10/core/GeneratorImpl.h`): repeatable, but `torch.manual_seed` does not reach it,
    so changing the run's seed leaves that stream unchanged, and every unseeded generator
    repeats the same numbers.

    ## Example
    ```python
    rng = np.random.default_rng()
    ```

    ## Fix
    Pass a seed, derived from your run's seed: `np.random.default_rng(seed)`,
    `random.Random(seed)`, `torch.Generator().manual_seed(seed)`,
    `tf.random.Generator.from_seed(seed)`.

    ## Automatic fix (unsafe)
    `fwd9m lint --unsafe-fixes --fix` passes the file's own seed (the first integer given
    to a seeding call, else 0) to a constructor called with no argument. Unsafe: it turns
    a fresh stream per run into one fixed stream on purpose.
    """

    autofix = "seeded_generators"
    code, name = "FWD103", "unseeded-generator"
    triggers = frozenset(
        {
            "default_rng",
            "RandomState",
            "Random",
            "SeedSequence",
            "PCG64",
            "PCG64DXSM",
            "Philox",
            "MT19937",
            "SFC64",
            "from_non_deterministic_state",
            "Generator",
            "seed",
            "seed_all",
            "SystemRandom",
        }
    )
    fix_code = "rng = np.random.default_rng(seed)"
    references = (
        "https://numpy.org/doc/stable/reference/random/generator.html#numpy.random.default_rng",
        "https://docs.python.org/3/library/random.html#random.SystemRandom",
        "https://www.tensorflow.org/api_docs/python/tf/random/Generator",
        "https://docs.pytorch.org/docs/stable/generated/torch.seed.html",
        "https://github.com/pytorch/pytorch/blob/main/c10/core/GeneratorImpl.h",
    )
    invalid = (
        "import numpy as np\nrng = np.random.default_rng()\n",
        "from numpy.random import default_rng\nrng = default_rng(None)\n",
        "import random\nr = random.Random()\n",
        "import tensorflow as tf\ng = tf.random.Generator.from_non_deterministic_state()\n",
        "import torch\ntorch.manual_seed(0)\ng = torch.Generator()\nx = torch.rand(3, generator=g)\n",
        "import torch\ng = torch.Generator()\ng.seed()\n",
    )
    valid = (
        "import numpy as np\nrng = np.random.default_rng(0)\n",
        "import random\nr = random.Random(42)\n",
        "import torch\ng = torch.Generator()\ng.manual_seed(0)\n",
        "import torch\ng = torch.Generator().manual_seed(0)\n",
        "import torch\ng = torch.Generator()\nx = torch.rand(3, generator=g)\n",
        "import tensorflow as tf\ng = tf.random.Generator.from_seed(1)\n",
        "import random\nclass S:\n    def __init__(self):\n        self._rng = random.Random()\n"
        "    def set_seed(self, s):\n        self._rng.seed(s)\n",
        # replaced by a seeded generator before each epoch (timm's reader_wds.py)
        "import random\nclass R:\n    def __init__(self):\n        self.rng = random.Random()\n"
        "    def set_epoch(self, epoch):\n        self.rng = random.Random(self.seed + epoch)\n",
        # a fallback when the caller passes no generator (big_vision, bert's test helpers)
        "import numpy as np\ndef choice(values, rng=None):\n    rng = rng or np.random.default_rng()\n"
        "    return rng.choice(values)\n",
        "import random\ndef ids(n, rng=None):\n    if rng is None:\n        rng = random.Random()\n"
        "    return [rng.random() for _ in range(n)]\n",
    )

    def __init__(self, ctx):
        super().__init__(ctx)
        self.seeded_inline: set[int] = set()
        self.torch_generators: dict[str, ast.Call] = {}
        self.pending: list[tuple[str | None, ast.Call]] = []
        self.unseeded: list[tuple[ast.Call, str]] = []
        self.targets: dict[int, str] = {}  # id(call) -> name or attribute it is assigned to
        self.to_attribute: set[int] = set()  # id(call) of those assigned to an attribute
        self.entropy: list[tuple[ast.Call, str]] = []

    def visit_Assign(self, node):
        v = node.value
        if type(v) is not ast.Call:
            return
        for t in node.targets:
            name = t.id if type(t) is ast.Name else t.attr if type(t) is ast.Attribute else None
            if name:
                self.targets[id(v)] = name
                if type(t) is ast.Attribute:
                    self.to_attribute.add(id(v))
                if type(t) is ast.Name and self.ctx.qualname(v.func) == "torch.Generator":
                    self.torch_generators[t.id] = v

    def visit_Call(self, node, qn):
        f = node.func
        if type(f) is ast.Attribute and f.attr == "manual_seed" and type(f.value) is ast.Call:
            self.seeded_inline.add(id(f.value))
        if qn in _UNSEEDED_WHEN_NO_ARG:
            a = arg(node, 0, _UNSEEDED_WHEN_NO_ARG[qn])
            if (
                (a is None or literal(a, 0) is None)
                and not any(k.arg is None for k in node.keywords)
                and not any(type(x) is ast.Starred for x in node.args)
            ):
                self.unseeded.append((node, qn))
        elif qn in _ALWAYS_ENTROPY:
            self.entropy.append((node, qn))
        elif qn == "torch.Generator":
            self.pending.append((None, node))
        elif (
            type(f) is ast.Attribute
            and f.attr == "seed"
            and not node.args
            and not node.keywords
            and type(f.value) is ast.Name
            and f.value.id in self.torch_generators
        ):
            self.report(
                node,
                f"{f.value.id}.seed() re-seeds the torch.Generator with a "
                "non-deterministic number; use .manual_seed(seed)",
            )
        elif type(f) is ast.Attribute and f.attr == "seed" and not node.args and not node.keywords:
            recv = f.value.value if type(f.value) is ast.Subscript else f.value
            if self.ctx.qualname(recv) in _DEFAULT_GENERATORS:
                self.report(
                    node,
                    f"{ast.unparse(f.value)}.seed() re-seeds PyTorch's default generator with a "
                    "non-deterministic number; use .manual_seed(seed)",
                )

    def _reseeded(self) -> set[str]:
        """Names and attributes later given a seed: ``rng.seed(s)``, ``self._rng.seed(s)``."""
        out = set()
        for method in ("seed", "manual_seed", "setstate", "set_state"):
            for c in self.ctx.methods.get(method, ()):
                if not c.args and not c.keywords:
                    continue  # .seed() with no argument draws from the OS
                r = c.func.value
                name = r.id if type(r) is ast.Name else r.attr if type(r) is ast.Attribute else None
                if name:
                    out.add(name)
        # an object's generator replaced by a seeded one before use (timm's reader_wds:
        # self.rng = random.Random(self.worker_seed() + epoch) in set_epoch); not a local
        # name, which a seeded generator on another branch does not make seeded
        for qn in _SEEDED_CTORS:
            for c in self.ctx.calls.get(qn, ()):
                if id(c) in self.to_attribute and any(
                    literal(a, 0) is not None for a in (*c.args, *(k.value for k in c.keywords))
                ):
                    out.add(self.targets[id(c)])
        return out

    def finish(self):
        if is_test_file(self.ctx):
            return  # fixtures and test helpers: entropy there sets up one test
        for node, qn in self.entropy:
            self.report(node, _ALWAYS_ENTROPY[qn] + "; use a seeded generator instead")
        reseeded = self._reseeded()
        fallback = fallback_calls(self.ctx) if self.unseeded else set()
        for node, qn in self.unseeded:
            if self.targets.get(id(node)) in reseeded or id(node) in fallback:
                continue
            self.report(
                node, f"{qn}() without a seed takes fresh OS entropy every run; pass a seed derived from the run's seed"
            )
        if not seeds(self.ctx, TORCH_SEED_CALLS):
            return  # a generator on the fixed default seed is repeatable; it only surprises
            # code that seeds torch and expects the seed to reach every generator
        for _, node in self.pending:
            if id(node) in self.seeded_inline or self.targets.get(id(node)) in reseeded:
                continue
            self.report(
                node,
                "torch.Generator() is never given manual_seed: it starts from the "
                "fixed default seed, apart from torch.manual_seed, so every unseeded "
                "generator repeats one stream; use torch.Generator().manual_seed(seed)",
            )


_SEEDED_CTORS = frozenset(
    {"random.Random", "numpy.random.default_rng", "numpy.random.RandomState", "numpy.random.Generator"}
)
_ENTROPY = frozenset(
    {
        "time.time",
        "time.time_ns",
        "time.perf_counter",
        "time.perf_counter_ns",
        "time.monotonic",
        "time.monotonic_ns",
        "time.process_time",
        "time.process_time_ns",
        "datetime.datetime.now",
        "datetime.datetime.utcnow",
        "datetime.datetime.today",
        "datetime.date.today",
        "os.urandom",
        "os.getpid",
        "uuid.uuid1",
        "uuid.uuid4",
        "secrets.randbits",
        "secrets.token_bytes",
        "secrets.token_hex",
        "secrets.randbelow",
        "hash",
        "random.SystemRandom",
    }
)
_SEED_TAKERS = SEED_CALLS | {
    "numpy.random.default_rng",
    "numpy.random.RandomState",
    "numpy.random.SeedSequence",
    "random.Random",
    "jax.random.PRNGKey",
    "jax.random.key",
    "tensorflow.random.Generator.from_seed",
    "tensorflow.random.experimental.Generator.from_seed",
    "keras.random.SeedGenerator",
    "numpy.random.PCG64",
    "numpy.random.Philox",
    "numpy.random.MT19937",
}
_SEED_KWARGS = ("seed", "random_state", "random_seed")


@register
class SeedFromEntropy(Rule):
    """Derives a seed from the clock, OS entropy, a process id or `hash()`.

    ## What it does
    Flags seeds (passed to a seeding call, a generator constructor or a `seed=` /
    `random_state=` argument) computed from `time.time()`, `datetime.now()`,
    `os.urandom`, `os.getpid()`, `uuid.uuid4()`, `secrets` or the builtin
    `hash()`, directly or through a variable assigned in the same scope; not a fallback
    under `if key is None:` for a parameter that has no default (every call passes it).

    ## Why is this bad
    These values differ on every run (`hash()` of a `str` or `bytes` is salted per
    process unless `PYTHONHASHSEED` is set before the interpreter starts), so the
    "seeded" run is not repeatable, and the seed is usually not logged.

    ## Example
    ```python
    seed = int(time.time())
    np.random.seed(seed)
    ```

    ## Fix
    Use a fixed seed from your configuration, or derive one deterministically:
    `fwd9m.derive_seed(base_seed, "worker", rank)`. If you want a fresh seed per run,
    draw it once, print or save it, and pass it in.

    ## Automatic fix (unsafe)
    `fwd9m lint --unsafe-fixes --fix` replaces the clock, process id or OS-entropy part of
    the seed with the file's own seed (the first integer given to a seeding call, else
    0), and each `hash(x)` in a seed with `fwd9m.derive_seed(seed, x, bits=63)` (still
    one seed per `x`). Unsafe: every run then draws the same numbers, which changes
    results on purpose.
    """

    autofix = "clock_seeds"
    code, name = "FWD104", "seed-from-entropy"
    triggers = frozenset(q.rsplit(".", 1)[-1] for q in _ENTROPY)
    references = (
        "https://docs.python.org/3/reference/datamodel.html#object.__hash__",
        "https://docs.python.org/3/library/os.html#os.urandom",
    )
    invalid = (
        "import time, numpy as np\nnp.random.seed(int(time.time()))\n",
        "import time, torch\nseed = int(time.time())\ntorch.manual_seed(seed)\n",
        "import random\nrandom.seed(hash('run-1'))\n",
        "from sklearn.model_selection import train_test_split\nimport os\n"
        "a, b = train_test_split([1, 2], random_state=os.getpid())\n",
        # a module-level clock seed, reaching a stateless op's seed through a local
        "import time, tensorflow as tf\nCLOCK = int(time.time())\ndef aug(x, step):\n"
        "    seed = tf.stack([step, CLOCK])\n    return tf.image.stateless_random_flip_left_right(x, seed=seed)\n",
    )
    valid = (
        "import numpy as np\nnp.random.seed(1234)\n",
        "import time, torch\nstart = time.time()\ntorch.manual_seed(0)\n",
        "import time, numpy as np\nt0 = time.time()\nelapsed = time.time() - t0\nnp.random.seed(0)\n",
    )

    def __init__(self, ctx):
        super().__init__(ctx)
        self.tainted: dict[tuple[int, str], int] = {}  # (scope id, name) -> line
        self.assign: ast.Assign | None = None

    def _scope(self):
        return id(self.ctx.function_stack[-1]) if self.ctx.function_stack else 0

    def _entropy_in(self, node) -> str | None:
        for n in _walk(node):
            if type(n) is ast.Call:
                qn = self.ctx.qualname(n.func)
                if qn in _ENTROPY:
                    return f"{qn}()"
            elif type(n) is ast.Name:
                # a name of this scope, or a module-level one read in a function
                key = next((k for k in ((self._scope(), n.id), (0, n.id)) if k in self.tainted), None)
                if key is not None and not _other_branch(self.ctx.tree, self.tainted[key], n.lineno):
                    return f"{n.id} (set from entropy on line {self.tainted[key]})"
        return None

    def visit_Assign(self, node):
        # the pass visits the value right after this: an entropy call inside it taints
        # the targets (see visit_Call); a value computed from a tainted name taints them
        # too (seed = tf.stack([step, CLOCK_SEED])); a plain reassignment clears them
        self.assign = node
        # with nothing tainted yet only an entropy call in the value can taint, and
        # visit_Call does that: the value need not be walked
        derived = bool(self.tainted) and self._entropy_in(node.value)
        for t in node.targets:
            if type(t) is ast.Name:
                self.tainted.pop((self._scope(), t.id), None)
                if derived:
                    self.tainted[(self._scope(), t.id)] = node.lineno

    def visit_Call(self, node, qn):
        a = self.assign
        if qn in _ENTROPY and a is not None and a.value.lineno <= node.lineno <= a.value.end_lineno:
            for t in a.targets:
                if type(t) is ast.Name:
                    self.tainted[(self._scope(), t.id)] = a.lineno
        if qn in _SEED_TAKERS or (type(node.func) is ast.Attribute and node.func.attr == "manual_seed"):
            candidates = [*node.args[:1], *(k.value for k in node.keywords if k.arg in _SEED_KWARGS)]
        else:
            candidates = [k.value for k in node.keywords if k.arg in _SEED_KWARGS]
        for value in candidates:
            src = self._entropy_in(value)
            if src and not _fallback_for_required(self.ctx.function_stack, node.lineno):
                where = qn or call_name(node) or "the call"
                self.report(
                    value,
                    f"seed for {where} comes from {src}, which differs on every "
                    "run; use a fixed seed or fwd9m.derive_seed(seed, ...)",
                )
                return


def _required_params(fn) -> set[str]:
    """The parameters of ``fn`` a call must pass: positional ones before the first
    default, keyword-only ones without a default."""
    a = fn.args
    positional = a.posonlyargs + a.args
    required = {p.arg for p in positional[: len(positional) - len(a.defaults)]}
    required.update(p.arg for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is None)
    return required


def _fallback_for_required(stack, line: int) -> bool:
    """``line`` lies in the body of ``if NAME is None:`` where NAME is a parameter of
    the enclosing function that has no default: every call passes a value, so the branch
    runs only when a caller passes None on purpose (issue 29, seventh held-out round:
    dopamine's ``ImpalaMoE.__call__(self, x, *, key)`` falls back to a clock key ``if key
    is None``; every caller passes a key)."""
    if not stack or type(stack[-1]) not in (ast.FunctionDef, ast.AsyncFunctionDef):
        return False
    fn = stack[-1]
    required = _required_params(fn)
    if not required:
        return False
    for n in _walk(fn):
        if (
            type(n) is ast.If
            and n.body
            and n.body[0].lineno <= line <= n.body[-1].end_lineno
            and type(n.test) is ast.Compare
            and type(n.test.left) is ast.Name
            and n.test.left.id in required
            and len(n.test.ops) == 1
            and type(n.test.ops[0]) is ast.Is
            and literal(n.test.comparators[0], True) is None
        ):
            return True
    return False


def _other_branch(tree, set_line: int, use_line: int) -> bool:
    """The line that set a name and the line that reads it lie in different branches of
    one ``if`` (the body and the ``else``) that no loop encloses: the value set in one
    branch never reaches the other (t5x's ``train.py`` draws a seed from the clock only
    in the ``if random_seed is None`` branch and uses the given seed in the ``else``)."""

    def inside(stmts, line):
        return bool(stmts) and stmts[0].lineno <= line <= stmts[-1].end_lineno

    todo = [tree] if tree is not None else []
    while todo:
        node = todo.pop()
        for child in ast.iter_child_nodes(node):
            if type(child) in (ast.For, ast.AsyncFor, ast.While):
                continue  # a later iteration can reach the other branch
            if type(child) is ast.If and (
                (inside(child.body, set_line) and inside(child.orelse, use_line))
                or (inside(child.orelse, set_line) and inside(child.body, use_line))
            ):
                return True
            if (
                isinstance(child, ast.stmt)
                and child.lineno <= min(set_line, use_line)
                and (child.end_lineno >= max(set_line, use_line))
            ):
                todo.append(child)
    return False


_INITIALIZER_ROOTS = (
    "keras.initializers.",
    "tensorflow.keras.initializers.",
    "tf_keras.initializers.",
    "tensorflow.initializers.",
    "keras.src.initializers.",
)


@register
class SharedInitializer(Rule):
    """Passes one initializer instance to several layers.

    ## What it does
    Flags a Keras initializer object (`keras.initializers.GlorotUniform(...)`, ...)
    assigned to a variable and then passed as `*_initializer=` to two or more layers or
    `add_weight` calls in the same scope.

    ## Why is this bad
    A Keras 3 initializer seeded with an integer or left unseeded "will produce the same
    random values across multiple calls" (its docstring): every layer sharing the
    instance gets identical initial weights (for equal shapes), which silently changes
    the model, and adding or reordering a layer changes which values each layer gets.

    ## Example
    ```python
    init = keras.initializers.GlorotUniform(seed=1)
    a = keras.layers.Dense(8, kernel_initializer=init)
    b = keras.layers.Dense(8, kernel_initializer=init)
    ```

    ## Fix
    Create one initializer per layer, each with its own seed (or pass
    `keras.random.SeedGenerator(seed)` as the seed), e.g.
    `kernel_initializer=keras.initializers.GlorotUniform(seed=seed + i)`.
    """

    code, name = "FWD105", "shared-initializer"
    triggers = ("initializers",)
    references = (
        "https://github.com/keras-team/keras/blob/master/keras/src/initializers/random_initializers.py",
        "https://keras.io/api/layers/initializers/",
    )
    invalid = (
        "import keras\ninit = keras.initializers.GlorotUniform(seed=1)\n"
        "a = keras.layers.Dense(8, kernel_initializer=init)\n"
        "b = keras.layers.Dense(8, kernel_initializer=init)\n",
    )
    valid = (
        "import keras\na = keras.layers.Dense(8, kernel_initializer=keras.initializers.GlorotUniform(1))\n"
        "b = keras.layers.Dense(8, kernel_initializer=keras.initializers.GlorotUniform(2))\n",
        "import keras\ninit = keras.initializers.Zeros()\n"
        "a = keras.layers.Dense(8, bias_initializer=init)\nb = keras.layers.Dense(8, bias_initializer=init)\n",
    )
    _CONSTANT = frozenset({"Zeros", "Ones", "Constant", "Identity", "zeros", "ones", "constant"})

    def __init__(self, ctx):
        super().__init__(ctx)
        self.instances: dict[tuple[int, str], int] = {}
        self.uses: dict[tuple[int, str], int] = {}

    def _scope(self):
        return id(self.ctx.function_stack[-1]) if self.ctx.function_stack else 0

    def visit_Assign(self, node):
        v = node.value
        if type(v) is not ast.Call:
            return
        qn = self.ctx.qualname(v.func)
        if qn and qn.startswith(_INITIALIZER_ROOTS) and qn.rsplit(".", 1)[1] not in self._CONSTANT:
            for t in node.targets:
                if type(t) is ast.Name:
                    self.instances[(self._scope(), t.id)] = node.lineno

    def visit_Call(self, node, qn):
        for k in node.keywords:
            if (
                k.arg
                and (k.arg.endswith("_initializer") or (k.arg == "initializer" and call_name(node) == "add_weight"))
                and type(k.value) is ast.Name
            ):
                key = (self._scope(), k.value.id)
                if key in self.instances:
                    self.uses[key] = self.uses.get(key, 0) + 1
                    if self.uses[key] == 2:
                        self.report(
                            k.value,
                            f"initializer {k.value.id!r} (line {self.instances[key]}) "
                            "is shared by several layers, which then get the same initial "
                            "values; create one initializer per layer with its own seed",
                        )


_RANDOM_LAYERS = frozenset(
    {
        "Dropout",
        "SpatialDropout1D",
        "SpatialDropout2D",
        "SpatialDropout3D",
        "GaussianNoise",
        "GaussianDropout",
        "AlphaDropout",
        "RandomFlip",
        "RandomRotation",
        "RandomZoom",
        "RandomCrop",
        "RandomTranslation",
        "RandomContrast",
        "RandomBrightness",
        "RandomHeight",
        "RandomWidth",
        "RandomErasing",
        "RandomGrayscale",
        "RandomHue",
        "RandomSaturation",
        "RandomSharpness",
        "RandomShear",
        "RandomColorJitter",
        "RandomColorDegeneration",
        "RandomPosterization",
        "RandomPerspective",
        "RandomGaussianBlur",
        "RandomInvert",
        "RandomElasticTransform",
    }
)
_KERAS_ROOTS = ("keras.", "tensorflow.keras.", "tf_keras.")


@register
class RandomLayerWithoutSeed(Rule):
    """A Keras dropout, noise or augmentation layer without `seed=` in a file that
    otherwise relies on op-level seeds.

    ## What it does
    Flags `keras.layers.Dropout(...)`, `GaussianNoise`, `RandomFlip`, `RandomRotation`
    and the other random layers created without `seed=` when the same function (or the
    module level) passes `seed=` to other calls, so it relies on per-op seeds rather
    than one global seed.

    ## Why is this bad
    A layer without a seed draws its seed from the global state at construction time
    (Keras 3: Python's `random` via `make_default_seed`), so it is only reproducible if
    the global seed is set before it and nothing else changes the order of draws. A file
    that seeds each op (and sets no global seed) but forgets one layer is not
    reproducible. Files that set a global seed are not flagged.

    ## Example
    ```python
    dense = keras.layers.Dense(8, kernel_initializer=keras.initializers.GlorotUniform(seed=1))
    drop = keras.layers.Dropout(0.5)
    ```

    ## Fix
    Give every random layer its own seed: `keras.layers.Dropout(0.5, seed=2)`.
    """

    code, name = "FWD106", "random-layer-without-seed"
    triggers = _RANDOM_LAYERS
    references = (
        "https://keras.io/api/layers/regularization_layers/dropout/",
        "https://github.com/keras-team/keras/blob/master/keras/src/random/seed_generator.py",
    )
    invalid = (
        "import keras\nd = keras.layers.Dense(8, kernel_initializer=keras.initializers.GlorotUniform(seed=1))\n"
        "drop = keras.layers.Dropout(0.5)\n",
    )
    valid = (
        "import keras\nd = keras.layers.Dense(8, kernel_initializer=keras.initializers.GlorotUniform(seed=1))\n"
        "drop = keras.layers.Dropout(0.5, seed=2)\n",
        "import keras\nkeras.utils.set_random_seed(0)\ndrop = keras.layers.Dropout(0.5)\n",
        "import keras\nkeras.utils.set_random_seed(0)\nd = keras.layers.Dense(8, kernel_initializer="
        "keras.initializers.GlorotUniform(seed=1))\ndrop = keras.layers.Dropout(0.5)\n",
    )

    def __init__(self, ctx):
        super().__init__(ctx)
        self.candidates = []
        self.op_seeds: set = set()  # scopes (function or None for module) that seed ops

    def visit_Call(self, node, qn):
        seed = None
        for k in node.keywords:
            if k.arg == "seed":
                seed = k.value
        scope = self.ctx.function_stack[-1] if self.ctx.function_stack else None
        if qn and qn.startswith(_KERAS_ROOTS) and qn.rsplit(".", 1)[1] in _RANDOM_LAYERS:
            if seed is None:
                self.candidates.append((node, qn, scope))
        elif seed is not None and literal(seed, 0) is not None:
            self.op_seeds.add(scope)

    def finish(self):
        if not self.op_seeds or seeds(self.ctx, TF_SEED_CALLS):
            return  # no op-level seeds, or a global seed covers the layers
        for node, qn, scope in self.candidates:
            if scope not in self.op_seeds and None not in self.op_seeds:
                continue  # op seeds elsewhere (another function) say nothing about this one
            self.report(
                node,
                f"{qn} has no seed= although this file seeds other ops; its seed "
                "comes from the global state at construction time. Pass seed=",
            )


#: calls that create a reinforcement-learning environment with its own generator
_ENV_MAKERS = frozenset(
    {
        "gym.make",
        "gymnasium.make",
        "gym.vector.make",
        "gymnasium.make_vec",
        "procgen.ProcgenEnv",
        "envpool.make",
        "envpool.make_gym",
        "envpool.make_gymnasium",
    }
)
#: keywords that seed an environment where it is made
_ENV_SEED_KWARGS = frozenset({"seed", "rand_seed", "seeds"})


@register
class UnseededEnvironment(Rule):
    """Trains on a reinforcement-learning environment that is never seeded.

    ## What it does
    Flags the creation of a Gym/Gymnasium environment (`gym.make(...)`,
    `gymnasium.make(...)`, `procgen.ProcgenEnv(...)`, `envpool.make(...)`, or `env_fn()`,
    a factory handed in; not inside a `lambda`, a factory that is made where it is
    called) in a file that imports Gym or Gymnasium, when nothing in the file
    seeds an environment: no `env.seed(s)`, `env.reset(seed=s)`,
    `env.action_space.seed(s)`, and no `seed=`/`rand_seed=` where it is made.

    ## Why is this bad
    An environment has its own generator. Unseeded, Gym seeds it from OS entropy on the
    first `reset()` (older Gym at creation), and procgen draws its level seed from
    `SystemRandom`: initial states, transitions and sampled actions differ in every run,
    whatever `torch.manual_seed` / `np.random.seed` / `tf.set_random_seed` say.

    ## Example
    ```python
    env = gym.make("CartPole-v1")
    obs, _ = env.reset()
    ```

    ## Fix
    Seed the environment once with the run's seed: `obs, _ = env.reset(seed=seed)` and
    `env.action_space.seed(seed)` (old Gym: `env.seed(seed)`); procgen:
    `ProcgenEnv(..., rand_seed=seed)`.
    """

    code, name = "FWD110", "unseeded-environment"
    triggers = frozenset({"gym", "gymnasium", "procgen", "envpool"})
    references = ("https://gymnasium.farama.org/api/env/#gymnasium.Env.reset",)
    invalid = (
        "import gym, torch\ntorch.manual_seed(0)\nenv = gym.make('CartPole-v1')\nobs = env.reset()\n",
        # a factory handed in (spinningup's ppo(env_fn, ...))
        "import gym\nimport tensorflow as tf\ndef ppo(env_fn, seed=0):\n    tf.set_random_seed(seed)\n"
        "    env = env_fn()\n    o = env.reset()\nppo(lambda: gym.make('Hopper-v2'))\n",
    )
    valid = (
        "import gymnasium as gym\nenv = gym.make('CartPole-v1')\nobs, _ = env.reset(seed=0)\n",
        "import gym\nenv = gym.make('CartPole-v1')\nenv.seed(0)\nenv.action_space.seed(0)\n",
        "import gym\nfrom procgen import ProcgenEnv\nenvs = ProcgenEnv(num_envs=4, env_name='coinrun', rand_seed=1)\n",
    )

    def __init__(self, ctx):
        super().__init__(ctx)
        self.made: list[ast.Call] = []
        self.seeded = False

    def visit_Call(self, node, qn):
        func = node.func
        if qn in _ENV_MAKERS or (qn is None and type(func) is ast.Name and func.id.endswith("env_fn")):
            if any(k.arg in _ENV_SEED_KWARGS for k in node.keywords):
                self.seeded = True
            else:
                self.made.append(node)
        elif type(func) is ast.Attribute and func.attr == "seed" and "env" in ast.unparse(func.value).lower():
            self.seeded = True
        elif type(func) is ast.Attribute and func.attr == "reset" and any(k.arg == "seed" for k in node.keywords):
            self.seeded = True

    def finish(self):
        if self.seeded or not self.made or not self.ctx.imports_any("gym", "gymnasium"):
            return
        if is_test_file(self.ctx):
            return
        factories = {id(n) for lam in _walk(self.ctx.tree) if type(lam) is ast.Lambda for n in _walk(lam)}
        made = [c for c in self.made if id(c) not in factories]  # lambda: gym.make(...) is made where called
        if not made:
            return
        first = min(made, key=lambda c: (c.lineno, c.col_offset))
        self.report(
            first,
            "this environment is never seeded: its generator starts from OS entropy, so "
            "initial states and transitions differ in every run whatever the framework seed; "
            "seed it once (env.reset(seed=seed), env.action_space.seed(seed); old Gym: env.seed(seed))",
        )


@register
class CudaSeedOnly(Rule):
    """Seeds the GPU generator but not PyTorch's CPU generator.

    ## What it does
    Flags `torch.cuda.manual_seed(...)` / `torch.cuda.manual_seed_all(...)` in a file
    that never calls `torch.manual_seed(...)` (or a helper that seeds everything),
    outside functions whose name contains "seed" (seeding helpers themselves).

    ## Why is this bad
    `torch.cuda.manual_seed` seeds only the CUDA generator (of the current device;
    `manual_seed_all` of every device). Weight initialisation, `DataLoader` shuffling and
    everything else drawn on the CPU still come from the unseeded CPU generator.
    `torch.manual_seed` seeds the CPU and every CUDA device.

    ## Example
    ```python
    torch.cuda.manual_seed_all(0)
    model = torch.nn.Linear(3, 3)
    ```

    ## Fix
    `torch.manual_seed(0)` (it seeds all devices).
    """

    code, name = "FWD107", "cuda-seed-only"
    triggers = ("manual_seed", "manual_seed_all")
    fix_code = "torch.manual_seed(0)"
    references = (
        "https://docs.pytorch.org/docs/stable/generated/torch.manual_seed.html",
        "https://docs.pytorch.org/docs/stable/generated/torch.cuda.manual_seed.html",
    )
    invalid = ("import torch\ntorch.cuda.manual_seed_all(0)\nm = torch.nn.Linear(3, 3)\n",)
    valid = (
        "import torch\ntorch.manual_seed(0)\ntorch.cuda.manual_seed_all(0)\n",
        "import torch\ndef manual_seed(s):  # a seeding helper itself\n    torch.cuda.manual_seed_all(s)\n",
    )

    def __init__(self, ctx):
        super().__init__(ctx)
        self.defs = []

    def visit_FunctionDef(self, node):
        self.defs.append(node)

    def finish(self):
        ctx = self.ctx
        cuda = [
            c
            for c in ctx.called(["torch.cuda.manual_seed", "torch.cuda.manual_seed_all"])
            if not any("seed" in getattr(d, "name", "") and d.lineno <= c.lineno <= d.end_lineno for d in self.defs)
        ]
        if cuda and not seeds(ctx, TORCH_SEED_CALLS):
            self.report(
                cuda[0],
                "seeds the CUDA generator only; CPU draws (weight init, "
                "shuffling) stay unseeded. Use torch.manual_seed(seed), which seeds all devices",
            )


_TRAINING_METHODS = ("backward", "fit", "fit_generator", "train_on_batch", "apply_gradients")
#: TF1 graph training: ``train_op = optimizer.minimize(loss)`` run by ``sess.run(train_op)``
_GRAPH_SESSIONS = (
    "tensorflow.Session",
    "tensorflow.compat.v1.Session",
    "tensorflow.InteractiveSession",
    "tensorflow.compat.v1.InteractiveSession",
    "tensorflow.train.MonitoredTrainingSession",
    "tensorflow.compat.v1.train.MonitoredTrainingSession",
)
_TRAINING_CALLS = ("jax.grad", "jax.value_and_grad")
_JAX_KEYS = frozenset(
    {"jax.random.PRNGKey", "jax.random.key", "jax.random.wrap_key_data", "haiku.PRNGSequence", "flax.nnx.Rngs"}
)
_TEST_MAINS = frozenset({"main", "run"})  # unittest.main(), tf.test.main(), absltest.main(), pytest.main()


def _seeded_otherwise(ctx) -> bool:
    """Seeded without a seeding call: by jaxline, or by op seeds on every random op."""
    return _jaxline_main(ctx) or _op_seeded_graph(ctx)


#: TF1 ops that draw (beside :func:`is_stateful_random`'s), seeded by their ``seed=``
_TF_OP_DRAWS = frozenset(
    {"truncated_normal", "dropout", "random_crop", "multinomial", "random_gamma", "random_poisson"}
)
#: TF APIs that build variables with a default (unseeded) initializer or draw inside
_TF_DEFAULT_INIT = (
    "tensorflow.layers.",
    "tensorflow.compat.v1.layers.",
    "tensorflow.contrib.",
    "tensorflow.keras.",
    "tensorflow.get_variable",
    "tensorflow.compat.v1.get_variable",
    "tensorflow.nn.rnn_cell.",
    "tensorflow.compat.v1.nn.rnn_cell.",
    "tensorflow.estimator.",
)


def _op_seeded_graph(ctx) -> bool:
    """A TF1 graph whose every random op, and every ``shuffle``, takes an op seed
    (``seed=SEED``, TensorFlow's MNIST tutorial) and that builds no variable with a
    default initializer (``tf.get_variable``, ``tf.layers``, Keras): with no graph seed
    TF1 then uses its default graph seed, so every op repeats its sequence
    (``tf.compat.v1.set_random_seed``'s documentation, "the operation seed is set")."""
    if not ctx.imports_any("tensorflow") or ctx.imports_any("keras"):
        return False
    draws = []
    for qn, calls in ctx.calls.items():
        if not qn.startswith("tensorflow."):
            continue
        if qn.startswith(_TF_DEFAULT_INIT):
            return False
        if is_stateful_random(qn) or qn.rsplit(".", 1)[-1] in _TF_OP_DRAWS:
            draws.extend(calls)
    draws += ctx.methods.get("shuffle", ())
    return bool(draws) and all(
        any(k.arg == "seed" and literal(k.value, 0) is not None for k in c.keywords) for c in draws
    )


def _jaxline_main(ctx) -> bool:
    """Whether the file hands its experiment to ``jaxline.platform.main`` (called, or
    passed as ``functools.partial(platform.main, Experiment)`` to ``app.run``): jaxline's
    train loop makes every key from ``jax.random.PRNGKey(config.random_seed)``, 42 by
    default (jaxline/train.py:80, base_config.py:134 at a2308d6)."""
    if not ctx.imports_any("jaxline"):
        return False
    return any(
        type(n) is ast.Attribute and n.attr == "main" and ctx.qualname(n) == "jaxline.platform.main"
        for n in _walk(ctx.tree)
    )


@register
class TrainsWithoutSeed(Rule):
    """A training script that never seeds its framework.

    ## What it does
    Flags the first training call (`loss.backward()`, `model.fit(...)`,
    `train_on_batch`, `optimizer.apply_gradients`, an Estimator's `train`, a TF1 graph's
    `optimizer.minimize(loss)` in a file that opens a `tf.Session`,
    `jax.grad`/`jax.value_and_grad`) in a script that imports a framework and calls no
    function seeding it (`torch.manual_seed`, `tf.random.set_seed`,
    `keras.utils.set_random_seed`, `fwd9m.seed_everything`, `fwd9m.enable_determinism`,
    a JAX key from `jax.random.key`/`PRNGKey`, ...); seeding only Python's `random` or
    NumPy (`random.seed`, `np.random.seed`) is said so in the message. Seeding helpers count: Lightning Fabric's
    `fabric.seed_everything(s)`, `RunConfig(tf_random_seed=s)`, `hk.PRNGSequence(s)`,
    an experiment handed to `jaxline.platform.main` (keyed from `config.random_seed`), a
    TF1 graph whose every random op and shuffle takes an op seed (`seed=SEED`) and that
    builds no variable with a default initializer,
    a function of this file or of a local module it imports whose body seeds, a
    setup function of a local module the script always calls that seeds up to four
    calls down, and a local trainer class derived from `transformers.Trainer` (whose
    `__init__` calls `set_seed(args.seed)`) when the script builds no model from its
    config before it. Only
    scripts count: files that train at module level, in an `if __name__ == "__main__":`
    block that is not a test runner (`unittest.main()`, `tf.test.main()`), or in a
    function those reach, also through `absl.app.run(main)` / `tf.compat.v1.app.run()`.
    A script whose every seed call sits under `if args.seed is not None:` (or `if
    args.seed:`) while `--seed` defaults to None is flagged too, at the option's
    definition: run as documented, it seeds nothing. A script with a `__main__` block
    that trains only through a class or function of a local module (beside it or up to
    three folders above it: `TrainLoop(...).run_loop()` from the project's package) is
    flagged at that call when the module imports a framework, calls a training method
    and seeds nothing either. A TF1 model module whose class builds `minimize` and runs it
    with the session it is handed (`self.sess.run(self.optim, ...)`) is flagged at its
    first `minimize` when the scripts importing it open a `tf.Session` and none sets
    TensorFlow's graph seed; so is a script whose model class builds `minimize` for a
    trainer class of the repository (a local base class whose module opens the session)
    when nothing sets the graph seed. Code in a class or function under a module-level
    `if`/`try` (a compatibility shim overriding `fit`) runs only when called. The `fit` of
    an estimator of scikit-learn, XGBoost, LightGBM, CatBoost, statsmodels, SageMaker, ... (a
    `LabelEncoder`, a `MinMaxScaler`, an `XGBClassifier` on features of a pretrained
    network) trains no framework model and is not a training call, unless the file builds
    framework layers from scratch (a random feature extractor, a `GridSearchCV` over a
    `KerasClassifier`).

    ## Why is this bad
    Weight initialisation, dropout masks, data shuffling and augmentation then start
    from fresh OS entropy in every run, so no two runs train the same model.

    ## Example
    ```python
    model = torch.nn.Linear(4, 1)
    loss = model(x).sum()
    loss.backward()
    ```

    ## Fix
    Once, before the model and data exist: `fwd9m.enable_determinism(seed=0)` (or
    `fwd9m.seed_everything(0)`); or run the unmodified script with `fwd9m run --seed 0`.

    ## Automatic fix (unsafe)
    `fwd9m lint --unsafe-fixes --fix` inserts `import fwd9m` and
    `fwd9m.enable_determinism(seed=S)` after the imports (S: the file's own seed, else
    0). Unsafe: it seeds every generator and turns deterministic kernels on, which
    changes results (and may make an op without a deterministic kernel raise).
    """

    autofix = "enable_after_imports"
    code, name = "FWD108", "trains-without-seed"
    #: ``__name__``: a script that trains only through a class of a local module
    triggers = (
        "backward",
        "fit",
        "fit_generator",
        "train_on_batch",
        "grad",
        "value_and_grad",
        "apply_gradients",
        "train",
        "minimize",
        "__name__",
    )
    fix_code = "fwd9m.enable_determinism(seed=0)"
    references = (
        "https://docs.pytorch.org/docs/stable/notes/randomness.html",
        "https://keras.io/api/utils/python_utils/#setrandomseed-function",
    )
    invalid = (
        "import torch\nmodel = torch.nn.Linear(4, 1)\nmodel(torch.ones(2, 4)).sum().backward()\n",
        "import keras\ndef main():\n    model.fit(x, y)\n\nif __name__ == '__main__':\n    main()\n",
        # reached through absl's app.run(main), as in google-research/bert
        "import tensorflow as tf\nfrom absl import app\ndef main(_):\n"
        "    estimator.train(input_fn=train_input_fn, max_steps=10)\n"
        "if __name__ == '__main__':\n    app.run(main)\n",
        # a function called from the module-level epoch loop (kuangliu/pytorch-cifar)
        "import torch\ndef train(epoch):\n    loss.backward()\nfor epoch in range(3):\n    train(epoch)\n",
        # a custom TF2 loop
        "import tensorflow as tf\ndef main(_):\n    optimizer.apply_gradients(zip(g, v))\n"
        "if __name__ == '__main__':\n    tf.compat.v1.app.run(main)\n",
        # seeds NumPy but not the framework
        "import numpy as np, torch\nnp.random.seed(0)\nmodel = torch.nn.Linear(3, 3)\nloss.backward()\n",
        # TF1 graph training: minimize builds the step, a session runs it
        "import tensorflow as tf\nW = tf.Variable(tf.random_normal([4, 2]))\n"
        "train_op = tf.train.AdamOptimizer(0.1).minimize(loss)\n"
        "with tf.Session() as sess:\n    sess.run(train_op)\n",
    )
    valid = (
        "import torch\ntorch.manual_seed(0)\nmodel = torch.nn.Linear(4, 1)\nmodel(torch.ones(2, 4)).sum().backward()\n",
        "import keras\ndef train(model):\n    model.fit(x, y)\n",  # a library function
        "import tensorflow as tf\nclass T(tf.test.TestCase):\n    def test_fit(self):\n"
        "        model.fit(x, y)\n\nif __name__ == '__main__':\n    tf.test.main()\n",
        "import fwd9m, torch\nfwd9m.enable_determinism(seed=0)\nloss.backward()\n",
        # seeding helpers: a Fabric method, a local function whose body seeds, RunConfig
        "import lightning as L\nfabric = L.Fabric()\nfabric.seed_everything(42)\nfabric.backward(loss)\n",
        "import torch\ndef set_seed(s):\n    torch.manual_seed(s)\nset_seed(0)\nloss.backward()\n",
        "import tensorflow as tf\ndef main(_):\n    cfg = tf.estimator.RunConfig(tf_random_seed=0)\n"
        "    est = tf.estimator.Estimator(fn, config=cfg)\n    est.train(input_fn=f)\n"
        "if __name__ == '__main__':\n    tf.compat.v1.app.run()\n",
        "import haiku as hk, jax\nrng = hk.PRNGSequence(42)\ng = jax.grad(loss)(params, next(rng))\n",
        # a scikit-learn / XGBoost fit on features of a frozen pretrained network
        "import xgboost as xgb\nfrom sklearn.preprocessing import LabelEncoder\n"
        "from keras.applications.vgg16 import VGG16\nX = VGG16(weights='imagenet').predict(x)\n"
        "le = LabelEncoder()\nle.fit(y)\nmodel = xgb.XGBClassifier()\nmodel.fit(X, le.transform(y))\n",
        # a library's Trainer; the __main__ demo only samples (lucidrains guided_diffusion.py)
        "import torch\nclass Trainer:\n    def train(self):\n        self.loss.backward()\n"
        "if __name__ == '__main__':\n    model = torch.nn.Linear(3, 3)\n    print(model(torch.ones(3)))\n",
    )

    def _graph_module(self, framework: bool) -> None:
        """A TF1 model module (no ``__main__``) whose class builds ``minimize`` and runs
        it with the session it is handed, imported by scripts that open a ``tf.Session``
        and none of which sets TensorFlow's graph seed: the training graph, at its first
        ``minimize``."""
        ctx = self.ctx
        calls = _graph_training(ctx) if framework and not is_test_file(ctx) else []
        if not calls or seeds(ctx, FRAMEWORK_SEED_CALLS | ALL_SEED_CALLS | SWITCH_ON_CALLS):
            return
        scripts = importer_scripts(ctx)
        if not any("Session(" in t for t in scripts) or importer_seeds(ctx, tf_only=True)[0]:
            return
        self.report(
            min(calls, key=lambda c: (c.lineno, c.col_offset)),
            "this TF1 training graph (minimize, run with the session the script opens) is "
            "built by scripts that never set TensorFlow's graph seed: initial weights and "
            "every random op differ in every run; call tf.compat.v1.set_random_seed(0) (or "
            "fwd9m.enable_determinism(seed=0)) in the script before the graph is built",
        )

    def finish(self):
        ctx = self.ctx
        framework = any(
            m in ctx.imports or m.split(".")[0] in {i.split(".")[0] for i in ctx.imports}
            for m in ("torch", "tensorflow", "keras", "jax")
        )
        calls, via = _training_calls(ctx) if framework else [], None
        if not calls and main_block(ctx.tree) is None:
            self._graph_module(framework)
            return
        optional = None
        # jaxline's train loop keys the experiment it is handed from config.random_seed
        if _seeded_otherwise(ctx) or seeds(ctx, FRAMEWORK_SEED_CALLS | ALL_SEED_CALLS | SWITCH_ON_CALLS | _JAX_KEYS):
            optional = _optional_seed(ctx) if calls else None  # JAX: an explicit key is the seed
            if optional is None:
                return
        only = [qn for qn in sorted(PYTHON_SEED_CALLS | NUMPY_SEED_CALLS) if ctx.calls.get(qn)]
        if not calls:  # a script training through a local module's class
            calls, via = local_training(ctx, _TRAINING_METHODS)
        if not calls and not framework:  # model = compiled_tcn(...) of a local package; model.fit
            calls, via = local_model_training(ctx, ("fit", "fit_generator", "train_on_batch"))
        if not calls:
            return
        tree = ctx.tree
        main = main_block(tree)
        top = _top_ids(ctx)
        # module level, __main__, app.run(main) and the functions they call
        is_script = any(id(c) in top or runs(ctx, c) for c in calls)
        if main is not None and not is_script:
            runners = [
                c
                for c in _walk(main)
                if type(c) is ast.Call
                and type(c.func) is ast.Attribute
                and c.func.attr in _TEST_MAINS
                and ctx.qualname(c.func) not in ENTRY_POINTS
            ]
            # a method of a class the __main__ block (or what it runs) names: Trainer(...).train()
            is_script = not runners and any(_owner_named(ctx, main, c) for c in calls)
        if is_script:
            first = min(calls, key=lambda c: (c.lineno, c.col_offset))
            if optional is not None:  # the line to change: the option's None default
                first = optional[1]
            what = (
                f"seeds only {' and '.join(only)}, not the framework it trains with: weights and dropout"
                if only
                else "seeds nothing: weights, dropout and data order"
            )
            if optional is not None:
                what = (
                    f"seeds only when {optional[0]} is given, and it defaults to None: a run as "
                    "documented seeds nothing, so weights, dropout and data order"
                )
            trains = f"trains (through {via})" if via else "trains"
            self.report(
                first,
                f"this script {trains} but {what} differ in every run; call "
                "fwd9m.enable_determinism(seed=0) before building the model (or run it with "
                "fwd9m run --seed 0)",
            )


#: libraries whose estimators have a ``fit`` that trains no framework model (a label
#: encoder, a scaler, a random forest or gradient-boosted trees with their own seed)
_ESTIMATOR_LIBRARIES = frozenset(
    {"sklearn", "xgboost", "lightgbm", "catboost", "statsmodels", "umap", "hdbscan", "imblearn", "scipy", "sagemaker"}
)
# sagemaker: an Estimator's ``fit`` submits a training job that runs another script on a
# remote instance (accelerate's ``launch.py`` does so); the calling file trains nothing


#: constructors of framework layers and models built from scratch (random initial weights)
_LAYER_PREFIXES = ("keras.layers.", "tensorflow.keras.layers.", "torch.nn.", "flax.linen.", "haiku.")


def _builds_layers(ctx) -> bool:
    """Whether the file builds framework layers or models from scratch (a Keras
    ``Sequential``, ``Conv2D``, a ``torch.nn`` module): their initial weights are drawn,
    so even a scikit-learn estimator fitted on their outputs (or a ``GridSearchCV`` over
    a ``KerasClassifier``) depends on the framework's seed."""
    found = ctx.__dict__.get("_seeding_builds_layers")
    if found is None:
        found = ctx.__dict__["_seeding_builds_layers"] = any(qn.startswith(_LAYER_PREFIXES) for qn in ctx.calls)
    return found


def _estimator_fit(ctx, call) -> bool:
    """Whether ``call`` is ``x.fit(...)`` of an estimator of a non-framework library:
    ``LabelEncoder().fit(y)``, or ``x`` assigned in the file from such a constructor
    (``scaler = MinMaxScaler()``; ``xgb_model = xgb.XGBClassifier()``), in a file that
    builds no framework layer from scratch (see :func:`_training_calls`)."""
    if call.func.attr != "fit":
        return False
    aliases = module_aliases(ctx)
    recv = call.func.value
    if type(recv) is ast.Call:
        qn = dotted(recv.func, aliases)
        return qn is not None and qn.split(".", 1)[0] in _ESTIMATOR_LIBRARIES
    if type(recv) is not ast.Name:
        return False
    cache = ctx.__dict__.setdefault("_seeding_estimators", {})
    if recv.id not in cache:
        roots = set()
        for s in statements(ctx):
            if (
                type(s) is ast.Assign
                and type(s.value) is ast.Call
                and any(type(t) is ast.Name and t.id == recv.id for t in s.targets)
            ):
                qn = dotted(s.value.func, aliases)
                if qn is not None:
                    roots.add(qn.split(".", 1)[0] in _ESTIMATOR_LIBRARIES)
        cache[recv.id] = roots == {True}
    return cache[recv.id]


def _graph_training(ctx) -> list:
    """``optimizer.minimize(loss)`` calls of a TF1 graph module that runs them itself with
    ``self.sess.run(...)`` / ``sess.run(...)`` on a session handed to it."""
    if not ctx.imports_any("tensorflow") or not any(
        "sess" in ast.unparse(c.func.value).lower() for c in ctx.methods.get("run", ())
    ):
        return []
    return [c for c in ctx.methods.get("minimize", ()) if ctx.qualname(c.func) is None]


def _opens_session(ctx) -> bool:
    """Whether the file opens a TF1 session through a helper: ``sess = utils.session()``
    (a name assigned from a call; a model class's ``self.sess = sess`` is handed one)."""
    return any(
        type(n) is ast.Assign
        and type(n.value) is ast.Call
        and any(type(t) is ast.Name and "sess" in t.id.lower() for t in n.targets)
        for n in statements(ctx)
    )


def _training_calls(ctx) -> list:
    """The calls that train: a backward pass, ``fit`` (not a scikit-learn style
    estimator's), ``apply_gradients``, ``jax.grad``, an Estimator's ``train``, a TF1
    graph's ``minimize`` run by a session."""
    found = [c for m in _TRAINING_METHODS for c in ctx.methods.get(m, ())]
    calls = [c for c in found if not _estimator_fit(ctx, c)]
    if not calls and _builds_layers(ctx):  # GridSearchCV(KerasClassifier(...)).fit, a random feature extractor
        calls = found
    calls += [c for qn in _TRAINING_CALLS for c in ctx.calls.get(qn, ())]
    calls += [
        c
        for c in ctx.methods.get("train", ())
        if any(k.arg == "input_fn" for k in c.keywords) or "estimator" in ast.unparse(c.func.value).lower()
    ]  # TF1 Estimator.train
    calls += [c for qn, cs in ctx.calls.items() if qn.endswith(".estimator.train_and_evaluate") for c in cs]
    # TF1: minimize builds the step sess.run runs (the session opened here or by a helper:
    # ``sess = utils.session()``)
    graph = [c for c in ctx.methods.get("minimize", ()) if ctx.qualname(c.func) is None]
    if any(ctx.calls.get(qn) for qn in _GRAPH_SESSIONS) or _opens_session(ctx) and _graph_training(ctx):
        calls += graph
    elif graph and main_block(ctx.tree) is not None and ctx.imports_any("tensorflow"):
        # a script whose model class builds minimize for the repository's trainer class,
        # which opens the session and runs it
        classes = local_session_subclasses(ctx)
        calls += [c for c in graph if any(k.lineno <= c.lineno <= k.end_lineno for k in classes)]
    return calls


def _none_by_default(ctx, name: str):
    """The definition of the command-line option ``name`` when it defaults to None:
    ``add_argument('--seed', type=int)`` or ``default=None``,
    ``flags.DEFINE_integer('seed', None, ...)``; else None."""
    for c in ctx.methods.get("add_argument", ()):
        opts = [a.value for a in c.args if type(a) is ast.Constant and isinstance(a.value, str)]
        if not any(o.lstrip("-").replace("-", "_") == name for o in opts) and literal(kwarg(c, "dest"), "") != name:
            continue
        default = kwarg(c, "default")
        return c if (default is None or literal(default, 0) is None) and kwarg(c, "action") is None else None
    for qn, cs in ctx.calls.items():
        if qn.startswith(("absl.flags.DEFINE_", "tensorflow.compat.v1.flags.DEFINE_")):
            for c in cs:
                if len(c.args) > 1 and literal(c.args[0], "") == name:
                    return c if literal(c.args[1], 0) is None else None
    return None


def _optional_seed(ctx):
    """``("--seed", its definition)`` when every seed call of the file runs only under ``if args.seed is not
    None:`` (or ``if args.seed:``) and the option defaults to None: the documented run
    seeds nothing. None otherwise."""
    names = FRAMEWORK_SEED_CALLS | ALL_SEED_CALLS | SWITCH_ON_CALLS | _JAX_KEYS
    calls = [c for qn in names for c in ctx.calls.get(qn, ())]
    if not calls:
        return None
    guards = []
    for n in _walk(ctx.tree):
        if type(n) is not ast.If:
            continue
        test = n.test
        if type(test) is ast.Compare and len(test.ops) == 1 and type(test.ops[0]) is ast.IsNot:
            if type(test.comparators[0]) is ast.Constant and test.comparators[0].value is None:
                test = test.left
        if type(test) in (ast.Name, ast.Attribute) and n.body:
            name = test.id if type(test) is ast.Name else test.attr
            guards.append((n.body[0].lineno, n.body[-1].end_lineno or n.body[-1].lineno, name))
    option = None
    for c in calls:
        guard = next((g for g in guards if g[0] <= c.lineno <= g[1] and _none_by_default(ctx, g[2])), None)
        if guard is None:
            return None
        option = guard[2]
    return f"--{option}", _none_by_default(ctx, option)


#: modules whose objects draw from NumPy's global generator in a method: TensorFlow 1's
#: tutorial MNIST reader (``input_data.read_data_sets``): ``DataSet.next_batch`` calls
#: ``numpy.random.shuffle`` at each epoch start (tensorflow/contrib/learn/python/learn/
#: datasets/mnist.py, which tensorflow/examples/tutorials/mnist/input_data.py re-exports)
_NUMPY_DRAWING_METHODS = {"next_batch": ("tensorflow.examples.tutorials.mnist", "tensorflow.contrib.learn")}


def _library_numpy_draws(ctx) -> list:
    """Method calls of library objects that draw from NumPy's global generator."""
    return [
        c
        for method, modules in _NUMPY_DRAWING_METHODS.items()
        for c in ctx.methods.get(method, ())
        if ctx.imports_any(*modules)
    ]


def _owner_named(ctx, main, call) -> bool:
    """Whether the module-level class or function holding ``call`` is named in the
    ``__main__`` block or in a module function it runs (a demo block that only samples
    from a library's model never reaches its ``Trainer.train``)."""
    owner = next(
        (s for s in ctx.tree.body if s.lineno <= call.lineno <= (s.end_lineno or s.lineno)),
        None,
    )
    if owner is None or type(owner) not in (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef):
        return True
    named = ctx.__dict__.get("_seeding_main_named")
    if named is None:  # names reachable from __main__: followed through the defs they name
        defs = {s.name: s for s in ctx.tree.body if type(s) in (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)}
        named, todo = set(), [main]
        while todo:
            for n in _walk(todo.pop()):
                if type(n) is ast.Name and n.id not in named:
                    named.add(n.id)
                    if n.id in defs:
                        todo.append(defs[n.id])
        ctx.__dict__["_seeding_main_named"] = named
    return owner.name in named


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _top_ids(ctx) -> set[int]:
    """``id`` of the nodes that run at module level outside the ``__main__`` block: not
    in a def or class, also one nested in a module-level ``if``/``try`` (a compatibility
    shim ``if keras.__version__ < ...: class Model(...): def fit(...)``). Once per file."""
    top = ctx.__dict__.get("_seeding_top_ids")
    if top is not None:
        return top
    main = main_block(ctx.tree)
    top, todo = set(), [s for s in getattr(ctx.tree, "body", ()) if s is not main and type(s) not in _DEFS]
    while todo:
        n = todo.pop()
        top.add(id(n))
        todo += [c for c in ast.iter_child_nodes(n) if type(c) not in _DEFS]
    ctx.__dict__["_seeding_top_ids"] = top
    return top


def _script_calls(ctx, calls) -> list:
    """Those of ``calls`` that a script runs: at module level (outside functions and
    classes), in a module function that module-level code calls (transitively, in a
    file without a ``__main__`` block), or anywhere in a file whose ``if __name__ ==
    "__main__":`` block is not a test runner (``unittest.main()``); [] otherwise."""
    tree = ctx.tree
    main = main_block(tree)
    top = _top_ids(ctx)
    at_top = [c for c in calls if id(c) in top]
    if at_top:
        return at_top
    if main is None:  # a function that module-level code calls (a data generator it drives)
        return [c for c in calls if runs(ctx, c)]
    runners = [
        c for c in _walk(main) if type(c) is ast.Call and type(c.func) is ast.Attribute and c.func.attr in _TEST_MAINS
    ]
    if runners:
        return []
    unused = _uncalled_functions(tree)
    return [c for c in calls if not any(f.lineno <= c.lineno <= f.end_lineno for f in unused)]


def _uncalled_functions(tree) -> list[ast.FunctionDef]:
    """The module-level functions whose name nothing in the file reads: a script never
    runs them; only a module importing them can, and that module's seeding decides
    (issue 29, seventh held-out round: latent-diffusion's ``utils_image.py``, a library
    with a print-only ``__main__`` block, draws in ``augment_imgs``, which nobody calls)."""
    defs = [s for s in tree.body if type(s) in (ast.FunctionDef, ast.AsyncFunctionDef)]
    if not defs or any(
        type(n) is ast.Call
        and (
            (type(n.func) is ast.Name and n.func.id in ("globals", "locals", "vars", "getattr"))
            or (type(n.func) is ast.Attribute and n.func.attr == "Fire")
        )
        for n in _walk(tree)
    ):
        return []  # a function named on the command line (fire.Fire(), globals()[task])
    read = {n.id for n in _walk(tree) if type(n) is ast.Name and type(n.ctx) is ast.Load}
    read |= {n.attr for n in _walk(tree) if type(n) is ast.Attribute}
    names = {c.value for c in _walk(tree) if type(c) is ast.Constant and type(c.value) is str}
    return [f for f in defs if f.name not in read and f.name not in names]


#: methods through which a loop's item reaches shared state in the order of the loop
_ACCUMULATES = frozenset({"append", "extend", "insert", "appendleft", "partial_fit", "update", "write", "writelines"})


def _order_only_shuffle(ctx, call) -> bool:
    """``random.shuffle(items)`` / ``np.random.shuffle(items)`` as a statement whose list
    is afterwards only the iterable of ``for`` loops that handle each item on its own
    (:func:`_per_item_loop`), in a file that calls no training function: the shuffle
    orders the work, not a result (facenet's alignment scripts shuffle the classes they
    align, each written to its own folder)."""
    if call_name(call) != "shuffle" or len(call.args) != 1 or type(call.args[0]) not in (ast.Name, ast.Attribute):
        return False
    if TRAINING_CALL.search(ctx.text):
        return False  # a training loop over shuffled data updates the model in that order
    target = ast.unparse(call.args[0])
    scope = _innermost_scope(ctx.tree, call.lineno)
    if scope is None or not any(type(s) is ast.Expr and s.value is call for s in _walk(scope)):
        return False
    loops, iters = [], set()
    for n in _walk(scope):
        if type(n) in (ast.For, ast.AsyncFor) and n.lineno > call.lineno and ast.unparse(n.iter) == target:
            loops.append(n)
            iters.add(id(n.iter))
    for n in _walk(scope):
        if (
            type(n) in (ast.Name, ast.Attribute)
            and type(n.ctx) is ast.Load
            and n.lineno > call.end_lineno
            and id(n) not in iters
            and ast.unparse(n) == target
        ):
            return False  # read otherwise: indexed, passed on, returned
    return bool(loops) and all(_per_item_loop(loop) for loop in loops)


def _innermost_scope(tree, line: int):
    best = tree
    for n in _walk(tree) if tree is not None else ():
        if type(n) in (ast.FunctionDef, ast.AsyncFunctionDef) and n.lineno <= line <= n.end_lineno:
            if best is tree or n.lineno >= best.lineno:
                best = n
    return best


def _per_item_loop(loop) -> bool:
    """A loop whose items reach nothing shared in loop order: no item, nor a value computed
    from one, is appended, written, summed or fed to ``partial_fit``/``update`` outside
    containers and files created in the body itself (a per-class list file, a per-item
    buffer); nothing is yielded, returned or broken out of."""
    body = loop.body + loop.orelse
    made = {n.id for st in body for n in _walk(st) if type(n) is ast.Name and type(n.ctx) is ast.Store}
    made -= {n.id for n in _walk(loop.target) if type(n) is ast.Name}
    bound = {n.id for n in _walk(loop.target) if type(n) is ast.Name}
    grew = True
    while grew:  # names computed from an item carry it (filename = path_of(item))
        grew = False
        for st in body:
            for n in _walk(st):
                src = n.value if type(n) is ast.Assign else n.iter if type(n) in (ast.For, ast.AsyncFor) else None
                outs = n.targets if type(n) is ast.Assign else [n.target] if src is not None else []
                if src is not None and any(type(u) is ast.Name and u.id in bound for u in _walk(src)):
                    new = {u.id for t in outs for u in _walk(t) if type(u) is ast.Name} - bound
                    if new:
                        bound |= new
                        grew = True

    def carries(e) -> bool:
        return any(type(u) is ast.Name and u.id in bound for u in _walk(e))

    counted = {n.target.id for st in body for n in _walk(st) if type(n) is ast.AugAssign and type(n.target) is ast.Name}
    if any(type(n) is ast.Name and n.id in counted and type(n.ctx) is ast.Load for st in body for n in _walk(st)):
        return False  # a running count read in the loop (the first k items go to validation)
    inner = {  # a break that ends a nested loop ends only that loop
        id(b)
        for st in body
        for n in _walk(st)
        if type(n) in (ast.For, ast.AsyncFor, ast.While)
        for b in _walk(n)
        if type(b) is ast.Break
    }
    for st in body:
        for n in _walk(st):
            t = type(n)
            if t in (ast.Yield, ast.YieldFrom, ast.Return) or (t is ast.Break and id(n) not in inner):
                return False
            if t is ast.AugAssign and carries(n.value) and not _made_here(n.target, made):
                return False
            if t is ast.Assign and any(
                type(x) in (ast.Subscript, ast.Attribute) and not _made_here(x, made) for x in n.targets
            ):
                return False  # shared state changed item by item (a graph's labels, a table)
            if (
                t is ast.Call
                and type(n.func) is ast.Attribute
                and n.func.attr in _ACCUMULATES
                and any(carries(a) for a in n.args)
                and not _made_here(n.func.value, made)
            ):
                return False
    return True


def _made_here(node, made: set[str]) -> bool:
    while type(node) in (ast.Attribute, ast.Subscript):
        node = node.value
    return type(node) is ast.Name and node.id in made


def _draw_line(node, aliases, tree, prefix: str, excluded) -> int | None:
    """Line of a draw from the global generator ``prefix`` in ``node`` (a class or function of
    a local module), or in a module function of ``tree`` it calls by name (one level)."""
    helpers = {s.name: s for s in getattr(tree, "body", ()) if type(s) in (ast.FunctionDef, ast.AsyncFunctionDef)}
    bodies = [node]
    bodies += [
        helpers[n.func.id]
        for n in _walk(node)
        if type(n) is ast.Call and type(n.func) is ast.Name and n.func.id in helpers
    ]
    for body in bodies:
        for n in _walk(body):
            if type(n) is ast.Call:
                qn = dotted(n.func, aliases)
                if (
                    qn
                    and qn.startswith(prefix)
                    and qn.count(".") == prefix.count(".")
                    and qn.rsplit(".", 1)[1] not in excluded
                ):
                    return n.lineno
    return None


def _local_draws(ctx, prefix: str, excluded) -> dict[int, tuple[ast.Call, str]]:
    """Calls of the file to a class or function of a local module (beside it or up to three
    folders above) that draws from the global generator ``prefix`` in its body, its methods or
    a module function they call: keras-rl's ``SequentialMemory`` samples replay batches with
    ``random.sample`` (rl/memory.py), so a script that uses it draws from Python's ``random``
    as surely as one that calls it. ``id(call) -> (call, "module file:line")``."""
    out: dict[int, tuple[ast.Call, str]] = {}
    for qn, calls in ctx.calls.items():
        if "." not in qn or qn.split(".", 1)[0] in _FOREIGN:
            continue
        found = local_function(ctx, qn, classes=True)
        if not found:
            continue
        node, aliases, path = found
        line = _draw_line(node, aliases, _parse(path), prefix, excluded)
        if line is not None:
            out.update((id(c), (c, f"{path.parent.name}/{path.name}:{line}")) for c in calls)
    return out


@register
class GlobalGeneratorUnseeded(Rule):
    """A script draws from Python's or NumPy's global generator and never seeds it.

    ## What it does
    Flags the first draw of each global generator, Python's `random` module
    (`random.shuffle`, `random.random`, ...) and NumPy's global generator
    (`np.random.permutation`, `np.random.rand`, ..., and TensorFlow 1's tutorial MNIST
    reader, whose `mnist.train.next_batch` shuffles with `numpy.random.shuffle`), in a
    script (a file that runs the draw at module level or in a function module-level
    code calls, or has an `if __name__ == "__main__":` block that is not a test runner,
    outside module-level functions nothing in the file calls) that calls no
    function seeding that generator (`random.seed` / `np.random.seed`, or one that seeds
    everything: `keras.utils.set_random_seed`, `fwd9m.seed_everything`, Lightning's
    `seed_everything`, `transformers.set_seed`, ...) and no framework seed either (a
    file that seeds only its framework gets FWD101 instead). Library modules, whose
    caller seeds, are not flagged; a script that draws nothing itself but calls a class
    or function of a local module (beside it or up to three folders above) that draws
    from the unseeded generator, in its body, a method or a module function those call
    (keras-rl's `SequentialMemory` samples replay batches with `random.sample`), is
    flagged at that call.

    ## Why is this bad
    Python's `random` and NumPy's global `RandomState` start from fresh OS entropy in
    every process (https://numpy.org/doc/stable/reference/random/legacy.html,
    https://docs.python.org/3/library/random.html#random.seed), so a shuffle or split
    drawn from them differs in every run, and so does everything trained on it.

    ## Example
    ```python
    import numpy as np
    idx = np.random.permutation(len(X))
    ```

    ## Fix
    Seed once at the top (`np.random.seed(0)`, `random.seed(0)`, or
    `fwd9m.seed_everything(0)` for every generator), or draw from a generator of your
    own: `rng = np.random.default_rng(0); idx = rng.permutation(len(X))`.
    """

    code, name = "FWD109", "global-generator-unseeded"
    triggers = ("random", "next_batch")  # a draw resolves through an import naming `random`
    fix_code = "fwd9m.seed_everything(0)  # before the first draw"
    references = (
        "https://numpy.org/doc/stable/reference/random/legacy.html",
        "https://docs.python.org/3/library/random.html#random.seed",
    )
    invalid = (
        "import numpy as np\nidx = np.random.permutation(10)\nprint(idx)\n",
        # TF1's tutorial MNIST reader shuffles with numpy.random.shuffle in next_batch
        "from tensorflow.examples.tutorials.mnist import input_data\n"
        "mnist = input_data.read_data_sets('/tmp/data/')\nx, y = mnist.train.next_batch(128)\n",
        "import random\ndef main():\n    items = list(range(9))\n    random.shuffle(items)\n"
        "\nif __name__ == '__main__':\n    main()\n",
    )
    valid = (
        "import numpy as np\nnp.random.seed(0)\nidx = np.random.permutation(10)\n",
        "import numpy as np\ndef split(n):\n    return np.random.permutation(n)\n",  # a library
        "import numpy as np\nrng = np.random.default_rng(0)\nidx = rng.permutation(10)\n",
        "import random, fwd9m\nfwd9m.seed_everything(0)\nrandom.shuffle(x)\n",
        "import random, torch\ntorch.manual_seed(0)\nx = random.random()\n",  # FWD101's
        "import random, unittest\nclass T(unittest.TestCase):\n    def test(self):\n"
        "        random.random()\n\nif __name__ == '__main__':\n    unittest.main()\n",
    )

    def finish(self):
        ctx = self.ctx
        if seeds(ctx, ALL_SEED_CALLS | FRAMEWORK_SEED_CALLS):
            return
        found, local = [], {}
        for name, draws, seed_calls, prefix, excluded in (
            ("Python's random", uses_python_random(ctx), PYTHON_SEED_CALLS, "random.", _PY_NOT_DRAWS),
            (
                "NumPy's global generator",
                uses_numpy_global_random(ctx) + _library_numpy_draws(ctx),
                NUMPY_SEED_CALLS,
                "numpy.random.",
                _NP_NOT_DRAWS,
            ),
        ):
            if seeds(ctx, seed_calls):
                continue
            draws = [c for c in draws if not _order_only_shuffle(ctx, c)]
            if not draws:  # only then: a local module's draws (each lookup may read a file)
                local.update(_local_draws(ctx, prefix, excluded))
                draws = [c for c, _ in local.values()]
            ran = _script_calls(ctx, draws)
            if ran:
                found.append((min(ran, key=lambda c: (c.lineno, c.col_offset)), name))
        for call, name in sorted(found, key=lambda t: (t[0].lineno, t[0].col_offset)):
            what = ctx.qualname(call.func) or ast.unparse(call.func)
            if call_name(call) == "next_batch":
                what += " (TensorFlow's tutorial MNIST DataSet)"
            elif id(call) in local:
                what += f" (a draw at {local[id(call)][1]})"
            self.report(
                call,
                f"{what} draws from {name}, which this script never seeds: it differs in "
                "every run; seed it once at the top (fwd9m.seed_everything(0)) or draw from a "
                "seeded generator of your own (np.random.default_rng(0))",
            )


__all__ = [
    "SeedsOneLibrary",
    "SeedAfterUse",
    "UnseededGenerator",
    "SeedFromEntropy",
    "SharedInitializer",
    "RandomLayerWithoutSeed",
    "CudaSeedOnly",
    "TrainsWithoutSeed",
    "GlobalGeneratorUnseeded",
    "kwarg",
]
