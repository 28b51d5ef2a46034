"""FWD7xx: calls to APIs the catalog lists as nondeterministic, generated from
:mod:`fwd9m.catalog` (no op list is written here).

One rule per framework: FWD701 TensorFlow, FWD702 Keras, FWD703 PyTorch, FWD704 JAX.
Each matches the public symbols of the framework's catalog entries of kind "op" that
apply to the installed version of the framework (package metadata, no import; every
version when it is not installed):

* only in files that ask for repeatable runs (they seed, turn a determinism switch on,
  create a JAX key or import fwd9m): library code that never asks is not reported; a
  model module without a ``__main__`` block counts when a script beside it (same folder
  or the one above) imports it and seeds, and then only for calls inside its model
  classes (subclasses of a ``Module``, ``Model`` or ``Layer``), with the device, the
  backward pass and the switch read from those scripts;
* an entry whose behaviour under the determinism switch is "raises" or
  "nondeterministic" is reported at every call, with the catalog's fix;
* an entry the switch makes deterministic is reported once per file, at its first
  call, when the file never turns the switch on.

A symbol ``torch.Tensor.index_add_`` matches method calls ``x.index_add_(...)`` in
files that import the framework; ``tf.math.unsorted_segment_sum`` matches the call
however TensorFlow was imported. Simple argument conditions from the catalog
(``accumulate=True``, ``reduce='sum' or reduce='mean'``, ``mode in (...)``) are checked
against literal keyword arguments; an absent keyword counts as its usual default only
for False/None. PyTorch keeps tensors on the CPU unless moved, so GPU-only PyTorch
entries are reported only in files that use CUDA in code (``torch.cuda.*``, ``.cuda()``,
a ``"cuda..."`` string). A condition written as prose (``index has repeated entries``,
``spatial input``) cannot be checked, so the call is not reported. An entry whose
direction is "backward" is reported only in files that run a backward pass (for JAX:
only in code a reverse-mode transform differentiates, on a non-constant operand), and an
entry with ``fixed_by`` settings (``torch.backends.cudnn.deterministic=True``) not in a
file, or an importing script, that makes one of them. Operand tests rule out calls the
catalog entry does not cover (``take_along_axis`` with one index per row, adaptive
average pooling to sizes None/1).
"""

from __future__ import annotations

import ast
import re

from .._flow import assigns, computes_gradients, importer_scripts, importer_seeds, main_block, statements
from .._helpers import literal
from .._helpers import walk as _walk
from .._rule import Rule, register
from ._common import SEED_CALLS, SWITCH_ON_CALLS

#: framework -> (code, import roots, the display name)
FRAMEWORK_CODES = {
    "tensorflow": ("FWD701", ("tensorflow",), "TensorFlow"),
    "keras": ("FWD702", ("keras", "tensorflow", "tf_keras"), "Keras"),
    "torch": ("FWD703", ("torch",), "PyTorch"),
    "jax": ("FWD704", ("jax",), "JAX"),
}
_SWITCH_FOR = {
    "tensorflow": (
        "tensorflow.config.experimental.enable_op_determinism",
        "tensorflow.python.framework.config.enable_op_determinism",
    ),
    "keras": ("tensorflow.config.experimental.enable_op_determinism",),
    "torch": ("torch.use_deterministic_algorithms",),
    "jax": (),  # the switch is an XLA flag: found in the text
}
_KW_EQ = re.compile(r"^\s*(\w+)\s*=\s*(.+?)\s*$")
_KW_GIVEN = re.compile(r"^\s*(\w+)\s+given\b")
_CUDA_STRING = re.compile(r"""['"]cuda""")
_GPU_TEXT = re.compile(r"""['"]cuda|\.cuda\(|torch\.cuda\.|torch\.accelerator\.""")
_SWITCH_TEXT = re.compile(
    r"enable_op_determinism\(|use_deterministic_algorithms\(\s*True|enable_determinism\(|xla_gpu_deterministic_ops"
)
_BACKWARD_TEXT = re.compile(r"\.(?:backward|fit|train_on_batch|apply_gradients|minimize)\(|\bgrad\(")
#: tensor methods whose names NumPy arrays, pandas objects or queues share: a method call
#: ``x.put(...)`` says nothing about ``x`` being a tensor, so only the function spellings
#: (``torch.cumsum``) are matched for these
_AMBIGUOUS_METHODS = frozenset(
    {
        "put",
        "get",
        "cumsum",
        "median",
        "take",
        "repeat",
        "sum",
        "mean",
        "resize_",
        "sort",
        "copy",
        "index",
        "scatter",
        "gather",
    }
)
#: PyTorch factories: a tensor they make without ``device=`` is on the CPU (unless the
#: file calls ``torch.set_default_device``)
_TORCH_FACTORIES = frozenset(
    f"torch.{n}"
    for n in (
        "tensor",
        "as_tensor",
        "from_numpy",
        "arange",
        "zeros",
        "ones",
        "empty",
        "full",
        "rand",
        "randn",
        "randint",
        "randperm",
        "linspace",
        "eye",
        "zeros_like",
        "ones_like",
    )
)
_KW_IN = re.compile(r"^\s*(\w+)\s+in\s+\((.+)\)\s*$")
_MISSING = object()


