"""FWD2xx: configuration that defeats determinism."""

from __future__ import annotations

import ast
from collections import deque

from .._flow import is_test_file, project_mentions, statements
from .._helpers import arg, kwarg, literal
from .._helpers import walk as _walk
from .._rule import Rule, register
from ._common import SEED_CALLS, SWITCH_ON_CALLS, TORCH_SEED_CALLS, env_writes, is_stateful_random, seeds

TORCH_DET = "https://docs.pytorch.org/docs/stable/generated/torch.use_deterministic_algorithms.html"
TORCH_REPRO = "https://docs.pytorch.org/docs/stable/notes/randomness.html"
TF_DET = "https://www.tensorflow.org/api_docs/python/tf/config/experimental/enable_op_determinism"
SEED_README = "https://github.com/NVIDIA/framework-reproducibility/blob/master/doc/d9m/tensorflow.md"


@register
class CudnnBenchmark(Rule):
    """Turns on cuDNN autotuning (`torch.backends.cudnn.benchmark = True`).

    ## What it does
    Flags assignments of a true value to `torch.backends.cudnn.benchmark`, however the
    module is imported (`from torch.backends import cudnn`), and
    `torch.backends.cudnn.flags(benchmark=True)`.

    ## Why is this bad
    With benchmarking on, cuDNN times several convolution algorithms at the first call
    and keeps the fastest; the winner can differ between runs (timing noise, other load),
    and different algorithms give different floating-point results.

    ## Example
    ```python
    torch.backends.cudnn.benchmark = True
    ```

    ## Fix
    `torch.backends.cudnn.benchmark = False` (the default), together with
    `torch.use_deterministic_algorithms(True)`.
    """

    code, name = "FWD201", "cudnn-benchmark"
    triggers = ("benchmark",)
    fix_code = "torch.backends.cudnn.benchmark = False"
    references = (TORCH_REPRO,)
    invalid = (
        "import torch\ntorch.backends.cudnn.benchmark = True\n",
        "from torch.backends import cudnn\ncudnn.benchmark = True\n",
        "import torch.backends.cudnn as C\nC.benchmark = 1\n",
    )
    valid = ("import torch\ntorch.backends.cudnn.benchmark = False\n", "benchmark = True\n")

    def visit_Assign(self, node):
        if literal(node.value, None) not in (True, 1):
            return  # only a literal True: a computed value may well be False
        for t in node.targets:
            if type(t) is ast.Attribute and self.ctx.qualname(t) == "torch.backends.cudnn.benchmark":
                self.report(
                    node,
                    "cudnn.benchmark = True lets cuDNN pick convolution algorithms by "
                    "timing, which can differ between runs; set it to False",
                )

    def visit_Call(self, node, qn):
        if qn == "torch.backends.cudnn.flags" and literal(kwarg(node, "benchmark"), False) not in (False, 0, None):
            self.report(node, "cudnn.flags(benchmark=True) lets cuDNN pick algorithms by timing")


@register
class DeterminismSwitchedOff(Rule):
    """Switches determinism off in a file that seeds.

    ## What it does
    Flags `torch.use_deterministic_algorithms(False)`,
    `torch.backends.cudnn.deterministic = False`,
    `torch.set_deterministic_debug_mode(0)` and
    `tf.config.experimental.disable_op_determinism()` in a file that also sets a seed,
    unless it puts the default back: in a `finally:` block, or as the last statement of
    a function that turned the switch on. Test files (`test_*.py`, `*_test.py`,
    `conftest.py`) are not checked.

    ## Why is this bad
    Seeding makes the random numbers repeatable, but with determinism off GPU kernels
    that accumulate with atomics (scatter, index_add, some convolution backward passes,
    ...) still give different results from run to run. The seed suggests the author
    wants a repeatable run; the switch prevents it.

    ## Example
    ```python
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(False)
    ```

    ## Fix
    `torch.use_deterministic_algorithms(True)` /
    `tf.config.experimental.enable_op_determinism()`, or `fwd9m.enable_determinism(seed)`.
    """

    code, name = "FWD202", "determinism-switched-off"
    triggers = (
        "use_deterministic_algorithms",
        "deterministic",
        "disable_op_determinism",
        "set_deterministic_debug_mode",
    )
    fix_code = "torch.use_deterministic_algorithms(True)"
    references = (TORCH_DET, TF_DET)
    invalid = (
        "import torch\ntorch.manual_seed(0)\ntorch.use_deterministic_algorithms(False)\n",
        "import torch\ntorch.manual_seed(0)\ntorch.backends.cudnn.deterministic = False\n",
        "import tensorflow as tf\ntf.random.set_seed(0)\ntf.config.experimental.disable_op_determinism()\n",
    )
    valid = (
        "import torch\ntorch.manual_seed(0)\ntorch.use_deterministic_algorithms(True)\n",
        "import torch\ntorch.use_deterministic_algorithms(False)\n",
        # a test turns it on and puts the default back at its end (litgpt's tests)
        "import torch\ndef test_batch():\n    torch.manual_seed(0)\n"
        "    torch.use_deterministic_algorithms(True)\n    run()\n"
        "    torch.use_deterministic_algorithms(False)\n",
    )

    def __init__(self, ctx):
        super().__init__(ctx)
        self.sites = []

    def visit_Assign(self, node):
        if literal(node.value, True) in (False, 0):
            for t in node.targets:
                if type(t) is ast.Attribute and self.ctx.qualname(t) == "torch.backends.cudnn.deterministic":
                    self.sites.append((node, "torch.backends.cudnn.deterministic = False"))

    def visit_Call(self, node, qn):
        if qn == "torch.use_deterministic_algorithms" and literal(arg(node, 0, "mode"), True) in (False, 0):
            self.sites.append((node, "torch.use_deterministic_algorithms(False)"))
        elif qn in (
            "tensorflow.config.experimental.disable_op_determinism",
            "tensorflow.python.framework.config.disable_op_determinism",
        ):
            self.sites.append((node, "disable_op_determinism()"))
        elif qn == "torch.set_deterministic_debug_mode" and literal(arg(node, 0, "debug_mode"), 1) in (0, "default"):
            self.sites.append((node, "set_deterministic_debug_mode(0)"))

    def _restores(self, node) -> bool:
        """``node`` puts back the default after the switch was turned on: it is in a
        ``finally:`` block, or the last statement of a function that turned it on
        earlier (a test's tear-down, as in litgpt's tests)."""
        for n in statements(self.ctx):
            if type(n) is ast.Try and any(
                node.lineno >= s.lineno and node.lineno <= (s.end_lineno or s.lineno) for s in n.finalbody
            ):
                return True
            if type(n) in (ast.FunctionDef, ast.AsyncFunctionDef) and n.body:
                last = n.body[-1]
                if last.lineno <= node.lineno <= (last.end_lineno or last.lineno):
                    on = [
                        c
                        for c in _walk(n)
                        if type(c) is ast.Call
                        and c.lineno < node.lineno
                        and self.ctx.qualname(c.func) in SWITCH_ON_CALLS
                        and literal(arg(c, 0, "mode"), True) not in (False, 0)
                    ]
                    if on:
                        return True
        return False

    def finish(self):
        if not seeds(self.ctx, SEED_CALLS) or is_test_file(self.ctx):
            return  # a test switches it for its own assertions
        for node, what in self.sites:
            if self._restores(node):
                continue
            self.report(
                node,
                f"{what} in a file that seeds: the seed makes random numbers "
                "repeatable but nondeterministic kernels still differ between runs",
            )


