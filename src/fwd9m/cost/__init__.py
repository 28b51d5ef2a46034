"""What determinism costs: ``fwd9m check --cost`` runs a script with and without
``enable_determinism`` (alternately, several pairs, each in a fresh process) and reports
the run-time ratio with its spread, and which ops account for the difference (PyTorch:
each aten op's time summed by name in each run)."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["CostResult", "check_cost"]


@dataclass
class CostResult:
    script: str
    pairs: int
    seconds_off: list[float]
    seconds_on: list[float]
    #: op -> (calls off, seconds off, calls on, seconds on), medians over the pairs
    ops: dict[str, list] = field(default_factory=dict)

    @property
    def ratios(self) -> list[float]:
        return [on / off for off, on in zip(self.seconds_off, self.seconds_on) if off > 0]

    def contributors(self, n: int = 5) -> list[tuple[str, float]]:
        """The ops whose time grew most with the switch on: (op, seconds added)."""
        deltas = [(op, v[3] - v[1]) for op, v in self.ops.items()]
        return sorted((d for d in deltas if d[1] > 0), key=lambda d: -d[1])[:n]

    def report(self) -> str:
        from ..compare import escape_control

        r = self.ratios
        lines = [
            f"COST OF DETERMINISM: {statistics.median(r):.2f}x the run time with enable_determinism "
            f"(ratio per pair {min(r):.2f} to {max(r):.2f}, {self.pairs} pair(s) of runs, off and on alternately)",
            f"  run time off: median {statistics.median(self.seconds_off):.2f} s; "
            f"on: median {statistics.median(self.seconds_on):.2f} s (each run in a fresh process, start-up included)",
        ]
        off, on = sum(v[1] for v in self.ops.values()), sum(v[3] for v in self.ops.values())
        if off > 0:
            lines.append(f"  time in PyTorch ops: {off:.3f} s off, {on:.3f} s on ({on / off:.2f}x)")
        top = self.contributors()
        if top:
            lines.append("Ops that account for the difference (PyTorch op time, median over the pairs):")
            for op, added in top:
                v = self.ops[op]
                lines.append(f"  {op}: +{added:.3f} s ({v[1]:.3f} s off, {v[3]:.3f} s on, {int(v[2])} calls)")
        elif self.ops:
            lines.append("No op took longer with the switch on.")
        else:
            lines.append("Op times: not measured (no PyTorch ops ran; other frameworks are timed as a whole)")
        return escape_control("\n".join(lines), keep="\n")

    def to_json(self) -> str:
        d = asdict(self)
        d["ratios"], d["contributors"] = self.ratios, self.contributors()
        return json.dumps(d, indent=2)

    def __bool__(self) -> bool:
        return True


def check_cost(
    target: str,
    args: Sequence[str] = (),
    *,
    pairs: int = 2,
    module: bool = False,
    cwd: str = "isolate",
    timeout: float | None = None,
    say: Callable[[str], None] = lambda m: None,
) -> CostResult:
    """Run ``target`` ``pairs`` times with the determinism switch off and on, alternately.

    Raises:
        ConfigurationError: ``pairs`` is below 1.
        RunError: a run gave no result, or ended with a non-zero exit status (a failed
            run's time is not the script's).
    """
    from ..errors import ConfigurationError

    if pairs < 1:
        raise ConfigurationError(f"--cost-pairs must be at least 1, got {pairs}")
    runs: dict[bool, list[dict]] = {False: [], True: []}
    for i in range(pairs):
        for enable in (False, True):
            what = f"the run with determinism {'on' if enable else 'off'} (pair {i + 1}/{pairs})"
            say(what)
            runs[enable].append(_run(target, args, enable, module, cwd, timeout, say, what))
    return CostResult(
        target, pairs, [r["seconds"] for r in runs[False]], [r["seconds"] for r in runs[True]], _ops(runs)
    )


def _run(target, args, enable: bool, module: bool, cwd: str, timeout, say, what: str) -> dict:
    """One run of the script, with the switch on or off: its result.

    Raises:
        RunError: it ended with a non-zero exit status.
    """
    from ..batch._script import run_child
    from ..compare import printable
    from ..errors import RunError

    spec = {"enable": enable, "module": module}
    env = {"FWD9M_SEED": "0"} if enable else None
    result = run_child(target, args, spec, cwd, timeout, say, "fwd9m.cost._child", env)
    if result.get("status", 0) != 0:
        text = "\n".join(f"  | {line}" for line in printable(result.get("_log", "")).splitlines()[-15:])
        raise RunError(
            f"{what} of {target} ended with exit status {result['status']}: no cost measured "
            f"(a failed run is not timed); the end of its output:\n{text}"
        )
    return result


def _ops(runs: dict[bool, list[dict]]) -> dict[str, list]:
    names = {n for rs in runs.values() for r in rs for n in r["ops"]}
    out: dict[str, Any] = {}
    for n in sorted(names):
        row = []
        for enable in (False, True):
            vals = [r["ops"].get(n, [0, 0.0]) for r in runs[enable]]
            row += [statistics.median(v[0] for v in vals), statistics.median(v[1] for v in vals)]
        out[n] = row
    return out
