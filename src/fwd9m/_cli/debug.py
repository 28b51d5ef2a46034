"""``fwd9m debug``: find the first op where two runs diverge, and say why.

    fwd9m debug script.py [ARGS...]              record two fresh runs, compare, report
    fwd9m debug record -o run.trace script.py    record one run
    fwd9m debug diff a.trace b.trace             compare two traces (also across machines)
    fwd9m debug diff runA/ runB/                 rank by rank (fwd9m run --record-ranks runA -- torchrun ...)

The report goes to stdout. The script's own output (and TensorFlow's start-up log
lines) is kept out of it: shown only, its last lines, when a run fails; fwd9m -v debug
shows it as it runs. debug record passes it through on stderr.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

HELP = "find the first op where two runs diverge, and say why (record / diff traces)"
DESCRIPTION = __doc__


def add_arguments(p) -> None:
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--html", metavar="REPORT.html", help="also write an HTML report with a plot")
    p.add_argument("-o", "--output", metavar="RUN.trace", help="record: the trace file to write")
    p.add_argument("--level", choices=("modules", "sequence", "digests", "full"), default="digests",
                   help="detail recorded per op (default: digests; modules: PyTorch modules, Keras "
                        "layers, JAX jitted user functions)")
    p.add_argument("--steps", metavar="A:B", help="PyTorch: record ops only in optimizer steps A..B "
                                                  "(JAX: steps end at calls of jitted user functions)")
    p.add_argument("--fast", action="store_true",
                   help="PyTorch: a module-level pass first, then op-level recording of the "
                        "first diverging step only (for long or large runs)")
    p.add_argument("--capture", metavar="OPS",
                   help="store full tensors for these ops: names (index_put_,MatMul) or "
                        "SEQ:RADIUS windows, comma-separated")
    p.add_argument("--framework", action="append", choices=("torch", "tensorflow", "keras", "jax"),
                   help="framework(s) to record (default: from the script's imports)")
    p.add_argument("-m", dest="module", action="store_true", help="TARGET is a module (python -m)")
    p.add_argument("--keep", metavar="DIR", help="keep the traces in DIR (without it they are "
                                                 "deleted on exit)")
    p.add_argument("--force", action="store_true",
                   help="replace an existing file that is not a fwd9m trace or report (-o, --html, "
                        "--keep); an input (the script, a trace compared) is never replaced")
    p.add_argument("--timeout", type=float, default=None, help="seconds per run")
    p.add_argument("--cwd", choices=("link", "empty"), default="link",
                   help="each run's working folder, beside its trace (deleted with the traces unless "
                        "--keep): links to this directory's entries (default), or empty; the runs do not "
                        "write into this directory (except through the links)")
    p.add_argument("--no-hashseed-check", action="store_true",
                   help="do not test hash-order sources (up to 6 reruns: PYTHONHASHSEED=0 "
                        "twice, then 1, 2, 3 until one differs, and that seed again)")
    p.add_argument("target", help="script.py (or 'record' / 'diff')")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")


def _progress(msg: str) -> None:
    from ..compare import escape_control

    print(f"fwd9m debug: {escape_control(msg)}", file=sys.stderr, flush=True)  # names the script, traces


def _steps(text: str | None) -> str:
    from ..errors import ConfigurationError

    if text is None:
        return "-"
    if not text.strip():
        raise ConfigurationError("--steps is empty: give optimizer steps as N or FIRST:LAST, "
                                 "e.g. --steps 3 or --steps 0:2")
    a, _, b = text.partition(":")
    try:
        lo, hi = int(a), int(b or a)
    except ValueError:
        lo = hi = -1
    if not 0 <= lo <= hi:  # an empty range records no op: a vacuous "reproducible"
        raise ConfigurationError(f"--steps {text!r}: use A:B with 0 <= A <= B (optimizer steps, "
                                 f"counted from 0), e.g. --steps 3:3")
    return f"{lo},{hi}"


def _record(args, target: str, script_args: list[str], out: str, env: dict | None = None,
            label: str = "", level: str | None = None, steps: str | None = None,
            quiet: bool = False) -> int:
    """Record one run into ``out``; returns the script's exit status.

    The script's standard output goes to our stderr, so that stdout carries the report
    only. With ``quiet`` (the runs ``fwd9m debug`` starts on its own; not with ``-v``),
    the script's stdout and stderr go to a log file beside the trace instead and are
    shown, their last lines, only when the run fails. TensorFlow's C++ runtime logs
    start-up lines (oneDNN, CPU features, "All log messages before absl::InitializeLog()")
    to stderr. TF_CPP_MIN_LOG_LEVEL only filters messages of TF's own logger
    (https://github.com/tensorflow/tensorflow/blob/master/third_party/xla/xla/tsl/platform/default/logging.cc,
    ``LogMessage::~LogMessage``), and TF 2.21 prints the oneDNN and absl lines even with
    TF_CPP_MIN_LOG_LEVEL=3 (checked here; abseil logs before ``InitializeLog`` whatever the
    threshold: https://github.com/abseil/abseil-cpp/pull/1718), so setting it would not
    make the report readable. The child's environment stays the user's: nothing is added.

    Raises:
        RunError: the target is missing, the run timed out, or it failed before the
            trace was opened.
    """
    from .._runtime.launch import resolve_target
    from ..errors import RunError

    resolve_target(target, args.module)
    if not args.framework and not args.module:
        from ..debug._child import detect_frameworks
        from ..errors import ConfigurationError

        if not detect_frameworks(target, False):
            raise ConfigurationError(f"{target} imports neither torch nor tensorflow/keras nor jax (read "
                                     f"from its import statements); name the framework it uses: fwd9m debug "
                                     f"--framework torch|tensorflow|jax ...")
    frameworks = ",".join("tensorflow" if f == "keras" else f for f in args.framework) \
        if args.framework else "-"
    cwd, watch, env = _run_folder(args, out, env)
    cmd = [sys.executable, "-m", "fwd9m.debug._child", os.path.abspath(out), level or args.level,
           args.capture or "-", steps or _steps(args.steps), frameworks,
           "1" if args.module else "0", target if args.module else os.path.abspath(target), *script_args]
    t0 = time.perf_counter()
    kept = args.target == "record" or args.keep
    _progress(f"recording {label or target}" + (f" -> {out}" if kept else ""))
    from .._runtime.process import kill_group, kill_leftovers, tail
    from ..compare import printable

    log = os.path.splitext(out)[0] + ".log" if quiet and not getattr(args, "verbose", 0) else None
    sink = open(log, "wb") if log else None
    try:
        to_stderr = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # no real stderr (embedded use)
        to_stderr = subprocess.DEVNULL
    try:
        # its own process group, so that a timeout or Ctrl-C ends the children it started too
        proc = subprocess.Popen(cmd, env={**os.environ, **(env or {})}, start_new_session=True,
                                stdout=sink or to_stderr, stderr=sink, cwd=cwd)
    finally:
        if sink:
            sink.close()

    def show_log(why: str) -> None:
        text = tail(log) if log else ""
        if text:
            _progress(f"  {why}; the end of its output" + (f" ({log})" if args.keep else "") + ":")
            text = printable(text)  # the script's own output: show escapes, do not obey them
            print("\n".join(f"    | {line}" for line in text.splitlines()), file=sys.stderr, flush=True)

    try:
        proc.wait(timeout=args.timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        show_log(f"{label or target} timed out")
        raise RunError(f"{target} did not finish within {args.timeout:g} s (its whole process group was "
                       f"killed); " + (f"the partial trace is in {out}" if kept else
                                       "--keep DIR keeps the partial trace")) from None
    except BaseException:  # Ctrl-C: leave nothing running
        kill_group(proc)
        raise
    kill_leftovers(proc)
    _note_writes_through_links(watch, os.path.dirname(os.path.abspath(out)), label or target,
                               getattr(args, "guard", None))
    size = os.path.getsize(out) if os.path.exists(out) else 0
    _progress(f"  done in {time.perf_counter() - t0:.1f} s, exit status {proc.returncode}, "
              f"trace {size / 1024:.0f} KiB")
    if proc.returncode or size == 0:
        show_log(f"{label or target} exited with status {proc.returncode}")
    if size == 0:
        raise RunError(f"recording {target} failed before the trace was opened "
                       f"(exit status {proc.returncode}); see the messages above")
    return proc.returncode


#: suffix of the working folder of a run ``fwd9m debug`` records (beside its trace)
RUN_FOLDER = ".files"
#: a file in each such folder, so that a later --keep into the same DIR may replace it
RUN_MARK = ".fwd9m-debug-run"


def _run_folder(args, out: str, env: dict | None) -> tuple:
    """The working folder of one recorded run: for ``fwd9m debug`` (two runs), a folder
    of its own beside the trace (``run1.files/``), linking to the entries of the current
    directory (``--cwd link``) or empty (``--cwd empty``), as ``fwd9m check`` runs do, so
    that run 2 does not see what run 1 wrote and the user's folder is left as it was.
    ``debug record`` runs in the current directory, as the script does on its own.
    Returns (cwd for the child or None, the snapshot of the current directory to tell
    writes through the links, the environment: for ``-m`` in an empty folder, the
    current directory on PYTHONPATH so that the module is found as ``python -m`` finds it)."""
    from pathlib import Path

    from .._runtime.workdir import prepare_cwd
    from ..errors import ConfigurationError

    if args.target == "record":
        return None, None, env
    folder = Path(os.path.abspath(os.path.splitext(out)[0] + RUN_FOLDER))
    if folder.exists():
        if not (folder / RUN_MARK).exists():
            from .._runtime.launch import shown

            raise ConfigurationError(f"{shown(str(folder))} exists and fwd9m did not make it; --keep a "
                                     f"folder without it, or remove it")
        shutil.rmtree(folder)
    user = Path.cwd()
    watch = prepare_cwd(folder / "cwd", user, args.cwd, own=folder.parent)
    (folder / RUN_MARK).write_text("a working folder of a run recorded by fwd9m debug\n")
    from ..debug._common import ENV_USER_CWD

    env = {**(env or {}), ENV_USER_CWD: str(user)}  # file:line shown relative to this directory
    if args.module and args.cwd == "empty":
        path = os.environ.get("PYTHONPATH", "")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(user), path) if p)
    return str(folder / "cwd"), watch, env


def _note_writes_through_links(watch, own: str, label: str, guard=None) -> None:
    """Say when a run changed files in the user's directory through its links, and put
    them back as they were (``guard``: :class:`fwd9m._runtime.workdir.Guard`), so that the
    next run starts from the same files; ``own``: the folder of the traces, left out."""
    if watch is None:
        return
    from pathlib import Path

    from .._runtime.workdir import snapshot_tree

    after = snapshot_tree(Path.cwd(), own=Path(own))
    changed = sorted(k for k, v in after.entries.items() if watch.entries.get(k) != v)
    # a folder whose mtime changed because a file in it did: name the file only
    changed = [k for k in changed if not any(c != k and c.startswith(k + os.sep) for c in changed)]
    if changed:
        from .._runtime.launch import shown

        kept = []
        if guard is not None:
            guard.restore(changed)
            kept = [c for c in changed if c in guard.unprotected]
        names = kept if guard is not None else changed
        if guard is not None and not kept:
            _progress(f"  {label} wrote into {', '.join(shown(c) for c in changed[:5])}"
                      + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
                      + " in your directory, through its links to it; put back as they were")
        elif names:
            _progress(f"  {label} changed {', '.join(shown(c) for c in names[:5])}"
                      + (f" and {len(names) - 5} more" if len(names) > 5 else "")
                      + " in your directory, through its links to it; --cwd empty runs it in an empty folder")


def _settle(report, codes: list[int], paths: list[str], args) -> None:
    """When the recorded ops agree, whether both runs also finished alike: different exit
    statuses make ``report`` not reproducible; failures in both runs, a trace without its
    end record, or two traces without any op give no verdict (RunError, after printing
    ``report``)."""
    if not report.reproducible:
        return
    cut = [i for i, p in enumerate(paths, 1) if _cut_traces(report, [p] if i == 1 else [None, p])]
    if codes[0] != codes[1]:
        report.reproducible, report.kind = False, "exit"
        report.notes.insert(0, f"NOT REPRODUCIBLE: run 1 exited with status {codes[0]}, run 2 with "
                               f"status {codes[1]}; the ops both runs recorded agree")
    elif codes[0] or cut:
        from ..errors import RunError

        # no report on stdout: its headline would read "reproducible"
        why = (f"{args.target} failed in both runs (exit status {codes[0]})" if codes[0] else
               (f"the trace of run {cut[0]} has" if len(cut) == 1 else "the traces of both runs have")
               + " no end record (the process was killed or called os._exit, and the ops of its last, "
                 "unwritten frame are lost)")
        n = max(report.ops_a, report.ops_b)
        raise RunError(f"{why}, so only the {n} ops recorded before that were compared (they agree); "
                       f"no verdict on the whole run")
    elif not (report.ops_a or report.ops_b):  # two empty traces agree: no verdict either
        from ..errors import RunError

        raise RunError(f"neither run of {args.target} recorded any op"
                       + (f" in optimizer steps {args.steps}" if args.steps else "")
                       + ", so nothing was compared and there is no verdict; check that it runs "
                         "ops of the framework recorded (--framework torch|tensorflow|jax)"
                       + (" and that --steps names steps it reaches" if args.steps else ""))


def _check_output(out: str, option: str = "-o", example: str = "run.trace") -> None:
    """Refuse, before any run, an output path that cannot be written as a file: a
    directory, a named pipe (opening it to write blocks until a reader comes) or a
    device, or one in a missing folder."""
    import stat

    from .._runtime.launch import shown
    from ..errors import ConfigurationError

    try:
        mode = os.stat(out).st_mode
    except OSError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
        raise ConfigurationError(f"{option} {shown(out)} is {kind}; name the file to write, e.g. "
                                 f"{option} {example}")
    folder = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(folder):
        raise ConfigurationError(f"{option} {shown(out)}: the folder {folder} does not exist; create it first "
                                 f"(mkdir -p {folder})")


def _check_options(args) -> None:
    """The options every recording shares, checked once before the first run starts
    (a mistake found by the child costs a framework import; one found at the end, two runs)."""
    from ..errors import ConfigurationError

    if args.timeout is not None and not args.timeout > 0:  # nan too
        raise ConfigurationError(f"--timeout must be a positive number of seconds, got {args.timeout}")
    _steps(args.steps)
    if args.capture is not None:
        from ..debug._common import CaptureSpec

        if not CaptureSpec(args.capture):
            raise ConfigurationError(f"--capture {args.capture!r} selects no op; name ops (index_put_,MatMul) "
                                     f"or SEQ:RADIUS windows (1200:5)")
    if args.html:
        _check_output(args.html, "--html", "report.html")


def _is_report(path: str) -> bool:
    from .._runtime.launch import starts_with

    return starts_with(path, (b"<title>fwd9m debug report</title>",))


def _check_overwrites(args, script: str | None, outputs: list[str], inputs: list[str]) -> None:
    """Refuse, before any run, to write over an input (the script, a trace compared) or
    over an existing file fwd9m did not write (unless --force): traces in ``outputs``
    (with the log beside each), and the --html report."""
    from .._runtime.launch import refuse_overwrite, shown
    from ..debug._store import is_trace

    ins = [p for p in (script, *inputs) if p]
    force = getattr(args, "force", False)
    for out in outputs:
        option = "-o" if args.target == "record" else f"--keep {shown(args.keep)}:"
        refuse_overwrite(out, option, inputs=ins, ours=is_trace, force=force, what="a trace",
                         example="run.trace")
        log = os.path.splitext(out)[0] + ".log"
        refuse_overwrite(log, option, inputs=ins, force=force or (os.path.isfile(out) and is_trace(out)),
                         ours=None, what="a log beside a trace", example="traces/")
    if args.html:
        refuse_overwrite(args.html, "--html", inputs=ins + outputs, ours=_is_report, force=force,
                         what="an HTML report", example="report.html")


def _cut_traces(report, paths) -> list[str]:
    """The traces among ``paths`` (A, B) that the comparison says stop early (cut off,
    damaged, or without an end record)."""
    return [p for name, p in zip("AB", paths)
            if p is not None and any(n.startswith(f"trace {name} ({p}) ") for n in report.notes)]


def _agree_at(a: str, b: str, seq: int) -> bool:
    """Whether traces ``a`` and ``b`` agree up to and including op ``seq``."""
    from .. import debug

    again = debug.diff(a, b)
    return again.reproducible or (again.first is not None and again.first.seq > seq)


def _hash_seed_experiment(args, directory: str, report, paths: list[str]) -> None:
    """Test whether the string-hash seed causes the first divergence (an external
    ``python`` or ``data`` source) with the controlled experiment ``fwd9m check`` runs
    too (:func:`fwd9m._hashseed.experiment`): runs agree when their traces agree up to
    and including that op. Confirmed or likely: the source becomes ``hashseed``. Updates
    ``report.first`` (source, explanation) and its notes."""
    from .. import _hashseed
    from ..debug import _explain, _store

    f = report.first
    ha = _store.read_header(paths[0])

    def run(seed: int, k: int) -> str:
        out = os.path.join(directory, f"hashseed{k}.trace")
        _record(args, args.target, args.args, out, env={"PYTHONHASHSEED": str(seed)},
                label=f"run {k} with PYTHONHASHSEED={seed}", quiet=True)
        return out

    outcome = _hashseed.experiment(run, lambda a, b: _agree_at(a, b, f.seq), script=_explain._script(ha),
                                   argv=_explain._argv(ha),
                                   target=" ".join([*(["-m"] if getattr(args, "module", False) else []),
                                                    args.target]),
                                   progress=_progress)
    if outcome.hash_order:
        f.source = "hashseed"  # the explanation's causes say what the experiment showed
    else:
        report.notes.append(outcome.message())
    f.explanation = _explain.explain(f, report, ha, _store.read_header(paths[1]), hashseed=outcome.verdict,
                                     hashseed_note=outcome.message())


def _hide_deleted(report, directory: str | None) -> None:
    """Traces in a temporary folder are deleted on exit: name them by file name only and
    say how to keep them."""
    if not directory:
        return
    prefix = os.path.join(directory, "")
    report.a, report.b = (os.path.basename(x) if x.startswith(prefix) else x for x in (report.a, report.b))
    report.notes = [n.replace(prefix, "") for n in report.notes]
    report.notes.append("the traces are deleted on exit; --keep DIR keeps the traces")


def _emit(report, args) -> int:
    _hide_deleted(report, getattr(args, "deleted_dir", None))
    out = report.render("json" if args.format == "json" else "text")
    if args.format != "json":  # names and text from the user's program: show escapes, do not obey them
        from ..compare import printable

        out = printable(out)
    print(out)
    if args.html:
        with open(args.html, "w", encoding="utf-8") as f:
            f.write(report.render("html"))
        _progress(f"HTML report written to {args.html}")
    return 0 if report.reproducible else 1


def run(args) -> int:
    from .. import debug
    from ..errors import ConfigurationError

    _check_options(args)
    from .check import exit_on_sigterm

    exit_on_sigterm()
    if args.target == "diff":
        if len(args.args) != 2:
            raise ConfigurationError("usage: fwd9m debug diff A.trace B.trace")
        dirs = [os.path.isdir(p) for p in args.args]
        if any(dirs) and not all(dirs):
            from .._runtime.launch import shown

            d, f = (args.args if dirs[0] else args.args[::-1])
            raise ConfigurationError(f"{shown(d)} is a directory but {shown(f)} is not: compare two trace "
                                     f"files (fwd9m debug diff a.trace b.trace) or two directories of "
                                     f"rank traces (fwd9m debug diff runA/ runB/)")
        if all(dirs):  # one trace per rank: rank r vs rank r
            from ..distributed import diff_ranks

            if args.html:  # was silently not written
                raise ConfigurationError("--html writes the report of two traces; for rank folders, compare "
                                         "one rank's traces: fwd9m debug --html r.html diff runA/rank0.trace "
                                         "runB/rank0.trace")

            ranks = diff_ranks(*args.args)
            print(ranks.render("json" if args.format == "json" else "text"))
            return 0 if ranks.reproducible else 1
        _check_overwrites(args, None, [], args.args)
        report = debug.diff(*args.args)
        cut = _cut_traces(report, args.args)
        if report.reproducible and cut:  # agreeing up to where a trace stops is no verdict
            from ..errors import RunError

            _emit(report, args)
            raise RunError(f"{' and '.join(cut)} {'is' if len(cut) == 1 else 'are'} incomplete (see the notes), "
                           f"so only the ops before that were compared; no verdict on the whole run")
        if report.reproducible and not (report.ops_a or report.ops_b):  # as for two recorded runs
            from ..errors import RunError

            raise RunError("neither trace holds any op, so nothing was compared and there is no verdict; "
                           "record runs that execute ops of a framework fwd9m records (torch, tensorflow, jax)")
        return _emit(report, args)
    if args.target == "record":
        rest = list(args.args)
        if rest[:1] in (["-o"], ["--output"]) and len(rest) >= 2:
            args.output, rest = rest[1], rest[2:]
        if rest[:1] == ["-m"]:
            args.module, rest = True, rest[1:]
        if rest[:1] and rest[0].startswith("-") and rest[0] != "-":  # argparse left it to us
            raise ConfigurationError(f"{rest[0]}: put options other than -o and -m before 'record': "
                                     f"fwd9m debug {rest[0]} ... record -o RUN.trace script.py [ARGS...]")
        if not args.output or not rest:
            raise ConfigurationError("usage: fwd9m debug record -o RUN.trace script.py [ARGS...]")
        _check_output(args.output)
        _check_overwrites(args, rest[0] if not args.module else None, [args.output], [])
        code = _record(args, rest[0], rest[1:], args.output)
        r = debug.TraceReader(args.output)
        n = sum(1 for _ in r)
        from .._runtime.launch import shown

        print(f"recorded {n} ops into {shown(args.output)} ({os.path.getsize(args.output)} bytes)"
              + (f"; the script exited with status {code}" if code else ""))
        return 0 if code == 0 else 2
    # record twice, compare
    if args.keep and os.path.exists(args.keep) and not os.path.isdir(args.keep):
        from .._runtime.launch import shown

        raise ConfigurationError(f"--keep {shown(args.keep)} is a file; --keep names a folder for the two "
                                 f"traces, e.g. --keep traces/")
    if args.keep:
        from .._hashseed import MAX_RUNS

        names = ["run1", "run2", "modules1", "modules2", *(f"hashseed{k}" for k in range(1, MAX_RUNS + 1))]
        _check_overwrites(args, None if args.module else args.target,
                          [os.path.join(args.keep, f"{n}.trace") for n in names], [])
    elif args.html:
        _check_overwrites(args, None if args.module else args.target, [], [])
    directory = args.keep or tempfile.mkdtemp(prefix="fwd9m-debug-")
    os.makedirs(directory, exist_ok=True)
    if args.cwd == "link":  # what a run writes into your files through its links is put back
        from pathlib import Path

        from .._runtime.workdir import Guard

        args.guard = Guard.make(Path.cwd(), Path(tempfile.mkdtemp(prefix="fwd9m-debug-backup-")) / "files")
    args.deleted_dir = None if args.keep else directory
    try:
        paths = [os.path.join(directory, f"run{i}.trace") for i in (1, 2)]
        first_pass = None
        if args.fast:
            mpaths = [os.path.join(directory, f"modules{i}.trace") for i in (1, 2)]
            mcodes = [_record(args, args.target, args.args, p, label=f"module-level run {i}/2",
                              level="modules", quiet=True) for i, p in enumerate(mpaths, 1)]
            first_pass = debug.diff(*mpaths)
            if first_pass.reproducible or first_pass.first is None or first_pass.first.step < 0:
                _settle(first_pass, mcodes, mpaths, args)
                return _emit(first_pass, args)
            s = first_pass.first.step
            _progress(f"module-level pass: first divergence in step {s} "
                      f"({first_pass.first.op} {first_pass.first.module}); op-level runs of step {s}")
            args.steps = f"{s}:{s}"
        codes = [_record(args, args.target, args.args, p, label=f"run {i}/2", quiet=True)
                 for i, p in enumerate(paths, 1)]
        _progress("comparing")
        report = debug.diff(*paths)
        if first_pass is not None:
            f0 = first_pass.first
            report.notes.insert(0, f"module-level pass: first divergence at {f0.op} in "
                                   f"{f0.module or '-'} (step {f0.step}); ops recorded for step "
                                   f"{f0.step} only")
            if report.reproducible:
                report.notes.append("the op-level runs of that step agreed (a race that did "
                                    "not recur); showing the module-level finding")
                first_pass.notes.extend(report.notes)
                report = first_pass
        for i, c in enumerate(codes, 1):
            if c:
                report.notes.append(f"run {i} exited with status {c}")
        f = report.first
        if (f is not None and f.kind == "external" and f.source in ("python", "data")
                and "PYTHONHASHSEED" not in os.environ and not args.no_hashseed_check):
            _hash_seed_experiment(args, directory, report, paths)
        if args.keep:
            from .._runtime.launch import shown

            report.notes.append("the files each run wrote are in its own working folder: "
                                + " and ".join(shown(os.path.splitext(p)[0] + RUN_FOLDER + "/cwd") for p in paths))
        _settle(report, codes, paths, args)
        return _emit(report, args)
    finally:
        if not args.keep:
            shutil.rmtree(directory, ignore_errors=True)
        if getattr(args, "guard", None) is not None:  # the copies of your files
            shutil.rmtree(args.guard.folder.parent, ignore_errors=True)
