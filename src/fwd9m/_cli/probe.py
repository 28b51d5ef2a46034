"""``fwd9m probe``: measure on this machine which catalog ops are nondeterministic."""

from __future__ import annotations

import json
import os
import sys

HELP = "measure which catalog ops are nondeterministic on this machine (--trace: your model's ops)"
DESCRIPTION = """Run a small probe of every catalog op entry (or, with --trace, of every op kind
a kept debug trace ran, at its recorded shapes and dtypes) several times in a fresh process
per framework and switch setting, and classify each: deterministic, nondeterministic, raises
under the determinism switch, nondeterministic under it. Lists where the measurement
contradicts the catalog. --cost: time each op with the switch on against off instead (the
ratio, median and spread over alternating pairs; exit 0). Exit 0 no contradiction, 1 some
measurement contradicts the catalog (or, with --trace, some op of the trace is
nondeterministic), 2 bad input."""


def _csv_ints(text: str) -> list[int]:
    import argparse

    try:
        out = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected thread counts such as 1,2,8, got {text!r}") from None
    if not out or min(out) < 1:
        raise argparse.ArgumentTypeError(f"thread counts must be >= 1, got {text!r}")
    return out


def add_arguments(p) -> None:
    from ..probe import DEFAULT_REPEAT

    p.add_argument(
        "--framework", "-f", action="append", help="torch, tensorflow or jax (repeatable; default: those installed)"
    )
    p.add_argument(
        "--device",
        "-d",
        action="append",
        help="cpu (default), cuda:N or all (every device each framework sees); repeatable",
    )
    p.add_argument(
        "--switch",
        choices=("off", "on", "both"),
        default="both",
        help="the framework's determinism switch: off, on, or both (default)",
    )
    p.add_argument(
        "--threads", type=_csv_ints, metavar="N,...", help="CPU thread counts to probe at (default: the CPU count)"
    )
    p.add_argument(
        "--repeat",
        "-k",
        type=int,
        default=DEFAULT_REPEAT,
        metavar="K",
        help=f"runs of each probe per setting; with --cost, off/on pairs per op (default {DEFAULT_REPEAT})",
    )
    p.add_argument("--entry", action="append", metavar="ID", help="only this catalog entry (repeatable)")
    p.add_argument(
        "--trace", metavar="TRACE", help="probe the op kinds this kept debug trace ran, at their shapes and dtypes"
    )
    p.add_argument(
        "--batch-invariance",
        action="store_true",
        help="measure instead which ops give a sample other bits in another batch size (matmul, "
        "linear, sum, mean, softmax, layer norm, attention; per framework, fresh process each), "
        "with the catalog's batch-invariance entries (exit 0)",
    )
    p.add_argument(
        "--cost",
        action="store_true",
        help="time each op (or, with --trace, each op kind of the trace) with the determinism switch on "
        "against off instead: the ratio, median and min-max over --repeat alternating pairs (exit 0)",
    )
    p.add_argument(
        "--input",
        action="append",
        metavar="NAME=DTYPE[SHAPE]",
        help="with --cost: this input of the catalog probes at another shape (e.g. i=int64[1000000]<8; "
        "see fwd9m/probe/specs.toml for the names); repeatable",
    )
    p.add_argument("--json", metavar="FILE", help="also write the report as JSON (a new file)")
    p.add_argument(
        "--format", choices=("text", "json"), default="text", help="the report on stdout, as the other commands"
    )
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")


def _cost_progress(stream):
    def show(ev: dict) -> None:
        if ev["event"] == "result":
            stream.write(
                f"probe --cost: {ev['framework']} {ev['device']} switch {ev['sides']} "
                f"[{ev['index']}/{ev['total']}] {ev['key']}: {ev.get('status')}\n"
            )
            stream.flush()

    return show


