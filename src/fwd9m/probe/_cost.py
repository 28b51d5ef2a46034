"""``fwd9m probe --cost``: what the determinism switch costs each catalog op (or each op
kind of a kept trace) on this machine, as the ratio of its time with the switch on to
its time with the switch off.

PyTorch's switch is toggled in one child process, in alternating pairs; a framework
whose switch cannot be toggled (TensorFlow's op determinism cannot be turned off once
on; JAX's is an XLA flag read at start-up) is timed in two fresh child processes, off
then on, whose samples are paired in order. The spread is the ratios' min and max over
the pairs. Times are ratios within one run, never absolute figures to compare across
machines. On CUDA, PyTorch's child has ``CUBLAS_WORKSPACE_CONFIG`` set for both sides
(the switch needs it before cuBLAS starts, :mod:`fwd9m.probe._torch`), so the ratio
leaves out what that setting itself costs.
"""

from __future__ import annotations

import importlib
import os
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from ..errors import ConfigurationError, RunError

__all__ = ["CostReport", "CostRow", "probe_cost"]

#: alternating off/on pairs per op by default
DEFAULT_PAIRS = 5
#: a sample lasts about this long (calls repeated), so a short op's time is not a timer's tick
MIN_SAMPLE_S = 0.02


@dataclass
class CostRow:
    """One op (catalog entry or trace op kind) at one device and thread count."""

    key: str
    framework: str
    device: str
    threads: int
    status: str  #: timed, raises (under the switch), error
    op: str = ""
    off: list[float] = field(default_factory=list)  #: seconds per call, one per pair
    on: list[float] = field(default_factory=list)
    calls: int = 0  #: calls per sample
    in_process: bool = True  #: both sides in one process (False: two processes)
    count: int = 0  #: trace mode: how often the trace ran this op kind
    entry_devices: list[str] = field(default_factory=list)  #: the catalog entry's devices
    error: str | None = None

    @property
    def ratios(self) -> list[float]:
        return [b / a for a, b in zip(self.off, self.on) if a > 0]

    def ratio(self) -> float | None:
        r = self.ratios
        return statistics.median(r) if r else None

    def added(self) -> float | None:
        """Trace mode: seconds the switch adds to one run of the trace (medians x count)."""
        if not self.count or not self.ratios:
            return None
        return self.count * (statistics.median(self.on) - statistics.median(self.off))

    def to_dict(self) -> dict:
        r = self.ratios
        spread = {"ratio": self.ratio(), "ratio_min": min(r) if r else None, "ratio_max": max(r) if r else None}
        return asdict(self) | spread | {"ratios": r, "added_s": self.added()}


@dataclass
class CostReport:
    rows: list[CostRow]
    settings: dict
    environment: dict
    skipped: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "schema": "fwd9m.probe.cost",
            "schema_version": 1,
            "settings": self.settings,
            "environment": self.environment,
            "results": [r.to_dict() for r in self.rows],
            "skipped": self.skipped,
        }

    def render(self) -> str:
        from ._cost_render import render

        return render(self)


def probe_cost(
    frameworks: str | list[str] | None = None,
    device: str | list[str] = "cpu",
    entries: list[str] | None = None,
    trace: str | None = None,
    inputs: dict[str, str] | None = None,
    threads: int | list[int] | None = None,
    pairs: int = DEFAULT_PAIRS,
    min_seconds: float = MIN_SAMPLE_S,
    progress: Callable[[dict], None] | None = None,
) -> CostReport:
    """Time every catalog op entry of ``frameworks`` (default: those installed; or the
    op kinds of ``trace``) with the determinism switch off and on.

    Args:
        device: "cpu", "cuda:N" or "all", or a list.
        entries: only these catalog entry ids.
        trace: a kept debug trace (PyTorch): its op kinds at their recorded shapes.
        inputs: input name -> ``"dtype[shape]"`` or ``"dtype[shape]<bound"``, in place of
            the catalog probes' default shapes, for every entry with an input of that name.
        threads: CPU thread counts (default: this machine's CPU count).
        pairs: off/on pairs per op (>= 1).
        min_seconds: a sample's length at least (calls repeated).
        progress: called with each event of the children.
    Raises:
        ConfigurationError: bad argument, a framework not installed, an unknown entry.
        RunError: a child process died.
    """
    from . import _devices_arg, _threads_arg

    if not isinstance(pairs, int) or pairs < 1:
        raise ConfigurationError(f"pairs must be a whole number >= 1, got {pairs!r}")
    if not min_seconds > 0:
        raise ConfigurationError(f"min_seconds must be > 0, got {min_seconds!r}")
    plan, skipped = _plan(frameworks, entries, trace)
    if inputs:
        _override(plan, inputs, trace)
    devices, thread_counts = _devices_arg(device), _threads_arg(threads)
    rows: list[CostRow] = []
    for fw, items in plan:
        for n in thread_counts:
            rows += _time_framework(fw, items, devices, n, pairs, min_seconds, progress)
    from .. import environment

    settings = {
        "frameworks": [fw for fw, _ in plan],
        "devices": devices,
        "threads": thread_counts,
        "pairs": pairs,
        "min_sample_s": min_seconds,
        "trace": trace,
        "inputs": dict(inputs or {}),
    }
    return CostReport(rows, settings, environment.collect(import_frameworks=False), skipped)


