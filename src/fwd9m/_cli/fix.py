"""``fwd9m fix``: find a patch that makes the script reproducible, and prove it."""

from __future__ import annotations

import argparse

HELP = "find a patch that makes a script reproducible, verified by fwd9m check on a patched copy"
DESCRIPTION = (
    "Check the script; when its runs differ, patch a copy of it step by step (the edit that what differs "
    "points at, else fwd9m.enable_determinism with the script's own seed after its imports, clock seeds replaced, "
    "hash() seeds derived with fwd9m.derive_seed; "
    "then, up to 4 steps, the next such edit: sets iterated in sorted order, "
    "generators given the seed, local modules' seeds, DataLoader workers seeded), check the copy after "
    "each step, and print what each step fixed and the patch that made the copy reproducible as a "
    "unified diff. Your files are not changed unless --write. Exit 0: reproducible, or a verified "
    "patch; 1: no verified patch (each step's remaining difference is listed; for an op with no "
    "deterministic kernel here, the catalog's entry and the best measured option, such as one CPU thread, with "
    "its time per run); 2: error."
)


def add_arguments(p) -> None:
    p.add_argument("--seed", type=int, help="the seed the patch uses (default: the script's own, else 0)")
    p.add_argument("-o", "--output", metavar="PATCH", help="also save the verified patch to this file")
    p.add_argument(
        "--write",
        action="store_true",
        help="apply the verified patch to the script (only if it is unchanged since the check)",
    )
    p.add_argument("--timeout", type=float, metavar="SEC", help="stop a run after SEC seconds")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress messages on stderr")
    p.add_argument("program", nargs=argparse.REMAINDER, metavar="script.py [args]", help="the script and its arguments")


def run(args) -> int:
    import json
    from pathlib import Path

    from ..errors import ConfigurationError, RunError
    from ..fix import fix, write
    from .check import _progress, exit_on_sigterm

    if not args.program:
        raise RunError("nothing to fix: name a script (fwd9m fix train.py [args])")
    target, script_args = args.program[0], args.program[1:]
    if not Path(target).is_file():
        raise RunError(f"cannot fix {target}: no such file (fwd9m fix takes a Python script)")
    if args.timeout is not None and not args.timeout > 0:
        raise ConfigurationError(f"--timeout must be positive, got {args.timeout}")
    if args.output:
        _check_patch_path(args.output, target)
    exit_on_sigterm()
    result = fix(target, script_args, seed=args.seed, progress=_progress(args.quiet, "fix"), timeout=args.timeout)
    fixed = result.fixed
    if fixed is not None and args.output:
        Path(args.output).write_text(fixed.patch, encoding="utf-8")
    if fixed is not None and args.write:
        write(result)
    print(json.dumps(result.to_dict(), indent=2) if args.format == "json" else result.report())
    if fixed is not None and args.write and args.format == "text":
        print(f"\nWritten: {target} (the patch above)")
    return 0 if result else 1


def _check_patch_path(path: str, script: str) -> None:
    """Refuse, before any run, a ``-o`` that is the script, not a file, or an existing
    file that is not a patch (one fwd9m wrote starts ``--- a/``)."""
    from .._files import check_output_path, refuse_overwrite, starts_with

    check_output_path(path, "-o", "fix.patch")
    refuse_overwrite(
        path,
        "-o",
        inputs=[script],
        ours=lambda p: starts_with(p, (b"--- a/",)),
        what="a patch",
        example="fix.patch",
        force_fix="remove it first",
    )
