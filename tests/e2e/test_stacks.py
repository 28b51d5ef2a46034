"""`fwd9m check` / `fwd9m debug` on real training stacks, written as their users write them.

Each stack in ``tests/e2e/stacks/`` has a reproducible variant (``<name>_ok.py``: check
exits 0) and one with a real nondeterminism source (``<name>_broken.py``: check exits 1
and names what differs; debug names the cause where the framework is recorded). The
scripts call no fwd9m API and run plainly too (``test_runs_without_fwd9m``, opt-in).

Every run uses ``--cwd empty`` and absolute paths (a launcher such as torchrun is given
the script's path as an argument, which fwd9m cannot rewrite). Every check skips the
hash-seed experiment (``--no-hashseed-check``; it is covered by tests/test_hashseed.py):
on a broken variant it only adds runs, and on an ok variant it never starts when the
runs agree.

A case marked ``xfail`` is one where today's fwd9m gives the wrong verdict; its reason
names the mechanism. The test asserts the right behaviour and passes once it is fixed.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from _examples_spec import explain, fwd9m, parse_json, require_cli, run

STACKS = Path(__file__).resolve().parent / "stacks"
#: seconds a single fwd9m command may take before the test fails (not the budget)
TIMEOUT = 420
#: the environment of every run: no download, TensorFlow's start-up log quiet
ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}


def _torchrun(script: Path) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", str(script)]


def _accelerate(script: Path) -> list[str]:
    # `--cpu` would start one process (accelerate/commands/launch.py: launch_command
    # takes multi_gpu_launcher only `if args.multi_gpu and not args.cpu`); --multi_gpu
    # without CUDA starts 2 processes through torch.distributed.run, on gloo, since the
    # script asks for Accelerator(cpu=True)
    return [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--multi_gpu",
        "--num_processes",
        "2",
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        str(script),
    ]


@dataclass(frozen=True)
class Stack:
    name: str
    #: top-level modules the scripts import (found with find_spec, never imported here)
    modules: tuple[str, ...]
    #: a launcher (script path -> command line), or None for `python script.py`
    launcher: object = None
    #: xfail reasons, while today's fwd9m gets that variant wrong
    ok_xfail: str | None = None
    broken_xfail: str | None = None
    #: substrings that must appear in the summaries of the broken variant's findings
    broken_finds: tuple[str, ...] = ()
    #: catalog ids that must be among the broken variant's hints (the cause, named)
    broken_catalog: tuple[str, ...] = ()
    #: lint codes of which the first "Next steps" entry must be one (the cause in the
    #: user's code, first); empty where lint does not see the cause
    first_lint: tuple[str, ...] = ()
    #: the stack whose broken variant's check proves what this one's would (the same path
    #: to the same verdict): this one's is then not checked (its script still runs under
    #: test_runs_without_fwd9m)
    broken_as: str | None = None

    def script(self, variant: str) -> Path:
        return STACKS / f"{self.name}_{variant}.py"

    def command(self, variant: str) -> list[str]:
        """The arguments after `fwd9m check`."""
        if self.launcher is None:
            return [str(self.script(variant))]
        return ["--", *self.launcher(self.script(variant))]


STACKS_TABLE = (
    Stack(
        "lightning",
        ("pytorch_lightning", "torch", "tensorboard"),
        broken_finds=("LitRegressor.net.0.weight", ".ckpt:state_dict.net.0.weight", "metrics.csv"),
        broken_catalog=("python.time-seed",),
        first_lint=("FWD104",),
    ),
    Stack(
        "hf_trainer",
        ("transformers", "torch", "accelerate"),
        broken_finds=("BertForSequenceClassification.bert.encoder.layer.0", "model.safetensors:"),
        broken_catalog=("torch.global-seed",),
    ),
    Stack(
        "accelerate",
        ("accelerate", "torch"),
        launcher=_accelerate,
        broken_finds=(
            "rank 0: torch:DistributedDataParallel.module.0.weight",
            "rank 1: torch:DistributedDataParallel.module.0.weight",
            "ckpt/model.safetensors:0.weight",
        ),
        first_lint=("FWD102",),
    ),
    Stack(
        "keras_fit",
        ("keras", "tensorflow"),
        broken_finds=("globals.x", "model.keras:model.weights.h5", "training.csv"),
        broken_catalog=("python.numpy-unseeded",),
        first_lint=("FWD103",),
    ),
    Stack(
        "tf_image",
        ("tensorflow",),
        broken_finds=("model.sequential/conv2d/kernel", "final.weights.h5:layers/conv2d"),
        first_lint=("FWD104",),
    ),
    Stack(
        "flax",
        ("flax", "optax", "jax"),
        broken_finds=("globals.order", "params.msgpack"),
        broken_catalog=("python.numpy-unseeded",),
        first_lint=("FWD109",),
    ),
    Stack(
        "torchrun_ddp",
        ("torch",),
        launcher=_torchrun,
        broken_finds=(
            "rank 0: torch:DistributedDataParallel.module.0.weight",
            "rank 1: torch:DistributedDataParallel.module.0.weight",
            "model.pt:0.weight",
        ),
        first_lint=("FWD101",),
    ),
    Stack(
        "tf_mirrored",
        ("tensorflow",),
        broken_finds=("model.sequential/dense/kernel", "kernel/replica_1", "mirrored.weights.h5:"),
        broken_catalog=("tensorflow.data-shuffle-seed",),
        first_lint=("FWD303", "FWD108"),
    ),
    # run folders named by the clock or a tracker's run id, loggers' timings (issue 26)
    Stack("hydra", ("hydra", "omegaconf", "torch"), broken_finds=("training step 0",)),
    Stack("wandb", ("wandb", "torch"), broken_finds=("training step 0",)),
    # mlflow_broken is wandb_broken with another tracker (the same unseeded torch.rand in
    # the data), and cleanrl_broken's unseeded NumPy reward differs at step 0 of a plain
    # torch loop as well: each check stops early at training step 0 before any file or log
    # of the tracker is read, as wandb's does (a torch script that imports TensorFlow
    # through TensorBoard gets no TensorFlow hint: lightning_broken)
    Stack("mlflow", ("mlflow", "torch"), broken_as="wandb"),
    Stack("sb3", ("stable_baselines3", "gymnasium", "torch"), broken_finds=("training step 0",)),
    Stack("cleanrl", ("torch", "tensorboard"), broken_as="wandb"),
)
BY_NAME = {s.name: s for s in STACKS_TABLE}


def _require(stack: Stack) -> None:
    require_cli("check")
    missing = [m for m in stack.modules if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"{stack.name} needs {', '.join(missing)} (not installed)")


def _check(stack: Stack, variant: str, *options: str):
    return fwd9m(
        "check",
        "-q",
        "--cwd",
        "empty",
        "--timeout",
        "300",
        "--format",
        "json",
        "--no-hashseed-check",
        *options,
        *stack.command(variant),
        env=ENV,
        timeout=TIMEOUT,
    )


def _summaries(report: dict) -> str:
    return "\n".join(f"[{f.get('source')}] {f.get('summary')}" for f in report.get("findings") or [])


def _params(variant: str) -> list:
    out = []
    for s in STACKS_TABLE:
        if variant == "broken" and s.broken_as:
            continue
        reason = s.ok_xfail if variant == "ok" else s.broken_xfail
        out.append(pytest.param(s, id=s.name, marks=[pytest.mark.xfail(reason=reason, strict=False)] if reason else []))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("stack", _params("ok"))
def test_check_says_ok_is_reproducible(stack):
    _require(stack)
    proc = _check(stack, "ok")
    report = parse_json(proc)
    assert proc.returncode == 0, f"{report.get('verdict')}\n{_summaries(report)}\n{explain(proc)}"
    assert report["reproducible"] is True
    compared = report["compared"]
    assert compared.get("stdout lines") and compared.get("state tensors"), compared


@pytest.mark.slow
@pytest.mark.parametrize("stack", _params("broken"))
def test_check_says_broken_is_not_reproducible(stack):
    _require(stack)
    proc = _check(stack, "broken")
    report = parse_json(proc)
    assert proc.returncode == 1, explain(proc)
    assert report["reproducible"] is False
    found = _summaries(report)
    steps = [f for f in report["findings"] if f.get("source") == "step"]
    if steps:  # the early stop: both runs stopped at the first training step that differs
        assert len(report["findings"]) == 1 and steps[0]["summary"].startswith("training step "), found
        assert any(g in steps[0]["detail"] for g in ("params: ", "grads: ", "loss: ")), steps[0]
    else:  # compared to the end: the final state, checkpoints and logs
        for expected in stack.broken_finds:
            assert expected in found, f"{expected!r} not among the findings:\n{found}"
    hints = [c.get("id") for c in report.get("catalog") or []]
    for expected in stack.broken_catalog:
        assert expected in hints, f"{expected!r} not among the catalog hints {hints}"
    if stack.first_lint:  # the user's own line first
        first = (report.get("catalog") or [{}])[0]
        assert first.get("kind") == "lint" and first.get("id") in stack.first_lint, (
            f"first next step {first.get('id')} {first.get('title')}, expected one of {stack.first_lint}"
        )
    # no catalog entry about a framework the script does not train with (TensorBoard
    # imports TensorFlow into a torch script; Keras and TF are one stack)
    frameworks = {
        "torch" if m in ("pytorch_lightning", "accelerate", "transformers") else "jax" if m in ("flax", "optax") else m
        for m in stack.modules
    } | {"python"}
    if "keras" in frameworks:
        frameworks.add("tensorflow")
    for c in report.get("catalog") or []:
        if c.get("kind") != "lint":
            assert c["id"].split(".")[0] in frameworks, f"{c['id']} for a {sorted(frameworks)} script"


# -- a reproducible run that reports its own timings -----------------------------------

TIMING = Stack("timing", ("torch", "tensorboard"))


@pytest.mark.slow
def test_check_ignores_timings_and_lists_them():
    """Prints a wall-clock time and an elapsed time, writes a JSON log with a runtime field
    and TensorBoard events, and trains reproducibly: exit 0, and the report says which
    values it ignored (so a user can see that nothing else was masked)."""
    _require(TIMING)
    script = str(STACKS / "timing_ok.py")
    proc = fwd9m(
        "check", "-q", "--cwd", "empty", "--timeout", "300", "--no-hashseed-check", script, env=ENV, timeout=TIMEOUT
    )
    assert proc.returncode == 0, explain(proc)
    report = proc.stdout.lower()
    assert "ignored" in report or "masked" in report, explain(proc)
    for value in ("runtime", "timestamp", "duration"):  # by name, and by form
        assert value in report, f"the report does not list the ignored {value!r}:\n{explain(proc)}"


# -- output and files that follow the clock -------------------------------------------

PROGRESS = Stack("progress", ("torch", "tqdm"))


@pytest.mark.slow
def test_check_reads_output_as_a_terminal_shows_it_and_pairs_time_stamped_names():
    """Nested tqdm bars on stdout (each redraw of the inner bar was a line of its own, as
    many as the clock allowed), logging with the time, and a run folder and log file
    named by the start time (every file was "written by run 1 only"): exit 0, with the
    names listed among the masked values."""
    _require(PROGRESS)
    proc = _check(PROGRESS, "ok")
    report = parse_json(proc)
    assert proc.returncode == 0, f"{report.get('verdict')}\n{_summaries(report)}\n{explain(proc)}"
    assert report["compared"].get("files") == 3, report["compared"]
    assert any(e["name"] == "file name" for e in report["ignored"]), report["ignored"]


# -- final state held in pytrees -------------------------------------------------------

FLAX_TRAINSTATE = Stack("flax_trainstate", ("flax", "optax", "jax"))


@pytest.mark.slow
def test_check_compares_flax_trainstate():
    """The script prints only its progress: its result is the final TrainState, whose
    parameters differ in every run. check must compare it (the README: "the final state of
    its models") and say NOT REPRODUCIBLE."""
    _require(FLAX_TRAINSTATE)
    proc = _check(FLAX_TRAINSTATE, "broken")
    report = parse_json(proc)
    assert proc.returncode == 1, f"{report.get('verdict')}\n{explain(proc)}"
    assert "params" in _summaries(report), _summaries(report)


# -- the scripts are ordinary user scripts ---------------------------------------------


def _plain(stack: Stack, variant: str) -> list[str]:
    script = stack.script(variant)
    return stack.launcher(script) if stack.launcher else [sys.executable, str(script)]


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["ok", "broken"])
@pytest.mark.parametrize("stack", [pytest.param(s, id=s.name) for s in (*STACKS_TABLE, TIMING, FLAX_TRAINSTATE)])
def test_runs_without_fwd9m(stack, variant, tmp_path):
    """Each script runs plainly, in an empty folder, without fwd9m (no fwd9m import in it).
    Opt-in (FWD9M_STACKS_PLAIN=1): the checks above run every script anyway, and these 19
    extra runs would double the module's time."""
    if os.environ.get("FWD9M_STACKS_PLAIN") != "1":
        pytest.skip("set FWD9M_STACKS_PLAIN=1 to run the scripts without fwd9m too")
    missing = [m for m in stack.modules if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"{stack.name} needs {', '.join(missing)} (not installed)")
    if not stack.script(variant).exists():
        pytest.skip(f"{stack.name} has no {variant} variant")
    assert "fwd9m" not in stack.script(variant).read_text()
    proc = run(_plain(stack, variant), env=ENV, cwd=tmp_path, timeout=TIMEOUT)
    assert proc.returncode == 0, explain(proc)
    assert proc.stdout.strip(), "the script printed nothing"