def _progress(stream):
    tty = stream.isatty()

    def show(ev: dict) -> None:
        where = (
            f"{ev['framework']} {ev['device']} switch {'on' if ev['switch'] else 'off'} "
            f"{ev['threads']}t [{ev['index']}/{ev['total']}] {ev['key']}"
        )
        if ev["event"] == "progress" and tty:
            stream.write(f"\r\x1b[Kprobe: {where} repeat {ev['repeat']}/{ev['of']}")
        elif ev["event"] == "result":
            stream.write(("\r\x1b[K" if tty else "") + f"probe: {where}: {ev.get('status')}\n")
        stream.flush()

    return show


def _write_json(path: str, data: dict) -> None:
    from ..errors import ConfigurationError

    try:
        with open(path, "x", encoding="utf-8") as f:  # never overwrite the user's file
            json.dump(data, f, indent=1, sort_keys=True)
            f.write("\n")
    except FileExistsError:
        raise ConfigurationError(
            f"--json {path}: the file exists; fwd9m never overwrites a file, name a new one"
        ) from None


def run(args) -> int:
    from ..errors import ConfigurationError

    if args.json and os.path.exists(args.json):
        raise ConfigurationError(f"--json {args.json}: the file exists; fwd9m never overwrites a file, name a new one")
    progress = None if args.quiet else _progress(sys.stderr)
    device = args.device or ["cpu"]
    if args.cost:
        return _cost(args, device)
    if args.input:
        raise ConfigurationError("--input sets the shapes --cost times at; add --cost")
    if args.batch_invariance:
        return _batch_invariance(args)
    if args.trace:
        from ..probe._trace import probe_trace

        report = probe_trace(
            args.trace, device=device, switch=args.switch, threads=args.threads, repeat=args.repeat, progress=progress
        )
        failing = any(r.status == "nondeterministic" for r in report.results)
    else:
        from ..probe import probe

        report = probe(
            args.framework,
            device=device,
            switch=args.switch,
            threads=args.threads,
            repeat=args.repeat,
            entries=args.entry,
            progress=progress,
        )
        failing = bool(report.contradictions())
    _emit(report, args)
    return 1 if failing else 0


def _emit(report, args) -> None:
    """A probe or cost report as text or JSON, and into ``--json FILE`` too."""
    from ..compare._escape import printable

    if args.format == "json":
        print(json.dumps(report.to_dict(), indent=1, sort_keys=True, default=str))
    else:
        print(printable(report.render()))
    if args.json:
        _write_json(args.json, report.to_dict())


def _batch_invariance(args) -> int:
    """``fwd9m probe --batch-invariance``: the measurement, and the catalog entry of each op."""
    from dataclasses import asdict

    from ..batch._probe import probe_batch_invariance, render
    from ..catalog._batch import batch_entries

    rows = probe_batch_invariance(args.framework)
    entries = {(e["framework"], e.get("probe")): e["id"] for e in batch_entries()}
    if args.format == "json":
        print(json.dumps([{**asdict(r), "entry": entries.get((r.framework, r.op))} for r in rows], indent=1))
    else:
        print(render(rows))
        known = sorted({entries[(r.framework, r.op)] for r in rows if (r.framework, r.op) in entries})
        print("Catalog batch-invariance entries (fwd9m debug --vary batch prints their fixes): " + ", ".join(known))
    if args.json:
        _write_json(args.json, {"batch_invariance": [asdict(r) for r in rows]})
    return 0


def _cost(args, device: list[str]) -> int:
    """``fwd9m probe --cost``: the switch's cost per op, as a table or JSON."""
    from ..errors import ConfigurationError
    from ..probe import probe_cost

    if args.switch != "both" or args.batch_invariance:
        raise ConfigurationError("--cost times the switch off and on; leave out --switch and --batch-invariance")
    inputs = {}
    for text in args.input or []:
        name, eq, value = text.partition("=")
        if not eq or not name.strip():
            raise ConfigurationError(f"--input {text!r}: expected NAME=DTYPE[SHAPE], e.g. i=int64[1000000]<8")
        inputs[name.strip()] = value.strip()
    report = probe_cost(
        args.framework,
        device=device,
        entries=args.entry,
        trace=args.trace,
        inputs=inputs,
        threads=args.threads,
        pairs=args.repeat,
        progress=None if args.quiet else _cost_progress(sys.stderr),
    )
    _emit(report, args)
    return 0