def _parse_condition(text: str | None):
    """[(keyword, {allowed value spellings})] or None when not machine-checkable."""
    if not text:
        return []
    if text.strip() == "dtype floating or complex":
        return [("dtype", {"<floating>"})]
    m = _KW_GIVEN.match(text)
    if m:
        return [(m.group(1), {"<given>"})]
    m = _KW_IN.match(text)
    if m:
        values = {v.strip().strip("'\"") for v in m.group(2).split(",") if v.strip()}
        return [(m.group(1), values)]
    out = []
    for part in re.split(r"\s+or\s+", text):
        m = _KW_EQ.match(part)
        if not m:
            return None
        out.append((m.group(1), {m.group(2).strip().strip("'\"")}))
    return out


def _spelling(node) -> str:
    v = literal(node, _MISSING)
    if v is not _MISSING:
        return str(v)
    try:
        return ast.unparse(node)
    except Exception:  # noqa: BLE001 - unparse of odd nodes
        return ""


def _condition_met(call: ast.Call, cond) -> bool | None:
    """True / False, or None when it cannot be told statically (then reported with the
    condition spelled out). A condition the linter cannot read at all (``cond`` None,
    e.g. "quantized tensor") counts as not met: precision over recall."""
    if cond is None:
        return False
    if not cond:
        return True
    for key, values in cond:
        node = next((k.value for k in call.keywords if k.arg == key), None)
        if values == {"<floating>"}:  # the input's dtype: ruled out only by an integer dtype=
            if node is not None and re.search(r"\b(u?int\d*|long|bool|short)\b", _spelling(node)):
                return False
            return None
        if values == {"<given>"}:
            if node is not None and literal(node, 0) is not None:
                return True
            if len(call.args) > 1:
                return None  # maybe passed by position
            continue
        if node is None:
            if values & {"False", "None"}:
                return True
            continue
        if literal(node, _MISSING) is _MISSING and type(node) is not ast.Attribute:
            return None
        spelled = _spelling(node)
        if any(spelled == v or spelled.endswith("." + v.rsplit(".", 1)[-1]) for v in values):
            return True
    return False


#: catalog spellings -> the qualified names the engine resolves calls to
_SHORT = (("tf.", "tensorflow."), ("jnp.", "jax.numpy."), ("np.", "numpy."))


def _resolved(symbol: str) -> str:
    for short, full in _SHORT:
        if symbol.startswith(short):
            return full + symbol[len(short) :]
    return symbol


#: TF2 modules that re-export Keras's (``tf.losses.CategoricalCrossentropy`` is
#: ``tf.keras.losses.CategoricalCrossentropy``: tensorflow/__init__.py imports them from
#: keras/api/_v2/keras)
_TF_KERAS_REEXPORTS = ("losses", "metrics", "optimizers", "initializers")


def _aliases(norm: str) -> list[str]:
    """The other spellings that resolve to the same TensorFlow symbol: ``tf.compat.v1``
    / ``tf.compat.v2``, and the TF2 re-exports of Keras modules."""
    if not norm.startswith("tensorflow.") or norm.startswith("tensorflow.compat."):
        return []
    rest = norm[len("tensorflow.") :]
    out = [f"tensorflow.compat.v1.{rest}", f"tensorflow.compat.v2.{rest}"]
    head, _, tail = rest.partition(".")
    if head == "keras" and tail.split(".", 1)[0] in _TF_KERAS_REEXPORTS:
        out.append(f"tensorflow.{tail}")
    return out


def _maybe_gradient(ctx, call: ast.Call) -> bool:
    """``tf.convert_to_tensor(x)`` densifies an IndexedSlices only when ``x`` is one: a
    gradient (``tape.gradient``, ``tf.gradients``, a name like ``grads``) or an
    ``IndexedSlices``; a NumPy array or a list converts without a segment sum."""
    value = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "value"), None)
    if value is None:
        return True

    def gradient_like(node) -> bool:
        text = ast.unparse(node).lower()
        return "grad" in text or "indexedslices" in text

    if gradient_like(value):
        return True
    if type(value) is ast.Name:
        return any(
            gradient_like(n.value)
            for n in _walk(ctx.tree)
            if type(n) is ast.Assign and any(type(t) is ast.Name and t.id == value.id for t in n.targets)
        )
    return False


def _axis_of_none(index, axis: int) -> bool:
    """``index`` adds a size-1 axis at ``axis``: ``a[..., None]`` / ``a[:, None]`` /
    ``jnp.expand_dims(a, axis=-1)``."""
    if type(index) is ast.Call and ast.unparse(index.func).endswith("expand_dims"):
        given = (
            index.args[1] if len(index.args) > 1 else next((k.value for k in index.keywords if k.arg == "axis"), None)
        )
        return literal(given, _MISSING) == axis
    if type(index) is not ast.Subscript:
        return False
    elts = index.slice.elts if type(index.slice) is ast.Tuple else [index.slice]
    kinds = ["none" if type(e) is ast.Constant and e.value is None else ast.unparse(e) for e in elts]
    if axis < 0 and "..." not in kinds[len(kinds) + axis + 1 :] and -axis <= len(kinds):
        return kinds[axis] == "none"
    return axis >= 0 and "..." not in kinds[:axis] and axis < len(kinds) and kinds[axis] == "none"


