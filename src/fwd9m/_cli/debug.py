"""``fwd9m debug``: find the first op where two runs diverge, and say why.

    fwd9m debug script.py [ARGS...]              record two fresh runs, compare, report
    fwd9m debug record -o run.trace script.py    record one run
    fwd9m debug diff a.trace b.trace             compare two traces (also across machines)
    fwd9m debug diff runA/ runB/                 rank by rank (fwd9m run --record-ranks runA -- torchrun ...)
    fwd9m debug diff a.steps b.steps             step digest files (fwd9m run --digests)
    fwd9m debug diff ref/ run/                   per-rank step digests (fwd9m run --digests ref/ -- torchrun ...)
    fwd9m debug replay run.trace --op SEQ        replay one captured op alone (record with --capture SEQ:0)

The report goes to stdout. The script's own output (and TensorFlow's start-up log
lines) is kept out of it: shown only, its last lines, when a run fails; fwd9m -v debug
shows it as it runs. debug record passes it through on stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._frameworks import FRAMEWORKS
from . import _batch
from . import replay as _replay

HELP = "find the first op where two runs diverge, and say why (record / diff traces)"
DESCRIPTION = __doc__

LEVEL_CHOICES = ("modules", "sequence", "digests", "full")  # fwd9m.debug.LEVELS (not imported: --help stays light)
FRAMEWORK_CHOICES = tuple(FRAMEWORKS)  # the registry


@dataclass(frozen=True)
class Subcommand:
    """One ``fwd9m debug NAME`` subcommand: its one-line help, the options it takes
    after its name (``add_arguments(parser)``), and ``run(args) -> exit status``."""

    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def _progress(msg: str) -> None:
    from ..compare import escape_control

    print(f"fwd9m debug: {escape_control(msg)}", file=sys.stderr, flush=True)  # names the script, traces


def _output(text: str) -> None:
    """The end of a failed run's own output (already escaped), as it is."""
    print(text, file=sys.stderr, flush=True)


# ------------------------------------------------------------------ options


def _recording_options(p: argparse.ArgumentParser, default: Any = None) -> None:
    """The options of a recording: before the script (``fwd9m debug --level full x.py``),
    or after ``record`` too (``default=argparse.SUPPRESS`` there, so that an option
    given before the subcommand is not reset by the subcommand's default)."""

    def d(value: Any) -> Any:
        return value if default is None else default

    p.add_argument(
        "--level",
        choices=LEVEL_CHOICES,
        default=d("digests"),
        help="detail recorded per op (default: digests; modules: PyTorch modules, Keras "
        "layers, JAX jitted user functions)",
    )
    p.add_argument(
        "--steps",
        metavar="A:B",
        default=d(None),
        help="PyTorch: record ops only in optimizer steps A..B (JAX: steps end at calls of jitted user functions)",
    )
    p.add_argument(
        "--capture",
        metavar="OPS",
        default=d(None),
        help="store full tensors for these ops: names (index_put_,MatMul) or SEQ:RADIUS windows, comma-separated",
    )
    p.add_argument(
        "--framework",
        action="append",
        choices=FRAMEWORK_CHOICES,
        default=d(None),
        help="framework(s) to record (default: from the script's imports; Keras is recorded on its active backend)",
    )
    p.add_argument("-m", dest="module", action="store_true", default=d(False), help="TARGET is a module (python -m)")
    p.add_argument("--timeout", type=float, default=d(None), help="seconds per run")
    _force(p, default)


def _force(p: argparse.ArgumentParser, default: Any = None) -> None:
    p.add_argument(
        "--force",
        action="store_true",
        default=False if default is None else default,
        help="replace an existing file that is not a fwd9m trace or report (-o, --html, "
        "--keep); an input (the script, a trace compared) is never replaced",
    )


def _report_options(p: argparse.ArgumentParser, default: Any = None) -> None:
    p.add_argument("--format", choices=("text", "json"), default="text" if default is None else default)
    p.add_argument("--html", metavar="REPORT.html", default=default, help="also write an HTML report with a plot")


