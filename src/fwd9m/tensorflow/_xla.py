"""``tf.function(jit_compile=True)`` under ``fwd9m debug``: narrow a culprit call.

The recorder sees each eager call of an XLA-compiled function as one op ``xla:NAME``
(XLA's executable cannot run the recorder's Python hooks, :mod:`._recorder`); the
program runs compiled, as without fwd9m. When the targeted run of replay reaches the
culprit call (``--capture SEQ:0``), the recorder keeps the call's input tensors and the
values of the variables it reads, as they were before the call (a hook on
``Context.call_function``, :mod:`._private`), lets the program's own call run, and then
:func:`narrow` runs the same function again on those inputs, the variables put back
before every run:

1. compiled: the registered function itself, by its runtime name (``__inference_NAME_N``:
   XLA's executable, compiled once for the program's call) ``repeat`` times: does the
   code XLA generated vary?
2. without XLA: a copy of the same FunctionDef with ``_XlaMustCompile`` false, under
   another name (the same graph, each op run by TensorFlow's own kernel), as many times
   (measured, TF 2.21 on CPU, 4096 float32 values: for sin, pow, gelu, erf, lgamma,
   softmax and log1p the copy's outputs equal a plain ``tf.function``'s bit for bit and
   differ from XLA's in 854 to 4055 elements: the copy is not compiled by XLA);
3. when 2 varies: that copy again with every op's outputs added to the function's
   outputs, and the first op (in graph order) whose inputs agree between two runs and
   whose outputs differ is named, with its type, node name and the user's file:line
   from the function's ``GraphDebugInfo`` (the stack trace TensorFlow keeps for each
   node when it traces the function, autograph's lines mapped back to the source).

A run's result is the digest of its outputs and of every variable it was given,
after it ran (a training step's update is in its variables, not its outputs). Then the
variables get back the values the program's own call left, and the two copies are
removed from the runtime.

What the extra runs cannot put back: the state stateful kernels hold outside variables
(``tf.random.uniform``'s generator; XLA ignores that op's seeds and draws from a state of
its own, per TensorFlow's warning "Using tf.random.uniform with XLA compilation will
ignore seeds"): ops after the captured one in the targeted run may draw other numbers
than in a run without the narrowing; nothing after the capture is used. No graph
bisection: a part of the graph compiled alone is another XLA program (other fusions,
other kernels), so its verdict would not be about this one.
"""

from __future__ import annotations

import hashlib
from typing import Any

from .._recording._common import _is_library, _short
from ._replay import Unrebuildable  # a call the narrowing cannot run again exactly

__all__ = ["Pending", "Unrebuildable", "before", "narrow"]

NARROW_REPEAT = 20
#: a copy's name: the runtime's function name after this prefix
COPY_PREFIX = "fwd9m_"
#: dtypes that are handles, not values: not digested, not tapped
_HANDLES = ("resource", "variant", "string")
_HANDLE_ENUMS = (7, 20, 21)  # DT_STRING, DT_RESOURCE, DT_VARIANT (types.proto)


class Pending:
    """An XLA-compiled function's call about to run: its runtime name, FunctionDef,
    input tensors and the values of the variables among them, before the call."""

    def __init__(self, name: str, fdef, inputs: list, num_outputs: int):
        self.name, self.fdef, self.inputs, self.num_outputs = name, fdef, inputs, num_outputs
        self.error: str | None = None
        self.saved: list[tuple[Any, Any]] = []
        try:
            self.saved = _variables(inputs)
        except Unrebuildable as exc:
            self.error = str(exc)

    @classmethod
    def failed(cls, name: str, reason: str) -> Pending:
        """A call that cannot be narrowed; ``reason`` completes "the op has ..."."""
        p = cls.__new__(cls)
        p.name, p.fdef, p.inputs, p.num_outputs, p.saved, p.error = name, None, [], 0, [], reason
        return p

    @property
    def short(self) -> str:
        """The Python name (``__inference_step_12`` -> ``step``)."""
        return self.name.split("_", 3)[-1].rsplit("_", 1)[0]