def _several_per_row(ctx, call: ast.Call) -> bool:
    """``jnp.take_along_axis(q, a[..., None], axis=-1)`` takes one element per row: its
    gradient scatter-adds into distinct slots, which is deterministic. Any other index
    may repeat."""
    index = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "indices"), None)
    axis = call.args[2] if len(call.args) > 2 else next((k.value for k in call.keywords if k.arg == "axis"), None)
    axis = literal(axis, _MISSING)
    return index is None or type(axis) is not int or not _axis_of_none(index, axis)


def _overlapping_windows(ctx, call: ast.Call) -> bool:
    """Adaptive average pooling to sizes of ``None`` (keep the input size) or 1 (one
    window over the whole axis) puts each input element in exactly one window, so its
    backward adds once per element: deterministic. Other sizes may overlap."""
    functional = ast.unparse(call.func).rsplit(".", 1)[-1].startswith("adaptive")
    args = call.args[1:] if functional else call.args
    size = args[0] if args else next((k.value for k in call.keywords if k.arg == "output_size"), None)
    try:
        value = ast.literal_eval(size) if size is not None else _MISSING
    except ValueError:
        return True
    sizes = value if type(value) in (tuple, list) else (value,)
    return not all(v is None or v == 1 for v in sizes)


#: symbols whose catalog entry holds only for some operands, and the test for them
_OPERAND_TESTS = {
    "tensorflow.convert_to_tensor": _maybe_gradient,
    "jax.numpy.take_along_axis": _several_per_row,
    "torch.nn.AdaptiveAvgPool2d": _overlapping_windows,
    "torch.nn.AdaptiveAvgPool3d": _overlapping_windows,
    "torch.nn.functional.adaptive_avg_pool2d": _overlapping_windows,
    "torch.nn.functional.adaptive_avg_pool3d": _overlapping_windows,
}


class _Index:
    """Symbol lookup tables for one framework, built once from the catalog."""

    def __init__(self, framework: str, version_independent: bool = False):
        from ... import catalog

        version = None if version_independent else catalog.installed_version(framework)
        self.version = version
        self.functions: dict[str, list] = {}
        self.methods: dict[str, list] = {}
        self.entries = []
        for e in catalog.entries(framework):
            if e.kind != "op":
                continue
            if version is not None and not e.applies_to(version):
                continue
            behaviour = e.behaviour_at(version)
            if behaviour == "not-applicable":
                continue
            item = (e, behaviour, _parse_condition(e.condition))
            self.entries.append(item)
            for sym in e.symbols:
                norm = _resolved(sym)
                last = norm.rsplit(".", 1)[-1]
                if last.startswith("__"):
                    continue
                if ".Tensor." in norm or ".Variable." in norm:
                    if last not in _AMBIGUOUS_METHODS:
                        self.methods.setdefault(last, []).append(item)
                else:
                    for name in (norm, *_aliases(norm)):
                        self.functions.setdefault(name, []).append(item)
        self.words = tuple(sorted({s.rsplit(".", 1)[-1] for s in (*self.functions, *self.methods)}))


_INDEXES: dict[str, _Index] = {}


def _index(framework: str) -> _Index:
    if framework not in _INDEXES:
        _INDEXES[framework] = _Index(framework)
    return _INDEXES[framework]


