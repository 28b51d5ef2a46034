"""fwd9m debug and torch.compile: the compiled program runs compiled under the recorder,
each Inductor graph call is one op, and a culprit graph is narrowed (compiled against
its eager equivalent).

The nondeterministic case is real: Inductor's CPU code for ``index_add`` (lowered to
``index_put_(accumulate=True)``) adds with ``atomic_add`` in a parallel loop when more
than one thread runs (torch/_inductor/codegen/cpp.py, ``CppKernel.store``); measured at
2 threads on this 2-core machine: 61 distinct outputs in 100 calls (6 in 100 at a load
average of 7), while PyTorch's eager kernel on the same 32000 updates (below its
parallel grain size) gave 1. One compilation per graph, module-scoped.
"""

from __future__ import annotations

import os
import re
import textwrap

import pytest

torch = pytest.importorskip("torch")

import fwd9m.debug as dbg  # noqa: E402
from fwd9m.debug import _replay  # noqa: E402

TWO_CORES = pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="a parallel CPU kernel needs 2 cores")
N = 32000  # updates: Inductor parallelises them; PyTorch's eager kernel runs them serially


def bucket_sums(idx, v):
    return torch.zeros(2).index_add(0, idx, v)  # the compiled graph's culprit line


def eager_sums(idx, v):
    return torch.zeros(2).index_add(0, idx, v)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(4, 8), torch.nn.Linear(8, 2)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """``bucket_sums`` compiled once, inside a recording that narrows op #0 (so the
    graph's eager equivalent is kept), and that first trace."""
    torch.set_num_threads(2)
    g = torch.Generator().manual_seed(1)
    idx, v = torch.randint(0, 2, (N,), generator=g), torch.randn(N, generator=g)
    fn = torch.compile(bucket_sums)
    path = tmp_path_factory.mktemp("compiled") / "narrow.trace"
    with dbg.record(path, framework="torch", capture="0:0"):
        out = fn(idx, v)
    return fn, idx, v, out, path


def _record(path, fn, *args, calls: int = 1):
    with dbg.record(path, framework="torch"):
        for _ in range(calls):
            fn(*args)
    return list(dbg.TraceReader(path))


def test_a_compiled_function_runs_compiled_and_is_one_op(compiled, tmp_path):
    # before: Dynamo skipped the frame under the dispatch mode, the function ran eagerly
    # and the trace held aten::zeros, aten::index_add (never Inductor's kernel)
    fn, idx, v, _, _ = compiled
    (op,) = _record(tmp_path / "a.trace", fn, idx, v)
    assert op.name == "torch.compile:bucket_sums"
    assert op.location == f"{os.path.relpath(__file__)}:{bucket_sums.__code__.co_firstlineno}"
    assert op.node.startswith("compiled graph") and op.phase == "forward"
    # Inductor's order; then the float constants of its code (issue 27: an input too)
    assert sorted(t.meta for t in op.inputs) == ["args[]", f"float32[{N}]", f"int64[{N}]"]
    assert [t.meta for t in op.outputs] == ["float32[2]"] and op.outputs[0].digest is not None


def test_a_compiled_module_trains_unchanged_under_the_recorder(tmp_path):
    # before: under the recorder the module ran eagerly (Dynamo skipped it), and its
    # parameters after one step differed in their bits from the unrecorded compiled run;
    # with Dynamo compiling under the mode, it traced the recorder's global module hooks
    # and raised an AssertionError; now the hooks do nothing while Dynamo traces
    torch.manual_seed(0)
    nets = [Net(), Net()]
    nets[1].load_state_dict(nets[0].state_dict())
    x, y = torch.randn(16, 4), torch.randn(16, 2)

    def step(net):
        cnet = torch.compile(net)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        loss = ((cnet(x) - y) ** 2).mean()
        loss.backward()
        opt.step()

    step(nets[0])
    with dbg.record(tmp_path / "m.trace", framework="torch"):
        step(nets[1])
    for p, q in zip(nets[0].parameters(), nets[1].parameters()):
        assert torch.equal(p, q)  # the recorded run computed the same bits
    ops = list(dbg.TraceReader(tmp_path / "m.trace"))
    graphs = [(o.name, o.phase) for o in ops if o.node.startswith("compiled graph")]
    assert graphs == [("torch.compile:Net.forward", "forward"), ("torch.compile:Net.forward.backward", "backward")]
    assert not any(o.name == "aten::addmm" for o in ops)  # Inductor's kernels, not eager ones


