"""Record every TensorFlow op, eager and inside ``tf.function`` graphs, into a trace.

Uses TensorFlow's op callbacks (``tensorflow.python.framework.op_callbacks``), as
tfdbg2 does in ``tensorflow/python/debug/lib/dumping_callback.py``
(https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/debug/lib/dumping_callback.py):

* eager ops: the callback runs after the op with concrete inputs and outputs, which
  are digested at once (CPU: zero-copy NumPy view; GPU: TF ops on the device);
* graph construction inside ``tf.function``: the callback instruments the graph it is
  building, so the program that runs is the compiled function itself, not an eager
  imitation. For each op it adds one stateful ``tf.numpy_function`` that receives the
  op's outputs (on a GPU: their 8-byte partial digests computed in the graph by
  :func:`fwd9m.tensorflow._digest.partial`); in TF2 function graphs stateful ops run
  through automatic control dependencies, as tfdbg's ``DebugIdentityV2`` ops do. The
  graph's ops are written in construction order (execution order inside a graph can
  vary between runs) when the eager call of the function returns. Ops TF's own
  debugger skips (``op_callbacks_common.OP_CALLBACK_SKIP_OPS``: Identity, control
  flow, partitioned calls) are not instrumented; an Identity passes its input's
  digest through. ``tf.data`` functions are not instrumented (their ops appear as
  eager ``*Dataset`` ops in the data phase).

An eager call of an XLA-compiled function (``jit_compile=True``; XLA's code cannot run
the hooks) is one op ``xla:NAME``: its tensor inputs and outputs, plus the values of the
variables it is given, read before the call (inputs, flagged as parameters) and after
it (outputs), through a hook on ``Context.call_function`` (:mod:`._private`); a function
traced before recording started is ``function:NAME``. In a targeted run (a capture
window) a selected XLA call is narrowed after it ran (:mod:`._xla`). An XLA function
called inside another ``tf.function`` is not an eager call: it is not recorded (the
call op of a function is not passed to op callbacks), and the trace's notes name the
calling function. Keras 3's ``jit_compile=True`` train step is called so, inside
``multi_step_on_iterator``: while recording, it runs as an eager call instead
(:mod:`fwd9m.keras._tf_xla`, patched once Keras has imported its TensorFlow trainer).

Keras layer/module path: the TF name scope (``tf.get_current_name_scope()`` eagerly,
the op name in graphs), which Keras 3 sets to the layer path. Phase: backward inside
``tf.GradientTape.gradient`` (and graph ops under ``gradient_tape/``), optimizer
inside Keras' ``Optimizer.apply`` (both patched for the duration, then restored),
data for dataset/iterator ops, forward inside a name scope, else other. The step
counts optimizer applications (calls of functions whose graph applies the optimizer,
told from other functions of the same Python name, such as Keras' test step, by their
FunctionDef).

What the recorder remembers across ``record()`` blocks (:class:`_Registry`) to decide how
a call is recorded is keyed by the function (its graph, or its runtime name, which a
process does not reuse), not by its Python name: by name, a graph instrumented in one
recording (Keras' ``one_step_on_data`` at level "modules") left a later model's XLA
step of that name unrecorded, and a later evaluation counted as training steps.

An op's attrs are one more input, last (the ``args`` record): eager attrs as the
callback receives them (``alpha`` of ``LeakyRelu``), graph attrs from their
``AttrValue`` protos (a traced ``tf.constant``'s value), leaving out resource names and
function attrs (:data:`_NAME_ATTRS`). Op types may arrive as bytes (``CropAndResize``)
and are decoded. An exception inside the callback or a graph hook is caught: the op is
"not recorded" and the program goes on.

Level "modules" patches Keras' ``Layer.__call__`` and ``Optimizer.apply`` instead of
hooking every op: one record per layer call (its outputs), per gradient and per
variable after the update, eagerly or through the same graph hooks.
"""

from __future__ import annotations

import functools
import hashlib
import re
import weakref
from typing import Any

from .. import fingerprint as fp
from .._log import logger
from .._recording._capture import take_call
from .._recording._common import Recording, _is_library, _short, guarded, user_location, value_text
from .._recording._store import HAS_SAMPLE, IS_PARAM, SEP
from . import _digest

__all__ = ["TFRecorder"]

_FUNCTION_PREFIXES = ("__inference_", "__forward_", "__backward_")
_NOT_DIGESTED = ("resource", "variant", "string")
#: attrs that are not values of the computation: a resource's instance name (a fresh
#: UUID per run for a variable: ``shared_name``), its container, a py_func's registry
#: token (``pyfunc_N``, a per-process counter), a function call's executor config, TF-internal
#: attrs (``_class``, ``_user_specified_name``, ...). Function-valued attrs are left
#: out too (the name carries a per-process counter; the function's ops are recorded).
_NAME_ATTRS = frozenset({"shared_name", "container", "token", "config_proto", "executor_type"})
#: a graph Const (or any tensor attr) with at most this many elements is written by value
_SMALL_TENSOR = 8
#: the name of the digest hook added after a graph op (``tf.numpy_function(name=...)``)
_HOOK = "fwd9m_digest"
#: a hook's node name in a FunctionDef, after its name scope (TF adds ``_N`` to repeats)
_HOOK_NODE = re.compile(rf"{_HOOK}(_[0-9]+)?")


