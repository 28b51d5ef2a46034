"""``torch.compile`` under ``fwd9m debug``: each call of an Inductor-compiled graph is one op.

Under the recorder's dispatch mode the compiled program runs compiled (the mode ignores
compile internals, :mod:`fwd9m.torch._private`), and the ops inside an Inductor graph
are not dispatched one by one, so the recorder sees the graph's call instead
(``CompiledFxGraph.__call__``): one op ``torch.compile:FN`` (FN the compiled function's
name; ``torch.compile:FN.backward`` for its backward graph) with the graph's inputs
(parameters included) and outputs digested, at the compiled function's file:line. A
divergence inside the graph is then named at graph level: its inputs agree, its outputs
differ.

Narrowing (:func:`narrow`, in the targeted run that captures a culprit): the compiled
graph and its eager equivalent (the post-grad aten graph Inductor compiled, run op by op
by PyTorch's own kernels) are each run ``repeat`` times on copies of the captured
inputs. Compiled varies and eager does not: the nondeterminism is in the code Inductor
generated for that graph. No graph bisection: a sub-graph compiled alone is another
program (other fusions, other kernels), so its verdict would not be about this one.
"""

from __future__ import annotations

import hashlib
import re
import sys
import weakref

from .._recording._capture import take_call
from .._recording._common import _is_library, _short
from .._recording._store import IS_PARAM

__all__ = ["CompiledGraphs", "NAME_PREFIX", "narrow"]

NAME_PREFIX = "torch.compile:"
NODE = "compiled graph (Inductor)"  # starts with fwd9m.debug._compiled.COMPILED_NODE
NARROW_REPEAT = 20
#: runs of a compiled graph that gave one output in NARROW_REPEAT runs go on up to this
#: many: a race between threads shows rarely on a busy machine (measured: 6 distinct
#: outputs in 100 calls at a load average of 7, 61 in 100 on an idle one)
NARROW_MORE = 100


#: a floating-point literal in generated code (C++ ``static_cast<float>(0.85)``, Triton
#: ``tmp1 = 0.85``); integers are left out: in that code they are sizes, strides and blocks
_FLOAT = re.compile(r"(?<![\w.])-?\d+\.\d+(?:[eE][-+]?\d+)?(?![\w.])")
_MAX_CONSTANTS = 16


def _user_frame() -> tuple[str, str]:
    """(function name, file:line) of the innermost frame of user code: for a compiled
    function's forward graph, the compiled function itself (Dynamo runs its frame)."""
    f = sys._getframe(2)
    while f is not None:
        fn = f.f_code.co_filename
        if not _is_library(fn):
            return getattr(f.f_code, "co_qualname", f.f_code.co_name), f"{_short(fn)}:{f.f_lineno}"
        f = f.f_back
    return "?", ""


#: id(CompiledFxGraph) -> (weak reference to it, its eager aten graph), for the graphs
#: built while a recorder that narrows was on (one process may record several times)
_EAGER: dict[int, tuple] = {}


def _eager_of(graph):
    ref, gm = _EAGER.get(id(graph), (None, None))
    return gm if ref is not None and ref() is graph else None