#: packages whose first call may start XLA (and so parse XLA_FLAGS)
_XLA_STARTERS = ("jax", "flax", "optax", "haiku", "tensorflow", "keras")

_LATE_ENV = {
    "CUBLAS_WORKSPACE_CONFIG": "cuBLAS reads it when PyTorch/TensorFlow create their cuBLAS handle",
    "XLA_FLAGS": "XLA parses it once, when the framework first initialises its XLA backend",
    "TF_DETERMINISTIC_OPS": "TensorFlow reads it when its kernels are first created",
    "TF_CUDNN_DETERMINISTIC": "TensorFlow reads it when its kernels are first created",
    "TF_ENABLE_ONEDNN_OPTS": "TensorFlow decides whether to use oneDNN when it is imported",
    "HOROVOD_FUSION_THRESHOLD": "Horovod reads it in hvd.init()",
}


#: import roots of TensorFlow, which reads the ``TF_*`` variables
_TF_ROOTS = frozenset({"tensorflow", "keras", "tf_keras"})

#: what follows the salted string hash: a set, a set comprehension, ``hash()``
_HASH_ORDER = r"\b(?:set|frozenset|hash)\(|\{\s*\w+\s+for\s"
#: ``torch.cuda`` calls that create no cuBLAS handle
_CUDA_QUERIES = ("manual_seed", "is_available", "device_count", "get_device", "current_device", "set_device")