def add_arguments(p) -> None:
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    _report_options(p)
    p.add_argument("-o", "--output", metavar="RUN.trace", help="record: the trace file to write")
    _recording_options(p)
    p.add_argument(
        "--fast",
        action="store_true",
        help="PyTorch: a module-level pass first, then op-level recording of the "
        "first diverging step only (for long or large runs)",
    )
    p.add_argument(
        "--no-early-stop",
        action="store_true",
        help="PyTorch: record the whole runs, without first finding the first diverging optimizer "
        "step with step digests of two runs side by side (and recording that step only)",
    )
    p.add_argument("--keep", metavar="DIR", help="keep the traces in DIR (without it they are deleted on exit)")
    from .check import add_cwd_option

    add_cwd_option(p)
    p.add_argument(
        "--no-hashseed-check",
        action="store_true",
        help="do not test hash-order sources (3 reruns: PYTHONHASHSEED=0, 1 and 0 again; "
        "a 4th with 2 only when they agree)",
    )
    p.add_argument(
        "--vary",
        action="append",
        default=[],
        metavar="batch[=S1,S2]",
        help="batch[=1,64]: the first op of the script's model whose output rows for the same "
        "samples differ between two batch sizes (default: found by check --vary batch), "
        "replayed alone at both shapes",
    )
    _batch.add_options(p)
    p.add_argument(
        "--no-replay",
        action="store_true",
        help="do not prove a culprit op (by default a third run captures its inputs and the "
        "op is replayed alone 20 times, then under the determinism switch)",
    )
    sub = p.add_subparsers(
        dest="action",
        action=_ScriptOrSubcommand,
        required=True,
        metavar="{" + ",".join(["SCRIPT", *SUBCOMMANDS]) + "}",
        title="subcommands (without one: record SCRIPT twice and compare)",
    )
    for name, command in SUBCOMMANDS.items():
        sp = sub.add_parser(name, help=command.help, description=command.help)
        command.add_arguments(sp)
        sp.set_defaults(_subcommand=command.run)


class _AnyName:
    """The choices of the first positional: the subcommands' names, and any other name,
    taken for the script (``fwd9m debug train.py``): ``in`` accepts every string."""

    def __init__(self, names: dict) -> None:
        self.names = names

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str)

    def __iter__(self):
        return iter(self.names)


class _ScriptOrSubcommand(argparse._SubParsersAction):  # noqa: SLF001 - argparse's own extension point
    """The first positional of ``fwd9m debug``: a subcommand (its options and arguments
    follow it), or else the script, whose arguments follow it untouched."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.choices = _AnyName(self._name_parser_map)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        if values[0] in SUBCOMMANDS:
            super().__call__(parser, namespace, values, option_string)
            return
        setattr(namespace, self.dest, None)
        namespace.target, namespace.args = values[0], list(values[1:])


def _options(args: argparse.Namespace):
    """``fwd9m debug``'s options, validated once, before any run."""
    from ..debug import DebugOptions

    return DebugOptions(
        level=args.level,
        steps=args.steps,
        fast=getattr(args, "fast", False),
        capture=args.capture,
        frameworks=tuple(args.framework or ()),
        module=args.module,
        keep=getattr(args, "keep", None),
        force=args.force,
        timeout=args.timeout,
        cwd=getattr(args, "cwd", "isolate"),
        hashseed_check=not getattr(args, "no_hashseed_check", False),
        replay=not getattr(args, "no_replay", False),
        show_output=bool(getattr(args, "verbose", 0)),
        early_stop=not getattr(args, "no_early_stop", False),
    )


# ------------------------------------------------------------------ the report


def _is_report(path: str) -> bool:
    from .._runtime.launch import starts_with

    return starts_with(path, (b"<title>fwd9m debug report</title>",))


def _check_html(args: argparse.Namespace, inputs: list[str]) -> None:
    """Refuse, before any run, an --html path that cannot be written, or that is an
    input or an existing file fwd9m did not write (unless --force)."""
    from .._runtime.launch import check_output_path, refuse_overwrite

    if args.html:
        check_output_path(args.html, "--html", "report.html")
        refuse_overwrite(
            args.html,
            "--html",
            inputs=inputs,
            ours=_is_report,
            force=args.force,
            what="an HTML report",
            example="report.html",
        )


