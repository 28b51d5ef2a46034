"""fwd9m.debug on real JAX (CPU, in-process): eager primitives and jitted calls recorded,
sources of divergence classified, hooks removed after the block."""

from __future__ import annotations

import inspect
from functools import partial

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import fwd9m.debug as dbg  # noqa: E402
from fwd9m import fingerprint as fp  # noqa: E402
from fwd9m.debug._child import detect_frameworks  # noqa: E402


def _ops(path):
    return list(dbg.TraceReader(path))


def _line(fn, text: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, s in enumerate(lines) if text in s)


@jax.jit
def scale_step(w, x):
    h = x * w  # inside the jit: not recorded on its own
    return w - 0.1 * jnp.mean(h), jnp.sum(h)


def _train(seed):
    """A toy loop: batch indices from a NumPy generator, a jitted step."""
    rng = np.random.default_rng(seed)
    w = jnp.ones(4)
    # distinct float rows, 8 of 64 drawn: two unseeded runs draw batches whose
    # means differ at step 0 (with arange rows, a permutation of the same rows or
    # rows with the same index sum gave a bit-identical step, rightly harmless)
    x = jnp.asarray(np.random.default_rng(1).standard_normal((64, 4)), jnp.float32)
    for _ in range(3):
        idx = rng.choice(64, 8, replace=False)
        w, _ = scale_step(w, x[idx])  # the batch enters here
    return w


def test_identical_runs_are_reproducible(tmp_path):
    report = dbg.localize(_train, 0, framework="jax", directory=str(tmp_path))
    assert report.reproducible and report.kind == "reproducible"
    assert report.framework == "jax" and report.ops_a == report.ops_b > 3


def test_unseeded_numpy_batch_order_is_an_external_data_source(tmp_path):
    # default_rng(None): fresh entropy in each run
    report = dbg.localize(_train, None, framework="jax", directory=str(tmp_path))
    first = report.first
    assert report.kind == "external" and first.source == "data", report.render()
    assert first.step == 0 and first.inputs_differ
    assert first.location.endswith(f"test_debug_jax.py:{_line(_train, 'the batch enters here')}")
    assert "default_rng(fwd9m.derive_seed" in first.explanation["fix"]
    assert first.explanation["catalog"][0]["id"] == "python.numpy-unseeded"


def test_jitted_call_is_one_op_named_after_the_function(tmp_path):
    path = tmp_path / "t.trace"
    w, x = jnp.ones(4), jnp.arange(8.0).reshape(2, 4)
    scale_step(w, x)  # compiled and in the C++ fast-path cache before recording
    with dbg.record(path, framework="jax") as trace:
        out = scale_step(w, x)
        scale_step(w, x)
    ops = _ops(path)
    names = [o.name for o in ops]
    assert names == ["jit(scale_step)", "jit(scale_step)"], names
    assert trace.ops == 2
    op = ops[0]
    assert op.node == "jit" and op.phase == "other" and op.device == "cpu:0"
    assert [t.meta for t in op.inputs] == ["float32[4]", "float32[2,4]", "jaxpr[]"]  # + program
    assert [t.meta for t in op.outputs] == ["float32[4]", "float32[]"]
    assert [t.digest for t in op.inputs[:2]] == [fp.numpy_digest(np.asarray(w)), fp.numpy_digest(np.asarray(x))]
    assert op.inputs[2].digest == ops[1].inputs[2].digest is not None  # the same program
    assert op.outputs[0].digest == fp.numpy_digest(np.asarray(out[0]))
    assert op.step == 0 and ops[1].step == 1  # a call of a jitted user function ends a step


def test_pytree_with_more_leaves_than_an_op_holds_is_folded(tmp_path):
    """A trace op holds 255 inputs/outputs; the leaves past them are one record."""

    @jax.jit
    def double(ps):
        return [p * 2 for p in ps]

    ps = [jnp.full(2, float(i)) for i in range(300)]
    path = tmp_path / "t.trace"
    with dbg.record(path, framework="jax"):
        double(ps)
        double(ps[:-1] + [ps[-1] + 1])
    a, b = [o for o in _ops(path) if o.name == "jit(double)"]
    assert len(a.inputs) == len(a.outputs) == 255
    assert [t.meta for t in a.inputs[-2:]] == ["leaves[47]", "jaxpr[]"]
    assert a.outputs[-1].meta == "leaves[46]"
    assert a.inputs[-2].digest != b.inputs[-2].digest  # the last leaf, folded, differs
    assert a.inputs[:-2] == b.inputs[:-2] and a.inputs[-1] == b.inputs[-1]


