#!/usr/bin/env python3
"""``scripts/gpu-check``: does fwd9m work on this machine's CUDA GPU? Eight minutes, no network.

    scripts/gpu-check --out DIR        on a machine with a CUDA build of PyTorch and/or JAX
    scripts/gpu-check --dry-run        the same steps on the CPU (CI runs it)

The driver is the standard library only. It picks an interpreter that holds a CUDA build
of a framework (``python3`` first, then ``.venv/bin/python``, or ``--python``), makes
fwd9m importable from this working tree without the network (``pip install --no-deps
--no-index --no-build-isolation -e .``, else ``PYTHONPATH=src``), then runs each step as
that interpreter's subprocess: ``python -m fwd9m ...`` and the small workloads in
``scripts/gpu_check_work/``. Each step ends in one line, PASS, FAIL or SKIP, with its
figure; ``--out DIR`` gets ``gpu-check.json`` (every step, its figures and details),
``gpu-check.txt`` (the lines) and ``probe.json`` (``fwd9m probe --json``).

``--dry-run`` takes the same path on the CPU: the device is ``cpu`` and each workload
replaces only its CUDA calls by stand-ins named ``CPU_STAND_IN_FOR_*`` (the atomics of
``index_add_`` by ``index_put_(accumulate=True)`` on CPU, nondeterministic with two
threads; see each workload's docstring). pip runs with ``--dry-run`` there, so that no
shared environment is changed. Exit status: 0 no step failed, 1 some step failed, 2 could
not start (no interpreter with a framework, bad arguments).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORK = REPO / "scripts" / "gpu_check_work"
#: the wall-clock budget of a whole check (the issue's eight minutes)
BUDGET_S = 480.0
#: kept back from each subprocess's time limit for the steps after it
RESERVE_S = 5.0
#: the variables a run "without determinism" must not inherit from the caller's shell
CLEARED_ENV = ("CUBLAS_WORKSPACE_CONFIG", "XLA_FLAGS", "PYTHONHASHSEED", "FWD9M_SEED", "FWD9M_RUN_ENABLE")
#: what a recorded op or a digested step may add in host synchronisations (the recorder
#: reads device digests back in batches of 256 ops; step digests in one transfer a step)
MAX_SYNCS_PER_OP = 1 / 16
MAX_SYNCS_PER_STEP = 4
#: targets on the GPU (issue 34): per-op recording of a transformer block, step digests
RECORD_TARGET, DIGEST_TARGET = 1.05, 1.01


@dataclass
class Step:
    name: str
    status: str  #: pass, fail, skip
    figure: str
    seconds: float = 0.0
    details: dict = field(default_factory=dict)

    def line(self) -> str:
        return f"{self.status.upper():<4}  {self.name:<13} {self.figure}"


class OutOfTime(Exception):
    """The budget has no room left for this step."""


@dataclass
class Context:
    python: str
    device: str  #: cuda:0, or cpu in the dry run
    dry_run: bool
    deadline: float
    info: dict = field(default_factory=dict)
    env: dict = field(default_factory=dict)
    tmp: Path = Path(".")
    out: Path | None = None
    start: float = field(default_factory=time.monotonic)

    @property
    def cuda(self) -> bool:
        return self.device.startswith("cuda")

    def say(self, text: str) -> None:
        print(f"gpu-check [{time.monotonic() - self.start:6.1f} s] {text}", flush=True)

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def run(self, args: list[str], cap: float, extra_env: dict | None = None, cwd=None):
        """``args`` as a subprocess with this check's environment, for at most ``cap``
        seconds and never past the budget, saying every 30 s that it still runs; (exit
        status, stdout, stderr), status 124 when it ran out of time (its whole process
        group is killed: ``fwd9m check`` and ``debug`` start runs of their own)."""
        limit = min(cap, self.left() - RESERVE_S)
        if limit < 10:
            raise OutOfTime(f"{self.left():.0f} s of the budget left")
        env = dict(self.env, **(extra_env or {}))
        proc = subprocess.Popen(
            args, cwd=cwd or self.tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True,
        )  # fmt: skip
        t0 = time.monotonic()
        try:
            while True:
                waited = time.monotonic() - t0
                try:
                    out, err = proc.communicate(timeout=max(0.1, min(30.0, limit - waited)))
                    return proc.returncode, out, err
                except subprocess.TimeoutExpired:
                    if time.monotonic() - t0 >= limit:
                        break
                    self.say(f"  still running ({time.monotonic() - t0:.0f} s): {' '.join(args[1:4])} ...")
        finally:  # out of time, or gpu-check itself interrupted: no run left behind on the GPU
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return 124, out, err + f"\n(gpu-check: stopped after {limit:.0f} s)"

    def fwd9m(self, *args: str, cap: float, extra_env: dict | None = None):
        return self.run([self.python, "-m", "fwd9m", *args], cap, extra_env)

    def workload(self, name: str, *args: str, cap: float, prefix: tuple[str, ...] = ()):
        """(status, the JSON its last stdout line holds or None, stderr tail)."""
        rc, out, err = self.run([self.python, *prefix, str(WORK / name), *args], cap)
        return rc, last_json(out), tail(err)


def last_json(text: str):
    for line in reversed(text.strip().splitlines()):
        if line.startswith(("{", "[")):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


def tail(text: str, lines: int = 12) -> str:
    return "\n".join((text or "").strip().splitlines()[-lines:])


# --------------------------------------------------------------------- interpreter


def candidates(explicit: str | None) -> list[str]:
    """The interpreters to try, in order, each once."""
    found = [explicit] if explicit else []
    for name in ("python3", str(REPO / ".venv" / "bin" / "python")):
        path = shutil.which(name)
        if path:
            found.append(path)
    seen, out = set(), []
    for p in found:
        key = os.path.abspath(p)  # not realpath: a venv links to its base interpreter
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


def inspect(python: str) -> dict:
    env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")
    env.pop("PYTHONPATH", None)
    try:
        done = subprocess.run(
            [python, str(WORK / "inspect_env.py")], capture_output=True, text=True, timeout=180, env=env
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"executable": python, "error": str(exc)}
    return last_json(done.stdout) or {"executable": python, "error": tail(done.stderr, 3)}


def usable(info: dict, dry_run: bool) -> bool:
    """On a GPU machine: a CUDA build that sees the GPU; in the dry run: PyTorch at all."""
    torch, jax = info.get("torch") or {}, info.get("jax") or {}
    if dry_run:
        return "version" in torch
    return bool(torch.get("cuda") or jax.get("cuda"))


def choose(explicit: str | None, dry_run: bool, say) -> tuple[str | None, dict, list[dict]]:
    tried = []
    for python in candidates(explicit):
        say(f"looking at {python}")
        info = inspect(python)
        tried.append(info)
        if usable(info, dry_run):
            return python, info, tried
    return None, {}, tried


def describe(info: dict) -> str:
    parts = [f"{info.get('executable')} (Python {info.get('python')})"]
    torch, jax = info.get("torch") or {}, info.get("jax") or {}
    if "version" in torch:
        gpu = f", {torch['gpu']}" if torch.get("gpu") else ", no GPU"
        parts.append(f"torch {torch['version']} (CUDA {torch.get('cuda_build') or 'none'}{gpu})")
    if "version" in jax:
        parts.append(f"jax {jax['version']} ({'gpu: ' + str(jax.get('gpu')) if jax.get('cuda') else 'no GPU'})")
    parts.append(f"tensorflow {info['tensorflow']}" if info.get("tensorflow") else "no tensorflow")
    return "; ".join(parts)


# --------------------------------------------------------------------- steps


def step_install(ctx: Context) -> Step:
    """fwd9m from this tree, without the network: pip's offline editable install (only
    checked in the dry run), else ``PYTHONPATH=src``."""
    pip = [ctx.python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps", "--no-index"]
    pip += ["--no-build-isolation", "-e", str(REPO)]
    src = str(REPO / "src")
    origin = ctx.info.get("fwd9m") or ""
    if origin.startswith(src):
        rc, _, err = ctx.run(pip[:4] + ["--dry-run"] + pip[4:], 120, cwd=REPO)
        how = "already installed from this tree; pip's offline build checked (--dry-run --no-index)"
    elif ctx.dry_run:
        rc, _, err = ctx.run(pip[:4] + ["--dry-run"] + pip[4:], 120, cwd=REPO)
        how = "PYTHONPATH=src (dry run: pip --dry-run --no-index only, this interpreter left as it was)"
        ctx.env["PYTHONPATH"] = os.pathsep.join(p for p in (src, ctx.env.get("PYTHONPATH", "")) if p)
    else:
        rc, _, err = ctx.run(pip, 240, cwd=REPO)
        how = "pip install --no-deps --no-index --no-build-isolation -e ."
        if rc != 0:
            how = f"PYTHONPATH=src (pip failed: {tail(err, 1)})"
            ctx.env["PYTHONPATH"] = os.pathsep.join(p for p in (src, ctx.env.get("PYTHONPATH", "")) if p)
    code = "import fwd9m, sys; print(fwd9m.__file__); print(fwd9m.__version__)"
    vrc, out, verr = ctx.run([ctx.python, "-c", code], 60)
    lines = out.split()
    ok = vrc == 0 and bool(lines) and lines[0].startswith(src)
    figure = f"fwd9m {lines[1] if len(lines) > 1 else '?'} from {src}: {how}"
    if not ok:
        figure = f"fwd9m does not import from {src}: {tail(verr or out, 2)}"
    return Step("install", "pass" if ok else "fail", figure, details={"pip_rc": rc, "pip_err": tail(err, 4)})


def _settings_ok(state: dict | None, ctx: Context) -> list[str]:
    """What is wrong with the settings ``enable_env.py`` printed ([] if nothing)."""
    if not state:
        return ["no result"]
    want = {
        "switch": True,
        "cudnn_deterministic": True,
        "cudnn_benchmark": False,
        "cuda_initialised_before": False,
        "kernels_ran": "ok",
    }
    bad = [f"{k}={state.get(k)!r}" for k, v in want.items() if state.get(k) != v]
    if state.get("CUBLAS_WORKSPACE_CONFIG") not in (":4096:8", ":16:8"):
        bad.append(f"CUBLAS_WORKSPACE_CONFIG={state.get('CUBLAS_WORKSPACE_CONFIG')!r}")
    if not str(state.get("device", "")).startswith(ctx.device.split(":")[0]):
        bad.append(f"ran on {state.get('device')}")
    return bad


def step_enable(ctx: Context) -> Step:
    """``fwd9m run`` and ``enable_determinism()`` set what CUDA needs before its first handle."""
    script = str(WORK / "enable_env.py")
    rc1, out1, err1 = ctx.fwd9m("run", "--seed", "0", script, cap=120)
    ran = last_json(out1)
    rc2, called, err2 = ctx.workload("enable_env.py", "--call", cap=120)
    bad = [f"fwd9m run: {b}" for b in _settings_ok(ran, ctx)]
    bad += [f"enable_determinism(): {b}" for b in _settings_ok(called, ctx)]
    if ran and ran.get("PYTHONHASHSEED") != "0":
        bad.append(f"fwd9m run: PYTHONHASHSEED={ran.get('PYTHONHASHSEED')!r}")
    details = {"fwd9m_run": ran, "enable_determinism": called, "stderr": [tail(err1, 4), tail(err2, 4)]}
    if bad:
        return Step("enable", "fail", "; ".join(bad), details=details)
    figure = (
        f"fwd9m run and enable_determinism(): CUBLAS_WORKSPACE_CONFIG={ran['CUBLAS_WORKSPACE_CONFIG']}, "
        f"switch on, cudnn.deterministic, no cudnn.benchmark, set before CUDA started; matmul and conv "
        f"ran on {ran['device']} under the switch"
    )
    return Step("enable", "pass", figure, details=details)


def _check(ctx: Context, *options: str) -> tuple[int, dict | None, str]:
    rc, out, err = ctx.fwd9m(
        "check", "-q", "--no-hashseed-check", "--cwd", "empty", "--format", "json", "--timeout", "150",
        *options, str(WORK / "train_atomic.py"), cap=200,
    )  # fmt: skip
    return rc, _json(out) or last_json(out), tail(err, 6)


def _json(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return None


def step_check(ctx: Context) -> Step:
    """The atomics training: NOT REPRODUCIBLE without determinism, REPRODUCIBLE with it."""
    rc_off, off, err_off = _check(ctx)
    rc_on, on, err_on = _check(ctx, "--enable")
    v_off = (off or {}).get("verdict", f"exit {rc_off}: {err_off}")
    v_on = (on or {}).get("verdict", f"exit {rc_on}: {err_on}")
    ok = rc_off == 1 and rc_on == 0
    figure = f"without: {v_off.split(':')[0]} (exit {rc_off}); --enable: {v_on.split(':')[0]} (exit {rc_on})"
    if not ok:
        figure += f" | without: {v_off[:300]} | with: {v_on[:300]}"
    details = {"without": v_off, "with": v_on, "stand_in": None if ctx.cuda else "CPU_STAND_IN_FOR_CUDA_ATOMICS"}
    return Step("check", "pass" if ok else "fail", figure, details=details)


def step_debug(ctx: Context) -> Step:
    """``fwd9m debug`` names the atomics op as the culprit and proves it by replay."""
    rc, out, err = ctx.fwd9m(
        "debug", "--format", "json", "--cwd", "empty", "--timeout", "150", "--no-hashseed-check",
        str(WORK / "train_atomic.py"), cap=300,
    )  # fmt: skip
    report = _json(out) or {}
    first = report.get("first") or {}
    replay = ((first.get("explanation") or {}).get("replay")) or {}
    expected = ("aten::index_add", "aten::index_add_") if ctx.cuda else ("aten::index_put_", "aten::_index_put_impl_")
    where = f"{first.get('op')} at {first.get('location')} on {first.get('device')}"
    checks = {
        "culprit": report.get("kind") == "culprit",
        "op": first.get("op") in expected,
        "device": str(first.get("device", "")).startswith(ctx.device.split(":")[0]),
        "replay varies": replay.get("status") == "nondeterministic",
        "switch fixes": "switch fixes it" in str(replay.get("switch", "")),
        "replayed on the device": f"{ctx.device.split(':')[0]}" in str(replay.get("text", "")),
    }
    failed = [k for k, v in checks.items() if not v]
    figure = (
        f"{report.get('kind', 'no report').upper()}: {where}; replay alone: {replay.get('distinct')} distinct in "
        f"{replay.get('replays')} (max {replay.get('max_ulp')} ULP); {replay.get('switch', 'no switch replay')}"
    )
    if failed:
        figure = f"not shown: {', '.join(failed)} | {figure}" + (f" | exit {rc}: {tail(err, 3)}" if not report else "")
    details = {"kind": report.get("kind"), "first": {k: v for k, v in first.items() if k != "explanation"}}
    details.update(replay=replay, stand_in=None if ctx.cuda else "CPU_STAND_IN_FOR_CUDA_ATOMICS")
    return Step("debug", "fail" if failed else "pass", figure, details=details)


def step_overhead(ctx: Context) -> list[Step]:
    """Host syncs per recorded op and per digested step; the two cost ratios."""
    rc, res, err = ctx.workload("overhead.py", cap=240)
    if not res:
        return [Step("syncs", "fail", f"overhead.py exit {rc}: {err}")]
    syncs, ops, steps = res["syncs"], max(res["ops"], 1), res["steps"]
    per_op = (syncs["recorded"] - syncs["plain"]) / ops
    per_step = (syncs["digests"] - syncs["plain"]) / steps
    ok = per_op <= MAX_SYNCS_PER_OP and per_step <= MAX_SYNCS_PER_STEP
    figure = (
        f"recording: {syncs['recorded'] - syncs['plain']} extra syncs for {res['ops']} ops ({per_op:.4f}/op, "
        f"limit {MAX_SYNCS_PER_OP:.4f}); step digests: {per_step:.1f}/step (limit {MAX_SYNCS_PER_STEP}); "
        f"counted by {res['sync_counter']}"
    )
    out = [Step("syncs", "pass" if ok else "fail", figure, details=res)]
    for name, ratio, target in (
        ("record-ratio", res["record_ratio"], RECORD_TARGET),
        ("digest-ratio", res["digest_ratio"], DIGEST_TARGET),
    ):
        text = f"{ratio:.3f}x a plain step ({res['steps']} steps, transformer block {res['sizes']}; target <= {target})"
        if ctx.cuda:
            out.append(Step(name, "pass" if ratio <= target else "fail", text))
        else:
            out.append(
                Step(name, "skip", f"{text}: the target is for the GPU (on a CPU, this small block times noise)")
            )
    return out


def _gpu_entries(ctx: Context, frameworks: list[str]) -> list[str]:
    rc, out, err = ctx.fwd9m("catalog", "--device", "gpu", "--format", "json", cap=60)
    entries = _json(out) or []
    return [e["id"] for e in entries if e.get("kind") == "op" and e.get("framework") in frameworks]


def _measured(report: dict, versions: dict, gpu: str) -> dict[str, str]:
    """For each entry probed: the line a catalog entry's ``measured`` field could take."""
    by_entry: dict[str, list[str]] = {}
    for r in report.get("results", []):
        if r["status"] == "nondeterministic":
            what = f"{r['distinct']} distinct outputs in {r['repeats']} repeats (max {r['max_ulp']} ULP)"
        elif r["status"] == "deterministic":
            what = f"1 output in {r['repeats']} repeats"
        else:
            what = r["status"] + (f" ({str(r.get('error'))[:80]})" if r.get("error") else "")
        by_entry.setdefault(r["key"], []).append(f"switch {'on' if r['switch'] else 'off'}: {what}")
    return {
        key: f"fwd9m probe, {versions.get(key.split('.')[0], '?')}, {gpu}: " + "; ".join(lines)
        for key, lines in by_entry.items()
    }


