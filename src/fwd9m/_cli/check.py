"""``fwd9m check``: run a script several times in fresh interpreters and compare."""

from __future__ import annotations

import argparse
import json
import sys
import time

from . import _batch

HELP = "run a script twice (or more) in fresh interpreters and compare, bit for bit"
DESCRIPTION = """\
Run a training script several times, each in a fresh interpreter and its own working
directory, and compare what it prints (numbers as numbers; timings masked and listed in
the report, --strict compares them too), the files it writes (.npy/.npz/.safetensors/.h5/
.keras/.pt/.ckpt and TensorFlow checkpoints tensor by tensor, other files by content) and
the final state of its models and variables.

  fwd9m check train.py --epochs 1           the script exactly as written
  fwd9m check --enable train.py             under `fwd9m run --seed 0` settings
  fwd9m check -m mypkg.train                a module
  fwd9m check -- torchrun --nproc-per-node 2 train.py
  fwd9m check --vary OMP_NUM_THREADS=1,4 train.py
  fwd9m check --vary=--batch-size=32,64 train.py
  fwd9m check --vary batch infer.py         same samples, other batch sizes: same bits?
  fwd9m check --cost train.py               run time with enable_determinism / without
  fwd9m check --resume --interrupt-after 5 --resume-args "--resume" train.py

Each run starts in the current directory seen through a copy-on-write layer of its
own, so relative paths to data work, each run writes its own files and yours are never
written (where the machine forbids that: a folder of links, with your files put back).
Exit status: 0 reproducible, 1 not reproducible, 2 could not run.
"""


def add_arguments(p) -> None:
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("--runs", type=int, default=2, metavar="N", help="runs under the same settings (default 2)")
    p.add_argument(
        "--seed", type=int, default=0, metavar="S", help="seed passed to `fwd9m run` with --enable (default 0)"
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="SEC",
        help="seconds per run; the run's whole process group is killed after it",
    )
    p.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="K=V",
        help="set an environment variable in every run (repeatable)",
    )
    p.add_argument(
        "--enable", action="store_true", help="run as `python -m fwd9m run --seed S SCRIPT` (determinism switched on)"
    )
    p.add_argument(
        "--vary",
        action="append",
        default=[],
        metavar="NAME=V1,V2",
        help="one extra run per value of an environment variable, 'threads', or a script "
        "option (--vary=--batch-size=32,64), each compared with run 1 (repeatable); "
        "batch[=1,2,64]: " + _batch.BATCH_HELP,
    )
    _batch.add_options(p)
    c = p.add_argument_group("cost of determinism (--cost)")
    c.add_argument(
        "--cost",
        action="store_true",
        help="time the script with and without enable_determinism (as fwd9m run --seed 0), "
        "alternately, each in a fresh process: the run-time ratio and the PyTorch ops that "
        "account for the difference (exit 0)",
    )
    c.add_argument("--cost-pairs", type=int, default=2, metavar="N", help="pairs of runs, off and on (default 2)")
    add_cwd_option(p)
    p.add_argument("--keep", action="store_true", help="keep the runs' directories and say where")
    p.add_argument(
        "--no-early-stop",
        dest="early_stop",
        action="store_false",
        help="run 1 and 2 one after the other to the end, not side by side stopping at the first "
        "training step whose loss, parameters, gradients, buffers or optimizer state differ",
    )
    p.add_argument(
        "--no-hashseed-check",
        dest="hashseed_check",
        action="store_false",
        help="when runs differ and their string-hash seed did too, do not run the hash-seed "
        "experiment (3 more runs, side by side where cores allow: PYTHONHASHSEED=0, 1 and 0 "
        "again; a 4th with 2 only when they agree) that tells whether hash order is the cause",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="compare printed output and text files with nothing masked: timings, rates, "
        "timestamps, addresses and temporary names too (only each run's folder path is "
        "rewritten); without it, every masked value is listed in the report as ignored",
    )
    r = p.add_argument_group("resume check (--resume)")
    r.add_argument(
        "--resume",
        action="store_true",
        help="check that an interrupted and resumed run ends as the uninterrupted one: run B is "
        "interrupted (--interrupt-after, --signal), run A runs through, run C runs the same "
        "command plus --resume-args in B's folder; C is compared with A, and the state lost at "
        "the resume point is named",
    )
    r.add_argument(
        "--interrupt-after",
        default="checkpoint",
        metavar="STEPS|epoch:N|checkpoint[:N]",
        help="where run B is interrupted: after that many optimizer steps (PyTorch, Keras fit "
        "batches), at the end of epoch N (Keras fit, Lightning, HF Trainer), or at the first step or epoch end after "
        "the N-th checkpoint appeared in its folder (default: checkpoint)",
    )
    r.add_argument(
        "--checkpoint",
        metavar="GLOB",
        help="what --interrupt-after checkpoint waits for (default: a file in a framework's save "
        "format, .pt .ckpt .safetensors .keras .h5 .npz .msgpack, or under a folder named as "
        "checkpoints are; never a log or a config written at start), e.g. --checkpoint 'ckpt/*.bin'",
    )
    r.add_argument(
        "--signal",
        default="TERM",
        metavar="TERM|KILL",
        help="TERM (default): SIGTERM to the script, then SIGKILL to its processes after --grace, "
        "as a scheduler preempts a job; KILL: SIGKILL to all its processes (a crash)",
    )
    r.add_argument(
        "--grace", type=float, default=30.0, metavar="SEC", help="seconds between SIGTERM and SIGKILL (default 30)"
    )
    r.add_argument(
        "--resume-args",
        default="",
        metavar='"ARGS"',
        help='arguments added to the command of run C, the resumed run (for example "--resume")',
    )
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress messages on stderr")
    p.add_argument(
        "-m",
        dest="module",
        action="store_true",
        help="the program is a module: fwd9m check -m MODULE [args], as python -m MODULE",
    )
    p.add_argument(
        "program",
        nargs=argparse.REMAINDER,
        metavar="script.py [args] | -m module [args] | -- command ...",
        help="the script and its arguments, a module (with -m), or -- and a command line",
    )