def _text(x) -> str:
    """An op type or attr name as str: TF hands some op types over as bytes
    (``b'CropAndResize'`` from the eager gradient and image ops)."""
    return x.decode("utf-8", "replace") if isinstance(x, (bytes, bytearray)) else str(x)


def _is_function(op_type: str) -> bool:
    return op_type.startswith(_FUNCTION_PREFIXES)


def _attr_pairs(attrs) -> list[tuple[str, Any]]:
    """The (name, value) attrs of an op callback's flat ``attrs`` tuple that are values
    of the computation (see :data:`_NAME_ATTRS`)."""
    if not attrs:
        return []
    it = iter(attrs)
    out = []
    for k, v in zip(it, it):
        k = _text(k)
        if not k.startswith("_") and k not in _NAME_ATTRS:
            out.append((k, v))
    return out


def _tensor_proto_text(tp) -> str:
    from . import _private

    dims = [d.size for d in tp.tensor_shape.dim]
    size = 1
    for d in dims:
        size *= d
    if size <= _SMALL_TENSOR:
        return repr(_private.make_ndarray(tp).tolist())
    digest = hashlib.blake2b(tp.SerializeToString(deterministic=True), digest_size=8).hexdigest()
    return f"tensor({tp.dtype},{dims},{digest})"


def _graph_attrs_text(attrs) -> str | None:
    """Canonical text of a graph op's attrs (``AttrValue`` protos): scalars by value,
    tensors by value when small (a ``tf.constant(random.random())`` traced into a
    function), else a digest of their deterministic serialization; None if none."""
    from google.protobuf import text_format

    items = []
    for k, av in _attr_pairs(attrs):
        if not hasattr(av, "WhichOneof"):
            items.append(f"{k}={value_text(av)}")
            continue
        kind = av.WhichOneof("value")
        if kind == "func" or (kind == "list" and len(av.list.func)):
            continue
        if kind in ("s", "i", "f", "b", "type"):
            v = repr(getattr(av, kind))
        elif kind == "tensor":
            v = _tensor_proto_text(av.tensor)
        elif kind is None:
            v = ""
        else:  # shape, list, placeholder
            v = text_format.MessageToString(av, as_one_line=True)
        items.append(f"{k}={v}")
    return SEP.join(items) if items else None


class _Registry:
    """Process-wide: graphs stay instrumented after a ``record()`` block ends (as with
    tfdbg), so their hooks report to whichever recorder is active (none: a no-op)."""

    active: TFRecorder | None = None
    #: per instrumented graph op: (op type, scope, phase, location,
    #: [(dtype, shape, producer ref)], [(dtype, shape)], digestable output slots, on_gpu)
    ops: list[tuple] = []
    src: dict[tuple, tuple[int, int] | None] = {}  # (graph id, tensor name) -> (op, slot)
    #: outermost function graphs that apply an optimizer, by identity (as ``instrumented``)
    optimizer_graphs: weakref.WeakSet = weakref.WeakSet()
    optimizer_functions: dict[str, bool] = {}  # runtime function name -> the function of one of them
    xla_graphs: set[str] = set()  # XLA-compiled function graphs (names, each logged once)
    xla_functions: dict[str, bool] = {}  # runtime function name -> compiled by XLA
    xla_constants: dict[str, str] = {}  # runtime function name -> its constants' text (or "")
    #: outermost function graphs with hooks, by identity: Keras' ``one_step_on_data`` of
    #: two models are two graphs of one name, one perhaps instrumented, the other compiled by XLA
    instrumented: weakref.WeakSet = weakref.WeakSet()
    hooked: dict[str, bool] = {}  # runtime function name -> it, or a function it calls, holds hooks
    #: function argument placeholders (op index) digested where a later op reads them
    read_args: set[int] = set()
    #: tf.data function graph -> (random op type, user location) of its first stateful draw; by
    #: graph, not name (``Dataset_map_NAME``: another function of the same name draws nothing)
    data_random: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _graph_hook(idx: int, *arrays) -> None:
    rec = _Registry.active
    if rec is not None:
        try:
            rec._graph_values(idx, *arrays)
        except Exception as exc:  # noqa: BLE001 - runs inside the user's graph: never raise
            try:
                rec.rec.failed(_Registry.ops[idx][0], exc)
            except Exception:  # noqa: BLE001
                pass