class CatalogOpRule(Rule):
    framework = ""

    def __init__(self, ctx):
        super().__init__(ctx)
        self.index = _index(self.framework)
        self.switch_sites: dict[str, list[ast.Call]] = {}
        self.pending: list = []
        self.gpu_seen: bool | None = None
        _, self.roots, _ = FRAMEWORK_CODES[self.framework]

    def visit_Call(self, node, qn):
        idx = self.index
        items = None
        if qn is not None:
            items = idx.functions.get(qn)
        elif type(node.func) is ast.Attribute and node.func.attr in idx.methods and self.ctx.imports_any(*self.roots):
            items = idx.methods[node.func.attr]
        if not items:
            return
        test = _OPERAND_TESTS.get((qn or "").replace(".compat.v1.", ".").replace(".compat.v2.", "."))
        if test is not None and not test(self.ctx, node):
            return
        worst = None
        for e, behaviour, cond in items:
            met = _condition_met(node, cond)
            if met is False:
                continue
            if behaviour in ("raises", "nondeterministic"):
                if worst is None or worst[1] == "deterministic":
                    worst = (e, behaviour, met)
            elif behaviour == "deterministic":
                self.switch_sites.setdefault(e.id, []).append(node)
        if worst is not None:
            self.pending.append((node, worst))

    def _gpu_used(self) -> bool:
        ctx = self.ctx
        if self.gpu_seen is None:
            self.gpu_seen = (
                "cuda" in ctx.methods
                or any(qn.startswith(("torch.cuda.", "torch.accelerator.")) for qn in ctx.calls)
                or _CUDA_STRING.search(ctx.text) is not None
                or any(_GPU_TEXT.search(t) for t in self._callers())
            )
        return self.gpu_seen

    def _callers(self) -> list[str]:
        """The scripts beside this module that import it when it has no ``__main__``
        block of its own (a model module): where it runs, on which device, with a
        backward pass."""
        if main_block(self.ctx.tree) is not None:
            return []
        return importer_scripts(self.ctx, near=True)

    def _via_callers(self) -> bool:
        """Only the scripts that import this module ask for repeatable runs, not itself."""
        ctx = self.ctx
        own = ctx.called(sorted(SEED_CALLS)) or ctx.called(sorted(SWITCH_ON_CALLS)) or ctx.imports_any("fwd9m")
        return (
            not own
            and not ctx.calls.get("jax.random.key")
            and not ctx.calls.get("jax.random.PRNGKey")
            and (self._intent_from_callers())
        )

    def _outside_models(self):
        """A test ``node -> bool``: for a module asked through its callers only, the node
        is not in a model class (see :meth:`_intent_from_callers`)."""
        ctx = self.ctx
        if not self._via_callers():
            return lambda node: False
        spans = [
            (c.lineno, c.end_lineno or c.lineno)
            for c in _walk(ctx.tree)
            if type(c) is ast.ClassDef
            and any(ast.unparse(b).endswith(("Module", "Model", "Layer", "Sequential")) for b in c.bases)
        ]
        return lambda node: not any(a <= node.lineno <= b for a, b in spans)

    def _skip(self, e) -> bool:
        """The entry's conditions cannot hold in this file: PyTorch keeps tensors on the
        CPU unless moved, so GPU-only entries need CUDA use; a backward-only entry needs a
        backward pass in the file; a setting the catalog lists in ``fixed_by`` is made."""
        if self.framework == "torch" and e.devices == ("gpu",) and not self._gpu_used():
            return True
        if (
            e.direction == "backward"
            and not computes_gradients(self.ctx)
            and not any(_BACKWARD_TEXT.search(t) for t in self._callers())
        ):
            return True
        return any(assigns(self.ctx, s) or self._callers_assign(s) for s in e.fixed_by)

    def _callers_assign(self, setting: str) -> bool:
        """A script that imports this model module makes the setting
        (``cudnn.deterministic = True``, read textually by its last two names): the
        setting is process-wide, so it holds for the module's calls in that run."""
        name, _, value = setting.partition("=")
        tail = r"\.".join(name.strip().split(".")[-2:])
        rx = re.compile(rf"\b{tail}\s*=\s*{re.escape(value.strip())}\b")
        return any(rx.search(t) for t in self._callers())

    def _no_gradient(self, e, node) -> bool:
        """An entry whose direction is "backward" (a gather's gradient) needs a gradient
        to flow through the call. JAX: the call is differentiated (in a function under
        ``jax.grad``/``value_and_grad``, a model method, a loss) on an operand that is not
        a constant. PyTorch: the call is not under ``torch.no_grad()`` /
        ``inference_mode()`` and its operand is not a fresh factory tensor."""
        if e.direction != "backward":
            return False
        if self.framework == "torch":
            return id(node) in _torch_no_grad_ids(self.ctx) or _torch_factory_operand(self.ctx, node)
        if self.framework != "jax":
            return False
        return not _differentiated(self.ctx)(node) or _constant_operand(self.ctx, node)

    def _cpu_operand(self, call: ast.Call) -> bool:
        """The tensor the call works on was made on the CPU in the expression itself:
        ``torch.cumsum(torch.unique_consecutive(torch.tensor([...]))[1], 0)``. A torch
        function's result lives on its input's device, a factory's on the CPU without
        ``device=``; anything else (a name, ``.cuda()``, ``.to(...)``) may be on the GPU."""
        if self.framework != "torch" or "set_default_device" in self.ctx.text:
            return False
        if type(call.func) is ast.Attribute and self.ctx.qualname(call.func) is None:
            node = call.func.value  # x.cumsum(...): the receiver
        else:
            node = call.args[0] if call.args else None
        while node is not None:
            if type(node) is ast.Subscript:
                node = node.value
                continue
            if type(node) is not ast.Call:
                return False
            qn = self.ctx.qualname(node.func)
            if qn in _TORCH_FACTORIES:
                return not any(k.arg in ("device", None) for k in node.keywords) and not (
                    qn == "torch.tensor" and len(node.args) > 1
                )
            if not (qn and qn.startswith("torch.") and node.args):
                return False
            node = node.args[0]
        return False

    def _intent(self) -> bool:
        """The file asks for reproducible runs: it seeds, turns a switch on or uses fwd9m."""
        ctx = self.ctx
        return bool(
            ctx.called(sorted(SEED_CALLS))
            or ctx.called(sorted(SWITCH_ON_CALLS))
            or ctx.calls.get("jax.random.key")
            or ctx.calls.get("jax.random.PRNGKey")
            or ctx.imports_any("fwd9m")
            or self._intent_from_callers()
        )

    def _intent_from_callers(self) -> bool:
        """A model module (no ``__main__`` block, no seed of its own) whose training
        script beside it seeds: its ops count only inside model classes (a subclass of a
        ``Module``, ``Model`` or ``Layer``), whose backward runs in that training; helper
        functions (anchors, post-processing, tf.data augmentation on the CPU) do not."""
        ctx = self.ctx
        if "_catalog_via_callers" not in ctx.__dict__:
            ctx.__dict__["_catalog_via_callers"] = main_block(ctx.tree) is None and importer_seeds(ctx, near=True)[0]
        return ctx.__dict__["_catalog_via_callers"]

    def finish(self):
        if (not self.pending and not self.switch_sites) or not self._intent():
            return
        never, outside = _never_called(self.ctx), self._outside_models()
        pipeline = _input_pipeline(self.ctx) if self.framework in ("tensorflow", "keras") else frozenset()

        def dead(node) -> bool:
            return never(node) or outside(node) or id(node) in pipeline

        for node, (e, behaviour, met) in self.pending:
            if self._skip(e) or (e.devices == ("gpu",) and self._cpu_operand(node)) or dead(node):
                continue
            if self._no_gradient(e, node):
                continue
            how = (
                "raises under the determinism switch"
                if behaviour == "raises"
                else "stays nondeterministic even under the determinism switch"
            )
            where = "/".join(e.devices) or "any device"
            cond = f" (when {e.condition}: not ruled out here)" if e.condition and met is None else ""
            version = f" {self.index.version}" if self.index.version else ""
            self.report(
                node,
                f"{e.title}: on {where} this{cond} {how} in "
                f"{self.framework}{version} [catalog {e.id}]; fix: "
                f"{e.fix or (e.solutions[0].text if e.solutions else 'see fwd9m catalog')}",
                fix=e.fix,
            )
        if not self.switch_sites:
            return
        ctx = self.ctx
        if (
            any(ctx.calls.get(s) for s in _SWITCH_FOR[self.framework])
            or ctx.called(["fwd9m.enable_determinism", f"fwd9m.{self.framework}.enable_determinism"])
            or (self.framework == "jax" and "xla_gpu_deterministic_ops" in ctx.text)
            or any(_SWITCH_TEXT.search(t) for t in self._callers())
        ):
            return
        from ... import catalog

        asks = "the script importing it seeds" if self._via_callers() else "this file seeds"
        switch = catalog.switch(self.framework) if self.framework != "keras" else catalog.switch("tensorflow")
        code = switch.code if switch else ""
        for entry_id, nodes in self.switch_sites.items():
            e = next(e for e, _, _ in self.index.entries if e.id == entry_id)
            node = next((n for n in nodes if not dead(n) and not self._no_gradient(e, n)), None)
            if node is None or self._skip(e):
                continue
            where = "/".join(e.devices) or "any device"
            self.report(
                node,
                f"{e.title}: nondeterministic on {where} unless the determinism "
                f"switch is on, and {asks} but never turns it on [catalog {e.id}]; "
                f"fix: {code or e.fix}",
                fix=code or e.fix,
            )