@register
class EnvSetTooLate(Rule):
    """Sets a framework's environment variable after importing the framework.

    ## What it does
    Flags `os.environ["CUBLAS_WORKSPACE_CONFIG"] = ...` (also `XLA_FLAGS`,
    `TF_DETERMINISTIC_OPS`, `TF_CUDNN_DETERMINISTIC`, `TF_ENABLE_ONEDNN_OPTS`,
    `HOROVOD_FUSION_THRESHOLD`) and the equivalent
    `setdefault`/`update`/`putenv` calls when they come after a line that imports
    TensorFlow, PyTorch, JAX or Keras.
    For `XLA_FLAGS` in a file that imports JAX or TensorFlow but not PyTorch, it is
    flagged only when a JAX or TensorFlow call (other than `jax.config.*` and
    `tf.config.*`) comes before it: both read the flags when they first start XLA (JAX's
    backend on the first computation or device query, TensorFlow its first XLA
    compilation), not at import. `CUBLAS_WORKSPACE_CONFIG` set inside a function (a
    seeding or determinism setup helper) is flagged only when a CUDA use (`.cuda()`,
    `.to(...)`, a `torch.cuda` call other than seeding or a query) comes before it in that
    function: cuBLAS reads it when the first handle is created, at the first GPU matrix
    product, not at import. The `TF_*` variables count only after TensorFlow's (or
    Keras's) own import; in a JAX file without TensorFlow, `TF_CUDNN_DETERMINISTIC` (read
    by XLA) is treated like `XLA_FLAGS`.

    ## Why is this bad
    Frameworks read these variables once, when they initialise the library that uses
    them (TensorFlow reads `TF_ENABLE_ONEDNN_OPTS` at import; cuBLAS and XLA when first
    used). After the import it depends on what already ran whether the setting takes
    effect, so a harmless-looking refactor (an earlier import, a first op at import
    time) silently turns it off.

    ## Example
    ```python
    import torch
    os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
    ```

    ## Fix
    Set the variable in the shell or launcher (`CUBLAS_WORKSPACE_CONFIG=:4096:8 python
    train.py`), or at the very top of the entry script before any framework import, or
    use `fwd9m run` / `fwd9m.enable_determinism()`, which warn when it is too late.
    """

    code, name = "FWD203", "env-set-too-late"
    triggers = ("environ", "putenv")
    references = ("https://docs.nvidia.com/cuda/cublas/index.html#results-reproducibility", TORCH_REPRO, SEED_README)
    invalid = (
        "import os\nimport torch\nos.environ['CUBLAS_WORKSPACE_CONFIG'] = ':4096:8'\n",
        "import os\nimport jax\nx = jax.numpy.ones(3)\n"
        "os.environ.update({'XLA_FLAGS': '--xla_gpu_deterministic_ops=true'})\n",
    )
    valid = (
        "import os\nos.environ['CUBLAS_WORKSPACE_CONFIG'] = ':4096:8'\nimport torch\n",
        "import os\nimport torch\nos.environ['MY_APP_SETTING'] = '1'\n",
        # JAX reads XLA_FLAGS when its backend starts (first device query), not at import
        "import os\nimport jax\nif __name__ == '__main__':\n"
        "    os.environ['XLA_FLAGS'] = '--xla_force_host_platform_device_count=8'\n    main()\n",
        # TensorFlow too parses XLA_FLAGS at its first XLA compilation, not at import
        "import os\nimport jax\nimport tensorflow as tf\ndef main():\n"
        "    tf.config.experimental.set_visible_devices([], 'GPU')\n"
        "    os.environ['XLA_FLAGS'] = '--xla_force_host_platform_device_count=8'\n"
        "    print(jax.device_count())\n",
        # a determinism helper the script calls before building the model (yolov5's init_seeds)
        "import os\nimport torch\ndef init_seeds(seed=0):\n    torch.manual_seed(seed)\n"
        "    torch.use_deterministic_algorithms(True)\n    os.environ['CUBLAS_WORKSPACE_CONFIG'] = ':4096:8'\n",
    )

    def __init__(self, ctx):
        super().__init__(ctx)
        self.sites = []

    def visit_Assign(self, node):
        self.sites.extend(env_writes(self.ctx, node))

    def visit_Call(self, node, qn):
        if qn and qn.startswith("os."):
            self.sites.extend(env_writes(self.ctx, node))

    def _jax_started_before(self, node) -> bool:
        """Whether a JAX call other than ``jax.config.*`` comes before ``node`` in its
        function (or at module level, which runs first): JAX creates its XLA clients,
        and so reads XLA_FLAGS, on the first ``backends()`` call, not at import
        (jax/_src/xla_bridge.py ``backends()``, line 799 in jax 0.10.2; checked: XLA_FLAGS
        set after ``import jax`` and before ``jax.devices()`` takes effect). TensorFlow
        parses it at its first XLA compilation (xla/parse_flags_from_env.cc; checked on
        CPU with TF 2.21: an unknown flag set after ``import tensorflow`` and an eager op
        aborts only at the first ``jit_compile=True`` call), so a TF call counts too."""
        scopes = {id(self.ctx.tree)}
        for fn in statements(self.ctx):
            if type(fn) in (ast.FunctionDef, ast.AsyncFunctionDef) and fn.lineno <= node.lineno <= (
                fn.end_lineno or fn.lineno
            ):
                scopes.add(id(fn))
        for qn, calls in self.ctx.calls.items():
            if qn.split(".", 1)[0] in _XLA_STARTERS and not qn.startswith(("jax.config.", "tensorflow.config.")):
                for c in calls:
                    if c.lineno < node.lineno and self._scope_of(c) in scopes:
                        return True
        return False

    def _scope_of(self, call):
        best = self.ctx.tree
        for fn in statements(self.ctx):
            if (
                type(fn) in (ast.FunctionDef, ast.AsyncFunctionDef)
                and fn.lineno <= call.lineno <= (fn.end_lineno or fn.lineno)
                and fn.lineno >= getattr(best, "lineno", 0)
            ):
                best = fn
        return id(best)

    def _cuda_used_before(self, node) -> bool:
        """For a write inside a function: whether a CUDA use comes before it in that
        function (``.cuda()``, ``.to(...)``, a ``torch.cuda`` call that is not a seed or a
        query). Module level (the rest of the script may already have run): True."""
        scope = self._scope_of(node)
        if scope == id(self.ctx.tree):
            return True
        for c in [*self.ctx.methods.get("cuda", ()), *self.ctx.methods.get("to", ())]:
            if c.lineno < node.lineno and self._scope_of(c) == scope:
                return True
        for qn, calls in self.ctx.calls.items():
            if qn.startswith("torch.cuda.") and not qn.rsplit(".", 1)[-1].startswith(_CUDA_QUERIES):
                if any(c.lineno < node.lineno and self._scope_of(c) == scope for c in calls):
                    return True
        return False

    def finish(self):
        first = self.ctx.first_framework_import()
        if first is None:
            return
        lazy_xla = self.ctx.imports_any("jax", "tensorflow") and not self.ctx.imports_any("torch")
        tf_first = min((ln for m, ln in self.ctx.imports.items() if m.split(".")[0] in _TF_ROOTS), default=None)
        for key, node in self.sites:
            start = first
            if key.startswith("TF_"):
                # TensorFlow's variables: late only after TensorFlow's own import; without
                # it only XLA reads TF_CUDNN_DETERMINISTIC, when JAX first starts its backend
                if tf_first is None and not (node.lineno > first and self._jax_started_before(node)):
                    continue
                start = tf_first or first
            if key == "XLA_FLAGS" and lazy_xla and node.lineno > first and not self._jax_started_before(node):
                continue  # JAX / TF read it when they first start XLA, after this line
            if key == "CUBLAS_WORKSPACE_CONFIG" and node.lineno > first and not self._cuda_used_before(node):
                continue  # a setup helper: cuBLAS reads it at the first GPU matrix product
            if key in _LATE_ENV and node.lineno > start:
                self.report(
                    node,
                    f"{key} is set after the framework import on line {start}; "
                    f"{_LATE_ENV[key]}, so it may have no effect. Set it before any "
                    "framework import or in the launching shell",
                )