def test_eager_primitives_are_recorded_by_primitive_name(tmp_path):
    path = tmp_path / "t.trace"
    a = jnp.zeros(4)
    with dbg.record(path, framework="jax"):
        jax.lax.add(a, a)
        a.at[np.array([0, 0, 1])].add(1.0)  # the primitives of an eager scatter
    names = [o.name for o in _ops(path)]
    assert names[0] == "add" and "scatter-add" in names, names
    from fwd9m import catalog

    assert catalog.for_op("jax", "scatter-add")  # the trace's name finds the catalog entry


def test_prng_keys_are_digested_through_key_data(tmp_path):
    path = tmp_path / "t.trace"
    key = jax.random.key(3)
    with dbg.record(path, framework="jax"):
        jax.random.split(key)
    op = next(o for o in _ops(path) if o.name == "random_split")
    assert op.node == "random" and op.inputs[0].meta.startswith("key<fry>")
    assert op.inputs[0].digest == fp.numpy_digest(np.asarray(jax.random.key_data(key)))


def test_key_from_unseeded_numpy_is_a_seed_source(tmp_path):
    def init():
        seed = int(np.random.default_rng().integers(2**31))  # noqa: FWD103 - the point
        return jax.random.normal(jax.random.key(seed), (3,))

    report = dbg.localize(init, framework="jax", directory=str(tmp_path))
    assert report.kind == "external" and report.first.source == "seed", report.render()
    assert "random_seed" in report.first.op + report.first.detail  # the seed enters the key
    assert "jax.random.key(0)" in report.first.explanation["fix"]
    assert report.first.explanation["catalog"][0]["id"] == "jax.prng-key-reuse"


def test_nondeterministic_jitted_call_is_the_culprit_at_jit_granularity(tmp_path):
    """A host callback inside a jit returns fresh entropy: identical inputs, different
    outputs, and the first such call is reported (ops inside are not recorded)."""
    shape = jax.ShapeDtypeStruct((3,), jnp.float32)

    @jax.jit
    def noisy(x):
        return x + jax.pure_callback(lambda: np.random.default_rng().random(3, dtype=np.float32), shape)  # noqa: FWD103

    x = jnp.ones(3)
    report = dbg.localize(noisy, x, framework="jax", directory=str(tmp_path))
    first = report.first
    assert report.kind == "culprit" and first.op == "jit(noisy)", report.render()
    told = first.explanation
    assert "recorded as one" in told["headline"]
    # the host callback is the first suspect, before any XLA kernel
    assert first.node == "jit:pure_callback" and "pure_callback" in told["headline"]
    assert "host callback" in told["causes"][0] and "XLA kernel" in told["causes"][1]
    assert "default_rng(fwd9m.derive_seed" in told["fix"]
    assert told["catalog"][0]["id"] == "python.numpy-unseeded"
    text = report.render()
    assert "op:       jit(noisy)  (contains: pure_callback)" in text and "autograd" not in text


def test_eager_host_callback_is_explained_as_a_callback(tmp_path):
    """pure_callback bound outside any jit is recorded as its own op; fresh entropy in
    it is the program's Python, a value entering from outside (issue 27), not a kernel."""
    shape = jax.ShapeDtypeStruct((3,), jnp.float32)
    x = jnp.ones(3)

    def run():
        return jax.pure_callback(
            lambda v: np.asarray(v) + np.random.default_rng().random(3, dtype=np.float32),  # noqa: FWD103
            shape,
            x,
        )

    report = dbg.localize(run, framework="jax", directory=str(tmp_path))
    first = report.first
    assert report.kind == "external" and first.source == "python" and first.op == "pure_callback", report.render()
    told = first.explanation
    assert "the Python function run by pure_callback (jax.pure_callback)" in told["headline"]
    assert "not in fwd9m's catalog" not in told["headline"] and "XLA" not in report.render()
    assert told["catalog"][0]["id"] == "python.numpy-unseeded"


