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


# ------------------------------------------------------------------ tf.function(jit_compile=True)
#: the node field of an XLA-compiled function's op record (fwd9m.tensorflow._recorder)
XLA_NODE = "xla"
XLA_FIX = (
    "compile the function without XLA (tf.function(jit_compile=False)) to record its ops one by one; "
    "on a GPU, XLA_FLAGS=--xla_gpu_deterministic_ops=true before TensorFlow starts "
    "(https://github.com/openxla/xla/pull/12520)"
)


def xla_culprit(first) -> dict:
    """The explanation of a culprit that is an XLA-compiled ``tf.function``'s call."""
    return {
        "headline": (
            f"{first.op}, a tf.function compiled by XLA (jit_compile=True), gave different outputs "
            f"from identical inputs (recorded as one op: XLA's code cannot run the recorder's hooks; "
            f"the replay below narrows it)"
        ),
        "causes": [
            "the code XLA generated for the function is nondeterministic (on a GPU: scatter and "
            "autotuned kernels without --xla_gpu_deterministic_ops)",
            "an op of the function is nondeterministic or stateful when run without XLA too",
            "a variable the function reads differed between the runs (its value is not a recorded input of the call)",
        ],
        "catalog": [],
        "fix": (
            "import fwd9m\nfwd9m.enable_determinism(seed=0)  # before XLA starts: op determinism, "
            "and XLA_FLAGS=--xla_gpu_deterministic_ops=true"
        ),
    }


def _xla_node_text(node: dict) -> str:
    where = f"op {node.get('op')} ({node.get('name')}) at {node.get('location') or '?'}"
    if node.get("stateful"):
        where += (
            " (a stateful op: its kernel keeps state of its own that changes with every run, such "
            "as a random op's generator; seeded stateless ops, tf.random.stateless_*, do not)"
        )
    return where


def _xla_notes(n: dict, runs: int, compiled: int, graph: int) -> list[str]:
    how = (
        f"the XLA-compiled function and the same graph without XLA (its FunctionDef with "
        f"_XlaMustCompile false: each op run by TensorFlow's own kernel) each run {runs} times alone "
        f"on the call's inputs, its {n.get('variables', 0)} variable(s) put back before every run"
    )
    if compiled > 1 and graph == 1:
        return [
            f"narrowed: the nondeterminism is in the code XLA generated for this function: compiled, "
            f"{compiled} distinct outputs in {runs} runs; without XLA, 1 output in {runs}; {how}",
            f"fix: {XLA_FIX}",
        ]
    if graph > 1:
        node = n.get("node")
        where = (
            f": the first op whose inputs agree between two runs and whose outputs differ is {_xla_node_text(node)}"
            if isinstance(node, dict)
            else "; no single op of its graph was named (each differing op had an input not compared)"
        )
        return [
            f"narrowed: the function varies without XLA too (compiled {compiled}, without XLA {graph} "
            f"distinct outputs in {runs} runs){where}; {how}"
        ]
    return [f"not narrowed: compiled and without XLA each gave 1 output in {runs} runs; {how}"]


def xla_result(result_type, phase_type, trace: str, seq: int, call: dict):
    """A :class:`~fwd9m.debug._replay.ReplayResult` for an XLA-compiled function's call,
    narrowed in the targeted run (:func:`fwd9m.tensorflow._xla.narrow`): in the code XLA
    generated, in one op of its graph (with file:line), or not reproduced in isolation."""
    n = call["narrowed"]
    runs, compiled, graph = n.get("runs"), n.get("compiled"), n.get("graph")
    if not all(isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in (runs, compiled, graph)):
        raise FileFormatError(f"the capture of op #{seq} of {trace} is damaged (its narrowing counts are not numbers)")
    off = phase_type(False, "nondeterministic" if compiled > 1 else "deterministic", compiled, runs)
    notes = _xla_notes(n, runs, compiled, graph)
    notes.append(
        "the program's own call ran compiled by XLA, as without fwd9m, before these runs; "
        "a stateful kernel's state they advanced (a random op's) is not put back"
    )
    ops = n.get("ops") or []
    if ops:
        shown = [f"{o.get('op', '?')} at {o.get('location') or '?'}" for o in ops[:8] if isinstance(o, dict)]
        notes.append("the function's ops: " + "; ".join(shown) + (f"; and {len(ops) - 8} more" if len(ops) > 8 else ""))
    op = str(call.get("op", f"xla:{n.get('function', '?')}"))
    threads = n.get("threads") if isinstance(n.get("threads"), int) else None
    return result_type(trace, seq, op, "tensorflow", str(n.get("device", "cpu")), threads, runs, off, None, "", notes)