@register
class PythonHashSeedInProcess(Rule):
    """Sets `PYTHONHASHSEED` from inside the running program.

    ## What it does
    Flags `os.environ["PYTHONHASHSEED"] = ...` (and `setdefault`/`update`/`putenv`) in
    a file that does not start a child interpreter afterwards, in a project that has
    something whose order or value follows the string hash: a `set(...)`/`frozenset(...)`,
    a set comprehension or `hash(...)` (read textually in the project's `.py` files).
    Without any, the line changes nothing, but nothing depends on it either.

    ## Why is this bad
    The hash seed of `str`/`bytes` is fixed when the interpreter starts. Setting the
    variable later changes nothing for the current process (set iteration order and
    `hash()` stay randomised); it only reaches child processes.

    ## Example
    ```python
    os.environ["PYTHONHASHSEED"] = "0"
    ```

    ## Fix
    Set it before Python starts: `PYTHONHASHSEED=0 python train.py`, or use
    `fwd9m run train.py`, which starts the script in a fresh interpreter with it set.
    """

    code, name = "FWD204", "pythonhashseed-in-process"
    triggers = ("PYTHONHASHSEED",)
    fix_code = "PYTHONHASHSEED=0 python train.py"
    references = ("https://docs.python.org/3/using/cmdline.html#envvar-PYTHONHASHSEED",)
    invalid = ("import os\nos.environ['PYTHONHASHSEED'] = '0'\nclasses = sorted(set(labels), key=hash)\n",)
    valid = (
        # nothing in the program follows the string hash
        "import os\nos.environ['PYTHONHASHSEED'] = '0'\n",
        "import os, subprocess, sys\nos.environ['PYTHONHASHSEED'] = '0'\n"
        "subprocess.run([sys.executable, 'train.py'])\n",
    )

    def __init__(self, ctx):
        super().__init__(ctx)
        self.sites = []

    def visit_Assign(self, node):
        self.sites.extend(s for s in env_writes(self.ctx, node) if s[0] == "PYTHONHASHSEED")

    def visit_Call(self, node, qn):
        if qn and qn.startswith("os."):
            self.sites.extend(s for s in env_writes(self.ctx, node) if s[0] == "PYTHONHASHSEED")

    def finish(self):
        if any(
            qn.startswith(("subprocess.", "os.exec", "os.spawn", "multiprocessing."))
            or qn in ("os.system", "os.posix_spawn")
            for qn in self.ctx.calls
        ):
            return
        if self.sites and not project_mentions(self.ctx, _HASH_ORDER):
            return  # nothing iterates a set or hashes: the ineffective line changes no result
        for _, node in self.sites:
            self.report(
                node,
                "PYTHONHASHSEED set inside the process has no effect on it: string "
                "hashing was randomised at start-up. Set it before Python starts "
                "(PYTHONHASHSEED=0 python ..., or fwd9m run)",
            )


_SWITCHES = {
    "tensorflow.config.experimental.enable_op_determinism": "tf.config.experimental.enable_op_determinism()",
    "torch.use_deterministic_algorithms": "torch.use_deterministic_algorithms(True)",
    "fwd9m.enable_determinism": "fwd9m.enable_determinism(seed)",
    "tensorflow.random.set_seed": "tf.random.set_seed(seed)",
    "torch.manual_seed": "torch.manual_seed(seed)",
    "keras.utils.set_random_seed": "keras.utils.set_random_seed(seed)",
    "tensorflow.keras.utils.set_random_seed": "tf.keras.utils.set_random_seed(seed)",
}


@register
class SwitchNotCalled(Rule):
    """Names a determinism or seeding function without calling it.

    ## What it does
    Flags a statement that is only a reference such as
    `tf.config.experimental.enable_op_determinism` or `torch.use_deterministic_algorithms`
    (no parentheses), and the same functions used as the condition of an `if`.

    ## Why is this bad
    Referencing a function does nothing; the line reads like it turns determinism on,
    but the run stays nondeterministic.

    ## Example
    ```python
    tf.config.experimental.enable_op_determinism
    ```

    ## Fix
    Call it: `tf.config.experimental.enable_op_determinism()`.
    """

    code, name = "FWD205", "switch-not-called"
    triggers = frozenset(q.rsplit(".", 1)[-1] for q in _SWITCHES)
    references = (TF_DET, TORCH_DET)
    invalid = (
        "import tensorflow as tf\ntf.config.experimental.enable_op_determinism\n",
        "import torch\nif torch.use_deterministic_algorithms:\n    pass\n",
    )
    valid = (
        "import tensorflow as tf\ntf.config.experimental.enable_op_determinism()\n",
        "import torch\nf = torch.use_deterministic_algorithms\nf(True)\n",
    )

    def _check(self, expr):
        if type(expr) in (ast.Attribute, ast.Name):
            qn = self.ctx.qualname(expr)
            if qn in _SWITCHES:
                self.report(expr, f"{qn} is referenced but not called, so it does nothing; call it: {_SWITCHES[qn]}")

    def visit_Expr(self, node):
        self._check(node.value)

    def visit_If(self, node):
        self._check(node.test)


@register
class JitCompileWithOpDeterminism(Rule):
    """Asks Keras for XLA (`jit_compile=True`) in a file that enables TF op determinism.

    ## What it does
    Flags `model.compile(..., jit_compile=True)` when
    `tf.config.experimental.enable_op_determinism()` is called at module level or in the
    same function.

    ## Why is this bad
    Keras 3 on TensorFlow turns XLA off when op determinism is on, "since not all ops
    are supported by XLA with determinism enabled" (`model_supports_jit` in
    `keras/src/trainers/trainer.py`), and only warns. If `compile` runs before
    `enable_op_determinism()`, XLA stays on and the compiled step is outside what the
    switch guarantees. Either way the program does not do what it says.

    ## Example
    ```python
    tf.config.experimental.enable_op_determinism()
    model.compile(optimizer="adam", loss="mse", jit_compile=True)
    ```

    ## Fix
    Drop `jit_compile=True` (or pass `jit_compile=False`) when you need determinism,
    and enable determinism before building and compiling the model.
    """

    code, name = "FWD206", "jit-compile-with-op-determinism"
    triggers = ("jit_compile",)
    references = ("https://github.com/keras-team/keras/blob/master/keras/src/trainers/trainer.py", TF_DET)
    invalid = (
        "import tensorflow as tf\ntf.config.experimental.enable_op_determinism()\n"
        "model.compile(loss='mse', jit_compile=True)\n",
    )
    valid = (
        "import tensorflow as tf\ntf.config.experimental.enable_op_determinism()\nmodel.compile(loss='mse')\n",
        "model.compile(loss='mse', jit_compile=True)\n",
        "import tensorflow as tf\ndef a():\n    tf.config.experimental.enable_op_determinism()\n"
        "def b(model):\n    model.compile(loss='mse', jit_compile=True)\n",
    )

    def __init__(self, ctx):
        super().__init__(ctx)
        self.sites = []
        self.enabled: set = set()

    def visit_Call(self, node, qn):
        scope = self.ctx.function_stack[-1] if self.ctx.function_stack else None
        if type(node.func) is ast.Attribute and node.func.attr == "compile":
            if literal(kwarg(node, "jit_compile"), None) is True:
                self.sites.append((scope, node))
        elif qn in (
            "tensorflow.config.experimental.enable_op_determinism",
            "tensorflow.python.framework.config.enable_op_determinism",
            "fwd9m.enable_determinism",
            "fwd9m.tensorflow.enable_determinism",
            "fwd9m.keras.enable_determinism",
        ):
            self.enabled.add(scope)

    def finish(self):
        # determinism on at module level covers everything; in a function, that function
        for scope, node in self.sites:
            if None in self.enabled or scope in self.enabled:
                self.report(
                    node,
                    "jit_compile=True with TF op determinism: Keras turns XLA off "
                    "when determinism is on (or, if compile runs first, XLA runs outside "
                    "the switch); drop jit_compile=True",
                )