# -- fwd9m debug names the cause -------------------------------------------------------


@dataclass(frozen=True)
class DebugStack:
    """What `fwd9m debug` must report on a broken stack."""

    stack: str
    #: cause class of the first divergence ("culprit" | "external" | "structural")
    kind: str
    #: fields of the first divergence -> a substring each must contain
    expect: dict = field(default_factory=dict)
    #: a snippet of the broken script: the divergence must be located on its line
    line: str | None = None
    xfail: str | None = None


DEBUG_STACKS = (
    # the noise drawn from the module's clock-seeded generator, in training_step
    DebugStack(
        "lightning",
        "external",
        {"op": "aten::randn", "source": "rng", "catalog": "python.time-seed"},
        line="noise = torch.randn(x.shape, generator=self.noise_gen)",
    ),
    # the training data from the unseeded NumPy generator enters fit as a TensorDataset
    DebugStack(
        "keras_fit", "external", {"source": "data", "catalog": "python.numpy-unseeded"}, line="history = model.fit("
    ),
    # the clock seed is a Python int that tf.function bakes into the graph as a Const: a
    # value entering from outside (external), not a nondeterministic op
    DebugStack("tf_image", "external", {}, line="seed = tf.stack([step, CLOCK_SEED])"),
    # the batch picked by the unseeded np.random.permutation enters the jitted step
    DebugStack(
        "flax",
        "external",
        {"source": "data", "catalog": "python.numpy-unseeded"},
        line="params, opt_state, loss = train_step(params, opt_state, x[idx]",
    ),
    # the unseeded weight initialisation, seen from the user's line that builds the model
    DebugStack(
        "hf_trainer",
        "external",
        {"source": "rng", "catalog": "torch.global-seed"},
        line="model = BertForSequenceClassification(config)",
    ),
    # no global seed: the first random op (a weight initializer) differs
    DebugStack("tf_mirrored", "external", {}),
)