def before(name: str, inputs, num_outputs: int) -> Pending | None:
    """The pending call, when ``name`` is an XLA-compiled function's; else None."""
    from . import _private

    fdef = _private.function_def(name)
    attr = fdef.attr.get(_private.XLA_COMPILE)
    if attr is None or not attr.b:
        return None
    return Pending(name, fdef, list(inputs), int(num_outputs))


def _variables(inputs) -> list[tuple[Any, Any]]:
    """(handle, value) of each resource input: the variable's value now."""
    from . import _private

    out = []
    for i, t in enumerate(inputs):
        if t.dtype.name != "resource":
            continue
        dtype = _private.variable_dtype(t)
        if not dtype:
            raise Unrebuildable(
                f"a resource input that is not a variable (input {i}: a lookup table, an iterator, "
                f"...), whose state the narrowing could not put back"
            )
        try:
            out.append((t, _private.read_variable(t, dtype)))
        except Exception as exc:  # noqa: BLE001 - said in the capture, never raised into the program
            raise Unrebuildable(f"a resource input that could not be read as a variable (input {i}: {exc})") from None
    return out


def _restore(saved) -> None:
    from . import _private

    for handle, value in saved:
        _private.assign_variable(handle, value)


def _digest(values) -> str:
    import numpy as np

    h = hashlib.blake2b(digest_size=16)
    for t in values:
        if t.dtype.name in _HANDLES:
            h.update(b"handle")
            continue
        h.update(np.ascontiguousarray(t.numpy()).tobytes())
    return h.hexdigest()


def _run(p: Pending, name: str, num_outputs: int) -> list:
    """One run of function ``name`` on the call's inputs, the variables as before the
    call: its outputs, then the variables' values after it."""
    from . import _private

    _restore(p.saved)
    outs = list(_private.run_function(name, p.inputs, num_outputs) or [])
    return outs + [_private.read_variable(h, v.dtype) for h, v in p.saved]


def _distinct(p: Pending, name: str, num_outputs: int, repeat: int) -> int:
    return len({_digest(_run(p, name, num_outputs)) for _ in range(repeat)})


def _outputs_of(node) -> list[tuple[str, int]]:
    """(FunctionDef output key ``node:arg:index``, dtype enum) of each output of a node;
    none for a node whose op is a function (no OpDef) or whose attrs do not say."""
    from . import _private

    od = _private.op_def(node.op)
    if od is None:
        return []
    out: list[tuple[str, int]] = []
    for arg in od.output_arg:
        if arg.type_list_attr:
            if arg.type_list_attr not in node.attr:
                return []
            types = list(node.attr[arg.type_list_attr].list.type)
        else:
            if not arg.type and arg.type_attr not in node.attr:
                return []
            one = arg.type or node.attr[arg.type_attr].type
            if arg.number_attr and arg.number_attr not in node.attr:
                return []
            types = [one] * (node.attr[arg.number_attr].i if arg.number_attr else 1)
        out += [(f"{node.name}:{arg.name}:{i}", t) for i, t in enumerate(types)]
    return out


def _copy(p: Pending, kind: str, taps: bool) -> tuple[str, int, list[str]]:
    """Register a copy of the function without XLA (``taps``: every op's value outputs
    added to its outputs): (its name, its number of outputs, the tapped keys in order)."""
    from . import _private

    fdef = type(p.fdef)()
    fdef.CopyFrom(p.fdef)
    fdef.signature.name = f"{COPY_PREFIX}{kind}_{p.name}"
    fdef.attr[_private.XLA_COMPILE].b = False
    tapped: list[str] = []
    if taps:
        for node in p.fdef.node_def:
            for key, dtype in _outputs_of(node):
                if dtype in _HANDLE_ENUMS or dtype > 100:  # a handle, or a ref type
                    continue
                arg = fdef.signature.output_arg.add()
                arg.name, arg.type = f"fwd9m_tap{len(tapped)}", dtype
                fdef.ret[arg.name] = key
                tapped.append(key)
    _private.add_function_def(fdef)
    return fdef.signature.name, len(fdef.signature.output_arg), tapped