def _flags_passed_off(call: ast.Call, fn) -> set[str]:
    """The parameters of ``fn`` that ``call`` passes as ``False``, ``None`` or ``0``."""
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    off = {params[i] for i, a in enumerate(call.args[: len(params)]) if literal(a, True) in (False, None, 0)}
    off.update(k.arg for k in call.keywords if k.arg and literal(k.value, True) in (False, None, 0))
    return off


def _walk_unless_off(fn, off: set[str]):
    """The nodes of ``fn`` less the branches a flag passed off skips: the body of
    ``if flag:`` and the ``else`` of ``if not flag:`` (issue 29, seventh held-out round:
    meta-dataset's MAML loop calls ``gradient_descent_step(..., False)``, whose
    ``tf.assign`` is made only ``if get_update_ops:``)."""
    todo = deque((fn,))
    while todo:
        node = todo.popleft()
        yield node
        if type(node) is ast.If and off:
            test = node.test
            if type(test) is ast.Name and test.id in off:
                todo.extend([node.test, *node.orelse])
                continue
            if type(test) is ast.UnaryOp and type(test.op) is ast.Not and type(test.operand) is ast.Name:
                if test.operand.id in off:
                    todo.extend([node.test, *node.body])
                    continue
        todo.extend(ast.iter_child_nodes(node))