class CompiledGraphs:
    """The graph-call hooks of one :class:`~fwd9m.torch._recorder.TorchRecorder`."""

    def __init__(self, recorder):
        from . import _private

        self.r = recorder
        self._private = _private
        self.depth = 0  # > 0 while a compiled graph runs: its inner ops are its own
        self.calls = 0
        self._names: dict[object, tuple[str, str, str]] = {}  # graph id -> (name, location, module)
        self._code_constants: dict[int, tuple] = {}  # graph id -> (weak reference, constants text)
        self._undo = None
        self._caches_on = None
        self._used = False

    @property
    def hooked(self) -> bool:
        """Whether Inductor's graph calls are seen (else compiled code must run eagerly)."""
        return self._undo is not None

    def start(self) -> None:
        """Install the hooks (none when this torch's Inductor cannot be hooked)."""
        self._undo = self._private.compiled_graph_hooks(self._on_call, self._on_init)
        if self._undo is not None and self.r.rec.capture.windows:  # a targeted run narrows
            self._caches_on = self._private.compile_caches_off()
        self._used = "torch._dynamo" in sys.modules

    def notes(self) -> list[str]:
        """What the report must say about compiled code in this run."""
        if not self.hooked and (self._used or "torch._dynamo" in sys.modules):
            return [
                "torch.compile: fwd9m cannot see this torch's compiled graphs "
                "(torch._inductor.output_code.CompiledFxGraph), so compiled functions ran "
                "eagerly under the recorder (and go on running eagerly in this process: Dynamo "
                "skips a function it met under the recorder): the compiled kernels were not "
                "recorded, and the program recorded is not the one that runs without fwd9m"
            ]
        if self.calls:
            return [
                f"torch.compile: {self.calls} call(s) of Inductor-compiled graphs, each recorded "
                f"as one op (torch.compile:NAME): they ran compiled, as without fwd9m; the "
                f"kernels inside a graph are not recorded one by one"
            ]
        return []

    def stop(self) -> None:
        for undo in (self._undo, self._caches_on):
            if undo is not None:
                undo()
        self._undo = self._caches_on = None

    def _on_init(self, graph, gm) -> None:
        if self.r.rec.capture.windows:  # only the narrowing needs the eager graph
            try:
                _EAGER[id(graph)] = (weakref.ref(graph), gm)
            except TypeError:
                pass

    def _on_call(self, graph, inputs, call):
        if self.r._mode is None or self.depth:
            return call(inputs)
        self.depth += 1  # the recorder's own ops (digests, narrowing) are not recorded either
        try:
            try:
                pre = self._before(graph, inputs)
            except Exception as exc:  # noqa: BLE001 - a recorder never breaks the program
                self.r._failed_name(NAME_PREFIX + "?", exc)
                return call(inputs)
            result = call(inputs)
            try:
                self._after(pre, result)
            except Exception as exc:  # noqa: BLE001
                self.r._failed_name(pre[0], exc)
            return result
        finally:
            self.depth -= 1

    def _constants(self, graph) -> str:
        """The floating-point constants in the code Inductor generated for ``graph`` (its
        ``source_code``), in order: a Python float the compiled function closes over (a
        scale drawn from ``random``) is baked into the code, not passed as an input, so it
        is digested as one (a differing one is a value entering from outside). Remembered
        per graph; the code holds no paths and is the same for the same program (with
        Inductor's FX graph cache on or off)."""
        got = self._code_constants.get(id(graph))
        if got is not None and got[0]() is graph:
            return got[1]
        found = _FLOAT.findall(getattr(graph, "source_code", "") or "")
        text = ",".join(found[:_MAX_CONSTANTS])
        if len(found) > _MAX_CONSTANTS:
            rest = hashlib.blake2b(",".join(found).encode(), digest_size=8).hexdigest()
            text += f",... ({len(found)} constants, digest {rest})"
        try:
            self._code_constants[id(graph)] = (weakref.ref(graph), text)
        except TypeError:
            pass
        return text

    def _where(self, graph) -> tuple[str, str, str]:
        backward, gid = self._private.graph_info(graph)
        if backward:
            name, loc, module = self._names.get(gid, (NAME_PREFIX + "?", "", ""))
            return name + ".backward", loc, module
        fn, loc = _user_frame()
        r = self.r
        module = r._path_of(r._modules[-1]) if r._modules else ""
        got = self._names[gid] = (NAME_PREFIX + fn, loc, module)
        return got

    def _before(self, graph, inputs):
        r = self.r
        rec = r.rec
        torch = r.torch
        name, loc, module = self._where(graph)
        tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
        other = [(str(i), a) for i, a in enumerate(inputs) if not isinstance(a, torch.Tensor)]
        in_recs = [
            r._tensor(t, IS_PARAM if isinstance(t, torch.nn.Parameter) else 0, rec.digests, False) for t in tensors
        ]
        constants = self._constants(graph)
        if constants:  # Python values baked into the graph's code: inputs too
            other.append(("constants", constants))
        if other:  # sizes of a dynamic-shape graph: inputs too
            in_recs.append(rec.args_record(other, r._str_types))
        seq = rec.writer.ops + len(r._pending)
        capture = bool(rec.capture) and rec.capture.wants(seq, name)
        if capture:
            take_call(rec, seq, "torch", _Graph(graph, _eager_of(graph), name), list(inputs), {})
        in_caps = [r._bytes(t) for t in tensors] if capture else None
        return name, loc, module, in_recs, in_caps, capture

    def _after(self, pre, result) -> None:
        name, loc, module, in_recs, in_caps, capture = pre
        r = self.r
        rec = r.rec
        # Inductor's kernels may write an input in place through its data pointer, without
        # bumping its version counter: no digest remembered before the call is trusted after
        r._known.clear()
        outs = [t for t in (result if isinstance(result, (list, tuple)) else [result]) if isinstance(t, r.torch.Tensor)]
        node = r._dispatch.current_autograd_node()
        phase = "backward" if node is not None else r._phase_now("forward")
        device = next((str(t.device) for t in outs), "")
        ctx = rec.ctx_id(module, phase, loc, NODE, device)
        out_recs = [r._tensor(t, 0, rec.digests, True, False) for t in outs]
        self.calls += 1
        entry = (
            rec.name_id(("compiled", name), name),
            ctx,
            rec.step,
            in_recs,
            out_recs,
            (in_caps, [r._bytes(t) for t in outs]) if capture else None,
        )
        r._emit(entry)