def _node_digests(p: Pending, name: str, num_outputs: int, taps: list[str]) -> dict[str, str]:
    """Digest of each tapped op output of one run of the tapped copy."""
    values = _run(p, name, num_outputs)[len(p.fdef.signature.output_arg) :]
    return {key: _digest([t]) for key, t in zip(taps, values)}


def _first_varying(p: Pending, name: str, num_outputs: int, taps: list[str], runs: int) -> dict | None:
    """The first node whose inputs agree and outputs differ between two runs of the
    tapped copy (a node with an input that is not tapped cannot be judged: skipped)."""
    from . import _private

    first = _node_digests(p, name, num_outputs, taps)
    for _ in range(runs - 1):
        other = _node_digests(p, name, num_outputs, taps)
        for node in p.fdef.node_def:
            keys = [k for k, _ in _outputs_of(node) if k in first]
            if not keys:
                continue
            ins = [i for i in node.input if not i.startswith("^")]
            ins1 = ["arg" if ":" not in i else first.get(i) for i in ins]  # an argument: the same each run
            ins2 = ["arg" if ":" not in i else other.get(i) for i in ins]
            if None in ins1:
                continue
            if ins1 != ins2:
                break
            if [first[k] for k in keys] != [other[k] for k in keys]:
                od = _private.op_def(node.op)
                return {"op": node.op, "name": node.name, "stateful": bool(od is not None and od.is_stateful)}
    return None


def _locations(name: str) -> dict[str, str]:
    """Node name -> the user's file:line, from the function's GraphDebugInfo (its
    innermost frame outside installed packages and fwd9m)."""
    from . import _private

    try:
        info = _private.graph_debug_info(name)
    except Exception:  # noqa: BLE001 - no debug info: no locations
        return {}
    out = {}
    for node, tid in info.name_to_trace_id.items():
        frames = [info.frames_by_id[f] for f in info.traces_by_id[tid].frame_id]
        for f in reversed(frames):
            fn = info.files[f.file_index]
            if not _is_library(fn):  # fwd9m's own files are library files too
                out[node] = f"{_short(fn)}:{f.line}"
                break
    return out


def _device(p: Pending) -> str:
    dev = next((t.device for t in p.inputs if t.dtype.name != "resource" and t.device), "") or ""
    dev = dev.rsplit("device:", 1)[-1]
    return "cpu" if not dev or dev.startswith("CPU") else f"cuda:{dev.split(':')[-1]}"


def narrow(p: Pending, repeat: int = NARROW_REPEAT) -> dict:
    """Run the call compiled and without XLA ``repeat`` times each on its inputs and,
    when the graph without XLA varies too, op by op (module docstring). Raises
    Unrebuildable when the call cannot be run again exactly."""
    import tensorflow as tf

    from . import _private

    if p.error:
        raise Unrebuildable(p.error)
    after = [(h, _private.read_variable(h, v.dtype)) for h, v in p.saved]  # what the program's call left
    made: list[str] = []
    node = None
    try:
        compiled = _distinct(p, p.name, p.num_outputs, repeat)
        plain, n_plain, _ = _copy(p, "noxla", False)
        made.append(plain)
        graph = _distinct(p, plain, n_plain, repeat)
        if graph > 1:
            tapped, n_tapped, taps = _copy(p, "taps", True)
            made.append(tapped)
            node = _first_varying(p, tapped, n_tapped, taps, repeat)
    finally:
        _restore(after)
        for name in made:
            _private.remove_function(name)
    locs = _locations(p.name)
    if node is not None:
        node["location"] = locs.get(node["name"], "")
    skip = {"NoOp", "Identity", "Const"}
    ops = [{"op": n.op, "name": n.name, "location": locs.get(n.name, "")} for n in p.fdef.node_def if n.op not in skip]
    return {
        "kind": "tf.xla",
        "function": p.short,
        "runtime_name": p.name,
        "runs": repeat,
        "compiled": compiled,
        "graph": graph,
        "node": node,
        "ops": ops[:64],
        "variables": len(p.saved),
        "threads": tf.config.threading.get_intra_op_parallelism_threads() or None,
        "device": _device(p),
        "found": compiled > 1 and graph == 1,
    }
