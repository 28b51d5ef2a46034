"""The ``fwd9m`` command line.

Each subcommand lives in ``fwd9m._cli.<name>`` and defines ``HELP`` (one line),
``add_arguments(parser)`` and ``run(args) -> int``. Those modules import nothing heavy
at module level; frameworks are imported inside ``run`` only.

Exit codes: 0 ok / reproducible / clean, 1 findings / not reproducible, 2 usage or run
error.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from . import __version__
from .errors import Fwd9mError

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2

#: subcommands in the order ``--help`` lists them
COMMANDS = ("check", "fix", "debug", "run", "lint", "catalog", "env", "probe")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse exits 2 too; keep its message short
        self.print_usage(sys.stderr)
        self.exit(EXIT_ERROR, f"fwd9m: error: {message}{_did_you_mean(message)}\n")


def _did_you_mean(message: str) -> str:
    """``; did you mean 'check'?`` after argparse's "invalid choice: 'chek' (choose from
    ...)" when one choice is close to what was typed, else nothing."""
    import difflib
    import re

    m = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
    if not m or "did you mean" in message:
        return ""
    choices = re.findall(r"'([^']*)'", m.group(2)) or [c.strip() for c in m.group(2).split(",")]
    close = difflib.get_close_matches(m.group(1), choices, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _command_in(argv: list[str]) -> str | None:
    """The subcommand ``argv`` names (its first word not an option; the top-level
    options take no value), or None."""
    word = next((a for a in argv if not a.startswith("-")), None)
    return word if word in COMMANDS else None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; with ``only``, the other subcommands are listed with their help but
    their arguments are not set up (that imports their modules' dependencies: a
    ``fwd9m lint`` run does not need the debugger's)."""
    parser = _Parser(
        prog="fwd9m",
        description="Make deep-learning runs bit-for-bit reproducible, and find out why when they are not.",
    )
    parser.add_argument("--version", action="version", version=f"fwd9m {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log what fwd9m does (-vv for debug detail)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"fwd9m._cli.{name}")
        except ModuleNotFoundError as exc:  # a subcommand not built yet
            if exc.name != f"fwd9m._cli.{name}":
                raise
            continue
        p = sub.add_parser(name, help=module.HELP, description=getattr(module, "DESCRIPTION", module.HELP))
        if only is None or name == only:
            # ``fwd9m check -v train.py`` as well as ``fwd9m -v check train.py``
            p.add_argument("-v", "--verbose", dest="sub_verbose", action="count", default=0, help=argparse.SUPPRESS)
            module.add_arguments(p)
            p.set_defaults(_run=module.run)
    return parser


#: options whose value may itself start with "-" (``--resume-args "--resume"``, as the
#: docs write it): argparse takes such a value for an option and says "expected one argument"
_DASH_VALUES = ("--resume-args",)


def _joined_values(argv: list[str]) -> list[str]:
    """``--resume-args --resume`` as ``--resume-args=--resume``, before the program (the
    first ``.py`` path, ``-m`` or ``--``): the script's own arguments are left as given."""
    out, i = [], 0
    while i < len(argv):
        a = argv[i]
        if a in ("--", "-m") or a.endswith(".py"):
            return out + argv[i:]
        if a in _DASH_VALUES and i + 1 < len(argv):
            out.append(f"{a}={argv[i + 1]}")
            i += 2
            continue
        out.append(a)
        i += 1
    return out


def main(argv: list[str] | None = None) -> int:
    argv = _joined_values(sys.argv[1:] if argv is None else argv)
    parser = build_parser(only=_command_in(argv))
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help(sys.stderr)
        return EXIT_ERROR
    args.verbose += getattr(args, "sub_verbose", 0)  # -vv check -v: 3
    logging.basicConfig(
        level={0: logging.WARNING, 1: logging.INFO}.get(args.verbose, logging.DEBUG),
        format="fwd9m: %(message)s",
    )
    try:
        return int(args._run(args) or 0)
    except Fwd9mError as exc:
        from .compare._escape import printable

        # a message quotes file names, values and output of the user's program: escaped
        print(f"fwd9m {args.command}: error: {printable(str(exc))}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print(f"fwd9m {args.command}: interrupted", file=sys.stderr)
        return 130
    except SystemExit as exc:  # SIGTERM or SIGHUP, unwound like Ctrl-C (_cli.check.exit_on_sigterm)
        if getattr(exc, "signal_name", None):
            print(f"fwd9m {args.command}: interrupted ({exc.signal_name})", file=sys.stderr)
        raise
    except BrokenPipeError:
        return EXIT_OK
    except OSError as exc:  # e.g. writing the report failed (disk full, closed stream)
        try:
            from .compare._escape import printable

            print(
                f"fwd9m {args.command}: error: {printable(str(exc))} ({type(exc).__name__}); check disk space, "
                f"permissions and where the output goes",
                file=sys.stderr,
            )
        except OSError:
            pass
        return EXIT_ERROR


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
