"""``fwd9m run``: run a script (or module, or launcher command) deterministically.

Sets the variables that only work before start-up (``PYTHONHASHSEED``,
``CUBLAS_WORKSPACE_CONFIG``, ``XLA_FLAGS``, TensorFlow's env switches where the
installed version needs them, ``HOROVOD_FUSION_THRESHOLD``, thread counts), puts
fwd9m's import hook on ``PYTHONPATH`` and replaces itself (``exec``) with a fresh
interpreter, so the exit status and signals are the program's own. Each framework
gets ``enable_determinism(seed)`` as it is imported; children started by launchers
(``torchrun``) inherit all of it.

    fwd9m run [--seed N] [--threads N] [--no-enable] script.py [args...]
    fwd9m run [options] -m package.module [args...]
    fwd9m run [options] -- torchrun --nproc-per-node 2 train.py [args...]
    fwd9m run --digests run.steps [--against ref.steps] train.py [args...]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
from typing import Any

HELP = "run a script, module or launcher with every determinism setting, from start-up"
DESCRIPTION = (
    "Set the variables that only work before start-up (PYTHONHASHSEED, "
    "CUBLAS_WORKSPACE_CONFIG, XLA_FLAGS, TF switches, HOROVOD_FUSION_THRESHOLD, threads), "
    "then run the program in a fresh interpreter whose frameworks get "
    "enable_determinism(seed) as they are imported. Forms: fwd9m run [opts] script.py "
    "ARGS | fwd9m run [opts] -m module ARGS | fwd9m run [opts] -- torchrun ... train.py"
)

#: thread-count variables set by ``--threads`` (OpenMP/MKL/OpenBLAS read them at
#: start-up; TensorFlow reads TF_NUM_*_THREADS when its runtime starts).
THREAD_VARS = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "TF_NUM_INTRAOP_THREADS",
    "TF_NUM_INTEROP_THREADS",
)
_CHILD = "from fwd9m._cli.run import child_main; child_main()"


def add_arguments(p) -> None:
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed for Python, NumPy and every framework, and PYTHONHASHSEED (default: $FWD9M_SEED, else 0)",
    )
    p.add_argument("--threads", type=int, default=None, metavar="N", help="set OMP/MKL/OpenBLAS/TF thread counts to N")
    p.add_argument(
        "--no-enable",
        dest="enable",
        action="store_false",
        help="only set the start-up environment; no import hook, no seeding",
    )
    p.add_argument(
        "--warn-only", action="store_true", help="torch: warn instead of raising on ops without a deterministic kernel"
    )
    p.add_argument(
        "--check-replicas",
        type=int,
        default=None,
        metavar="N",
        help="torch.distributed: after every N-th optimizer step, compare every rank's "
        "parameters and buffers and stop at the first that differs "
        "(fwd9m.distributed.check_replicas)",
    )
    p.add_argument(
        "--record-ranks",
        metavar="DIR",
        default=None,
        help="record every op (collectives included) of each process that imports "
        "torch into DIR/rank<r>.trace; compare two launches with "
        "`fwd9m debug diff DIR_A DIR_B`",
    )
    p.add_argument(
        "--digests",
        metavar="FILE",
        default=None,
        help="write a step digest file: one record per optimizer step (PyTorch, "
        "automatic) or per step_digest()/callback step; keep it as a reference",
    )
    p.add_argument(
        "--against",
        metavar="REF",
        default=None,
        help="compare each step with the digest file REF as the run goes and stop "
        "at the first step that differs (exit 1), naming what differs",
    )
    p.add_argument(
        "--rank-independent",
        action="store_true",
        help="with --against: compare only the loss and the parameters (replicated on every "
        "data-parallel rank), so a reference of another world size can be compared",
    )
    p.add_argument("--show", action="store_true", help="print the environment changes and exit without running")
    p.add_argument("--format", choices=("text", "json"), default="text", help="format of --show")
    p.add_argument("-m", dest="module", action="store_true", help="run a module, as python -m does")
    p.add_argument(
        "program", nargs=argparse.REMAINDER, help="script.py [args], or module [args] with -m, or -- command [args]"
    )


def plan(
    seed: int | None,
    threads: int | None = None,
    enable: bool = True,
    warn_only: bool = False,
    verbose: int = 0,
    environ: dict | None = None,
    first: tuple[str, ...] = (),
):
    """The environment for the child and the :class:`~fwd9m.enable.Change` records.
    ``first``: frameworks whose start-up settings come first (the script's own: a
    variable two frameworks need, such as ``XLA_FLAGS``, is then credited to it).

    Imports no framework (versions from package metadata).

    Raises:
        ConfigurationError: seed outside ``[0, 2**32 - 1]`` (PYTHONHASHSEED's range,
            https://docs.python.org/3/using/cmdline.html#envvar-PYTHONHASHSEED) or
            threads < 1.
    """
    from ..errors import ConfigurationError
    from ..seed import MAX_SEED, current_seed

    env = dict(os.environ if environ is None else environ)
    if seed is None:
        seed = current_seed()
        seed = 0 if seed is None else seed
    if isinstance(seed, bool) or not 0 <= seed <= MAX_SEED:
        raise ConfigurationError(f"--seed {seed} is out of range: use an int in [0, {MAX_SEED}]")
    if threads is not None and threads < 1:
        raise ConfigurationError(f"--threads {threads}: use a positive number of threads")
    changes = []

    def put(c):
        if c is not None:
            changes.append(c)
            env[c.what[len("env:") :]] = c.new

    _plan_python(put, env, seed, threads)
    _plan_frameworks(put, env, first)
    if enable:
        _plan_hook(put, env, seed, warn_only, verbose)
    else:
        from .._runtime.bootstrap import ENV_ENABLE

        env.pop(ENV_ENABLE, None)
    return env, changes


def _plan_python(put, env: dict, seed: int, threads: int | None) -> None:
    """``plan``'s interpreter-wide variables: PYTHONHASHSEED, Horovod's fusion threshold
    and, with ``threads``, the thread counts (each passed to ``put`` in that order)."""
    from ..enable import cite, env_change

    put(
        env_change(
            "python",
            "PYTHONHASHSEED",
            str(seed),
            "str/bytes hashes, hence set and dict-of-set iteration order, are salted "
            "per process; only read at interpreter start-up",
            cite(
                "python.hash-seed",
                "python.set-iteration-order",
                "https://docs.python.org/3/using/cmdline.html#envvar-PYTHONHASHSEED",
            ),
            environ=env,
        )
    )
    put(
        env_change(
            "python",
            "HOROVOD_FUSION_THRESHOLD",
            "0",
            "Horovod Tensor Fusion batches gradients nondeterministically",
            "https://github.com/horovod/horovod/pull/1130",
            environ=env,
        )
    )
    if threads is not None:
        for name in THREAD_VARS:
            put(
                env_change(
                    "python",
                    name,
                    str(threads),
                    "thread counts change reduction order on CPU",
                    "https://www.tensorflow.org/api_docs/python/tf/config/threading",
                    environ=env,
                )
            )


def _plan_frameworks(put, env: dict, first: tuple[str, ...]) -> None:
    """``plan``'s start-up settings of each framework, those in ``first`` first."""
    from .. import jax as fw_jax
    from .. import keras as fw_keras
    from .. import tensorflow as fw_tf
    from .. import torch as fw_torch

    modules = {"tensorflow": fw_tf, "keras": fw_keras, "torch": fw_torch, "jax": fw_jax}
    for name in sorted(modules, key=lambda n: n not in first):
        for c in modules[name].startup_env(environ=env):
            put(c)


def _plan_hook(put, env: dict, seed: int, warn_only: bool, verbose: int) -> None:
    """``plan``'s import hook: the seed and switch for it, ``PYTHONPATH`` leading to it
    (unless already there), and its warn-only and verbosity settings."""
    from .._runtime.bootstrap import ENV_ENABLE, ENV_VERBOSE, ENV_WARN_ONLY, bootstrap_dir
    from ..enable import env_change
    from ..seed import ENV_VAR

    put(
        env_change(
            "python",
            ENV_VAR,
            str(seed),
            "seed for the import hook and children",
            "https://docs.python.org/3/library/random.html",
            environ=env,
        )
    )
    put(
        env_change(
            "python",
            ENV_ENABLE,
            "1",
            "enable determinism for each framework as it is imported",
            "fwd9m._runtime.bootstrap",
            environ=env,
        )
    )
    path = env.get("PYTHONPATH", "")
    parts = [p for p in path.split(os.pathsep) if p]
    if bootstrap_dir() not in parts:
        put(
            env_change(
                "python",
                "PYTHONPATH",
                os.pathsep.join([bootstrap_dir(), *parts]),
                "start-up hook (sitecustomize) for this and every child interpreter",
                "https://docs.python.org/3/library/site.html",
                environ=env,
            )
        )
    if warn_only:
        env[ENV_WARN_ONLY] = "1"
    if verbose:
        env[ENV_VERBOSE] = str(min(verbose, 2))


def _script_frameworks(script: str | None) -> set[str] | None:
    """The frameworks a script imports (itself, its local modules, or through a library
    built on one); None when that cannot be told."""
    if not script or not os.path.isfile(script):
        return None
    from .._lint_hints import script_frameworks as frameworks

    used = frameworks(script, None)
    try:
        if used is not None and "horovod" in open(script, encoding="utf-8", errors="replace").read():
            used.add("horovod")
    except OSError:
        pass
    return used


def _print_show(changes, used: set[str] | None) -> None:
    """``--show``: the settings for Python and the frameworks the script uses, then, in
    one line, those set for the other installed frameworks (harmless, and set anyway in
    case a library the script imports uses them)."""
    if used is None:
        for c in changes:
            print(c)
        return
    # HOROVOD_FUSION_THRESHOLD is set for every script, in case it trains with Horovod
    mine = [
        c
        for c in changes
        if c.framework in used
        or c.framework == "python"
        and ("horovod" in used or c.what != "env:HOROVOD_FUSION_THRESHOLD")
    ]
    other = [c for c in changes if c not in mine]
    for c in mine:
        print(c)
    if other:
        print(
            f"also set, though this script ({', '.join(sorted(used))}) does not use them (harmless; in "
            f"case a library it imports does): "
            + ", ".join(
                f"{c.what.removeprefix('env:')} [{'horovod' if 'HOROVOD' in c.what else c.framework}]" for c in other
            )
        )


def run(args) -> int:
    from ..errors import RunError

    command = list(args.program)
    launcher = bool(command) and command[0] == "--"
    if launcher:
        command = command[1:]
    if not command and not args.show:  # --show alone lists what would be set
        raise RunError(
            "nothing to run: give a script, -m module, or -- command.\nExample: fwd9m run --seed 0 train.py --epochs 1"
        )
    script = command[0] if command and not args.module and not launcher else None
    used = _script_frameworks(script)
    env, changes = plan(
        args.seed, args.threads, args.enable, args.warn_only, args.verbose, first=tuple(sorted(used or ()))
    )
    _distributed_options(args, env)
    if args.digests is not None or args.against is not None or args.rank_independent:
        _digest_options(args, launcher, env)
    if args.show:
        if args.format == "json":
            json.dump([c.to_dict() for c in changes], sys.stdout, indent=2)
            print()
        else:
            _print_show(changes, used)
        return 0
    if args.verbose:
        for c in changes:
            print(f"fwd9m run: {c}", file=sys.stderr)
    return _launch(args, command, launcher, env)


def _distributed_options(args, env: dict) -> None:
    """Check ``--check-replicas``/``--record-ranks`` and pass them to the child.

    Raises:
        ConfigurationError: N < 1, a folder name that is empty or a file, or either
            option with --no-enable.
    """
    if args.check_replicas is not None:
        from ..distributed._replicas import ENV_CHECK_REPLICAS
        from ..errors import ConfigurationError

        if args.check_replicas < 1 or not args.enable:
            raise ConfigurationError("--check-replicas N needs N >= 1 and the import hook (drop --no-enable)")
        env[ENV_CHECK_REPLICAS] = str(args.check_replicas)
    if args.record_ranks is not None:
        from ..distributed._debug import ENV_RECORD_RANKS
        from ..errors import ConfigurationError

        if not args.enable:
            raise ConfigurationError("--record-ranks needs the import hook (drop --no-enable)")
        folder = args.record_ranks
        if not folder.strip() or (os.path.exists(folder) and not os.path.isdir(folder)):
            from .._runtime.launch import shown

            # was: '' recorded into the working folder; a file made each rank's torch
            # set-up fail with a warning, so determinism was not enabled at all
            raise ConfigurationError(
                f"--record-ranks {shown(folder)}: name a folder for the rank traces "
                f"(created if missing), e.g. --record-ranks runA"
            )
        env[ENV_RECORD_RANKS] = os.path.abspath(folder)


def _launch(args, command: list[str], launcher: bool, env: dict) -> int:
    """Replace this process with the launcher command, module or script, under ``env``.

    Raises:
        RunError: the command is not found, the module name is malformed, or the script
            is missing or unreadable.
    """
    from ..errors import RunError

    if launcher and not (command[0].endswith(".py") and os.path.isfile(command[0])):
        from .._runtime.launch import shown

        exe = shutil.which(command[0], path=env.get("PATH")) if command[0].strip() else None
        if exe is None:
            raise RunError(
                f"command not found: {shown(command[0])} (is it installed and on PATH?); "
                f"e.g. fwd9m run -- torchrun --nproc-per-node 2 train.py"
            )
        return _exec([exe, *command[1:]], env)
    from .._runtime.launch import check_module_name, resolve_target

    if args.module:  # the form only: finding it would import its packages here
        check_module_name(command[0])
    else:
        resolve_target(command[0])  # RunError if the script is missing or unreadable
    argv = [sys.executable, "-c", _CHILD, *(["-m"] if args.module else []), *command]
    return _exec(argv, env)


def _complete_reference(path: str, reader_type: Any) -> None:
    """Raises FileFormatError when ``path`` is not a complete step digest file."""
    with reader_type(path) as reader:  # FileFormatError: exit 2, nothing run
        for _ in reader:
            pass
    if not reader.complete:
        from ..compare._escape import printable
        from ..errors import FileFormatError

        raise FileFormatError(
            f"--against {printable(path)}: the reference is incomplete ({reader.steps_read} step(s) and "
            f"no end record: the run that wrote it was killed or is still running), so no verdict can rest "
            f"on it; record it again to the end: fwd9m run --digests {printable(path)} SCRIPT.py"
        )


def _per_rank(value: str | None, option: str, launcher: bool) -> str | None:
    """The per-rank pattern of ``--digests``/``--against`` (absolute, with ``{rank}``): a
    folder (``DIR/``, or one that exists) holds ``rank<r>.steps``; a name with ``{rank}``
    is one. None for a single file.

    Raises:
        ConfigurationError: a launcher with a single file (every rank would write it).
    """
    from ..errors import ConfigurationError
    from ..steps._session import RANK

    if value is None:
        return None
    if RANK in value:
        return os.path.abspath(value)
    if value.endswith(("/", os.sep)) or os.path.isdir(value):
        if option == "--digests":
            os.makedirs(value, exist_ok=True)
        return os.path.join(os.path.abspath(value), f"rank{RANK}.steps")
    if launcher:
        raise ConfigurationError(
            f"{option} {value}: with a launcher each rank records its own steps; name a folder "
            f"({option} ref/, one rank<r>.steps per rank) or a pattern ({option} 'run-{RANK}.steps')"
        )
    return None


def _digest_options(args, launcher: bool, env: dict) -> None:
    """Check ``--digests``/``--against`` before the run starts (a reference that is not a
    digest file is exit 2 now, not after training) and pass them to the child.

    Raises:
        ConfigurationError: a launcher command with a single file (not a folder or a
            ``{rank}`` pattern), --rank-independent without --against, --digests naming
            the reference or a file that is not a digest file.
        FileFormatError: REF is missing, not a digest file, damaged or truncated.
    """
    from .._runtime.launch import check_output_path, refuse_overwrite
    from ..errors import ConfigurationError
    from ..steps._format import StepReader, is_step_digest_file
    from ..steps._session import ENV_AGAINST, ENV_OUT, ENV_RANK_INDEPENDENT, RANK

    if args.rank_independent:
        if args.against is None:
            raise ConfigurationError(
                "--rank-independent chooses what --against compares: fwd9m run --against ref/ --rank-independent -- ..."
            )
        env[ENV_RANK_INDEPENDENT] = "1"
    digests, against = _per_rank(args.digests, "--digests", launcher), _per_rank(args.against, "--against", launcher)
    if against is not None:
        import glob

        refs = sorted(glob.glob(glob.escape(against).replace(glob.escape(RANK), "*")))
        if not refs:
            raise ConfigurationError(
                f"--against {args.against}: no per-rank reference there ({os.path.basename(against)}); record one "
                f"first: fwd9m run --digests {args.against} -- LAUNCHER ..."
            )
        for ref in refs:
            _complete_reference(ref, StepReader)
        env[ENV_AGAINST] = against
    elif args.against is not None:
        _complete_reference(args.against, StepReader)
        env[ENV_AGAINST] = os.path.abspath(args.against)
    if digests is not None:
        env[ENV_OUT] = digests  # each rank checks its own file at its first step
    elif args.digests is not None:
        if not args.digests.strip():
            raise ConfigurationError("--digests needs a file name, e.g. --digests run.steps")
        check_output_path(args.digests, "--digests", "run.steps")  # a missing folder: exit 2 before training
        refuse_overwrite(
            args.digests,
            "--digests",
            inputs=(args.against,),
            ours=is_step_digest_file,
            what="a step digest file",
            example="run2.steps",
            force_fix="delete it first if you mean to replace it",
        )
        if os.path.isfile(args.digests) and not args.show:  # one fwd9m wrote (refused otherwise): said
            import time

            from ..compare._escape import printable

            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(os.path.getmtime(args.digests)))
            print(
                f"fwd9m run: --digests {printable(args.digests)} exists (step digests fwd9m wrote {when}); "
                f"this run's replace them",
                file=sys.stderr,
            )
        env[ENV_OUT] = os.path.abspath(args.digests)