#: JAX transforms whose first argument is differentiated (reverse mode: a gather's
#: transpose, the scatter-add, runs only under these)
_GRAD_TRANSFORMS = frozenset(
    {"grad", "value_and_grad", "vjp", "jacrev", "hessian", "filter_grad", "filter_value_and_grad"}
)
_JAX_ROOTS = ("jax.", "flax.", "equinox.", "haiku.", "optax.")
_MODEL_BASES = ("Module", "Model", "Layer", "Sequential")


def _grad_target(ctx, call: ast.Call):
    """The function a ``jax.grad(f)`` / ``jax.value_and_grad(partial(f, ...))`` call
    differentiates, or None when ``call`` is no such transform."""
    name = call.func.attr if type(call.func) is ast.Attribute else getattr(call.func, "id", "")
    qn = ctx.qualname(call.func)
    if name not in _GRAD_TRANSFORMS or (qn is not None and not qn.startswith(_JAX_ROOTS)):
        return None
    f = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg in ("fun", "f")), None)
    while type(f) is ast.Call and f.args:  # partial(loss_fn, ...), jax.checkpoint(loss_fn)
        f = f.args[0]
    return f


def _differentiated(ctx):
    """A test ``node -> bool``: the node sits in code that a reverse-mode transform
    differentiates: a function (or lambda) handed to ``jax.grad``/``value_and_grad``
    (or decorated with one), a method of a model class, a function named like a loss,
    and the functions of this file those call (transitively, by name)."""
    cached = ctx.__dict__.get("_catalog_differentiated")
    if cached is not None:
        return cached
    defs: dict[str, list] = {}
    roots: list = []
    for n in _walk(ctx.tree):
        if type(n) in (ast.FunctionDef, ast.AsyncFunctionDef):
            defs.setdefault(n.name, []).append(n)
            if "loss" in n.name.lower() or any(
                _GRAD_TRANSFORMS & set(re.findall(r"\w+", ast.unparse(d))) for d in n.decorator_list
            ):
                roots.append(n)
        elif type(n) is ast.ClassDef and any(ast.unparse(b).endswith(_MODEL_BASES) for b in n.bases):
            roots.extend(b for b in n.body if type(b) in (ast.FunctionDef, ast.AsyncFunctionDef))
        elif type(n) is ast.Call:
            f = _grad_target(ctx, n)
            if type(f) is ast.Lambda:
                roots.append(f)
            elif type(f) in (ast.Name, ast.Attribute):
                roots.extend(defs.get(f.id if type(f) is ast.Name else f.attr, ()))
    spans, seen, todo = [], set(), list(roots)
    pending_names = {
        (f.id if type(f) is ast.Name else f.attr)
        for n in _walk(ctx.tree)
        if type(n) is ast.Call and type(f := _grad_target(ctx, n)) in (ast.Name, ast.Attribute)
    }
    todo.extend(d for name in pending_names for d in defs.get(name, ()))  # defined after the call
    while todo:
        fn = todo.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        spans.append((fn.lineno, fn.end_lineno or fn.lineno))
        for c in _walk(fn):
            if type(c) is ast.Call and type(c.func) in (ast.Name, ast.Attribute):
                todo.extend(defs.get(c.func.id if type(c.func) is ast.Name else c.func.attr, ()))
    test = lambda node: any(a <= node.lineno <= b for a, b in spans)  # noqa: E731
    ctx.__dict__["_catalog_differentiated"] = test
    return test