@register
class WhileLoopParallelIterations(Rule):
    """`tf.while_loop` with `parallel_iterations` above 1 (the default is 10).

    ## What it does
    Flags `tf.while_loop(...)` without `parallel_iterations=1` whose body calls a
    stateful op (a random op such as `tf.random.uniform`, a variable update such as
    `v.assign_add`), looked for in the body and the functions of the same file it calls,
    or whose body is not in the file (then the message says it could not be ruled out);
    and `tf.autograph.experimental.set_loop_options(parallel_iterations=N)` with N > 1.
    A loop of pure tensor ops (NMS, sequence packing) computes the same values whatever
    the iterations' schedule and is not flagged, nor a retry loop whose one loop variable
    is the body's draw and is read by the condition (resample until valid), nor a loop
    whose draws read a loop variable that the body returns computed from the draw (an
    autoregressive decode: the next token is sampled from `tokens[step]` and written
    into `tokens`): the next iteration cannot start before this one's draw is done, so
    the draws keep their order. A branch that a flag the body passes as `False` skips
    (`if get_update_ops:` in a helper called with `False`) is not looked into.

    ## Why is this bad
    In a graph (`tf.function`), iterations that run in parallel can execute their ops in
    a different order from run to run, which may change accumulated floating-point
    results (NVIDIA's TensorFlow determinism notes list `tf.while_loop` with
    `parallel_iterations > 1` as a source of nondeterminism).

    ## Example
    ```python
    tf.while_loop(cond, body, loop_vars)
    ```

    ## Fix
    `tf.while_loop(cond, body, loop_vars, parallel_iterations=1)`; in AutoGraph loops,
    `tf.autograph.experimental.set_loop_options(parallel_iterations=1)`.
    """

    code, name = "FWD207", "while-loop-parallel-iterations"
    triggers = ("while_loop", "set_loop_options")
    references = (SEED_README, "https://www.tensorflow.org/api_docs/python/tf/while_loop")
    invalid = (
        "import tensorflow as tf\ntf.while_loop(c, b, [i])\n",
        "import tensorflow as tf\ntf.while_loop(c, b, [i], parallel_iterations=4)\n",
        "import tensorflow as tf\ndef crop(i):\n    return i + tf.random.uniform([])\n"
        "def body(i):\n    return tf.cond(i > 0, crop, lambda: i)\n"
        "tf.while_loop(lambda i: i < 3, body, [0.0])\n",
        # the draw does not read the loop variable it writes: iterations can overlap
        "import tensorflow as tf\ndef body(step, tokens):\n    nxt = tf.random.uniform([4])\n"
        "    tokens = tf.tensor_scatter_nd_update(tokens, [[step]], [nxt])\n    return step + 1, tokens\n"
        "tf.while_loop(lambda s, t: s < 9, body, [0, t0])\n",
    )
    valid = (
        "import tensorflow as tf\ntf.while_loop(c, b, [i], parallel_iterations=1)\n",
        # pure tensor ops (MaxText's sequence packing loop): the schedule cannot change them
        "import tensorflow as tf\ndef body(i, acc):\n    return i + 1, acc + tf.reduce_sum(x[i])\n"
        "tf.while_loop(lambda i, acc: i < 3, body, [0, 0.0])\n",
        # retry loop (scenic's densevoc sampling): cond reads the draw, iterations are serial
        "import tensorflow as tf\ndef draw(_):\n    if k:\n        o = tf.random.uniform([], maxval=5)\n"
        "        return tf.range(o, o + 3)\n    return tf.random.shuffle(tf.range(9))[:3]\n"
        "tf.while_loop(lambda x: tf.reduce_max(x) < 5, draw, [draw(())])\n",
        # autoregressive decode (pix2seq): the draw reads tokens[step], its result goes
        # back into tokens, so each iteration waits for the previous one's draw
        "import tensorflow as tf\ndef body(step, tokens):\n    logits = model(tokens[step])\n"
        "    nxt = tf.random.categorical(logits, 1)[:, 0]\n"
        "    tokens = tf.tensor_scatter_nd_update(tokens, [[step + 1]], [nxt])\n    return step + 1, tokens\n"
        "tf.while_loop(lambda s, t: s < 9, body, [0, t0])\n",
    )
    _LOOPS = frozenset({"tensorflow.while_loop", "tensorflow.compat.v1.while_loop", "tensorflow.compat.v2.while_loop"})
    #: methods that update state (tf.Variable) rather than compute a value
    _STATEFUL_METHODS = frozenset(
        {"assign", "assign_add", "assign_sub", "scatter_add", "scatter_update", "scatter_nd_add", "scatter_nd_update"}
    )

    def _stateful_body(self, loop):
        """The first stateful op (random op from a global/op seed, variable update)
        called by the loop body, looked into one level of same-file functions; False
        when the body is a lambda or function of this file with none; None when the
        body cannot be seen."""
        body = kwarg(loop, "body") or (loop.args[1] if len(loop.args) > 1 else None)
        defs = {n.name: n for n in statements(self.ctx) if type(n) in (ast.FunctionDef, ast.AsyncFunctionDef)}
        if type(body) is ast.Name and body.id in defs:
            todo = [defs[body.id]]
        elif type(body) is ast.Lambda:
            todo = [body]
        else:
            return None
        seen = set()
        off: dict[int, set[str]] = {}  #: id(function) -> its parameters passed as False
        while todo:
            fn = todo.pop()
            flags = off.get(id(fn))
            for n in _walk_unless_off(fn, flags) if flags else _walk(fn):
                if type(n) is not ast.Call:
                    continue
                qn = self.ctx.qualname(n.func)
                if is_stateful_random(qn):
                    return qn
                if type(n.func) is ast.Attribute and n.func.attr in self._STATEFUL_METHODS:
                    return n.func.attr
                if type(n.func) is ast.Name and n.func.id in defs and n.func.id not in seen:
                    seen.add(n.func.id)
                    callee = defs[n.func.id]
                    off[id(callee)] = _flags_passed_off(n, callee)
                    if flags and fn.lineno <= callee.lineno <= fn.end_lineno:
                        off[id(callee)] |= flags  # a closure reads the flags of its function
                    todo.append(callee)  # functions the body calls
                for a in n.args:  # tf.cond(pred, true_fn, false_fn)
                    if type(a) is ast.Name and a.id in defs and a.id not in seen:
                        seen.add(a.id)
                        todo.append(defs[a.id])
        return False

    def _function(self, node):
        """The lambda or same-file function ``node`` names, or None."""
        if type(node) is ast.Lambda:
            return node
        if type(node) is ast.Name:
            return next(
                (
                    n
                    for n in statements(self.ctx)
                    if type(n) in (ast.FunctionDef, ast.AsyncFunctionDef) and n.name == node.id
                ),
                None,
            )
        return None

    def _serial_retry(self, loop) -> bool:
        """One loop variable, read by the condition and returned by the body only as the
        result of a stateful draw (resample until valid): iteration i+1 waits for the
        condition on iteration i's draw, so the draws cannot overlap."""
        cond = self._function(kwarg(loop, "cond") or (loop.args[0] if loop.args else None))
        body = self._function(kwarg(loop, "body") or (loop.args[1] if len(loop.args) > 1 else None))
        loop_vars = kwarg(loop, "loop_vars") or (loop.args[2] if len(loop.args) > 2 else None)
        if (
            cond is None
            or body is None
            or type(loop_vars) not in (ast.List, ast.Tuple)
            or len(loop_vars.elts) != 1
            or len(cond.args.args) != 1
        ):
            return False
        param = cond.args.args[0].arg
        if not any(type(n) is ast.Name and n.id == param for n in _walk(cond)):
            return False

        def draws(expr) -> bool:  # a stateful call, or a name assigned from one in the body
            return any(
                (type(c) is ast.Call and is_stateful_random(self.ctx.qualname(c.func)))
                or (type(c) is ast.Name and c.id in drawn)
                for c in _walk(expr)
            )

        drawn: set[str] = set()
        for n in _walk(body):
            if type(n) is ast.Assign and draws(n.value):
                drawn.update(t.id for t in n.targets if type(t) is ast.Name)
        results = (
            [body.body]
            if type(body) is ast.Lambda
            else [n.value for n in _walk(body) if type(n) is ast.Return and n.value is not None]
        )
        return bool(results) and all(draws(r) for r in results)

    def _updates_or_calls_a_draw(self, body) -> bool:
        """Whether ``body`` updates a variable, or calls (or passes) a function of this file
        that draws or updates a variable: what :meth:`_serial_chain` does not follow."""
        defs = {n.name: n for n in statements(self.ctx) if type(n) in (ast.FunctionDef, ast.AsyncFunctionDef)}

        def stateful(fn) -> bool:  # a function of this file that draws or updates a variable
            return any(
                type(c) is ast.Call
                and (
                    is_stateful_random(self.ctx.qualname(c.func))
                    or (type(c.func) is ast.Attribute and c.func.attr in self._STATEFUL_METHODS)
                )
                for c in _walk(fn)
            )

        return any(
            type(st) is ast.Call
            and (
                (type(st.func) is ast.Attribute and st.func.attr in self._STATEFUL_METHODS)
                or any(type(a) is ast.Name and a.id in defs and stateful(defs[a.id]) for a in (st.func, *st.args))
            )
            for st in _walk(body)
        )

    def _serial_chain(self, loop) -> bool:
        """Every stateful op of the body is a draw of this file's body function itself
        whose inputs depend on one loop variable, and the body returns, in that variable's
        place, a value that depends on the draw (an autoregressive decode: the next token
        is drawn from logits of ``tokens[step]`` and written into ``tokens``): iteration
        i+1's draws wait for iteration i's, so they keep their order. Followed through the
        body's assignments in source order; a draw or variable update in a function of this
        file the body calls, or a variable update in the body, is not followed (False)."""
        body = self._function(kwarg(loop, "body") or (loop.args[1] if len(loop.args) > 1 else None))
        loop_vars = kwarg(loop, "loop_vars") or (loop.args[2] if len(loop.args) > 2 else None)
        if type(body) is not ast.FunctionDef or type(loop_vars) not in (ast.List, ast.Tuple):
            return False
        if self._updates_or_calls_a_draw(body):
            return False
        params = [p.arg for p in body.args.args][: len(loop_vars.elts)]

        deps: dict[str, set[str]] = {p: {p} for p in params}  # name -> loop variables it depends on
        drawn: set[str] = set()  # names whose value depends on a draw
        draw_deps: list[set[str]] = []  # per draw: the loop variables its inputs depend on

        def scan(expr) -> tuple[set[str], bool]:
            got, is_drawn = set(), False
            for n in _walk(expr):
                if type(n) is ast.Name:
                    got |= deps.get(n.id, set())
                    is_drawn |= n.id in drawn
                elif type(n) is ast.Call and is_stateful_random(self.ctx.qualname(n.func)):
                    inputs = set()
                    for a in (*n.args, *(k.value for k in n.keywords)):
                        inputs |= scan(a)[0]
                    draw_deps.append(inputs)
                    is_drawn = True
            return got, is_drawn

        returns = []
        for st in sorted(
            (n for n in _walk(body) if type(n) in (ast.Assign, ast.Return, ast.Expr)), key=lambda n: n.lineno
        ):
            if type(st) is ast.Return:
                returns.append(st.value)
                continue
            got, is_drawn = scan(st.value)
            for t in st.targets if type(st) is ast.Assign else ():
                for n in _walk(t):
                    if type(n) is ast.Name:
                        deps[n.id] = got
                        (drawn.add if is_drawn else drawn.discard)(n.id)
        if not draw_deps or not returns:
            return False
        for k, p in enumerate(params):
            if all(p in d for d in draw_deps) and all(
                type(r) in (ast.Tuple, ast.List) and len(r.elts) == len(params) and scan(r.elts[k])[1] for r in returns
            ):
                return True
        return False

    def visit_Call(self, node, qn):
        if qn in self._LOOPS:
            p = kwarg(node, "parallel_iterations")
            if p is None and len(node.args) > 3 and type(node.args[3]) is not ast.Starred:
                p = node.args[3]
            value = literal(p, None) if p is not None else 10
            if value is None or (isinstance(value, int) and value > 1):
                stateful = self._stateful_body(node)
                if stateful is False or (stateful and (self._serial_retry(node) or self._serial_chain(node))):
                    return  # no stateful op, or draws that wait for each other: same result
                what = (
                    f"its body calls {stateful} (stateful)"
                    if stateful
                    else "its body is not in this file, so a stateful op in it cannot be ruled out"
                )
                self.report(
                    node,
                    f"tf.while_loop runs up to {value or 'N'} iterations in parallel "
                    f"(default 10) and {what}: stateful ops can run in a different order "
                    "between runs; pass parallel_iterations=1",
                )
        elif qn == "tensorflow.autograph.experimental.set_loop_options":
            value = literal(kwarg(node, "parallel_iterations"), 1)
            if isinstance(value, int) and value > 1:
                self.report(
                    node,
                    "set_loop_options(parallel_iterations>1) can reorder ops between runs; use parallel_iterations=1",
                )