def test_callbacks_come_before_catalog_primitives_in_the_node(tmp_path):
    """A jit holding both a host callback and a catalog primitive (scatter-add) lists the
    callback first; its explanation still names the scatter's catalog entry."""
    shape = jax.ShapeDtypeStruct((4,), jnp.float32)

    @jax.jit
    def both(x, idx):
        y = jax.pure_callback(lambda v: np.asarray(v), shape, x)
        return jnp.zeros(4).at[idx].add(y)

    path = tmp_path / "t.trace"
    x, idx = jnp.ones(4), jnp.array([0, 1, 1, 2])
    with dbg.record(path, framework="jax"):
        both(x, idx)
    (op,) = _ops(path)
    assert op.node == "jit:pure_callback,scatter-add", op.node
    from fwd9m.debug import _compare, _explain

    first = _compare.Divergence(
        kind="culprit",
        seq=0,
        step=0,
        op=op.name,
        module="",
        phase="other",
        location=op.location,
        node=op.node,
        device="gpu:0",
        outputs_differ=[0],
    )
    report = _compare.Report(a="", b="", framework="jax", reproducible=False, kind="culprit", ops_a=1, ops_b=1)
    told = _explain.explain(first, report, {}, {})
    assert "pure_callback" in told["headline"] and "scatter-add" in told["headline"]
    assert [e["id"] for e in told["catalog"]][:2] == ["python.numpy-unseeded", "jax.xla-gpu-scatter"]


def _scale_with(lr):
    """A jitted step with a static learning rate, called like a training loop."""
    x = jnp.ones(4)
    for _ in range(2):
        x = _static_scale(x, lr)  # the program changes here
    return x


@partial(jax.jit, static_argnums=1)
def _static_scale(x, lr):
    return x * lr


def _external_program(report, fn, line_text):
    first = report.first
    assert report.kind == "external" and first.source == "python", report.render()
    assert first.op.startswith("jit(") and first.step == 0
    assert "(jaxpr[])" in first.detail  # the program input differs, no data input
    assert first.location.endswith(f"test_debug_jax.py:{_line(fn, line_text)}")
    told = first.explanation
    assert "the compiled program of" in told["headline"]
    assert "static argument or captured value" in told["headline"]
    assert "static argument" in told["causes"][0] and "global" in told["causes"][1]
    assert "traced argument" in told["fix"]
    text = report.render()
    assert "CULPRIT" not in text and "XLA" not in text and "autograd" not in text
    assert "model input" not in text


def test_static_argument_that_changes_is_external_not_a_culprit(tmp_path):
    """``lr`` from unseeded Python random (two values, one per run) is a static argument:
    it is compiled into the program, so the call is external (python), not a culprit."""
    values = iter([0.25, 0.5])
    report = dbg.localize(lambda: _scale_with(next(values)), framework="jax", directory=str(tmp_path))
    _external_program(report, _scale_with, "the program changes here")


def test_same_static_argument_is_reproducible(tmp_path):
    report = dbg.localize(_scale_with, 0.25, framework="jax", directory=str(tmp_path))
    assert report.reproducible, report.render()


_LR = [0.1]


def _global_step():
    @jax.jit
    def step(x):
        return x * _LR[0]  # a captured Python value, read when JAX traces step

    x = jnp.ones(4)
    for _ in range(2):
        x = step(x)  # the captured value enters here
    return x


def test_captured_global_that_changes_is_external(tmp_path):
    values = iter([0.1, 0.3])

    def run():
        _LR[0] = next(values)
        return _global_step()

    report = dbg.localize(run, framework="jax", directory=str(tmp_path))
    _external_program(report, _global_step, "the captured value enters here")


def test_captured_array_constant_that_changes_is_external(tmp_path):
    """A closed-over NumPy array is a const of the jaxpr (not in its text): its bytes
    are part of the program digest."""
    consts = iter([np.arange(4.0), np.arange(4.0) + 1e-6])

    def run():
        table = next(consts)

        @jax.jit
        def add_table(x):
            return x + table

        return add_table(jnp.ones(4))

    report = dbg.localize(run, framework="jax", directory=str(tmp_path))
    assert report.kind == "external" and "(jaxpr[])" in report.first.detail, report.render()