def step_probe(ctx: Context) -> Step:
    """``fwd9m probe --device cuda:0`` over the catalog's GPU op entries."""
    frameworks = [f for f in ("torch", "jax") if _has(ctx, f)]
    entries = _gpu_entries(ctx, frameworks)
    if not entries:
        return Step("probe", "skip", f"no GPU op entry for {frameworks or 'any framework here'}")
    where = (ctx.out or ctx.tmp) / "probe.json"
    where.unlink(missing_ok=True)
    args = ["probe", "-q", "--device", ctx.device, "--repeat", "5" if ctx.cuda else "2", "--json", str(where)]
    args += [a for f in frameworks for a in ("-f", f)] + [a for e in entries for a in ("--entry", e)]
    rc, out, err = ctx.fwd9m(*args, cap=240)
    report = _json(where.read_text()) if where.exists() else None
    if rc not in (0, 1) or not report:
        return Step("probe", "fail", f"fwd9m probe exit {rc}: {tail(err, 4)}")
    results = report["results"]
    counts = {s: sum(r["status"] == s for r in results) for s in ("nondeterministic", "raises", "error")}
    contra = report.get("contradictions", [])
    versions = {f: f"{f} {(ctx.info.get(f) or {}).get('version')}" for f in frameworks}
    gpu = (ctx.info.get("torch") or {}).get("gpu") or (ctx.info.get("jax") or {}).get("gpu") or ctx.device
    figure = (
        f"{len(entries)} catalog GPU entries ({', '.join(frameworks)}) on {ctx.device}, {len(results)} measurements: "
        f"{counts['nondeterministic']} nondeterministic, {counts['raises']} raise under the switch, "
        f"{counts['error']} could not run; {len(contra)} contradict the catalog"
    )
    figure += "".join(f"\n        - {c}" for c in contra)
    details = {"entries": entries, "contradictions": contra, "measured": _measured(report, versions, gpu)}
    details["skipped"] = report.get("skipped", {})
    details["not_in_catalog"] = ["FlexAttention decode backward (no catalog entry or probe yet)"]
    return Step("probe", "fail" if contra else "pass", figure, details=details)


