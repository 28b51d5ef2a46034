"""``fwd9m env``: print or compare the environment fingerprint."""

from __future__ import annotations

import json
import sys

HELP = "show the environment fingerprint, or compare two (--diff A.json B.json)"


def add_arguments(p) -> None:
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument(
        "--import",
        dest="import_frameworks",
        action="store_true",
        help="also import installed frameworks to ask for threads, CUDA and devices",
    )
    p.add_argument(
        "--framework",
        action="append",
        dest="frameworks",
        help="import this framework and ask it (implies --import, for this one only; repeatable)",
    )
    p.add_argument(
        "--diff",
        nargs=2,
        metavar=("A.json", "B.json"),
        help="list differences that can change results, likeliest first; exit 1 if any",
    )


def run(args) -> int:
    from .. import environment
    from ..errors import ConfigurationError

    if args.diff:
        if args.import_frameworks or args.frameworks:
            raise ConfigurationError(
                "--import and --framework describe this machine, and --diff compares "
                "two saved files: write each with fwd9m env --import --format json "
                "> A.json, then run fwd9m env --diff A.json B.json"
            )
        a, b = (environment.load(p) for p in args.diff)
        diffs = environment.diff(a, b)
        if args.format == "json":
            json.dump([d.to_dict() for d in diffs], sys.stdout, indent=2, default=str)
            print()
        else:
            print(environment.render_diff(diffs))
        return 1 if diffs else 0
    if args.frameworks:  # naming a framework is asking about it: import that one
        from .. import _frameworks

        names = _frameworks.resolve([n.strip().lower() for n in args.frameworks])
        missing = [n for n in names if _frameworks.installed_version(n) is None]
        if missing:
            raise ConfigurationError(
                f"--framework {', '.join(missing)}: not installed in this Python "
                f"({sys.executable}); install it, or drop --framework"
            )
        args.frameworks, args.import_frameworks = names, True
    fp = environment.collect(import_frameworks=args.import_frameworks, frameworks=args.frameworks)
    print(environment.dump(fp) if args.format == "json" else environment.render_text(fp))
    return 0
