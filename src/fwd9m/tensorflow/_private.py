"""TensorFlow's private API (``tensorflow.python``), in one module (as
:mod:`fwd9m.torch._private` is for torch).

Everything here is private to TensorFlow and may change between releases; keep its
use in this file so a TensorFlow upgrade breaks one place. Checked against TensorFlow
2.21.0 (tensorflow-cpu). Every function imports TensorFlow's modules when called:
importing this module imports no framework.

* ``tensorflow.python.eager.context.context()``: the eager context; its ``_seed`` and
  ``_rng`` (a ``random.Random``) are the global seed and the op-seed generator that
  ``tf.random.set_seed`` resets. Source:
  https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/eager/context.py
* ``tensorflow.python.ops.stateful_random_ops.global_generator``: the module global
  behind ``tf.random.get_global_generator()``, None until first use (read without
  creating it). Source:
  https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/ops/stateful_random_ops.py
* ``tensorflow.python.framework.config.is_op_determinism_enabled``: not exported under
  ``tf.config`` in TF 2.21; Keras 3 reads the same function (``model_supports_jit`` in
  keras/src/trainers/trainer.py). Source:
  https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/framework/config.py
* ``tensorflow.python.ops.nn``, ``nn_ops``, ``math_ops``: where ``bias_add`` and the
  segment sums live, patched by the TF 1.14-2.0 recipe (:mod:`._patches`).
* Debug recorder (:mod:`._recorder`), as tfdbg2 does in
  https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/debug/lib/dumping_callback.py:
  ``tensorflow.python.framework.op_callbacks`` (``add_op_callback``,
  ``remove_op_callback``), ``tensorflow.python.debug.lib.op_callbacks_common``
  (``OP_CALLBACK_SKIP_OPS``), ``tensorflow.python.framework.tensor_util.MakeNdarray``,
  ``tensorflow.python.ops.control_flow_util.GraphOrParentsInXlaContext`` and
  ``tensorflow.python.util.tf_stack.extract_stack`` (autograph's source map applied).
* Replay (:mod:`._replay`): ``tensorflow.python.eager.execute.execute(op_type,
  num_outputs, inputs, attrs, ctx)`` runs one eager op from its type and attrs, as the
  generated ``gen_*_ops`` wrappers do. Source:
  https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/eager/execute.py
* Narrowing an XLA-compiled function (:mod:`._xla`): ``Context.call_function(name,
  tensor_inputs, num_outputs)`` is where an eager call of a ``tf.function`` runs
  (``AtomicFunction.call_flat``, tensorflow/python/eager/polymorphic_function/atomic_function.py),
  wrapped in the targeted run to see the call's inputs before it runs;
  ``Context.get_function_def`` / ``add_function_def`` / ``remove_function`` /
  ``get_graph_debug_info`` (the runtime's FunctionDef and its nodes' stack traces; the
  recorder also reads a called function's FunctionDef to tell whether it holds its digest
  hooks and which traced graph it is),
  ``execute.quick_execute`` (runs a function by name, without op callbacks: the path
  ``call_function`` takes), the FunctionDef attr ``_XlaMustCompile``
  (``attributes.XLA_COMPILE``, tensorflow/python/eager/polymorphic_function/attributes.py),
  ``op_def_registry.get`` (an op's output args), and
  ``resource_variable_ops.get_eager_safe_handle_data`` (a variable handle's dtype).
  Source: https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/eager/context.py
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

__all__ = [
    "eager_execute",
    "eager_context",
    "global_generator",
    "op_determinism_query",
    "op_modules",
    "op_callbacks",
    "op_callback_skip_ops",
    "make_ndarray",
    "in_xla_context",
    "extract_stack",
    "XLA_COMPILE",
    "call_function_hook",
    "function_def",
    "add_function_def",
    "remove_function",
    "graph_debug_info",
    "run_function",
    "op_def",
    "variable_dtype",
    "read_variable",
    "assign_variable",
]

#: the FunctionDef attr of ``tf.function(jit_compile=True)`` (attributes.XLA_COMPILE)
XLA_COMPILE = "_XlaMustCompile"

#: TensorFlow's private op modules that hold ``bias_add`` and the segment sums
OP_MODULES = ("tensorflow.python.ops.nn", "tensorflow.python.ops.nn_ops", "tensorflow.python.ops.math_ops")


def eager_context() -> Any:
    from tensorflow.python.eager import context  # private module: holds the op-seed RNG

    return context.context()


def global_generator() -> Any:
    """TF's global ``tf.random.Generator``, or None when it was never created."""
    mod = sys.modules.get("tensorflow.python.ops.stateful_random_ops")
    return getattr(mod, "global_generator", None) if mod else None