def _emit(report, args: argparse.Namespace) -> int:
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


# ------------------------------------------------------------------ fwd9m debug diff


def _add_diff_arguments(p: argparse.ArgumentParser) -> None:
    _report_options(p, argparse.SUPPRESS)
    _force(p, argparse.SUPPRESS)
    p.add_argument(
        "a",
        metavar="A",
        help="a trace (A.trace), a folder of rank traces (runA/), or a step digest file (fwd9m run --digests)",
    )
    p.add_argument("b", metavar="B", help="the trace, folder or step digest file to compare with A")
    p.add_argument(
        "--rank-independent",
        action="store_true",
        help="step digests: compare only the loss and the parameters (replicated on every "
        "data-parallel rank); folders of jobs of different world sizes are then compared",
    )


def _diff_ranks(args: argparse.Namespace) -> int:
    from .._runtime.launch import shown
    from ..errors import ConfigurationError

    dirs = [os.path.isdir(p) for p in (args.a, args.b)]
    if not all(dirs):
        d, f = (args.a, args.b) if dirs[0] else (args.b, args.a)
        raise ConfigurationError(
            f"{shown(d)} is a directory but {shown(f)} is not: compare two trace "
            f"files (fwd9m debug diff a.trace b.trace) or two directories of "
            f"rank traces (fwd9m debug diff runA/ runB/)"
        )
    if args.html:  # was silently not written
        raise ConfigurationError(
            "--html writes the report of two traces; for rank folders, compare "
            "one rank's traces: fwd9m debug --html r.html diff runA/rank0.trace "
            "runB/rank0.trace"
        )
    from ..distributed import diff_ranks

    ranks = diff_ranks(args.a, args.b)
    print(ranks.render("json" if args.format == "json" else "text"))
    return 0 if ranks.reproducible else 1


def _run_diff(args: argparse.Namespace) -> int:
    """Compare two traces (or two folders of rank traces, rank by rank)."""
    from .. import debug
    from ..debug._script import cut_traces
    from ..errors import RunError

    if os.path.isdir(args.a) and os.path.isdir(args.b):
        from ..steps._compare import diff_step_folders, rank_files

        if rank_files(args.a) and rank_files(args.b):  # fwd9m run --digests DIR/ -- LAUNCHER
            report = diff_step_folders(args.a, args.b, rank_independent=args.rank_independent)
            print(report.render())
            return report.exit_code
    digests = [debug.is_step_digest_file(p) for p in (args.a, args.b)]
    if args.rank_independent and not all(digests):
        from ..errors import ConfigurationError

        raise ConfigurationError(
            "--rank-independent compares step digests: two files or two folders of per-rank files "
            "(fwd9m run --digests ref/ -- LAUNCHER ...), not traces"
        )
    if os.path.isdir(args.a) or os.path.isdir(args.b):
        return _diff_ranks(args)
    if any(digests):
        return _diff_step_digests(args, digests)
    _check_html(args, [args.a, args.b])
    report = debug.diff(args.a, args.b)
    cut = cut_traces(report, [args.a, args.b])
    if report.reproducible and cut:  # agreeing up to where a trace stops is no verdict
        _emit(report, args)
        raise RunError(
            f"{' and '.join(cut)} {'is' if len(cut) == 1 else 'are'} incomplete (see the notes), "
            f"so only the ops before that were compared; no verdict on the whole run"
        )
    if report.reproducible and not (report.ops_a or report.ops_b):  # as for two recorded runs
        raise RunError(
            "neither trace holds any op, so nothing was compared and there is no verdict; "
            "record runs that execute ops of a framework fwd9m records (torch, tensorflow, jax)"
        )
    return _emit(report, args)