def _has(ctx: Context, framework: str) -> bool:
    """``framework`` is here, and in a CUDA build unless this is the dry run."""
    info = ctx.info.get(framework) or {}
    return "version" in info and (not ctx.cuda or bool(info.get("cuda")))


def step_jax(ctx: Context) -> Step:
    """enable_determinism puts XLA's flag in before the backend starts; the scatter-add
    differs without it (on a GPU) and not with it."""
    if not _has(ctx, "jax"):
        return Step("jax", "skip", "JAX is not installed here" + ("" if not ctx.info.get("jax") else " with CUDA"))
    rc_on, on, err_on = ctx.workload("jax_scatter.py", "--enable", cap=120)
    rc_off, off, err_off = ctx.workload("jax_scatter.py", cap=120)
    if not on or not off:
        return Step("jax", "fail", f"jax_scatter.py exit {rc_on}/{rc_off}: {err_on or err_off}")
    flag = "--xla_gpu_deterministic_ops=true" in on["XLA_FLAGS"]
    late = bool(on.get("warnings"))
    ok = flag and not late and on["distinct"] == 1 and (off["distinct"] > 1 or not ctx.cuda)
    figure = (
        f"XLA_FLAGS {'has' if flag else 'LACKS'} --xla_gpu_deterministic_ops=true before the backend starts"
        f"{' (but a too-late warning)' if late else ''}; scatter-add on {on['device']}: {off['distinct']} distinct "
        f"in {off['repeats']} without, {on['distinct']} with"
    )
    if not ctx.cuda:
        figure += " (CPU stand-in: XLA's CPU scatter is serial, no difference expected)"
    elif off["distinct"] == 1:
        figure += " (no difference without the flag: the catalog's jax.xla-gpu-scatter not reproduced)"
    return Step("jax", "pass" if ok else "fail", figure, details={"with": on, "without": off})