def test_hooks_are_removed_and_fast_path_restored(tmp_path):
    from jax._src import core, pjit

    before = (core.EvalTrace.__dict__["process_primitive"], pjit._run_python_pjit, pjit._get_fastpath_data)
    path = tmp_path / "t.trace"
    w, x = jnp.ones(4), jnp.ones((2, 4))
    with pytest.raises(RuntimeError, match="user error"):
        with dbg.record(path, framework="jax"):
            scale_step(w, x)
            raise RuntimeError("user error")
    assert (core.EvalTrace.__dict__["process_primitive"], pjit._run_python_pjit, pjit._get_fastpath_data) == before
    r = dbg.TraceReader(path)
    assert [o.name for o in r] == ["jit(scale_step)"] and r.end["completed"] is False


def test_steps_window_and_modules_level(tmp_path):
    path = tmp_path / "w.trace"
    with dbg.record(path, framework="jax", steps=(1, 1)):
        _train(0)
    ops = _ops(path)
    assert ops and {o.step for o in ops} == {1}
    path = tmp_path / "m.trace"
    with dbg.record(path, framework="jax", level="modules"):
        _train(0)
    assert [o.name for o in _ops(path)] == ["jit(scale_step)"] * 3  # jitted user functions only


def test_truncated_trace_still_readable(tmp_path):
    path = tmp_path / "t.trace"
    with dbg.record(path, framework="jax"):
        a = jnp.ones(4)
        for _ in range(3000):  # several frames of eager adds
            a = jax.lax.add(a, a)
    data = path.read_bytes()
    full = len(_ops(path))
    cut = tmp_path / "cut.trace"
    cut.write_bytes(data[: len(data) * 2 // 3])
    r = dbg.TraceReader(cut)
    n = sum(1 for _ in r)
    assert 0 < n < full and r.truncated
    report = dbg.diff(path, cut)
    assert any("last complete record" in note for note in report.notes)


def test_framework_detection(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("import os\nimport jax.numpy as jnp\n")
    assert detect_frameworks(str(script), False) == ["jax"]
    script.write_text("from jax import random\n")
    assert detect_frameworks(str(script), False) == ["jax"]


def test_jitted_call_names_the_catalog_primitives_inside(tmp_path):
    """The node of a jit op lists the primitives inside it that the catalog knows
    (scatter-add, nondeterministic on GPU), which a jit-level culprit then shows. The
    trace is real; the divergence on a GPU is simulated (no GPU here): a Divergence
    object built from the recorded op with device "gpu:0"."""

    @jax.jit
    def segment(x, idx):
        return jnp.zeros(4).at[idx].add(x) * 2.0

    path = tmp_path / "t.trace"
    x, idx = jnp.ones(6), jnp.array([0, 1, 1, 2, 3, 3])
    with dbg.record(path, framework="jax"):
        segment(x, idx)
    (op,) = _ops(path)
    assert op.name == "jit(segment)" and op.node == "jit:scatter-add", op.node
    from fwd9m.debug import _compare, _explain

    first = _compare.Divergence(
        kind="culprit",
        seq=0,
        step=0,
        op=op.name,
        module="",
        phase="other",
        location=op.location,
        node=op.node,
        device="gpu:0",
        outputs_differ=[0],
    )
    report = _compare.Report(a="", b="", framework="jax", reproducible=False, kind="culprit", ops_a=1, ops_b=1)
    told = _explain.explain(first, report, {}, {})
    assert "scatter-add" in told["headline"]
    assert told["catalog"][0]["id"] == "jax.xla-gpu-scatter"


def test_eager_primitive_param_from_python_is_external(tmp_path):
    """An eager primitive's params are inputs: integer_pow's exponent drawn in Python."""
    paths = []
    for i, k in enumerate((2, 3)):
        p = tmp_path / f"run{i}.trace"
        with dbg.record(p, framework="jax"):
            jax.lax.integer_pow(jnp.arange(4.0), k)
        paths.append(p)
    report = dbg.diff(*paths)
    assert report.kind == "external" and report.first.source == "python", report.render()
    assert report.first.op == "integer_pow"
    assert "argument 'y' of integer_pow: 2 vs 3" in report.first.detail