def _constant_operand(ctx, call: ast.Call) -> bool:
    """The array a gather reads is a constant, so no gradient reaches it: wrapped in
    ``stop_gradient``, or a name assigned only under ``jax.ensure_compile_time_eval()``."""
    value = call.args[0] if call.args else None
    if type(value) is ast.Call and ast.unparse(value.func).endswith("stop_gradient"):
        return True
    if type(value) is not ast.Name:
        return False
    const = set()
    for w in _walk(ctx.tree):
        if type(w) is ast.With and any("ensure_compile_time_eval" in ast.unparse(i.context_expr) for i in w.items):
            const |= {id(n) for st in w.body for n in _walk(st)}
    writes = [
        n
        for n in _walk(ctx.tree)
        if type(n) is ast.Assign
        and n.lineno < call.lineno
        and any(type(t) is ast.Name and t.id == value.id for t in n.targets)
    ]
    return bool(writes) and id(max(writes, key=lambda n: n.lineno)) in const


_NO_GRAD = ("torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad", "torch.autograd.inference_mode")


def _torch_no_grad_ids(ctx) -> set[int]:
    """``id`` of every node under ``with torch.no_grad():`` / ``torch.inference_mode()``
    or in a function decorated with either: autograd records nothing there, so no
    backward runs through those calls."""
    cached = ctx.__dict__.get("_catalog_no_grad")
    if cached is not None:
        return cached
    out: set[int] = set()
    for n in statements(ctx):
        if type(n) in (ast.With, ast.AsyncWith):
            heads = [i.context_expr for i in n.items]
            body = n.body
        elif type(n) in (ast.FunctionDef, ast.AsyncFunctionDef):
            heads, body = n.decorator_list, n.body
        else:
            continue
        if any(ctx.qualname(h.func if type(h) is ast.Call else h) in _NO_GRAD for h in heads):
            out |= {id(x) for st in body for x in _walk(st)}
    ctx.__dict__["_catalog_no_grad"] = out
    return out


def _torch_factory_operand(ctx, call: ast.Call) -> bool:
    """The tensor a backward-only op works on is made in the expression by a factory
    (``torch.arange``, ``torch.zeros``, ...) without ``requires_grad=True``, through torch
    functions and tensor methods (``.unsqueeze(0)``, ``.long()``): it needs no gradient."""
    node = call.func.value if type(call.func) is ast.Attribute and ctx.qualname(call.func) is None else None
    if node is None:
        node = call.args[0] if call.args else None
    while node is not None:
        if type(node) is ast.Subscript:
            node = node.value
            continue
        if type(node) is not ast.Call:
            return False
        qn = ctx.qualname(node.func)
        if qn in _TORCH_FACTORIES:
            return not any(k.arg == "requires_grad" for k in node.keywords)
        if qn is None and type(node.func) is ast.Attribute and node.func.attr != "requires_grad_":
            node = node.func.value  # a tensor method: its result follows its receiver
        elif qn and qn.startswith("torch.") and not qn.startswith("torch.nn.") and node.args:
            node = node.args[0]
        else:
            return False
    return False


#: ``tf.data.Dataset`` methods whose function argument runs in the input pipeline
_PIPELINE_METHODS = frozenset({"map", "filter", "flat_map", "interleave", "parallel_interleave"})


