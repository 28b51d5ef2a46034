"""The replay verdict of a compiled graph (``torch.compile``), narrowed in the targeted
run (:func:`fwd9m.torch._compiled.narrow`): the compiled graph and its eager equivalent,
each run alone on the captured inputs, and the eager graph node by node when it varies."""

from __future__ import annotations

from ..errors import FileFormatError

#: the determinism switch, measured on a compiled index_add (1 output in 100 calls
#: against 6 to 61 without it, 2 threads): Inductor then lowers index_put_ to PyTorch's
#: kernel (torch/_inductor/lowering.py, index_put_impl_: "Fallback in torch
#: deterministic mode", torch 2.13)
FIX = (
    "torch.use_deterministic_algorithms(True) before the first call of the compiled function "
    "(Inductor then lowers some accumulating ops, index_put_ among them, to PyTorch's "
    "deterministic kernels), or torch.compiler.disable on the function that holds the op"
)


#: the node field of a compiled graph's op record (fwd9m.torch._compiled.NODE)
COMPILED_NODE = "compiled graph"


def compiled_culprit(first) -> dict:
    """The explanation of a culprit that is a compiled graph's call."""
    return {
        "headline": (
            f"{first.op}, a compiled graph, gave different outputs from identical inputs "
            f"(recorded as one op: the kernels inside it are not recorded one by one; the "
            f"replay below narrows it)"
        ),
        "causes": [
            "the code the compiler generated for the graph accumulates in a run-dependent order "
            "(Inductor's CPU code adds with atomic_add inside parallel loops when more than one "
            "thread runs: torch/_inductor/codegen/cpp.py, CppKernel.store)",
            "one of the graph's ops is nondeterministic when run eagerly too",
        ],
        "catalog": [],
        "fix": "import torch\ntorch.use_deterministic_algorithms(True)  # before the compiled function's first call",
    }


def _ops_text(ops: list) -> str:
    shown = [f"{o.get('op', '?')} at {o.get('location') or '?'}" for o in ops if isinstance(o, dict)]
    shown = shown[:8]
    return "; ".join(shown) + (f"; and {len(ops) - 8} more" if len(ops) > 8 else "")


def compiled_result(result_type, phase_type, trace: str, seq: int, call: dict):
    """A :class:`~fwd9m.debug._replay.ReplayResult` saying where the nondeterminism is:
    in the code the compiler generated for the graph, in one of the graph's ops run
    eagerly, or not reproduced in isolation."""
    n = call["narrowed"]
    runs, compiled, eager = n.get("runs"), n.get("compiled"), n.get("eager")
    if not (isinstance(runs, int) and isinstance(compiled, int) and (eager is None or isinstance(eager, int))):
        raise FileFormatError(f"the capture of op #{seq} of {trace} is damaged (its narrowing counts are not numbers)")
    graph = str(n.get("graph", call.get("op", "?")))
    off = phase_type(False, "nondeterministic" if compiled > 1 else "deterministic", max(compiled, 1), runs)
    how = (
        f"the compiled graph and its eager equivalent (the same aten ops, after Inductor's "
        f"decompositions, each run by PyTorch's own kernel) each run {runs} times alone on the "
        f"captured inputs"
    )
    ops = n.get("ops") or []
    notes = []
    if eager is None:
        notes.append(
            f"the compiled graph alone gave {compiled} distinct outputs in {runs} runs; its eager "
            f"equivalent was not available (the graph came from a compile cache), so it was not compared"
        )
    elif compiled > 1 and eager == 1:
        notes.append(
            f"narrowed: the nondeterminism is in the code Inductor generated for this graph: compiled, "
            f"{compiled} distinct outputs in {runs} runs; eager, 1 output in {runs}; {how}"
        )
        notes.append(f"fix: {FIX}")
    elif isinstance(eager, int) and eager > 1:
        node = n.get("node") or {}
        where = (
            f"; the first of its ops whose inputs agree and outputs differ, run one by one: "
            f"{node.get('op')} at {node.get('location') or '?'}"
            if node
            else ""
        )
        notes.append(
            f"narrowed: the graph's ops are nondeterministic when run eagerly too: compiled {compiled}, "
            f"eager {eager} distinct outputs in {runs} runs{where}; {how}"
        )
    else:
        notes.append(f"not narrowed: compiled and eager each gave 1 output in {runs} runs; {how}")
    if ops:
        notes.append(f"the graph's ops: {_ops_text(ops)}")
    device = str(n.get("device", "cpu"))
    return result_type(trace, seq, graph, "torch", device, n.get("threads"), runs, off, None, "", notes)