class TFRecorder:
    framework = "tensorflow"

    def __init__(self, rec: Recording):
        import tensorflow as tf

        from . import _private

        self.tf = tf
        self.rec = rec
        self._op_callbacks = _private.op_callbacks()
        self._skip = _private.op_callback_skip_ops()
        self._phase: list[str] = []
        self._patched: list[tuple[Any, str, Any]] = []
        # physical, not logical: listing logical devices initialises the runtime, after which
        # the script can no longer configure devices (tf.config.set_logical_device_configuration
        # raises); listing physical ones does not (tensorflow/python/framework/config.py,
        # list_physical_devices / list_logical_devices docstrings)
        self._on_gpu = bool(tf.config.list_physical_devices("GPU"))
        # graph instrumentation state (bounded by the size of the traced programs)
        self._vals: dict[int, list[int | None]] = {}  # gop -> output digests of the current call
        self._float = {"float16", "bfloat16", "float32", "float64"}
        self._str_types = (tf.DType, tf.TensorShape)
        self._narrowing = False  # True while an XLA call is narrowed: its runs are not the program's
        self._xla_pending = None  # (seq, fwd9m.tensorflow._xla.Pending) of the call about to run
        self._xla_vars = None  # (function, [(input index, handle, dtype)], value records) before a call
        self._keras_pending = False  # Keras' TF trainer not yet patched (:mod:`fwd9m.keras._tf_xla`)
        self._nested_xla: set[str] = set()  # non-XLA functions that call an XLA one (not recorded)
        self._installed = None  # the op callback added by start, removed by stop

    # ------------------------------------------------------------- install
    def _wrap_phase(self, cls, attr: str, phase: str, step: bool = False) -> None:
        owner = next((k for k in cls.__mro__ if attr in k.__dict__), None)
        if owner is None:
            return
        cls, original = owner, owner.__dict__[attr]
        stack, rec = self._phase, self.rec

        @functools.wraps(original)
        def wrapper(*a, **k):
            stack.append(phase)
            try:
                return original(*a, **k)
            finally:
                stack.pop()
                if step and self.tf.executing_eagerly():
                    rec.step += 1

        setattr(cls, attr, wrapper)
        self._patched.append((cls, attr, original))

    # ------------------------------------------------------------- layer level
    def _patch_layers(self) -> None:
        """Level "modules": one record per Keras layer call, per gradient and per
        variable update, instead of every op (the cheap first pass)."""
        import keras

        tf = self.tf
        layer_cls = keras.layers.Layer
        owner = next(k for k in layer_cls.__mro__ if "__call__" in k.__dict__)
        original = owner.__dict__["__call__"]
        stack: list[str] = []
        rec = self

        def is_tf(t):
            return isinstance(t, (tf.Tensor, tf.Variable))

        def flat(x):
            return [t for t in tf.nest.flatten(x) if is_tf(t)]

        @functools.wraps(original)
        def call(layer, *args, **kwargs):
            stack.append(layer.name)
            try:
                out = original(layer, *args, **kwargs)
            finally:
                path = "/".join(stack)
                stack.pop()
            ins, outs = flat(args), flat(out)
            if outs:
                rec._pseudo_op(f"layer:{type(layer).__name__}", path, "forward", ins if not stack else [], outs)
            return out

        owner.__call__ = call
        self._patched.append((owner, "__call__", original))
        opt_owner = next(k for k in keras.optimizers.Optimizer.__mro__ if "apply" in k.__dict__)
        apply = opt_owner.__dict__["apply"]

        @functools.wraps(apply)
        def apply_wrapper(optimizer, grads, trainable_variables=None, *a, **k):
            variables = list(trainable_variables if trainable_variables is not None else optimizer._trainable_variables)
            grads = list(grads)
            for g, v in zip(grads, variables):
                if g is not None and is_tf(g):
                    rec._pseudo_op("grad", getattr(v, "path", v.name), "backward", [], [g])
            self._phase.append("optimizer")
            try:
                result = apply(optimizer, grads, variables, *a, **k)
            finally:
                self._phase.pop()
            for v in variables:
                rec._pseudo_op("param", getattr(v, "path", v.name), "optimizer", [], [tf.convert_to_tensor(v)])
            if tf.executing_eagerly():
                rec.rec.step += 1
            return result

        opt_owner.apply = apply_wrapper
        self._patched.append((opt_owner, "apply", apply))

    @guarded("<keras layer hook>")
    def _pseudo_op(self, op_type: str, scope: str, phase: str, inputs, outputs) -> None:
        tf = self.tf
        if tf.executing_eagerly():
            if not self._in_window():
                return
            rec = self.rec
            ctx = rec.ctx_id(scope, phase, user_location(3), "", "")
            rec.writer.op(
                rec.name_id(op_type, op_type),
                ctx,
                rec.step,
                [self._eager_tensor(t, False) for t in inputs],
                [self._eager_tensor(t, True) for t in outputs],
            )
            return
        graph = outputs[0].graph
        if (getattr(graph, "name", "") or "").startswith("Dataset_"):
            return
        self._register(op_type, scope, phase, inputs, outputs, graph)

    def _flush_only(self, op_type, inputs, attrs, outputs, op_name=None, graph=None):
        """Level "modules": the op callback only marks function calls."""
        op_type = _text(op_type)
        if self._keras_pending and graph is None:
            self._patch_keras_steps()
        if graph is None and _is_function(op_type):
            return self._callback(op_type, inputs, attrs, outputs)
        return None

    def start(self) -> None:
        tf = self.tf
        self._keras_pending = True
        self._patch_keras_steps()
        if self.rec.level == "modules":
            self._patch_layers()
            self._op_callbacks.add_op_callback(self._flush_only)
            self._installed = self._flush_only
            _Registry.active = self
            return
        self._wrap_phase(tf.GradientTape, "gradient", "backward")
        try:
            import keras

            if keras.backend.backend() == "tensorflow":
                self._wrap_phase(keras.optimizers.Optimizer, "apply", "optimizer", step=True)
        except (ImportError, AttributeError):
            pass
        self._op_callbacks.add_op_callback(self._callback)
        self._installed = self._callback
        from . import _private

        # before an XLA call: its variables' values; in a targeted run, its inputs for narrowing
        self._patched.append(_private.call_function_hook(self._before_call))
        _Registry.active = self

    def _patch_keras_steps(self) -> None:
        """Keras 3's XLA-compiled ``fit`` step, called inside a plain ``tf.function``,
        runs as an eager call while recording, so that it is recorded (:mod:`fwd9m.keras._tf_xla`).
        Tried at start and then before each eager op until Keras' TensorFlow trainer is
        imported (the recorder can start while Keras is importing TensorFlow)."""
        from .. import _frameworks

        try:
            undo = _frameworks.backend("keras").patch_tf_steps(lambda: _Registry.active is not None)
        except Exception as exc:  # noqa: BLE001 - a recorder never breaks the program
            logger.info("fwd9m.debug: Keras' train step is not patched: %s", _error_text(exc))
            self._keras_pending = False
            return
        if undo is not None:
            self._patched += undo
            self._keras_pending = False

    def _before_call(self, name: str, inputs, num_outputs: int) -> None:
        """Before an eager function call: when XLA compiles it, read the values of the
        variables it is given (inputs of its op record); in a targeted run, when it is the
        op a capture window selects, keep its inputs for :mod:`._xla`'s narrowing after it
        ran. Never raises into the program."""
        self._xla_vars = None
        if self._narrowing or not self._in_window():
            return
        try:
            if not _is_xla_function(name):
                return
            if self.rec.digests:
                self._read_variables(name, inputs)
            if self.rec.capture.windows:
                self._keep_for_narrowing(name, inputs, num_outputs)
        except Exception as exc:  # noqa: BLE001 - a recorder never breaks the program
            logger.info("fwd9m.debug: cannot read the variables of %s: %s", name, _error_text(exc))

    def _read_variables(self, name: str, inputs) -> None:
        from . import _private

        handles = [(i, t, _private.variable_dtype(t)) for i, t in enumerate(inputs) if t.dtype.name == "resource"]
        handles = [h for h in handles if h[2]]
        if handles:
            self._xla_vars = (name, handles, self._variable_records([(h, d) for _, h, d in handles], False))

    def _keep_for_narrowing(self, name: str, inputs, num_outputs: int) -> None:
        from . import _xla

        seq = self.rec.writer.ops + len(self._vals)  # the graph ops still to write come first
        if not any(a <= seq <= b for a, b in self.rec.capture.windows):
            return
        self._narrowing = True  # reading the variables is not the program's op
        try:
            pending = _xla.before(name, inputs, num_outputs)
        except Exception as exc:  # noqa: BLE001 - said in the capture, never raised into the program
            pending = _xla.Pending.failed(name, f"inputs that could not be kept before the call ({_error_text(exc)})")
        finally:
            self._narrowing = False
        self._xla_pending = (seq, pending) if pending is not None else None

    def _narrow_xla(self, seq: int, op_type: str, kind: str) -> None:
        """After the program's call of a function (op ``seq``), when a capture window
        selects it: narrow a pending XLA call into the capture file
        (:func:`fwd9m._recording._capture.take_call`); another call's capture says why not."""
        pending, self._xla_pending = self._xla_pending, None
        if not any(a <= seq <= b for a, b in self.rec.capture.windows):
            return
        from . import _xla

        if pending is not None and pending[0] == seq and pending[1].name == op_type:
            call = pending[1]
        elif kind == "xla":
            call = _xla.Pending.failed(op_type, "inputs that were not kept before the call")
        else:
            call = _xla.Pending.failed(
                op_type,
                "the call of a tf.function traced before recording started: its ops were not "
                "recorded one by one, and only calls of XLA-compiled functions are narrowed",
            )
        self._narrowing = True
        try:
            take_call(self.rec, seq, "tensorflow", call, (), None, 0)
        finally:
            self._narrowing = False

    def stop(self) -> None:
        """Undo what :meth:`start` did, all of it also after a start cut short by an error
        (``record`` stops every recorder, the one whose start raised too)."""
        try:
            if self._installed is not None:
                self._op_callbacks.remove_op_callback(self._installed)
        finally:
            self._installed = None
            if _Registry.active is self:
                _Registry.active = None
            for cls, attr, original in reversed(self._patched):
                setattr(cls, attr, original)
            self._patched = []
        self._flush_graph()

    # ------------------------------------------------------------- helpers
    def _phase_of(self, op_type: str, scope: str) -> str:
        if self._phase:
            return self._phase[-1]
        if op_type.endswith("Dataset") or "Iterator" in op_type:
            return "data"
        if scope.startswith("gradient_tape") or "/gradient_tape/" in scope or scope.startswith("gradients"):
            return "backward"
        return "forward" if scope else "other"

    def _eager_tensor(self, t, want_sample: bool):
        import numpy as np

        rec = self.rec
        dtype = t.dtype.name
        meta = rec.meta_id(dtype, tuple(t.shape))
        if not rec.digests or dtype in _NOT_DIGESTED:
            return (meta, 0, None, None, None)
        try:
            if self._on_gpu and "GPU" in (t.device or ""):
                s, nbytes = _digest.partial(t)
                return (meta, 0, fp.finalize(int(s.numpy()), int(nbytes)), None, None)
            a = np.asarray(t)  # zero-copy view of a host tensor (.numpy() copies)
        except (TypeError, ValueError, AttributeError, self.tf.errors.OpError):
            return (meta, 0, None, None, None)
        return self._array_tensor(meta, dtype, a, want_sample)

    def _array_tensor(self, meta: int, dtype: str, a, want_sample: bool):
        import numpy as np

        a = np.ascontiguousarray(a)
        if a.dtype.hasobject:
            return (meta, 0, None, None, None)
        u8 = a.reshape(-1).view(np.uint8)
        dig = fp.u8_digest(u8)
        if want_sample and self.rec.samples and dtype in self._float and u8.size:
            return (meta, HAS_SAMPLE, dig, self.rec.sample(u8, a.itemsize), None)
        return (meta, 0, dig, None, None)

    # ------------------------------------------------------------- callback
    def _callback(self, op_type, inputs, attrs, outputs, op_name=None, graph=None):
        """The op callback; an exception of the recorder is caught: the op is recorded
        as "not recorded" (:meth:`Recording.failed`) and the program goes on (a callback
        that raises would fail the user's op)."""
        op_type = _text(op_type)
        if self._narrowing:
            return None
        if self._keras_pending and graph is None:
            self._patch_keras_steps()
        try:
            return self._on_op(op_type, inputs, attrs, outputs, op_name, graph)
        except Exception as exc:  # noqa: BLE001 - a recorder never breaks the program
            try:
                name_id, ctx = self.rec.failed(op_type, exc)
                if graph is None:  # graph ops are counted; eager ones also keep their place
                    self.rec.writer.op(name_id, ctx, self.rec.step, [], [])
            except Exception:  # noqa: BLE001
                pass
            return None

    def _on_op(self, op_type: str, inputs, attrs, outputs, op_name, graph):
        if graph is not None:
            return self._instrument(op_type, inputs, attrs, outputs, _text(op_name or ""), graph)
        if _is_function(op_type):
            self._function_call(op_type, inputs, outputs)
            return None
        if op_type.startswith("Parallel") and "Dataset" in op_type:
            self._parallel_dataset(op_type, attrs)
        if op_type in self._skip or not self._in_window():
            return None
        rec = self.rec
        seq = rec.writer.ops
        capture = bool(rec.capture) and rec.capture.wants(seq, op_type)
        scope = self.tf.get_current_name_scope()
        ins = [self._eager_tensor(t, False) for t in inputs]
        pairs = _attr_pairs(attrs)
        if pairs:  # last, after the tensors (capture indices are tensor indices)
            ins.append(rec.args_record(pairs, self._str_types))
        outs = [self._eager_tensor(t, True) for t in (outputs or ())]
        dev = ""
        for t in outputs or inputs or ():
            dev = (t.device or "").rsplit("device:", 1)[-1]
            break
        ctx = rec.ctx_id(scope.rstrip("/"), self._phase_of(op_type, scope), user_location(2), "", dev)
        seq = rec.writer.op(rec.name_id(op_type, op_type), ctx, rec.step, ins, outs)
        if capture:  # also the whole call, for replay (fwd9m.debug._replay)
            take_call(rec, seq, "tensorflow", op_type, inputs, attrs, len(outputs or ()))
            for is_out, ts in ((False, inputs), (True, outputs or ())):
                for i, t in enumerate(ts):
                    try:
                        data = t.numpy().tobytes()
                    except (TypeError, ValueError, AttributeError, self.tf.errors.OpError):
                        continue  # a resource handle (InvalidArgumentError): not a value
                    rec.writer.capture(seq, is_out, i, rec.meta_id(t.dtype.name, tuple(t.shape)), data)
        return None

    def _parallel_dataset(self, op_type: str, attrs) -> None:
        """A parallel tf.data stage (``map(..., num_parallel_calls=...)``, a parallel
        interleave) whose function draws from a stateful random op: its threads draw in
        an order that varies from run to run, and its ops are not recorded one by one
        (they run on tf.data's threads): the trace's ``pipeline`` names the draw."""
        graph = getattr(dict(_attr_pairs(attrs)).get("f"), "graph", None)
        try:
            got = _Registry.data_random.get(graph)
        except TypeError:  # not a graph (None, or no weak reference to it): no draw known
            got = None
        if got is None or any(p["location"] == got[1] for p in self.rec.pipeline):
            return
        name = graph.name
        stage = name[len("Dataset_") :] if name.startswith("Dataset_") else name
        self.rec.pipeline.append(
            {
                "op": got[0],
                "location": got[1],
                "where": f"{op_type} ({stage})",
                "catalog": "tensorflow.data-parallel-map",
            }
        )
        self.rec.notes.append(
            f"the tf.data function {stage} runs {got[0]} at {got[1]} in a parallel stage ({op_type}): its ops run "
            f"on tf.data's threads and are not recorded one by one (the order of their draws varies between "
            f"threads, so no op of one run is paired with an op of the other); what it makes is compared "
            f"where the model reads the batch (IteratorGetNext)"
        )

    def _function_call(self, op_type: str, inputs, outputs) -> None:
        """An eager call of a function whose ops are not instrumented (XLA-compiled, or
        traced before recording started): one op, ``xla:NAME`` or ``function:NAME``; an
        XLA call's variables are inputs (their values before the call) and outputs
        (after it), read by :meth:`_before_call`."""
        self._flush_graph()
        name = op_type.split("_", 3)[-1].rsplit("_", 1)[0]  # __inference_NAME_123
        got, self._xla_vars = self._xla_vars, None
        if not _is_instrumented(op_type) and self._in_window():
            kind = "xla" if _is_xla_function(op_type) else "function"
            rec = self.rec
            ins = [self._eager_tensor(t, False) for t in inputs]
            outs = [self._eager_tensor(t, True) for t in (outputs or ())]
            if got is not None and got[0] == op_type:
                for (i, _, _), r in zip(got[1], got[2]):
                    ins[i] = r
                outs += self._variable_records([(h, d) for _, h, d in got[1]], True)
            constants = _xla_constants(op_type) if kind == "xla" and rec.digests else ""
            if constants:  # values traced into the compiled function: inputs too, last
                ins.append(rec.text_record(constants))
            ctx = rec.ctx_id(name, self._phase_of(op_type, ""), user_location(3), kind, "")
            seq = rec.writer.op(rec.name_id((kind, name), f"{kind}:{name}"), ctx, rec.step, ins, outs)
            if rec.capture.windows:
                self._narrow_xla(seq, op_type, kind)
        if _applies_optimizer(op_type, name):
            self.rec.step += 1

    def _variable_records(self, handles, want_sample: bool) -> list:
        """Tensor records of the values of variables (by handle and dtype), flagged as
        parameters; the reads are not the program's ops (not recorded)."""
        from . import _private

        self._narrowing = True
        try:
            out = []
            for h, dtype in handles:
                meta, flags, *rest = self._eager_tensor(_private.read_variable(h, dtype), want_sample)
                out.append((meta, flags | IS_PARAM, *rest))
            return out
        finally:
            self._narrowing = False

    def _instrument(self, op_type, inputs, attrs, outputs, op_name: str, graph):
        """Graph construction: register the op and add its digest side effect."""
        dataset = _dataset_graph(graph)
        if dataset is not None:  # a tf.data function, or a branch of one: not instrumented
            if _is_stateful_random(op_type):
                _Registry.data_random.setdefault(dataset, (op_type, self._graph_location()))
            return None
        if not hasattr(graph, "outer_graph"):
            return None  # TF1 graph: not instrumented
        gid = id(graph)
        src = _Registry.src
        outputs = list(outputs or ())
        if op_type in self._skip:
            if op_type == "Identity" and inputs and outputs:
                src[(gid, outputs[0].name)] = src.get((id(inputs[0].graph), inputs[0].name))
            return None
        scope = op_name.rsplit("/", 1)[0] if "/" in op_name else ""
        phase = self._phase[-1] if self._phase else self._phase_of(op_type, op_name if "/" in op_name else "")
        return self._register(
            op_type, scope, phase, inputs, outputs, graph, _graph_attrs_text(attrs) if self.rec.digests else None
        )

    def _register(self, op_type: str, scope: str, phase: str, inputs, outputs, graph, attrs_text: str | None = None):
        """Register a graph op (or a layer's outputs) and add its digest hook. Graphs
        compiled by XLA (``jit_compile=True``) cannot run Python hooks: they are
        recorded as one op per call instead (``xla:NAME``)."""
        tf = self.tf
        from . import _private

        outer = graph
        while getattr(getattr(outer, "outer_graph", None), "outer_graph", None) is not None:
            outer = outer.outer_graph
        if phase == "optimizer":
            _Registry.optimizer_graphs.add(outer)
        if _private.in_xla_context(graph):
            if outer.name not in _Registry.xla_graphs:
                _Registry.xla_graphs.add(outer.name)
                logger.info(
                    "fwd9m.debug: %s is compiled by XLA (jit_compile=True): recorded as "
                    "one op per call; compile it with jit_compile=False to see its ops",
                    outer.name,
                )
            # TF enters an XLA context on the caller's graph for the call of an XLA function
            # (polymorphic_function.py, OptionalXlaContext): an outer function whose own ops
            # were instrumented is not compiled by XLA
            if outer in _Registry.instrumented and outer.name not in self._nested_xla:
                self._nested_xla.add(outer.name)
                self.rec.notes.append(_nested_xla_note(outer.name))
            return None
        _Registry.instrumented.add(outer)
        gid = id(graph)
        src = _Registry.src
        ins = [(t.dtype.name, _shape(t), src.get((id(t.graph), t.name))) for t in inputs]
        for t, (_, _, ref) in zip(inputs, ins):
            self._read_argument(t, ref)
        outs = [(t.dtype.name, _shape(t)) for t in outputs]
        digestable = (
            [i for i, t in enumerate(outputs) if t.dtype.name not in _NOT_DIGESTED and t.dtype.is_numpy_compatible]
            if self.rec.digests
            else []
        )
        idx = len(_Registry.ops)
        _Registry.ops.append(
            (op_type, scope, phase, self._graph_location(), ins, outs, digestable, self._on_gpu, attrs_text)
        )
        for i, t in enumerate(outputs):
            src[(gid, t.name)] = (idx, i)
        if not outputs:
            return None
        args = [outputs[i] for i in digestable]
        if self._on_gpu and args:
            parts = []
            for t in args:
                s, n = _digest.partial(t)
                parts += [s, tf.cast(n, tf.int64)]
            args = parts
        tf.numpy_function(functools.partial(_graph_hook, idx), args, Tout=[], stateful=True, name=_HOOK)
        return None

    def _read_argument(self, t, ref) -> None:
        """A function's argument (a ``Placeholder``) read by the op being built: its value
        is digested here, at its first reader, once. The placeholders of a function's
        arguments are made before TensorFlow adds control dependencies to the graph's
        stateful ops, so a digest hook added with them is pruned: a nested function's
        inputs (Keras' ``one_step_on_data`` batch) were never digested, and an op reading
        them looked like one whose inputs agree."""
        if ref is None or ref[0] in _Registry.read_args or not self.rec.digests:
            return
        entry = _Registry.ops[ref[0]]
        if entry[0] != "Placeholder" or ref[1] not in entry[6]:
            return
        _Registry.read_args.add(ref[0])
        args = [t]
        if entry[7]:  # on a GPU: the partial digest computed in the graph
            s, n = _digest.partial(t)
            args = [s, self.tf.cast(n, self.tf.int64)]
        self.tf.numpy_function(functools.partial(_graph_hook, ref[0]), args, Tout=[], stateful=True, name=_HOOK)

    def _graph_location(self) -> str:
        """User file:line at graph construction, with autograph's generated code mapped
        back to the user's source (``tf_stack.extract_stack`` applies autograph's source
        map, as tfdbg2's dumping_callback does)."""
        from . import _private

        for frame in reversed(_private.extract_stack()):
            fn = frame.filename
            if not _is_library(fn) and "__autograph_generated_file" not in fn:
                return f"{_short(fn)}:{frame.lineno}"
        return user_location(3)

    def _in_window(self) -> bool:
        steps = self.rec.steps
        return steps is None or steps[0] <= self.rec.step <= steps[1]

    def _graph_values(self, idx: int, *arrays) -> None:
        """Runs inside the graph (numpy_function): op ``idx``'s output values."""
        if not self._in_window():
            return
        _, _, _, _, _, outs, digestable, on_gpu, _ = _Registry.ops[idx]
        vals: list = [None] * len(outs)
        for j, i in enumerate(digestable):
            vals[i] = ("partial", int(arrays[2 * j]), int(arrays[2 * j + 1])) if on_gpu else (arrays[j],)
        self._vals[idx] = vals

    def _flush_graph(self) -> None:
        """After a function call: write the graph ops that ran, in construction order."""
        if not self._vals:
            return
        rec = self.rec
        vals, self._vals = self._vals, {}
        digests: dict[int, list] = {}
        for idx in sorted(vals):
            op_type, scope, phase, loc, in_info, out_info, _, _, attrs_text = _Registry.ops[idx]
            outs = []
            for (dtype, shape), v in zip(out_info, vals[idx]):
                meta = rec.meta_id(dtype, shape)
                if v is None:
                    outs.append((meta, 0, None, None, None))
                elif len(v) == 3:
                    outs.append((meta, 0, fp.finalize(v[1], v[2]), None, None))
                else:
                    outs.append(self._array_tensor(meta, dtype, v[0], True))
            digests[idx] = [o[2] for o in outs]
            ins = []
            for dtype, shape, ref in in_info:
                d = None
                if ref is not None and ref[0] in digests and ref[1] < len(digests[ref[0]]):
                    d = digests[ref[0]][ref[1]]
                ins.append((rec.meta_id(dtype, shape), 0, d, None, None))
            if attrs_text is not None:  # last, as for eager ops
                ins.append(rec.text_record(attrs_text))
            ctx = rec.ctx_id(scope, phase, loc, "", "")
            rec.writer.op(rec.name_id(op_type, op_type), ctx, rec.step, ins, outs)