def _line_of(script: Path, snippet: str) -> int:
    lines = [i for i, text in enumerate(script.read_text().splitlines(), 1) if snippet in text]
    assert len(lines) == 1, f"{snippet!r} is on lines {lines} of {script.name}"
    return lines[0]


def _first_field(first: dict, name: str) -> str:
    explanation = first.get("explanation") or {}
    if name == "headline":
        return str(explanation.get("headline", ""))
    if name == "catalog":
        return " ".join(str(c.get("id")) for c in explanation.get("catalog") or [])
    return str(first.get(name) or "")


@pytest.mark.slow
@pytest.mark.parametrize(
    "case",
    [
        pytest.param(c, id=c.stack, marks=[pytest.mark.xfail(reason=c.xfail, strict=False)] if c.xfail else [])
        for c in DEBUG_STACKS
    ],
)
def test_debug_names_the_cause(case, tmp_path):
    stack = BY_NAME[case.stack]
    _require(stack)
    require_cli("debug")
    script = stack.script("broken")
    # debug runs the script where it is started: an empty folder, not the checkout
    proc = fwd9m(
        "debug", "--format", "json", "--no-hashseed-check", str(script), env=ENV, cwd=tmp_path, timeout=TIMEOUT
    )
    assert proc.returncode == 1, explain(proc)
    report = parse_json(proc)
    # the recorder must not change the program: both recorded runs complete
    assert not [n for n in report.get("notes") or [] if "exited with status" in n], report.get("notes")
    first = report.get("first") or {}
    brief = {k: first.get(k) for k in ("kind", "op", "module", "phase", "location", "source", "detail")}
    assert report.get("kind") == case.kind and first.get("kind") == case.kind, brief
    for name, expected in case.expect.items():
        assert expected in _first_field(first, name), f"{name}: expected {expected!r}: {brief}"
    if case.line:
        where = f"{script.name}:{_line_of(script, case.line)}"
        assert str(first.get("location") or "").endswith(where), f"expected the divergence at {where}: {brief}"


@pytest.mark.slow
def test_debug_runs_do_not_see_each_others_files(tmp_path):
    """The "resume if a checkpoint exists" idiom: each recorded run must start from the
    same folder contents, as each run of check does."""
    require_cli("debug")
    script = STACKS / "resume_ok.py"
    proc = fwd9m(
        "debug", "--format", "json", "--no-hashseed-check", str(script), env=ENV, cwd=tmp_path, timeout=TIMEOUT
    )
    assert proc.returncode == 0, explain(proc)
    assert not (tmp_path / "checkpoint.pt").exists(), "debug left the script's checkpoint in the user's folder"