def _start_digests() -> Any:
    """In the child: the step session of ``--digests/--against`` (None without them),
    with PyTorch's optimizer hooks installed when torch is (or gets) imported."""
    from ..steps._session import start

    return start()


def _exec(argv: list[str], env: dict) -> int:
    """Replace this process (POSIX): the program's exit status and signals are its own.
    Elsewhere run it as a child, forward Ctrl-C/termination and return its status."""
    sys.stdout.flush()
    sys.stderr.flush()
    if os.name == "posix":
        try:
            os.execve(argv[0], argv, env)
        except OSError as exc:
            from ..errors import RunError

            raise RunError(f"cannot execute {argv[0]}: {exc.strerror}") from None
    proc = subprocess.Popen(argv, env=env)  # pragma: no cover - non-POSIX
    while True:  # pragma: no cover
        try:
            return proc.wait()
        except KeyboardInterrupt:
            proc.send_signal(signal.SIGINT)


def child_main() -> None:
    """Entry point of the fresh interpreter: run the target as ``__main__``."""
    from .._runtime.launch import run_as_main
    from ..errors import Fwd9mError

    argv = sys.argv[1:]
    module = bool(argv) and argv[0] == "-m"
    if module:
        argv = argv[1:]
    # `python -c` put the working directory first on sys.path, as `python -m` does;
    # `python script.py` would not (run_as_main adds the script's directory).
    if not module and sys.path and sys.path[0] in ("", os.getcwd()):
        sys.path.pop(0)
    try:
        session = _start_digests()
        code = run_as_main(argv[0], argv[1:], module=module)
        if session is not None:
            code = session.finish(code)
    except Fwd9mError as exc:
        from ..compare import printable

        print(f"fwd9m run: error: {printable(str(exc))}", file=sys.stderr)
        code = 2
    sys.stdout.flush()
    raise SystemExit(code)