def _nested_xla_note(outer: str) -> str:
    return (
        f"the tf.function {outer} calls a function compiled by XLA (jit_compile=True) inside its graph: "
        "TensorFlow passes no such call to the recorder and XLA's code runs no hooks, so the ops of that "
        "call (in Keras: its train, test or predict step) were not recorded, and a difference made inside "
        "it shows only on what later reads its results; to record it op by op, compile it with jit_compile=False "
        "(Keras: model.compile(..., jit_compile=False))"
    )


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc)[:200]}"


def _xla_constants(op_type: str) -> str:
    """The ``Const`` nodes of XLA function ``op_type``'s FunctionDef as an ``args`` text
    (``constant NODE=VALUE`` items; small tensors by value, others by digest): a Python
    float the function closes over is traced into it as a constant, not passed as an
    input, so it is digested as one (a differing one is a value entering from outside, as
    it is in a plain ``tf.function``, whose ops are recorded one by one). Remembered per
    function; "" when it has none or cannot be read."""
    got = _Registry.xla_constants.get(op_type)
    if got is None:
        from . import _private

        try:
            nodes = _private.function_def(op_type).node_def
            got = SEP.join(
                f"constant {n.name}={_tensor_proto_text(n.attr['value'].tensor)}" for n in nodes if n.op == "Const"
            )
        except Exception:  # noqa: BLE001 - not readable: no constants input
            got = ""
        _Registry.xla_constants[op_type] = got
    return got