@register
class GateGradientsNone(Rule):
    """Computes TF1 gradients without gating (`gate_gradients=GATE_NONE`).

    ## What it does
    Flags `gate_gradients=tf.compat.v1.train.Optimizer.GATE_NONE` (or `0`) in
    `minimize`/`compute_gradients`, and `gate_gradients=False` passed explicitly to
    `tf.gradients`.

    ## Why is this bad
    TensorFlow documents `GATE_NONE` as computing and applying gradients in parallel
    "at the cost of some non-reproducibility in the results".

    ## Example
    ```python
    opt.minimize(loss, gate_gradients=tf.compat.v1.train.Optimizer.GATE_NONE)
    ```

    ## Fix
    Keep the default `GATE_OP`, or `GATE_GRAPH` if nondeterminism remains.
    """

    code, name = "FWD208", "gate-gradients-none"
    triggers = ("gate_gradients",)
    references = ("https://www.tensorflow.org/api_docs/python/tf/compat/v1/train/Optimizer", SEED_README)
    invalid = (
        "import tensorflow as tf\nopt.minimize(loss, gate_gradients=tf.compat.v1.train.Optimizer.GATE_NONE)\n",
        "opt.compute_gradients(loss, gate_gradients=0)\n",
    )
    valid = ("import tensorflow as tf\nopt.minimize(loss, gate_gradients=tf.compat.v1.train.Optimizer.GATE_GRAPH)\n",)

    def visit_Call(self, node, qn):
        g = kwarg(node, "gate_gradients")
        if g is None:
            return
        # GATE_NONE is 0, so False means the same (tf.gradients: explicit False)
        if (type(g) is ast.Attribute and g.attr == "GATE_NONE") or literal(g, None) in (0, False):
            self.report(
                g,
                "gradients computed without gating may be applied in a different order "
                "each run (TF: 'at the cost of some non-reproducibility'); use GATE_OP or GATE_GRAPH",
            )


@register
class HorovodTensorFusion(Rule):
    """Uses Horovod without disabling Tensor Fusion.

    ## What it does
    Flags `hvd.init()` in a file that never mentions `HOROVOD_FUSION_THRESHOLD`.

    ## Why is this bad
    Tensor Fusion batches small allreduce operations into buffers whose make-up depends
    on timing, which can change the order of the reduction and so the summed gradients
    (NVIDIA's determinism notes; Horovod PR 1130).

    ## Example
    ```python
    import horovod.tensorflow as hvd
    hvd.init()
    ```

    ## Fix
    Launch with `HOROVOD_FUSION_THRESHOLD=0` (or set `os.environ["HOROVOD_FUSION_THRESHOLD"] = "0"`
    before `hvd.init()`).
    """

    code, name = "FWD209", "horovod-tensor-fusion"
    triggers = ("horovod",)
    fix_code = 'os.environ["HOROVOD_FUSION_THRESHOLD"] = "0"'
    references = (SEED_README, "https://github.com/horovod/horovod/pull/1130")
    invalid = ("import horovod.torch as hvd\nhvd.init()\n",)
    valid = ("import os\nos.environ['HOROVOD_FUSION_THRESHOLD'] = '0'\nimport horovod.torch as hvd\nhvd.init()\n",)

    def visit_Call(self, node, qn):
        if (
            qn
            and qn.startswith("horovod.")
            and qn.endswith(".init")
            and "HOROVOD_FUSION_THRESHOLD" not in self.ctx.text
        ):
            self.report(
                node,
                "Horovod Tensor Fusion is on: the fused allreduce can sum gradients "
                "in a different order each run; set HOROVOD_FUSION_THRESHOLD=0",
            )


