"""fwd9m check --resume, the parts that need no training run: the options, the child's
digests, and the control of run B (a real child process, no framework)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from fwd9m.check import _resume, _resume_child
from fwd9m.errors import ConfigurationError


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("5", ("step", 5)),
        ("epoch:2", ("epoch", 2)),
        ("checkpoint", ("checkpoint", 1)),
        ("checkpoint:3", ("checkpoint", 3)),
    ],
)
def test_interrupt_after_forms(spec, expected):
    how = _resume.Interruption.parse(spec)
    assert (how.at, how.n) == expected and how.signal == "TERM"


@pytest.mark.parametrize(
    "spec, sig, grace",
    [
        ("0", "TERM", 1),
        ("epoch", "TERM", 1),
        ("step:x", "TERM", 1),
        ("5", "HUP", 1),
        ("5", "KILL", 0),
        ("5", "TERM", float("nan")),
    ],
)
def test_bad_interrupt_options_are_refused(spec, sig, grace):
    with pytest.raises(ConfigurationError):
        _resume.Interruption.parse(spec, sig, grace)


def test_signal_names_with_or_without_sig():
    assert _resume.Interruption.parse("3", "sigkill").signal == "KILL"


def test_digest_sees_every_bit_and_the_structure():
    a = {"w": np.zeros(3, np.float32), "n": 1}
    assert _resume_child.digest(a) == _resume_child.digest({"n": 1, "w": np.zeros(3, np.float32)})
    b = np.zeros(3, np.float32)
    b[1] = -0.0
    assert _resume_child.digest({"w": b, "n": 1}) != _resume_child.digest(a)
    assert _resume_child.digest([1, 2]) != _resume_child.digest([[1, 2]])
    assert _resume_child.digest(np.zeros(2, np.float32)) != _resume_child.digest(np.zeros(2, np.int32))


def test_cli_refuses_options_that_do_not_go_with_resume():
    proc = subprocess.run(
        [sys.executable, "-m", "fwd9m", "check", "--resume", "--runs", "3", "x.py"], capture_output=True, text=True
    )
    assert proc.returncode == 2 and "does not take --runs" in proc.stderr, proc.stderr


def test_interrupter_signals_then_kills_the_group_after_the_grace(tmp_path):
    """A real child that ignores SIGTERM: SIGTERM once it says it is at the boundary,
    SIGKILL to its group after the grace; ``signalled`` tells the child to go on."""
    (tmp_path / "interrupt.json").write_text(json.dumps({"step": 2}))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, time\n"
            "signal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('ready', flush=True)\n"
            "time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert proc.stdout.readline() == b"ready\n"  # SIGTERM is ignored from here on
        control = _resume._Interrupter(tmp_path, _resume.Interruption.parse("2", "TERM", 0.2), lambda m: None)
        control(proc)
        assert control.info == {"step": 2} and (tmp_path / "signalled").exists()
        assert proc.poll() is None  # SIGTERM ignored
        time.sleep(0.3)
        control(proc)
        assert control.killed
        assert proc.wait(timeout=30) == -9
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_report_and_json_name_the_lost_state_and_escape_control_characters():
    lost = [_resume._lost("rng:torch", "torch"), _resume._lost("generator:collate_fn.rng\x1b[2J", "torch")]
    result = _resume.ResumeResult(
        "train.py",
        [],
        [_resume.Finding("state", "run C", "w differs")],
        {"state tensors": 1},
        interruption="after step 4 with SIGTERM",
        interrupted_at=4,
        resume_step=3,
        lost=lost,
    )
    text = result.report()
    assert text.startswith("RESUME NOT EXACT") and "resumed from step 3" in text.splitlines()[0]
    assert "Lost at the resume point (run A before step 4 vs run C just after loading" in text
    assert "fwd9m.rng.state_dict()" in text and "\x1b" not in text
    data = json.loads(result.to_json())
    assert data["reproducible"] is False and data["resume"]["resume_step"] == 3
    assert [s["component"] for s in data["resume"]["lost"]][0] == "RNG torch"
    assert not _resume.ResumeResult("t.py", [], [], {"files": 1}, from_scratch=True)  # nothing resumed


def test_execute_calls_control_while_running_and_runs_again_in_an_existing_folder(tmp_path):
    """What check --resume needs from check's launcher: a callback while the run runs (run
    B's interruption) and a second run in the first one's folder (run C in B's)."""
    from fwd9m.check._process import _execute, _Run
    from fwd9m.check._result import RunInfo

    script = tmp_path / "s.py"
    script.write_text("import os, time\nprint(os.path.exists('mark'))\nopen('mark', 'w').close()\ntime.sleep(0.3)\n")
    calls = []
    first = _Run(
        RunInfo("one", [sys.executable, str(script)]),
        tmp_path / "r1",
        tmp_path / "r1" / "cwd",
        tmp_path / "r1" / "stdout",
    )
    (tmp_path / "r1").mkdir()
    _execute(first, tmp_path, "empty", {}, False, None, "1/2", lambda m: None, control=calls.append)
    assert first.info.returncode == 0 and calls and all(c.pid == calls[0].pid for c in calls)
    second = _Run(RunInfo("two", [sys.executable, str(script)]), tmp_path / "r2", first.cwd, tmp_path / "r2" / "stdout")
    (tmp_path / "r2").mkdir()
    _execute(second, tmp_path, "empty", {}, False, None, "2/2", lambda m: None)
    assert first.stdout.read_text() == "False\n" and second.stdout.read_text() == "True\n"


@pytest.mark.parametrize("compared, counted", [({"state tensors": 4}, False), ({"stdout lines": 2}, True)])
def test_a_summary_after_the_last_step_counts_only_when_nothing_else_was_compared(tmp_path, compared, counted):
    """HF Trainer prints train_loss averaged over the steps the process ran: run C ran only
    those after the resume, so that line differs though the training agrees."""
    from fwd9m.check._process import _Run
    from fwd9m.check._result import RunInfo

    ta, tc = tmp_path / "a", tmp_path / "c"
    ta.write_text("{'train_loss': '2.49', 'epoch': '2'}\n")
    tc.write_text("{'train_loss': '2.341', 'epoch': '2'}\n")
    runs = [_Run(RunInfo(name, []), tmp_path, tmp_path / name, tmp_path / "x") for name in ("run A", "run C")]
    result = _resume.ResumeResult("t.py", [], [], dict(compared))
    _resume._compare_tails(result, (ta, tc), *runs, strict=False)
    assert bool(result.findings) is counted
    assert counted or "train_loss" in result.notes[0]


def test_variables_only_the_resume_branch_binds_are_left_out_of_the_final_state():
    """``restored = ckptr.restore(...)`` exists in run C only: not a difference from run A.
    A variable of run A that run C lacks stays in (it is still compared)."""
    a = [{"flat": {"globals.params.w": 1, "globals.only_a": 2, "model:net.w": 3}}]
    c = [{"flat": {"globals.params.w": 1, "globals.restored.key": 4, "globals.restored[0]": 5, "model:net.w": 3}}]
    kept, dropped = _resume._drop_resume_globals(c, a)
    assert kept == [{"flat": {"globals.params.w": 1, "model:net.w": 3}}]
    assert dropped == ["restored"]
    assert _resume._drop_resume_globals(a, a) == (a, [])


_JAX_LOOP = """
import jax, jax.numpy as jnp, optax
tx = optax.sgd(0.1)
params = {"w": jnp.ones(3)}
opt_state = tx.init(params)

@jax.jit
def evaluate(params, x):  # jitted, but no update: not a step
    return jnp.sum(params["w"] * x)

@jax.jit(static_argnums=())
def inner(x):  # called inside the step's trace: not a step either
    return x * 2

@jax.jit
def train_step(params, opt_state, key, x):
    g = jax.grad(lambda p: jnp.sum(p["w"] * inner(x) * jax.random.normal(key, (3,))))(params)
    updates, opt_state = tx.update(g, opt_state, params)
    return optax.apply_updates(params, updates), opt_state

import functools

class Scaler:
    @functools.partial(jax.jit, static_argnums=0)
    def scale(self, x):  # a jitted method: bound as jax.jit's are
        return x * 3

assert float(Scaler().scale(jnp.ones(()))) == 3.0
key = jax.random.key(0)
for i in range(3):
    key, sub = jax.random.split(key)
    evaluate(params, jnp.ones(3))
    params, opt_state = train_step(params, opt_state, sub, jnp.full(3, float(i + 1)))
print(train_step.lower(params, opt_state, sub, jnp.ones(3)) is not None)
"""


def test_a_jitted_optax_step_is_seen_from_its_trace_and_its_arguments_are_the_state(tmp_path):
    """A real JAX/optax loop (no change to it) under the child: three steps, the jitted
    step's arguments digested before each; other jitted functions are not steps."""
    pytest.importorskip("jax")
    pytest.importorskip("optax")
    script = tmp_path / "loop.py"
    script.write_text(_JAX_LOOP)
    env = {_resume_child.ENV_DIR: str(tmp_path), _resume_child.ENV_RECORD: "2"}
    proc = subprocess.run(
        [sys.executable, "-m", "fwd9m.check._resume_child", str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("True")  # .lower reaches the jitted function
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert [e["e"] for e in events if e["e"] != "epoch"] == ["pre", "post", "pre", "post", "post"], events
    pre = [e for e in events if e["e"] == "pre"]
    assert [e["step"] for e in pre] == [1, 2] and {e["hook"] for e in pre} == {"jax"}
    names = set(pre[0]["state"])
    assert {"model weights", "jax argument opt_state", "jax argument key", "jax argument x"} <= names, names
    assert pre[0]["state"]["model weights"] != pre[1]["state"]["model weights"]  # the step changed them
    assert pre[0]["state"]["jax argument key"] != pre[1]["state"]["jax argument key"]


def test_digest_reads_jax_arrays_and_typed_keys_by_their_bits():
    jax = pytest.importorskip("jax")
    k0, k1 = jax.random.key(0), jax.random.key(1)
    assert _resume_child.digest(k0) == _resume_child.digest(jax.random.key(0))
    assert _resume_child.digest(k0) != _resume_child.digest(k1)
    assert _resume_child.digest(jax.numpy.zeros(2)) == _resume_child.digest(np.zeros(2, np.float32))


def test_a_checkpoint_still_being_written_is_not_a_new_checkpoint(tmp_path, monkeypatch):
    """orbax-checkpoint writes into STEP.orbax-checkpoint-tmp-TIME and renames it to STEP
    when it is complete (asynchronously with CheckpointManager): only the rename counts."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(_resume_child._state, "files", None)
    assert not _resume_child._new_files()
    tmp = tmp_path / "ckpt" / "3.orbax-checkpoint-tmp-1700000000"
    tmp.mkdir(parents=True)
    (tmp / "_METADATA").write_text("{}")
    assert not _resume_child._new_files()
    tmp.rename(tmp_path / "ckpt" / "3")
    assert _resume_child._new_files()
    assert not _resume_child._new_files()


_JAX_STATE_LOOP = """
import jax, jax.numpy as jnp, optax
tx = optax.adam(0.1)  # a state with leaves
params = {"w": jnp.ones(3)}
state = {"params": params, "opt": tx.init(params)}  # as flax's TrainState holds them

@jax.jit
def step(state, rng):
    g = jax.grad(lambda p: jnp.sum(p["w"] * jax.random.normal(rng, (3,))))(state["params"])
    updates, opt = tx.update(g, state["opt"], state["params"])
    return {"params": optax.apply_updates(state["params"], updates), "opt": opt}

for i in range(2):
    state = step(state, jax.random.key(i))

def again(p, rng):  # jax.jit(again) made anew at each step: one trace, every call a step
    print("tracing")
    g = jax.grad(lambda q: jnp.sum(q["w"] * jax.random.normal(rng, (3,))))(p)
    return optax.apply_updates(p, jax.tree_util.tree_map(lambda v: -0.1 * v, g))

p = params
for i in range(2):
    p = jax.jit(again)(p, jax.random.key(i))
"""


def test_the_weights_are_the_argument_that_holds_the_params_with_more(tmp_path):
    """A train state (params and optimizer state in one argument, flax's TrainState) is
    the weights; the key beside it is still compared on its own."""
    pytest.importorskip("jax")
    pytest.importorskip("optax")
    (tmp_path / "loop.py").write_text(_JAX_STATE_LOOP)
    env = {**os.environ, _resume_child.ENV_DIR: str(tmp_path), _resume_child.ENV_RECORD: "5"}
    proc = subprocess.run(
        [sys.executable, "-m", "fwd9m.check._resume_child", "loop.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    pre = [e for e in events if e["e"] == "pre"]
    assert [e["step"] for e in pre] == [1, 2], events  # the first step function's steps
    assert {"model weights", "jax argument rng"} <= set(pre[0]["state"]), pre[0]
    assert proc.stdout.count("tracing") == 1, proc.stdout  # jax's cache still hit
    assert "jax argument state" not in pre[0]["state"]


def test_a_step_function_jitted_anew_at_each_step_is_traced_once_and_counted(tmp_path):
    pytest.importorskip("jax")
    pytest.importorskip("optax")
    script = _JAX_STATE_LOOP.split("for i in range(2):")[0] + _JAX_STATE_LOOP.split("jax.random.key(i))", 1)[1]
    (tmp_path / "loop.py").write_text(script)
    env = {**os.environ, _resume_child.ENV_DIR: str(tmp_path), _resume_child.ENV_RECORD: "5"}
    proc = subprocess.run(
        [sys.executable, "-m", "fwd9m.check._resume_child", "loop.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("tracing") == 1, proc.stdout
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert [e["step"] for e in events if e["e"] == "post"] == [1, 2], events
    assert {"model weights", "jax argument rng"} <= set(events[0]["state"]), events[0]


def test_the_state_objects_are_found_past_a_dead_weak_proxy():
    # before: isinstance() on a weakref.proxy whose object is gone raised ReferenceError,
    # so no state was recorded before any step (Dynamo leaves such proxies behind when it
    # compiles a function that calls optimizer.step(); measured with torch 2.13)
    torch = pytest.importorskip("torch")
    import weakref

    from fwd9m.check import _resume_child as child

    class Gone:
        pass

    obj = Gone()
    held = [weakref.proxy(obj)]
    del obj
    loader = torch.utils.data.DataLoader([1, 2], generator=torch.Generator())
    found = child._torch_objects()
    assert any(ref() is loader for ref in found["data loader generator"])
    assert held
