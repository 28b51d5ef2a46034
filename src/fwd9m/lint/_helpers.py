"""Small AST helpers shared by the rules."""

from __future__ import annotations

import ast
import re
from collections import deque
from operator import attrgetter

from .. import _frameworks

__all__ = [
    "kwarg",
    "arg",
    "literal",
    "is_const",
    "call_name",
    "names_in",
    "calls_in",
    "walk",
    "SEED_CALLS",
    "FRAMEWORK_SEED_CALLS",
    "FRAMEWORK_ROOTS",
    "TRAINING_CALL",
]

_MISSING = object()

#: top-level modules that count as "a framework" for ordering rules: the registry's,
#: tf-keras and Flax
FRAMEWORK_ROOTS = frozenset({*(f.module for f in _frameworks.FRAMEWORKS.values()), "tf_keras", "flax"})

#: calls that seed one framework's global generator
FRAMEWORK_SEED_CALLS = frozenset(
    {
        "tensorflow.random.set_seed",
        "tensorflow.set_random_seed",
        "tensorflow.compat.v1.set_random_seed",
        "tensorflow.compat.v1.random.set_random_seed",
        "tensorflow.random.set_random_seed",
        "torch.manual_seed",
        "torch.random.manual_seed",
        "torch.cuda.manual_seed",
        "torch.cuda.manual_seed_all",
    }
)
#: calls that seed Python, NumPy and the backend at once
ALL_SEED_CALLS = frozenset(
    {
        "keras.utils.set_random_seed",
        "tensorflow.keras.utils.set_random_seed",
        "tf_keras.utils.set_random_seed",
        "keras.src.utils.rng_utils.set_random_seed",
        "lightning.seed_everything",
        "pytorch_lightning.seed_everything",
        "lightning.pytorch.seed_everything",
        "lightning.fabric.seed_everything",
        "transformers.set_seed",
        "transformers.trainer_utils.set_seed",
        "accelerate.utils.set_seed",
        "accelerate.utils.random.set_seed",
        "lightning.fabric.utilities.seed.seed_everything",
        "lightning.pytorch.utilities.seed.seed_everything",
        "pytorch_lightning.utilities.seed.seed_everything",
        # ignite/utils.py manual_seed: random.seed, torch.manual_seed, np.random.seed
        # (pytorch/ignite de08e79, lines 368-393)
        "ignite.utils.manual_seed",
        "fwd9m.seed_everything",
        "fwd9m.seed.seed_everything",
        "fwd9m.enable_determinism",
        "fwd9m.tensorflow.enable_determinism",
        "fwd9m.torch.enable_determinism",
        "fwd9m.jax.enable_determinism",
        "fwd9m.keras.enable_determinism",
    }
)
PYTHON_SEED_CALLS = frozenset({"random.seed"})
NUMPY_SEED_CALLS = frozenset({"numpy.random.seed"})
#: every call that seeds a global generator
SEED_CALLS = FRAMEWORK_SEED_CALLS | ALL_SEED_CALLS | PYTHON_SEED_CALLS | NUMPY_SEED_CALLS


def kwarg(call: ast.Call, name: str, default=None):
    """The value node of keyword ``name`` in ``call``, else ``default``."""
    for k in call.keywords:
        if k.arg == name:
            return k.value
    return default


def arg(call: ast.Call, index: int, name: str | None = None):
    """Positional argument ``index`` or keyword ``name`` of ``call``, else None."""
    if name is not None:
        v = kwarg(call, name)
        if v is not None:
            return v
    if len(call.args) > index and not any(isinstance(a, ast.Starred) for a in call.args[: index + 1]):
        return call.args[index]
    return None


def literal(node, default=_MISSING):
    """The Python value of a constant node (also ``-1``), else ``default`` (a sentinel)."""
    if type(node) is ast.Constant:
        return node.value
    if type(node) is ast.UnaryOp and type(node.op) is ast.USub and type(node.operand) is ast.Constant:
        v = node.operand.value
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return -v
    return default


def is_const(node, value) -> bool:
    v = literal(node)
    return v is not _MISSING and type(v) is type(value) and v == value


def call_name(call: ast.Call) -> str | None:
    """The last name of the callee: ``f`` for ``f(...)`` and ``a.b.f(...)``."""
    f = call.func
    if type(f) is ast.Attribute:
        return f.attr
    if type(f) is ast.Name:
        return f.id
    return None


def names_in(node) -> set[str]:
    """Names loaded anywhere under ``node``."""
    return {n.id for n in walk(node) if type(n) is ast.Name}


def calls_in(node):
    """Every call node under ``node`` (``node`` included)."""
    return [n for n in walk(node) if type(n) is ast.Call]


#: node type -> a function giving the values of its fields, in ``_fields`` order
_FIELD_VALUES: dict[type, object] = {}


def _field_values(t: type):
    fields = t._fields
    if not fields:
        return lambda node: ()
    if len(fields) == 1:
        one = attrgetter(fields[0])
        return lambda node: (one(node),)
    return attrgetter(*fields)


def walk(node):
    """:func:`ast.walk`: ``node`` and every node under it, breadth first, the same nodes
    in the same order, in about two thirds of the time (one C call reads a node's fields;
    no generator per node). A node missing one of its fields is read as ``ast.walk``
    reads it."""
    AST, get = ast.AST, _FIELD_VALUES.get
    todo = deque((node,))
    pop, push = todo.popleft, todo.append
    while todo:
        node = pop()
        t = type(node)
        values = get(t)
        if values is None:
            values = _FIELD_VALUES[t] = _field_values(t)
        try:
            got = values(node)
        except AttributeError:  # a hand-made node without all its fields
            got = [v for _, v in ast.iter_fields(node)]
        for v in got:
            if type(v) is list:
                for item in v:
                    if isinstance(item, AST):
                        push(item)
            elif isinstance(v, AST):
                push(v)
        yield node


#: a training call, as the held-out rounds' recall pool finds training files
TRAINING_CALL = re.compile(
    r"\.backward\(|apply_gradients\(|\.fit\(|value_and_grad\(|jax\.grad\(|optimizer\.step\(|\.minimize\(|\.train_step\("
)