def _plan(frameworks, entries, trace) -> tuple[list[tuple[str, list[dict]]], dict[str, str]]:
    from .. import catalog
    from . import _frameworks_arg, _spec_items

    if trace is not None:
        if entries:
            raise ConfigurationError("--entry picks catalog entries; with --trace the trace's ops are timed")
        from ._trace import trace_items

        fw, items, skipped = trace_items(trace)
        for it in items:  # the op alone is timed, its fresh inputs made once
            it["prepare"] = it["run"].replace("rebuild(", "call = prepared(", 1)
            it["run"] = "call()"
        return [(fw, items)], skipped
    plan, skipped = [], {}
    keys = list(entries) if entries is not None else None
    for fw in _frameworks_arg(frameworks):
        items, sk = _spec_items(fw, keys)
        for it in items:
            it["devices"] = list(catalog.get(it["key"]).devices)
        plan.append((fw, items))
        skipped.update(sk)
    if keys is not None:
        known = {i["key"] for _, its in plan for i in its} | set(skipped)
        unknown = [k for k in keys if k not in known]
        if unknown:
            raise ConfigurationError(
                f"no op entry {', '.join(map(repr, unknown))} for {', '.join(fw for fw, _ in plan)}; "
                f"list them with: fwd9m catalog kind:op"
            )
    return [(fw, its) for fw, its in plan if its], skipped


def _override(plan: list[tuple[str, list[dict]]], inputs: dict[str, str], trace: str | None) -> None:
    """Given shapes in place of the probes' defaults (ConfigurationError: bad or unused)."""
    from ..errors import FileFormatError
    from ._specs import parse_input

    if trace is not None:
        raise ConfigurationError("--input sets a catalog probe's input; a trace's ops run at their recorded shapes")
    items = [it for _, its in plan for it in its]
    for name, text in inputs.items():
        try:
            parsed = parse_input(text, f"--input {name}")
        except FileFormatError as exc:
            raise ConfigurationError(str(exc)) from None
        users = [it for it in items if name in it["inputs"]]
        if not users:
            names = sorted({n for it in items for n in it["inputs"]})
            raise ConfigurationError(
                f"--input {name}: no probe here has an input {name!r}; they have: {', '.join(names)}"
            )
        for it in users:
            it["inputs"] = {**it["inputs"], name: parsed}


def _time_framework(fw, items, devices, threads, pairs, min_seconds, progress) -> list[CostRow]:
    """One framework's rows: one child toggling the switch, or two children (off, on)."""
    from . import _expand

    backend = importlib.import_module(f"fwd9m.probe._{fw}")
    in_process = hasattr(backend, "set_switch")
    rows: list[CostRow] = []
    for dev in _expand(devices, fw, dict(os.environ, **backend.child_env(False, threads))):
        sides = [[False, True]] if in_process else [[False], [True]]
        got: dict[str, dict] = {}
        for switches in sides:
            env = dict(os.environ, **backend.child_env(any(switches), threads))
            request = {
                "framework": fw,
                "device": dev,
                "switch": switches == [True],
                "threads": threads,
                "repeat": pairs,
                "items": items,
                "mode": "cost",
                "switches": switches,
                "min_seconds": min_seconds,
            }
            for key, res in _results(request, env, progress, len(items)):
                _merge(got.setdefault(key, {}), res)
        rows += [_row(it, got.get(it["key"], {}), fw, dev, threads, in_process) for it in items]
    return rows


def _merge(into: dict, res: dict) -> None:
    """Two processes' results of one item: an error or a raise wins over a timing."""
    if into.get("status") in ("raises", "error"):
        return
    if res.get("status") != "timed":
        into.clear()
    into.update({k: v for k, v in res.items() if k not in ("off", "on")})
    for side in ("off", "on"):
        if side in res:
            into[side] = res[side]


def _row(item: dict, res: dict, fw: str, dev: str, threads: int, in_process: bool) -> CostRow:
    status = res.get("status", "error")
    if status == "timed" and not (res.get("off") and res.get("on")):
        status = "error"
    return CostRow(
        item["key"],
        fw,
        dev,
        threads,
        status,
        op=item.get("op", ""),
        off=list(res.get("off", [])),
        on=list(res.get("on", [])),
        calls=int(res.get("calls", 0)),
        in_process=in_process,
        count=int(item.get("count", 0)),
        entry_devices=list(item.get("devices", [])),
        error=res.get("error") or (None if status != "error" else "no timing came back"),
    )


def _results(request: dict, env: dict, progress, total: int):
    """(key, result) of each item a child timed; the child's progress passed on."""
    from . import _child_events

    done = 0
    for ev in _child_events(request, env):
        if ev.get("event") == "fatal":
            raise (
                ConfigurationError(
                    f"fwd9m probe --cost {request['framework']} on {request['device']}: {ev.get('error')}"
                )
                if ev.get("missing")
                else RunError(
                    f"fwd9m probe --cost: the {request['framework']} child could not start: {ev.get('error')}"
                )
            )
        if ev.get("event") == "result":
            done += 1
            yield ev["key"], {k: v for k, v in ev.items() if k not in ("event", "key")}
        if progress is not None and ev.get("event") in ("progress", "result"):
            sides = "off and on" if len(request["switches"]) > 1 else ("on" if request["switches"][0] else "off")
            progress(
                dict(
                    ev,
                    framework=request["framework"],
                    device=request["device"],
                    sides=sides,
                    index=done + (ev["event"] == "progress"),
                    total=total,
                )
            )
