"""``--vary batch`` of ``fwd9m check`` and ``fwd9m debug``: the options they share, and
the two runs (parse, call :mod:`fwd9m.batch`, print)."""

from __future__ import annotations

import argparse

BATCH_HELP = (
    "batch invariance: run the script up to its model's first call (the outermost PyTorch "
    "module or Keras model called, or --entry), then run that call's samples in batches of "
    "several sizes and places (batch[=1,2,64] names the sizes) and compare each sample's "
    "output rows bit for bit"
)


def add_options(p: argparse.ArgumentParser) -> None:
    """``--batch-dim`` and ``--entry``, the options of ``--vary batch``."""
    g = p.add_argument_group("batch invariance (--vary batch)")
    g.add_argument(
        "--batch-dim",
        type=int,
        default=None,
        metavar="N",
        help="the inputs' batch dimension (default 0); the arguments with the first array "
        "argument's size there are split into samples, the others held fixed",
    )
    g.add_argument(
        "--entry",
        metavar="[MODULE:]FUNCTION",
        help="the model's forward function to stop at and check, a function of the script "
        "(apply) or of a module (mypkg.model:forward); needed for JAX",
    )


def batch_sizes(vary: list[str]) -> tuple[bool, list[int] | None]:
    """(``--vary batch`` given, its sizes or None); ``vary`` holds no other item with it.

    Raises:
        ConfigurationError: ``batch`` with other --vary items, or sizes that are not
            positive integers.
    """
    from ..errors import ConfigurationError

    batch = [v for v in vary if v == "batch" or v.startswith("batch=")]
    if not batch:
        return False, None
    if len(vary) > 1:
        raise ConfigurationError("--vary batch is a check of its own: give it alone, without other --vary items")
    _, _, values = batch[0].partition("=")
    if not values:
        return True, None
    try:
        sizes = [int(v) for v in values.split(",") if v]
    except ValueError:
        sizes = []
    if not sizes or min(sizes) < 1:
        raise ConfigurationError(f"--vary {batch[0]!r}: sizes must be positive integers, e.g. --vary batch=1,2,64")
    return True, sizes


def run(args, target: str, script_args: list[str], sizes: list[int] | None, debug: bool, progress) -> int:
    """Check (or debug) the script's model for batch invariance and print the report:
    0 invariant, 1 varies."""
    from ..batch._script import check_script, debug_script

    run_it = debug_script if debug else check_script
    result = run_it(
        target,
        script_args,
        module=bool(getattr(args, "module", False)),
        entry=args.entry,
        batch_dim=args.batch_dim,
        sizes=sizes,
        cwd=args.cwd,
        timeout=args.timeout,
        say=progress,
    )
    print(result.to_json() if args.format == "json" else result.report())
    return 0 if result else 1