def _is_xla_function(op_type: str) -> bool:
    """Whether the runtime function ``op_type`` is compiled by XLA (its FunctionDef's
    ``_XlaMustCompile``): a function traced before recording started is one too."""
    got = _Registry.xla_functions.get(op_type)
    if got is None:
        from . import _private

        try:
            attr = _private.function_def(op_type).attr.get(_private.XLA_COMPILE)
        except Exception:  # noqa: BLE001 - not a registered function: a plain call
            attr = None
        got = _Registry.xla_functions[op_type] = bool(attr is not None and attr.b)
    return got


def _is_instrumented(op_type: str) -> bool:
    """Whether the runtime function ``op_type`` holds fwd9m's digest hooks, in its own
    FunctionDef or in one it calls (a nested ``tf.function``, a ``tf.cond`` branch): its
    ops are then written one by one, from those hooks, and its call is no op of its own.
    Asked of the function itself, not of its Python name, which another function can
    share: Keras' ``one_step_on_data`` of a model recorded earlier in the process (its
    graph instrumented) and of a later model compiled by XLA, whose call is the op.
    Remembered per function (a runtime name is not reused in a process)."""
    got = _Registry.hooked.get(op_type)
    if got is None:
        got = _Registry.hooked[op_type] = _holds_hooks(op_type)
    return got