@register
class TorchCompileRng(Rule):
    """`torch.compile` in a file that seeds PyTorch and expects eager random numbers.

    ## What it does
    Flags `torch.compile(...)` (call or decorator) in a file that calls
    `torch.manual_seed` and never sets `torch._inductor.config.fallback_random`. Opt-in
    (select `FWD210`): a compiled run is repeatable on its own; the rule is for code
    that compares, or switches between, compiled and eager runs.

    ## Why is this bad
    TorchInductor generates its own kernels for random ops (dropout, `torch.rand`), so
    under the same seed a compiled function draws different numbers from the eager one;
    results change when `torch.compile` is switched on or off, or when graph breaks
    move. `fallback_random = True` makes Inductor use the eager random ops
    (`torch/_inductor/config.py`).

    ## Example
    ```python
    torch.manual_seed(0)
    model = torch.compile(model)
    ```

    ## Fix
    `torch._inductor.config.fallback_random = True` before compiling, when you need the
    compiled run to match the eager one.
    """

    code, name = "FWD210", "torch-compile-rng"
    default = False  # parity with eager is an assumption the source does not show
    triggers = ("compile",)
    fix_code = "torch._inductor.config.fallback_random = True"
    references = (
        "https://github.com/pytorch/pytorch/blob/main/torch/_inductor/config.py",
        "https://docs.pytorch.org/docs/stable/generated/torch.compile.html",
    )
    invalid = (
        "import torch\ntorch.manual_seed(0)\nm = torch.compile(torch.nn.Linear(2, 2))\n",
        "import torch\ntorch.manual_seed(0)\n@torch.compile\ndef f(x):\n    return x\n",
    )
    valid = (
        "import torch\nimport torch._inductor.config\ntorch._inductor.config.fallback_random = True\n"
        "torch.manual_seed(0)\nm = torch.compile(torch.nn.Linear(2, 2))\n",
    )

    def __init__(self, ctx):
        super().__init__(ctx)
        self.sites = []

    def visit_Call(self, node, qn):
        if qn == "torch.compile":
            self.sites.append(node)

    def visit_FunctionDef(self, node):
        for d in node.decorator_list:
            if type(d) is not ast.Call and self.ctx.qualname(d) == "torch.compile":
                self.sites.append(d)

    visit_AsyncFunctionDef = visit_FunctionDef

    def finish(self):
        if "fallback_random" in self.ctx.text or not seeds(self.ctx, TORCH_SEED_CALLS):
            return
        for node in self.sites:
            self.report(
                node,
                "torch.compile draws random numbers with Inductor's own kernels, so "
                "the seeded run differs from eager; set "
                "torch._inductor.config.fallback_random = True for eager parity",
            )


@register
class DeterministicWarnOnly(Rule):
    """Turns on PyTorch determinism in warn-only mode.

    ## What it does
    Flags `torch.use_deterministic_algorithms(True, warn_only=True)` and
    `torch.set_deterministic_debug_mode("warn")` / `(1)`.

    ## Why is this bad
    In warn-only mode an op without a deterministic implementation only emits a warning
    and runs its nondeterministic kernel, so the run can differ while the code looks
    protected; the warning is easy to miss in a long log.

    ## Example
    ```python
    torch.use_deterministic_algorithms(True, warn_only=True)
    ```

    ## Fix
    `torch.use_deterministic_algorithms(True)`, so such ops raise; fix or replace the op
    that raises (see `fwd9m catalog`).
    """

    code, name = "FWD211", "deterministic-warn-only"
    triggers = ("warn_only", "set_deterministic_debug_mode")
    fix_code = "torch.use_deterministic_algorithms(True)"
    references = (TORCH_DET,)
    invalid = (
        "import torch\ntorch.use_deterministic_algorithms(True, warn_only=True)\n",
        "import torch\ntorch.set_deterministic_debug_mode('warn')\n",
    )
    valid = (
        "import torch\ntorch.use_deterministic_algorithms(True)\n",
        "import torch\ntorch.set_deterministic_debug_mode('error')\n",
    )

    def visit_Call(self, node, qn):
        if (
            qn == "torch.use_deterministic_algorithms"
            and literal(arg(node, 0, "mode"), None) is True
            and literal(kwarg(node, "warn_only"), None) is True
        ):
            self.report(node, "warn_only=True runs nondeterministic ops after a warning; drop it so they raise")
        elif qn == "torch.set_deterministic_debug_mode" and literal(arg(node, 0, "debug_mode"), None) in (1, "warn"):
            self.report(node, "debug mode 'warn' runs nondeterministic ops after a warning; use 'error'")


@register
class FillUninitializedMemoryOff(Rule):
    """Turns off PyTorch's filling of uninitialised memory under determinism.

    ## What it does
    Flags `torch.utils.deterministic.fill_uninitialized_memory = False`.

    ## Why is this bad
    With deterministic algorithms on, PyTorch fills memory from `torch.empty` and
    similar with NaN (floats) or the largest integer, so results cannot depend on what
    the memory held before. Turning that off lets garbage from earlier allocations leak
    into results, which differs from run to run.

    ## Example
    ```python
    torch.utils.deterministic.fill_uninitialized_memory = False
    ```

    ## Fix
    Leave it at its default `True`.
    """

    code, name = "FWD212", "fill-uninitialized-memory-off"
    triggers = ("fill_uninitialized_memory",)
    references = ("https://docs.pytorch.org/docs/stable/deterministic.html", TORCH_DET)
    invalid = ("import torch\ntorch.utils.deterministic.fill_uninitialized_memory = False\n",)
    valid = ("import torch\ntorch.utils.deterministic.fill_uninitialized_memory = True\n",)

    def visit_Assign(self, node):
        if literal(node.value, True) in (False, 0):
            for t in node.targets:
                if (
                    type(t) is ast.Attribute
                    and self.ctx.qualname(t) == "torch.utils.deterministic.fill_uninitialized_memory"
                ):
                    self.report(
                        node,
                        "fill_uninitialized_memory = False lets uninitialised memory "
                        "reach results under deterministic mode; leave it True",
                    )