def _diff_step_digests(args: argparse.Namespace, digests: list[bool]) -> int:
    """Compare two step digest files (``fwd9m run --digests``): the first step whose
    digests differ, and the environment differences."""
    from .. import debug
    from .._runtime.launch import shown
    from ..errors import ConfigurationError

    if not all(digests):
        one, other = (args.a, args.b) if digests[0] else (args.b, args.a)
        raise ConfigurationError(
            f"{shown(one)} is a step digest file but {shown(other)} is not; compare two traces or two step digest files"
        )
    if getattr(args, "html", None):
        raise ConfigurationError("--html draws traces; step digest files have no HTML report")
    report = debug.diff_steps(args.a, args.b, rank_independent=args.rank_independent)
    print(report.render())
    return report.exit_code


# ------------------------------------------------------------------ fwd9m debug record


def _add_record_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-o", "--output", metavar="RUN.trace", default=argparse.SUPPRESS, help="the trace file to write (required)"
    )
    _recording_options(p, argparse.SUPPRESS)
    p.add_argument("target", metavar="SCRIPT", help="script.py (a module with -m)")
    p.add_argument("args", metavar="ARGS", nargs=argparse.REMAINDER, help="arguments for the script")


def _run_record(args: argparse.Namespace) -> int:
    """Record one run into ``-o RUN.trace``, in the current directory."""
    from .. import debug
    from .._runtime.launch import shown
    from ..errors import ConfigurationError

    if not args.output:
        raise ConfigurationError("usage: fwd9m debug record -o RUN.trace script.py [ARGS...]")
    code = debug.record_script(args.target, args.args, args.output, _options(args), progress=_progress)
    n = sum(1 for _ in debug.TraceReader(args.output))
    print(
        f"recorded {n} ops into {shown(args.output)} ({os.path.getsize(args.output)} bytes)"
        + (f"; the script exited with status {code}" if code else "")
    )
    return 0 if code == 0 else 2


# ------------------------------------------------------------------ fwd9m debug SCRIPT


def _run_script(args: argparse.Namespace, options) -> int:
    """Record the script twice, compare, explain (:func:`fwd9m.debug.debug_script`)."""
    from .. import debug
    from .._runtime.launch import shown
    from ..debug._script import kept_traces
    from ..errors import ConfigurationError

    if getattr(args, "output", None):
        raise ConfigurationError(
            f"-o {shown(args.output)} names the trace of one run, written by `fwd9m debug record -o FILE "
            f"script.py`; `fwd9m debug script.py` records two runs: keep their traces with --keep DIR"
        )
    _check_html(args, [*([] if args.module else [args.target]), *kept_traces(options)])
    report = debug.debug_script(args.target, args.args, options, progress=_progress, output=_output)
    return _emit(report, args)


#: ``fwd9m debug NAME ...``; without a subcommand, ``fwd9m debug SCRIPT [ARGS...]``
#: records two runs and compares them. A new subcommand is one entry here (with its
#: options and its body in a module of its own).
SUBCOMMANDS: dict[str, Subcommand] = {
    "record": Subcommand(
        "record one run into a trace file: record -o RUN.trace script.py [ARGS...]", _add_record_arguments, _run_record
    ),
    "diff": Subcommand(
        "compare two traces, two folders of rank traces, or two step digest files: diff A.trace B.trace",
        _add_diff_arguments,
        _run_diff,
    ),
    "replay": Subcommand(_replay.HELP + ": replay TRACE --op SEQ", _replay.add_arguments, _replay.run),
}


def run(args) -> int:
    from .check import exit_on_sigterm

    options = _options(args)  # every option checked before anything runs
    exit_on_sigterm()
    subcommand = getattr(args, "_subcommand", None)
    if args.action is not None and subcommand is not None:
        return subcommand(args)
    if args.vary:
        return _run_batch(args)
    return _run_script(args, options)


def _run_batch(args: argparse.Namespace) -> int:
    """``fwd9m debug --vary batch SCRIPT``."""
    from ..errors import ConfigurationError
    from .check import _progress

    batch, sizes = _batch.batch_sizes(args.vary)
    if not batch:
        raise ConfigurationError(f"fwd9m debug --vary takes batch (or batch=1,64), got {args.vary[0]!r}")
    return _batch.run(args, args.target, list(args.args), sizes, True, _progress(False, "debug"))