def _input_pipeline(ctx) -> frozenset[int]:
    """``id`` of the nodes that run inside a ``tf.data`` input pipeline, on the CPU: a
    lambda or a function of this file (``fn``, ``self.fn``) passed to ``ds.map(...)``
    (also ``filter``/``flat_map``/``interleave``), and this file's functions those call,
    by name, three levels deep. Computed once per file."""
    cached = ctx.__dict__.get("_catalog_pipeline")
    if cached is not None:
        return cached
    defs: dict[str, list[ast.AST]] = {}
    for s in statements(ctx):
        if type(s) in (ast.FunctionDef, ast.AsyncFunctionDef):
            defs.setdefault(s.name, []).append(s)
    roots: list[ast.AST] = []
    for m in _PIPELINE_METHODS:
        for c in ctx.methods.get(m, ()):
            if ctx.qualname(c.func) is not None:
                continue  # a library function named map (jax.tree.map), not a dataset method
            fn = (
                c.args[0] if c.args else next((k.value for k in c.keywords if k.arg in ("map_func", "predicate")), None)
            )
            if type(fn) is ast.Lambda:
                roots.append(fn)
            elif type(fn) in (ast.Name, ast.Attribute):
                roots += defs.get(fn.id if type(fn) is ast.Name else fn.attr, [])
    out: set[int] = set()
    seen: set[int] = set()
    for _ in range(3):
        nxt = []
        for r in roots:
            if id(r) in seen:
                continue
            seen.add(id(r))
            for n in _walk(r):
                out.add(id(n))
                if type(n) is ast.Call:
                    f = n.func
                    name = f.id if type(f) is ast.Name else f.attr if type(f) is ast.Attribute else None
                    if name in defs and (type(f) is ast.Name or ast.unparse(f.value) == "self"):
                        nxt += defs[name]
                    elif type(f) is ast.Name:  # a function handed in: ds.map(lambda x: fn(x))
                        nxt += _passed_functions(ctx, defs, r, f.id)
        roots = nxt
    ctx.__dict__["_catalog_pipeline"] = frozenset(out)
    return ctx.__dict__["_catalog_pipeline"]


def _passed_functions(ctx, defs: dict, inner: ast.AST, param: str) -> list[ast.AST]:
    """This file's functions passed, as the argument ``param``, to the function of the
    file that encloses ``inner`` (``configure(ds, train_preprocess)`` where ``configure``
    maps ``lambda x: param(x)``)."""
    outer = [
        d
        for ds in defs.values()
        for d in ds
        if d is not inner
        and d.lineno <= inner.lineno <= (d.end_lineno or d.lineno)
        and param in [a.arg for a in (*d.args.posonlyargs, *d.args.args)]
    ]
    if not outer:
        return []
    fn = max(outer, key=lambda d: d.lineno)  # the innermost
    params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    index = params.index(param) - (1 if params and params[0] in ("self", "cls") else 0)
    found = []
    for c in _walk(ctx.tree):
        if type(c) is not ast.Call:
            continue
        f = c.func
        if (f.id if type(f) is ast.Name else f.attr if type(f) is ast.Attribute else None) != fn.name:
            continue
        given = next((k.value for k in c.keywords if k.arg == param), None)
        if given is None and 0 <= index < len(c.args):
            given = c.args[index]
        if type(given) is ast.Name:
            found += defs.get(given.id, [])
    return found


def _never_called(ctx):
    """A test ``node -> bool``: the node sits in a module-level function that a script
    (a file with a ``__main__`` block) never names anywhere, so it never runs (a loss
    helper whose only call is commented out). Library modules: always False."""
    tree = ctx.tree
    if tree is None or main_block(tree) is None:
        return lambda node: False
    named = {n.id for n in _walk(tree) if type(n) is ast.Name} | {
        n.attr for n in _walk(tree) if type(n) is ast.Attribute
    }
    named |= {a.name for n in _walk(tree) if type(n) is ast.ImportFrom for a in n.names}
    dead = [
        (s.lineno, s.end_lineno or s.lineno)
        for s in tree.body
        if type(s) in (ast.FunctionDef, ast.AsyncFunctionDef) and s.name not in named and not s.decorator_list
    ]
    if "__all__" in named or not dead:
        return lambda node: False
    return lambda node: any(a <= node.lineno <= b for a, b in dead)