class _Graph:
    """A compiled graph as a capture sees it (:func:`fwd9m.torch._replay.capture`)."""

    def __init__(self, graph, gm, name: str):
        self.graph, self.gm, self.name = graph, gm, name


def _digest(outs, torch) -> str:
    h = hashlib.blake2b(digest_size=16)
    for t in outs if isinstance(outs, (list, tuple)) else [outs]:
        if isinstance(t, torch.Tensor):
            h.update(t.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _distinct(run, inputs, repeat: int, torch, more: int = 0) -> tuple[int, int]:
    """(distinct outputs, runs): ``run`` on fresh copies of ``inputs`` ``repeat`` times,
    then on up to ``more`` runs in all while it has given one output."""
    seen: set = set()
    runs = 0
    while runs < repeat or (len(seen) == 1 and runs < more):
        runs += 1
        fresh = [t.detach().clone() if isinstance(t, torch.Tensor) else t for t in inputs]
        with torch.no_grad():
            seen.add(_digest(run(fresh), torch))
    return len(seen), runs


def _where_node(node) -> str:
    """file:line of the user's line an FX node came from (its last stack frame)."""
    trace = (node.meta.get("stack_trace") or "").strip().splitlines()
    for line in reversed(trace):
        line = line.strip()
        if line.startswith('File "') and '", line ' in line:
            fn, rest = line[6:].split('", line ', 1)
            return f"{_short(fn)}:{rest.split(',', 1)[0]}"
    return ""


def _ops(gm) -> list[dict]:
    """The graph's ops (aten overloads, after Inductor's decompositions), with lines."""
    if gm is None:
        return []
    return [{"op": str(n.target), "location": _where_node(n)} for n in gm.graph.nodes if n.op == "call_function"]


def _node_digests(gm, inputs, torch) -> list[tuple[str, str, str, str]]:
    """(op, location, inputs digest, outputs digest) of each node of one eager run of
    ``gm`` (torch.fx.Interpreter: each node run by PyTorch's own kernel)."""
    seen = []

    class _Each(torch.fx.Interpreter):
        def run_node(self, n):
            if n.op != "call_function":
                return super().run_node(n)
            ins = _digest([self.env[a] for a in n.all_input_nodes], torch)  # before: it may write them
            out = super().run_node(n)
            seen.append((str(n.target), _where_node(n), ins, _digest(out, torch)))
            return out

    fresh = [t.detach().clone() if isinstance(t, torch.Tensor) else t for t in inputs]
    with torch.no_grad():
        _Each(gm).run(*fresh)
    return seen


def _first_varying_node(gm, inputs, torch, runs: int = 2) -> dict | None:
    """The first node whose inputs agree and outputs differ between eager runs."""
    first = _node_digests(gm, inputs, torch)
    for _ in range(runs - 1):
        other = _node_digests(gm, inputs, torch)
        for (op, loc, ins, out), (_, _, ins2, out2) in zip(first, other):
            if ins == ins2 and out != out2:
                return {"op": op, "location": loc}
            if ins != ins2:
                break
    return None


def narrow(g: _Graph, inputs: list, repeat: int = NARROW_REPEAT) -> dict:
    """Run the compiled graph and its eager equivalent ``repeat`` times each on copies
    of ``inputs`` (before the program's own call, which empties the list); when the
    eager graph varies too, run it node by node to name the first node that does. The
    torch RNG state is put back, so the program goes on as if this had not run."""
    import torch

    from . import _private

    state = torch.random.get_rng_state()
    node = None
    try:
        compiled, runs = _distinct(lambda xs: _private.run_graph(g.graph, xs), inputs, repeat, torch, NARROW_MORE)
        eager = _distinct(lambda xs: g.gm(*xs), inputs, runs, torch)[0] if g.gm is not None else None
        if eager is not None and eager > 1:
            node = _first_varying_node(g.gm, inputs, torch, runs=runs)
    finally:
        torch.random.set_rng_state(state)
    return {
        "kind": "torch.compile",
        "graph": g.name,
        "runs": runs,
        "compiled": compiled,
        "eager": eager,
        "node": node,
        "ops": _ops(g.gm)[:64],
        "threads": torch.get_num_threads(),
        "device": next((str(t.device) for t in inputs if isinstance(t, torch.Tensor)), "cpu"),
        "found": compiled > 1 and eager == 1,
    }