def add_cwd_option(p) -> None:
    """``--cwd``, the same for ``check`` and ``debug``: where each run works."""
    p.add_argument(
        "--cwd",
        choices=("isolate", "link", "empty"),
        default="isolate",
        help="each run's working directory: this directory seen through a copy-on-write layer of "
        "the run's own, so that your files are never written (default, where the machine allows "
        "it, else as link); links to this directory's entries, with what the runs write there put "
        "back (link); or an empty folder (empty)",
    )


def exit_on_sigterm() -> None:
    """Make SIGTERM (``timeout``, a CI job being cancelled, a scheduler) and SIGHUP (the
    terminal closed) unwind like Ctrl-C, so that the runs' process groups (started in
    sessions of their own) are killed and the user's files put back on the way out."""
    import signal
    import threading

    def _term(signum, frame):
        stop = SystemExit(128 + signum)
        stop.signal_name = signal.Signals(signum).name  # cli.main says it, as for Ctrl-C
        raise stop

    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is signal.SIG_DFL:
            signal.signal(sig, _term)


def run(args) -> int:
    from ..errors import ConfigurationError, RunError

    rest = list(args.program)
    command = False
    if rest[:1] == ["--"]:
        command, rest = not args.module, rest[1:]
    if not rest:
        raise RunError(
            "nothing to check: name a script (fwd9m check train.py), a module "
            "(fwd9m check -m pkg.train) or a command (fwd9m check -- torchrun ... train.py)"
        )
    target, script_args = rest[0], rest[1:]
    env = _env_option(args.env)
    if args.timeout is not None and not args.timeout > 0:  # nan too
        raise ConfigurationError(f"--timeout must be positive, got {args.timeout}")
    progress = _progress(args.quiet)
    exit_on_sigterm()
    if args.cost:
        return _check_cost(args, command, target, script_args, progress)
    batch, sizes = _batch.batch_sizes(args.vary)
    if batch:
        if command or args.resume:
            raise ConfigurationError("--vary batch runs a script (or -m module), not a command or --resume")
        return _batch.run(args, target, script_args, sizes, False, progress)
    try:
        if args.resume:
            result = _check_resume(args, command, target, script_args, env, progress)
        else:
            result = _check_script(args, command, target, script_args, env, progress)
    except RunError as exc:
        if args.format == "json":  # CI parses stdout: say why there is no verdict
            _print_json_error(exc)
        raise
    if args.format == "json":
        print(result.to_json())
    else:
        print(result.report(max_findings=None if getattr(args, "verbose", 0) else 5))
    return 0 if result else 1