def step_gpu_tests(ctx: Context) -> Step:
    """The test suite's GPU-marked tests (``pytest -m gpu``), where pytest is."""
    if not ctx.info.get("pytest"):
        return Step("gpu-tests", "skip", "pytest is not installed for this interpreter")
    files = sorted(str(p.relative_to(REPO)) for p in (REPO / "tests").glob("test_*.py") if "mark.gpu" in p.read_text())
    if not ctx.cuda:
        return Step("gpu-tests", "skip", f"dry run: every test it would run needs a CUDA GPU ({', '.join(files)})")
    args = [ctx.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "gpu", *files]
    rc, out, err = ctx.run(args, 240, cwd=REPO)
    summary = tail(out, 1) or tail(err, 1)
    if rc == 5 or (rc == 0 and " passed" not in summary):
        return Step("gpu-tests", "skip", f"{summary} ({', '.join(files)}; they need a CUDA GPU)")
    figure = f"{summary} in {', '.join(files)}"
    return Step("gpu-tests", "pass" if rc == 0 else "fail", figure, details={"output": tail(out, 40)})


def step_not_here(ctx: Context) -> list[Step]:
    """What this script does not run, each saying why."""
    tf = ctx.info.get("tensorflow")
    why_tf = f"TensorFlow {tf} is here but has no step in this script" if tf else "TensorFlow is not installed here"
    return [
        Step("tensorflow", "skip", f"{why_tf}: its GPU ops stay unmeasured (fwd9m probe -f tensorflow)"),
        Step("vary-batch", "skip", "check --vary batch on a GPU matmul waits for batch invariance (issue 31)"),
    ]


