"""``fwd9m env``: print or compare the environment fingerprint."""

from __future__ import annotations

import json
import sys

HELP = "show the environment fingerprint, or compare two (--diff A.json B.json)"


def add_arguments(p) -> None:
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--import", dest="import_frameworks", action="store_true",
                   help="also import installed frameworks to ask for threads, CUDA and devices")
    p.add_argument("--framework", action="append", dest="frameworks",
                   help="with --import: only this framework (repeatable)")
    p.add_argument("--diff", nargs=2, metavar=("A.json", "B.json"),
                   help="list differences that can change results, likeliest first; exit 1 if any")


def run(args) -> int:
    from .. import environment

    if args.diff:
        a, b = (environment.load(p) for p in args.diff)
        diffs = environment.diff(a, b)
        if args.format == "json":
            json.dump([d.to_dict() for d in diffs], sys.stdout, indent=2, default=str)
            print()
        else:
            print(environment.render_diff(diffs))
        return 1 if diffs else 0
    fp = environment.collect(import_frameworks=args.import_frameworks, frameworks=args.frameworks)
    print(environment.dump(fp) if args.format == "json" else environment.render_text(fp))
    return 0
