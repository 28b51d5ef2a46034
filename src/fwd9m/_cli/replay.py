"""``fwd9m debug replay TRACE --op SEQ``: replay one op of a kept trace alone.

The lead hooks this into ``fwd9m debug``'s subcommands: ``add_arguments(parser)`` sets
up the parser, ``run(args) -> int`` is the command. Exit 0 the op is deterministic
alone, 1 replay confirmed it nondeterministic (or the switch leaves it so), 2 bad input
(no capture, an op that cannot be rebuilt, a device that is not here)."""

from __future__ import annotations

import json

HELP = "replay one op of a kept trace alone, K times, without and with the determinism switch"


def add_arguments(p) -> None:
    from ..debug._replay import DEFAULT_REPEAT

    p.add_argument(
        "trace",
        metavar="TRACE",
        help="a trace recorded with --capture SEQ:0 (its capture file TRACE.opSEQ.npz beside it)",
    )
    p.add_argument("--op", type=int, required=True, metavar="SEQ", help="the op's sequence number (#SEQ)")
    p.add_argument(
        "--repeat",
        "-k",
        type=int,
        default=DEFAULT_REPEAT,
        metavar="K",
        help=f"replays per setting (default {DEFAULT_REPEAT})",
    )
    p.add_argument("--no-switch", action="store_true", help="do not replay under the determinism switch")
    p.add_argument("--capture", metavar="FILE", help="the capture file (default: TRACE.opSEQ.npz)")
    p.add_argument("--format", choices=("text", "json"), default="text")


def run(args) -> int:
    from ..debug._replay import replay

    result = replay(args.trace, args.op, repeat=args.repeat, switch=not args.no_switch, capture=args.capture)
    if args.format == "json":
        print(json.dumps(result.to_dict(), indent=1, sort_keys=True))
    else:
        print(result.render())
    gap = result.on is not None and result.on.status == "nondeterministic"
    return 1 if result.confirmed or gap else 0