def _check_cost(args, command: bool, target: str, script_args: list[str], progress) -> int:
    """``fwd9m check --cost``: the ratio and the ops behind it, printed."""
    from ..cost import check_cost
    from ..errors import ConfigurationError

    if command or args.resume or args.vary or args.enable:
        raise ConfigurationError("--cost runs a script (or -m module) itself, without --resume, --vary or --enable")
    result = check_cost(
        target,
        script_args,
        pairs=args.cost_pairs,
        module=bool(args.module),
        cwd=args.cwd,
        timeout=args.timeout,
        say=progress,
    )
    print(result.to_json() if args.format == "json" else result.report())
    return 0


def _env_option(items: list[str]) -> dict[str, str]:
    """``--env K=V`` options as a dict.

    Raises:
        ConfigurationError: an item without ``=`` or with an empty name.
    """
    from ..errors import ConfigurationError

    env = {}
    for item in items:
        k, sep, v = item.partition("=")
        if not sep or not k:
            raise ConfigurationError(f"--env {item!r}: expected K=V, for example --env OMP_NUM_THREADS=1")
        env[k] = v
    return env


def _progress(quiet: bool, command: str = "check"):
    """The progress callback: each message on stderr with the seconds since now (with
    ``--quiet`` only the warnings: a file of yours not put back), after ``fwd9m COMMAND``."""
    start = time.monotonic()

    def progress(msg: str) -> None:
        if not quiet or "WARNING" in msg:
            from ..compare import escape_control

            seconds = time.monotonic() - start
            print(f"fwd9m {command} [{seconds:5.1f} s] {escape_control(msg)}", file=sys.stderr, flush=True)

    return progress


def _check_script(args, command: bool, target: str, script_args: list[str], env: dict[str, str], progress):
    """The plain check: :func:`fwd9m.check.check_script` with the options."""
    from ..check import check_script, parse_vary

    return check_script(
        target,
        script_args,
        module=bool(args.module),
        command=command,
        runs=args.runs,
        seed=args.seed,
        timeout=args.timeout,
        env=env,
        enable=args.enable,
        vary=parse_vary(args.vary),
        cwd=args.cwd,
        keep=args.keep,
        progress=progress,
        hashseed_check=args.hashseed_check,
        strict=args.strict,
        early_stop=args.early_stop,
    )


def _print_json_error(exc: Exception) -> None:
    """``--format json`` without a verdict: the schema, ``reproducible: null`` and why."""
    from ..check import SCHEMA, SCHEMA_VERSION

    print(
        json.dumps(
            {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, "reproducible": None, "error": str(exc)},
            indent=2,
        )
    )


def _check_resume(args, command: bool, target: str, script_args: list[str], env: dict[str, str], progress):
    """``fwd9m check --resume``: the options that do not go with it are refused."""
    import shlex

    from ..check._resume import Interruption, check_resume
    from ..errors import ConfigurationError

    other = [
        name
        for name, on in (
            ("--runs", args.runs != 2),
            ("--vary", bool(args.vary)),
            ("--enable", args.enable),
            ("-- command", command),
        )
        if on
    ]
    if other:
        raise ConfigurationError(
            f"--resume runs the script three times (interrupted, uninterrupted, resumed) "
            f"and does not take {', '.join(other)}; name a script or a module (-m)"
        )
    how = Interruption.parse(args.interrupt_after, args.signal, args.grace)
    try:
        resume_args = shlex.split(args.resume_args)
    except ValueError as exc:
        raise ConfigurationError(f"--resume-args {args.resume_args!r}: {exc}") from None
    return check_resume(
        target,
        script_args,
        how=how,
        resume_args=resume_args,
        module=bool(args.module),
        timeout=args.timeout,
        env=env,
        cwd=args.cwd,
        keep=args.keep,
        progress=progress,
        strict=args.strict,
        checkpoint=args.checkpoint,
    )