def _applies_optimizer(op_type: str, name: str) -> bool:
    """Whether the runtime function ``op_type`` (Python name ``name``) is the function of a
    graph seen applying an optimizer while it was traced: the step counter moves after
    its call. Its FunctionDef's nodes are that graph's operations but its arguments
    (``Placeholder``), which tells it from another graph of the same name (Keras' test
    step, another model's train step); remembered per function."""
    got = _Registry.optimizer_functions.get(op_type)
    if got is None:
        got = False
        graphs = [g for g in list(_Registry.optimizer_graphs) if g.name == name]
        if graphs:
            from . import _private

            try:
                nodes = {n.name for n in _private.function_def(op_type).node_def}
            except Exception:  # noqa: BLE001 - not a registered function: no step
                nodes = None
            got = nodes is not None and any(
                nodes == {op.name for op in g.get_operations() if op.type != "Placeholder"} for g in graphs
            )
        _Registry.optimizer_functions[op_type] = got
    return got


def _holds_hooks(name: str) -> bool:
    from . import _private

    todo, seen = [name], {name}
    while todo:
        try:
            fdef = _private.function_def(todo.pop())
        except Exception:  # noqa: BLE001 - not a registered function: no hooks known
            continue
        for node in fdef.node_def:
            if node.op in ("PyFunc", "EagerPyFunc") and _HOOK_NODE.fullmatch(node.name.rsplit("/", 1)[-1]):
                return True
            for value in node.attr.values():  # the functions it calls (call ops, control flow)
                called = [value.func.name] if value.HasField("func") else []
                for f in [*called, *(f.name for f in value.list.func)]:
                    if f not in seen:
                        seen.add(f)
                        todo.append(f)
    return False


def _dataset_graph(graph) -> Any:
    """The tf.data function graph (named ``Dataset_...``) that ``graph`` is, or is nested
    in (a ``tf.cond`` branch of a map function), else None."""
    g = graph
    while g is not None:
        name = getattr(g, "name", "") or ""
        if name.startswith("Dataset_"):
            return g
        g = getattr(g, "outer_graph", None)
    return None


def _is_stateful_random(op_type: str) -> bool:
    """Whether ``op_type`` draws from a random generator's state (``RandomUniform``,
    ``RandomShuffle``, a ``tf.random.Generator`` op), not from a seed input (stateless)."""
    return (
        op_type.startswith(("Random", "Multinomial", "TruncatedNormal", "StatefulUniform", "StatefulStandardNormal"))
        or op_type.startswith(("StatefulTruncatedNormal", "StatefulRandom", "RngRead"))
    ) and "Stateless" not in op_type


def _shape(t) -> tuple:
    try:
        return tuple(-1 if d is None else d for d in t.shape.as_list())
    except ValueError:  # unknown rank
        return ("?",)