def test_the_module_level_pass_names_a_compiled_module_and_its_parameters_as_the_users(tmp_path):
    # before: "module:OptimizedModule" at path "OptimizedModule", parameters under
    # "OptimizedModule._orig_mod.a"; the modules inside run compiled, so their own calls
    # are not seen (recording them would break the compiled graph at each module)
    torch.manual_seed(0)
    net = Net()
    cnet = torch.compile(net)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    x, y = torch.randn(16, 4), torch.randn(16, 2)
    with dbg.record(tmp_path / "m.trace", framework="torch", level="modules"):
        for _ in range(2):
            ((cnet(x) - y) ** 2).mean().backward()
            opt.step()
            opt.zero_grad()
    ops = [(o.step, o.name, o.module) for o in dbg.TraceReader(tmp_path / "m.trace")]
    assert ops == [
        (s, name, module)
        for s in (0, 1)
        for name, module in [("module:Net", "Net"), *((k, f"Net.{m}") for k in ("grads", "params") for m in "ab")]
    ]


def test_where_compiled_graphs_cannot_be_hooked_they_run_eagerly_and_the_trace_says_so(compiled, tmp_path, monkeypatch):
    # simulated: a torch whose Inductor has no CompiledFxGraph to hook (none installable here)
    from fwd9m.torch import _private

    monkeypatch.setattr(_private, "compiled_graph_hooks", lambda *a: None)
    _, idx, v, _, _ = compiled
    path = tmp_path / "eager.trace"
    # a function of its own: Dynamo skips a code object for the rest of the process once
    # it met it under a dispatch mode that does not ignore compile internals (measured)
    ops = _record(path, torch.compile(eager_sums), idx, v)
    assert "aten::index_add" in [o.name for o in ops]  # Dynamo ran it eagerly, every op recorded
    reader = dbg.TraceReader(path)
    list(reader)
    assert any("compiled functions ran eagerly under the recorder" in n for n in reader.end["notes"])


@TWO_CORES
def test_a_nondeterministic_compiled_graph_is_named_and_narrowed(compiled, tmp_path):
    fn, idx, v, _, narrow_trace = compiled
    # the race is real: two recordings are compared until they differ (at most 10 tries;
    # at the measured rate the chance that 10 pairs of 3 calls all agree is below 1e-12)
    for attempt in range(10):
        a = _record(tmp_path / f"a{attempt}.trace", fn, idx, v, calls=3)
        b = _record(tmp_path / f"b{attempt}.trace", fn, idx, v, calls=3)
        if [o.outputs[0].digest for o in a] != [o.outputs[0].digest for o in b]:
            break
    else:  # a real race: on a machine too busy for it to show, there is nothing to name
        pytest.skip("the atomic-add race did not show in 10 pairs of recordings on this machine")
    report = dbg.diff(tmp_path / f"a{attempt}.trace", tmp_path / f"b{attempt}.trace")
    assert report.kind == "culprit" and report.first.op == "torch.compile:bucket_sums"
    text = report.render()
    assert "a compiled graph, gave different outputs from identical inputs" in text
    assert "(compiled graph (Inductor): recorded as one op)" in text
    assert "torch.use_deterministic_algorithms(True)" in text
    assert "torch.compile: 3 call(s) of Inductor-compiled graphs, each recorded as one op" in text

    r = dbg.replay(narrow_trace, 0)  # narrowed in the recording that compiled it
    assert r.op == "torch.compile:bucket_sums" and r.confirmed, r.render()
    assert r.off.distinct > 1 and r.threads == 2
    notes = " ".join(r.notes)
    assert "narrowed: the nondeterminism is in the code Inductor generated for this graph" in notes
    assert re.search(r"compiled, \d+ distinct outputs in (\d+) runs; eager, 1 output in \1", notes), notes
    line = f"{os.path.relpath(__file__)}:{bucket_sums.__code__.co_firstlineno + 1}"
    assert f"aten.index_put_.default at {line}" in notes