def op_determinism_query() -> Callable[[], bool] | None:
    try:
        from tensorflow.python.framework.config import is_op_determinism_enabled
    except ImportError:
        return None
    return is_op_determinism_enabled


def op_modules() -> list[Any]:
    """The importable modules of :data:`OP_MODULES`."""
    import importlib

    mods = []
    for path in OP_MODULES:
        try:
            mods.append(importlib.import_module(path))
        except ImportError:
            continue
    return mods


def op_callbacks() -> Any:
    from tensorflow.python.framework import op_callbacks as module

    return module


def op_callback_skip_ops() -> set[str]:
    from tensorflow.python.debug.lib import op_callbacks_common

    return {s.decode() for s in op_callbacks_common.OP_CALLBACK_SKIP_OPS}


def make_ndarray(tensor_proto: Any) -> Any:
    from tensorflow.python.framework import tensor_util

    return tensor_util.MakeNdarray(tensor_proto)


def in_xla_context(graph: Any) -> bool:
    from tensorflow.python.ops import control_flow_util

    return bool(control_flow_util.GraphOrParentsInXlaContext(graph))


def extract_stack() -> Any:
    from tensorflow.python.util import tf_stack

    return tf_stack.extract_stack()


def eager_execute(op_type: str, num_outputs: int, inputs: list, attrs: tuple) -> Any:
    """Run one eager op by type (``tensorflow.python.eager.execute.execute``)."""
    from tensorflow.python.eager import context, execute

    return execute.execute(op_type, num_outputs, inputs, attrs, context.context())


def call_function_hook(before: Callable[[str, list, int], None]) -> tuple[Any, str, Any]:
    """Wrap ``Context.call_function`` so that ``before(name, inputs, num_outputs)`` runs
    before each eager call of a function; (class, attribute, original) to undo it."""
    from tensorflow.python.eager import context

    cls = context.Context
    original = cls.__dict__["call_function"]

    def call_function(self, name, tensor_inputs, num_outputs):
        before(name.decode("utf-8") if isinstance(name, bytes) else str(name), tensor_inputs, num_outputs)
        return original(self, name, tensor_inputs, num_outputs)

    call_function.__wrapped__ = original  # type: ignore[attr-defined]
    cls.call_function = call_function
    return cls, "call_function", original


def function_def(name: str) -> Any:
    return eager_context().get_function_def(name)


def add_function_def(fdef: Any) -> None:
    eager_context().add_function_def(fdef)


def remove_function(name: str) -> None:
    eager_context().remove_function(name)


def graph_debug_info(name: str) -> Any:
    return eager_context().get_graph_debug_info(name.encode("utf-8"))


def run_function(name: str, inputs: list, num_outputs: int) -> Any:
    """Run a registered function by name, as ``Context.call_function`` does, without op
    callbacks (``execute.quick_execute``)."""
    import itertools

    from tensorflow.python.eager import execute

    ctx = eager_context()
    attrs = tuple(itertools.chain(*ctx.function_call_options.as_attrs().items()))
    return execute.quick_execute(name, num_outputs, list(inputs), attrs, ctx)


def op_def(op_type: str) -> Any:
    """The OpDef of a registered op; None for a function name."""
    from tensorflow.python.framework import op_def_registry

    return op_def_registry.get(op_type)


def variable_dtype(handle: Any) -> Any:
    """The dtype enum of the variable behind an eager resource handle; None when the
    handle is not a variable's (no handle data)."""
    from tensorflow.python.ops import resource_variable_ops

    try:
        data = resource_variable_ops.get_eager_safe_handle_data(handle)
    except (AttributeError, AssertionError):
        return None
    if data is None or not data.is_set or not data.shape_and_type:
        return None
    return data.shape_and_type[0].dtype


def read_variable(handle: Any, dtype: Any) -> Any:
    from tensorflow.python.ops import gen_resource_variable_ops

    return gen_resource_variable_ops.read_variable_op(handle, dtype)


def assign_variable(handle: Any, value: Any) -> None:
    from tensorflow.python.ops import gen_resource_variable_ops

    gen_resource_variable_ops.assign_variable_op(handle, value)