# --------------------------------------------------------------------- driver

#: (name, function, what it needs: "torch", "jax" or None), in the order they run: the
#: steps a first lease most needs first, so that a short budget drops the last ones
STEPS = (
    ("install", step_install, None, "fwd9m from this tree, offline"),
    ("enable", step_enable, "torch", "fwd9m run / enable_determinism before CUDA starts"),
    ("check", step_check, "torch", "fwd9m check on the atomics training, without and with --enable"),
    ("debug", step_debug, "torch", "fwd9m debug on the atomics training: culprit and replay"),
    ("jax", step_jax, None, "JAX: XLA's determinism flag and a scatter-add"),
    ("overhead", step_overhead, "torch", "host syncs and cost of recording and step digests"),
    ("probe", step_probe, None, "fwd9m probe over the catalog's GPU op entries"),
    ("gpu-tests", step_gpu_tests, None, "pytest -m gpu"),
    ("not-here", step_not_here, None, "what this script does not run"),
)


def run_step(ctx: Context, name: str, fn, needs: str | None, what: str) -> list[Step]:
    if needs and not _has(ctx, needs):
        steps = [Step(name, "skip", f"needs {needs}{' with CUDA' if ctx.cuda else ''}, not installed here")]
        print(steps[0].line(), flush=True)
        return steps
    ctx.say(f"{name}: {what} ...")
    t0 = time.monotonic()
    try:
        got = fn(ctx)
    except OutOfTime as exc:
        got = Step(name, "skip", f"out of time: {exc} (budget {BUDGET_S:.0f} s; --only {name} runs it alone)")
    except Exception as exc:  # a step's own bug must not cost the lease the other steps
        got = Step(name, "fail", f"gpu-check error: {type(exc).__name__}: {exc}")
    steps = got if isinstance(got, list) else [got]
    for s in steps:
        s.seconds = s.seconds or round(time.monotonic() - t0, 1)
        print(s.line(), flush=True)
    return steps


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="scripts/gpu-check", description=__doc__.split("\n\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="the same steps on the CPU, CUDA calls stood in for")
    ap.add_argument("--out", type=Path, help="folder for gpu-check.json, gpu-check.txt and probe.json")
    ap.add_argument("--python", help="the interpreter to use (default: python3, then .venv/bin/python)")
    ap.add_argument("--budget", type=float, default=BUDGET_S, help="seconds for the whole check (default 480)")
    ap.add_argument(
        "--only", help="comma-separated steps to run: " + ",".join(s[0] for s in STEPS if s[0] != "install")
    )
    args = ap.parse_args(argv)
    unknown = set((args.only or "").split(",")) - {s[0] for s in STEPS} - {""}
    if unknown:
        ap.error(f"unknown step(s) for --only: {', '.join(sorted(unknown))}")
    return args


def child_env(device: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in CLEARED_ENV}
    env.update(
        FWD9M_GPU_CHECK_DEVICE=device,
        XLA_PYTHON_CLIENT_PREALLOCATE="false",  # JAX and PyTorch take turns on one GPU
        PIP_NO_INDEX="1",
        HF_HUB_OFFLINE="1",
        PYTHONDONTWRITEBYTECODE="1",
    )
    return env


def write(ctx: Context, steps: list[Step], header: str) -> str:
    lines = [header] + [s.line() for s in steps]
    failed = [s.name for s in steps if s.status == "fail"]
    lines.append(f"gpu-check: {'FAILED: ' + ', '.join(failed) if failed else 'no step failed'} "
                 f"({sum(s.status == 'pass' for s in steps)} passed, {sum(s.status == 'skip' for s in steps)} "
                 f"skipped) in {time.monotonic() - ctx.start:.0f} s")  # fmt: skip
    text = "\n".join(lines) + "\n"
    if ctx.out:
        result = {
            "schema": "fwd9m.gpu-check",
            "dry_run": ctx.dry_run,
            "device": ctx.device,
            "interpreter": ctx.info,
            "seconds": round(time.monotonic() - ctx.start, 1),
            "failed": failed,
            "steps": [asdict(s) for s in steps],
        }
        (ctx.out / "gpu-check.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
        (ctx.out / "gpu-check.txt").write_text(text)
    return text


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    start = time.monotonic()
    device = "cpu" if args.dry_run else "cuda:0"
    ctx = Context(python="", device=device, dry_run=args.dry_run, deadline=start + args.budget, start=start)
    ctx.say(f"{'dry run on the CPU' if args.dry_run else 'on the GPU'}; budget {args.budget:.0f} s")
    python, info, tried = choose(args.python, args.dry_run, ctx.say)
    if not python:
        need = "PyTorch" if args.dry_run else "a CUDA build of PyTorch or JAX that sees a GPU"
        print(f"gpu-check: no interpreter here has {need}; tried: " + "; ".join(describe(t) for t in tried))
        print("  (on a machine without a GPU: scripts/gpu-check --dry-run)")
        return 2
    ctx.python, ctx.info, ctx.env = python, info, child_env(device)
    header = f"gpu-check {'--dry-run ' if args.dry_run else ''}on {device}: {describe(info)}"
    print(header, flush=True)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        ctx.out = args.out.resolve()
    only = set(args.only.split(",")) | {"install"} if args.only else None
    steps: list[Step] = []
    with tempfile.TemporaryDirectory(prefix="fwd9m-gpu-check-") as tmp:
        ctx.tmp = Path(tmp)
        for name, fn, needs, what in STEPS:
            if only is None or name in only:
                steps += run_step(ctx, name, fn, needs, what)
    print(write(ctx, steps, header).splitlines()[-1])
    return 1 if any(s.status == "fail" for s in steps) else 0


if __name__ == "__main__":
    raise SystemExit(main())