def test_the_narrowing_leaves_the_program_unchanged(compiled, tmp_path):
    # the capture ran the graph 40 times before the program's own call: the program's
    # result is still what the compiled function computes, and its RNG state is untouched
    fn, idx, v, out, _ = compiled
    assert out.shape == (2,) and torch.allclose(out, bucket_sums(idx, v), rtol=1e-4, atol=1e-3)
    state = torch.random.get_rng_state()
    with dbg.record(tmp_path / "n.trace", framework="torch", capture="0:0"):
        fn(idx, v)
    assert os.path.exists(_replay.capture_path(tmp_path / "n.trace", 0))
    assert torch.equal(state, torch.random.get_rng_state())


@pytest.mark.slow
@TWO_CORES
def test_fwd9m_debug_names_and_narrows_a_compiled_training_step(tmp_path, monkeypatch):
    script = tmp_path / "train.py"
    script.write_text(
        textwrap.dedent(f"""
        import torch
        torch.manual_seed(0)
        torch.set_num_threads(2)
        w = torch.nn.Parameter(torch.randn(2))
        opt = torch.optim.SGD([w], lr=0.1)
        g = torch.Generator().manual_seed(1)
        idx = torch.randint(0, 2, ({N},), generator=g)
        v = torch.randn({N}, generator=g)

        @torch.compile
        def bucket_sums(idx, v):
            return torch.zeros(2).index_add(0, idx, v)

        for step in range(8):
            opt.zero_grad()
            s = sum(bucket_sums(idx, v) for _ in range(20))  # 20 calls: a race shows even on a busy machine
            (s * w).sum().backward()
            opt.step()
        """)
    )
    monkeypatch.chdir(tmp_path)
    report = dbg.debug_script(str(script), [], dbg.DebugOptions())
    if report.reproducible:  # a real race: both runs may draw the same sums on a busy machine
        pytest.skip("the atomic-add race did not show in either run on this machine")
    assert report.kind == "culprit" and report.first.op == "torch.compile:bucket_sums", report.render()
    text = report.render()
    assert "narrowed: the nondeterminism is in the code Inductor generated for this graph" in text
    assert "aten.index_put_.default at train.py:13" in text
    # the early stop records the first differing step only: 20 calls a step
    assert re.search(r"torch\.compile: \d+ call\(s\) of Inductor-compiled graphs, each recorded as one op", text)


def test_a_damaged_compiled_graph_capture_is_a_clear_error(tmp_path):
    import json

    import numpy as np

    from fwd9m.errors import FileFormatError

    trace = tmp_path / "run.trace"
    trace.write_bytes(b"")
    call = {"framework": "torch", "op": "torch.compile:f", "narrowed": {"kind": "torch.compile", "runs": "20"}}
    with open(_replay.capture_path(trace, 3), "xb") as f:
        np.savez(f, call=np.frombuffer(json.dumps(call).encode(), dtype=np.uint8))
    with pytest.raises(FileFormatError, match="capture of op #3 .* is damaged"):
        dbg.replay(trace, 3)


def pooled(idx, v):
    return torch.zeros(8, 16).index_add(0, idx, v).relu()  # 200000 x 16 updates: eager is parallel too


@TWO_CORES
def test_where_the_eager_graph_varies_too_its_first_varying_op_is_named(tmp_path):
    # PyTorch's eager index_put_(accumulate=True) adds with atomics above its grain size
    # (the existing replay test measures 20 of 20 replays distinct at this size)
    torch.set_num_threads(2)
    g = torch.Generator().manual_seed(1)
    idx, v = torch.randint(0, 8, (200000,), generator=g), torch.randn(200000, 16, generator=g)
    with dbg.record(tmp_path / "k.trace", framework="torch", capture="0:0"):
        torch.compile(pooled)(idx, v)
    r = dbg.replay(tmp_path / "k.trace", 0)
    notes = " ".join(r.notes)
    line = f"{os.path.relpath(__file__)}:{pooled.__code__.co_firstlineno + 1}"
    assert "the graph's ops are nondeterministic when run eagerly too" in notes, notes
    assert f"run one by one: aten.index_put_.default at {line}" in notes