_DOC = """Calls a {name} API that the catalog lists as nondeterministic.

## What it does
Flags calls to {name} functions, layers and tensor methods that `fwd9m catalog`
lists as nondeterministic (kind "op") for the installed {name} version (every
version when it is not installed), in files that ask for repeatable runs (they seed,
turn the switch on, create a JAX key or import fwd9m), and in the model classes of a
module that a seeding script beside it imports. A call in a function that a script
never names (dead code) is not reported. An entry that acts only in the backward pass
needs one in the file (or the script importing it); in JAX, the call must also sit in
code that `jax.grad`/`value_and_grad` differentiates (the function handed to it, what
that calls, a model method or a loss), on an operand that is not a constant
(`stop_gradient`, `jax.ensure_compile_time_eval`); `jnp.take_along_axis` with one
index per row and adaptive average pooling to sizes `None`/1 are not reported (their
backward adds once per element). In TensorFlow and Keras, a call in a function handed
to a `tf.data` `map`/`filter`/`flat_map`/`interleave` (a lambda, a function or method
of the file, and what it calls there) is not reported: input pipelines run on the CPU.
In PyTorch, a backward-only entry is not reported
under `torch.no_grad()`/`inference_mode()` or on a tensor a factory makes in the call
(`torch.arange(n).unsqueeze(0)`). A setting the catalog lists as the fix
(`cudnn.deterministic = True`) counts when the file or the importing script makes it,
also from a command-line option that defaults to that value (`cudnn.deterministic =
args.torch_deterministic` with `torch_deterministic: bool = True`).

Generated from `src/fwd9m/catalog/data/{framework}.toml`, which has {count} such
entries: {ids}.

## Why is this bad
These ops accumulate in an order that changes between runs (GPU atomics, parallel
reductions), so the same inputs give slightly different outputs, and the difference
grows during training. Some stay nondeterministic, or raise, even with the framework's
determinism switch on.

## Example
```python
{example}
```

## Fix
The catalog entry's fix, printed with each finding: usually turn the determinism switch
on (`{switch}`), or replace the op with a deterministic formulation. `fwd9m catalog
ENTRY-ID` shows the details and sources.
"""


def _examples(framework: str, idx: _Index, switch_code: str):
    roots = {
        "tensorflow": "import tensorflow as tf",
        "keras": "import tensorflow as tf",
        "torch": "import torch\nx = x.cuda()",
        "jax": "import jax\nimport jax.numpy as jnp",
    }[framework]
    seed = {
        "tensorflow": "tf.random.set_seed(0)",
        "keras": "tf.random.set_seed(0)",
        "torch": "torch.manual_seed(0)",
        "jax": "key = jax.random.key(0)",
    }[framework]
    invalid, valid = [], []
    for e, behaviour, cond in idx.entries:
        if cond is None or cond or e.direction == "backward" or e.fixed_by:
            continue  # examples need no argument, backward pass or setting to hold
        fn = next(
            (s for s in (e.symbols or ()) if ".Tensor." not in s and not s.rsplit(".", 1)[-1].startswith("_")), None
        )
        if fn is None:
            continue
        call = f"y = {fn}(x)"
        if behaviour in ("raises", "nondeterministic") and len(invalid) < 2:
            invalid.append(f"{roots}\n{seed}\n{call}\n")
            if len(valid) < 1:  # the same call in a file that never asks for repeatable runs
                valid.append(f"{roots}\n{call}\n")
        elif behaviour == "deterministic" and switch_code and not valid:
            invalid.append(f"{roots}\n{seed}\n{call}\n")
            valid.append(f"{roots}\n{seed}\n{switch_code}\n{call}\n")
    valid.append(f"{roots}\ny = x + 1\n")
    return tuple(invalid), tuple(valid)


def _switch_code(framework: str) -> str:
    from ... import catalog

    sw = catalog.switch("tensorflow" if framework == "keras" else framework)
    if sw is None:
        return ""
    if framework == "jax":
        return "import os\n" + sw.code
    return sw.code


_GENERATED = False


def generate() -> None:
    """Create and register the FWD7xx rule classes (once)."""
    global _GENERATED
    if _GENERATED:
        return
    _GENERATED = True
    for framework, (code, _, display) in FRAMEWORK_CODES.items():
        try:
            idx = _index(framework)
        except Exception:  # noqa: BLE001 - a broken catalog must not break the linter
            from ..._log import logger

            logger.warning("catalog for %s unreadable; rule %s matches nothing", framework, code, exc_info=True)
            _INDEXES[framework] = idx = _Index.__new__(_Index)
            idx.version, idx.functions, idx.methods, idx.entries, idx.words = None, {}, {}, [], ()
        switch = _switch_code(framework) if idx.entries else ""
        invalid, valid = _examples(framework, idx, switch)
        # the page shows every op entry and an example at the newest known behaviour, so
        # docs/rules.md does not depend on the versions installed here
        try:
            doc_idx = _Index(framework, version_independent=True)
        except Exception:  # noqa: BLE001
            doc_idx = idx
        ids = ", ".join(f"`{e.id}`" for e, _, _ in doc_idx.entries) or "none"
        doc_invalid, _ = _examples(framework, doc_idx, switch)
        example = doc_invalid[0].strip() if doc_invalid else "# (no catalog entries)"
        doc = _DOC.format(
            name=display,
            framework=framework,
            count=len(doc_idx.entries),
            ids=ids,
            example=example,
            switch=switch or "see the catalog",
        )
        cls = type(
            f"Catalog{display}Op",
            (CatalogOpRule,),
            {
                "__doc__": doc,
                "__module__": __name__,
                "code": code,
                "name": f"catalog-{framework}-op",
                "framework": framework,
                "triggers": idx.words or ("<no catalog entries>",),
                # a call is matched only through an import of the framework (visit_Call)
                "requires": FRAMEWORK_CODES[framework][1],
                "invalid": invalid,
                "valid": valid,
                "references": ("https://github.com/NVIDIA/framework-reproducibility",),
            },
        )
        register(cls)
