"""Measure on this machine which catalog ops are nondeterministic (``fwd9m probe``).

Each op entry of the catalog has a runnable probe (``specs.toml``, keyed by entry id:
inputs with shapes and dtypes matching the entry's conditions, and the call). For each
framework and switch setting a fresh child process (:mod:`fwd9m.probe._child`) runs
every probe ``repeat`` times on each device and thread count, and each entry is
classified: deterministic, nondeterministic, raises (under the switch), or error (the
probe could not run). The measurement is compared with what the catalog says for the
installed version and device.

>>> from fwd9m import probe                                       # doctest: +SKIP
>>> report = probe.probe(frameworks=["torch"], switch="both")     # doctest: +SKIP
>>> print(report.render())                                        # doctest: +SKIP
>>> print(probe.probe_cost(frameworks=["torch"]).render())        # doctest: +SKIP

:func:`probe_cost` (``fwd9m probe --cost``) times each op with the switch off and on
instead (:mod:`fwd9m.probe._cost`).

The parent imports no framework; children talk JSON, never pickle.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from ..errors import ConfigurationError, RunError

__all__ = [
    "FRAMEWORKS",
    "SWITCHES",
    "CostReport",
    "CostRow",
    "ProbeReport",
    "Result",
    "probe",
    "probe_cost",
    "probe_items",
]

#: frameworks with op entries and a probe backend (Keras runs on one of them)
FRAMEWORKS = ("torch", "tensorflow", "jax")
SWITCHES = {"off": (False,), "on": (True,), "both": (False, True)}
#: repeats per probe by default: each probe shows a nondeterministic kernel in most
#: repeats (heavy contention), so 5 give a false "deterministic" rarely; see the README
DEFAULT_REPEAT = 5
CHILD_TIMEOUT_S = 900.0


@dataclass
class Result:
    """One probe of one entry (or trace op kind) at one setting."""

    key: str
    framework: str
    device: str
    switch: bool
    threads: int
    status: str  #: deterministic, nondeterministic, raises, error
    distinct: int = 0
    repeats: int = 0
    max_ulp: int | None = None
    error: str | None = None
    seconds: float = 0.0
    op: str = ""  #: what was run (trace mode: the op kind)

    def measured(self) -> str:
        """``"7 distinct outputs in 20 repeats (max 50 ULP)"`` and the like."""
        if self.status == "nondeterministic":
            ulp = f" (max {self.max_ulp} ULP)" if self.max_ulp is not None else ""
            return f"{self.distinct} distinct outputs in {self.repeats} repeats{ulp}"
        if self.status == "deterministic":
            return f"1 output in {self.repeats} repeats"
        return self.error or self.status


@dataclass
class ProbeReport:
    results: list[Result]
    environment: dict
    settings: dict
    skipped: dict[str, str] = field(default_factory=dict)  #: key -> why it has no probe
    expected: dict = field(default_factory=dict)  #: (key, device, switch) -> catalog's behaviour

    def contradictions(self) -> list[str]:
        """``catalog says X, measured Y`` for every measurement the catalog contradicts
        (certain ones: nondeterminism observed, or raising; not 'not observed')."""
        from ._compare import contradictions

        return contradictions(self)

    def to_dict(self) -> dict:
        return {
            "schema": "fwd9m.probe",
            "schema_version": 1,
            "settings": self.settings,
            "environment": self.environment,
            "results": [asdict(r) | {"catalog": self.expected.get(_ekey(r))} for r in self.results],
            "skipped": self.skipped,
            "contradictions": self.contradictions(),
        }

    def render(self) -> str:
        from ._compare import render

        return render(self)


def _ekey(r: Result) -> str:
    return f"{r.key}|{r.device}|{'on' if r.switch else 'off'}"


def _devices_arg(device: str | list[str]) -> list[str]:
    items = [device] if isinstance(device, str) else list(device)
    out = []
    for d in items:
        d = d.strip().lower()
        if d in ("all", "cpu") or (d.startswith("cuda:") and d[5:].isdigit()):
            out.append(d)
        elif d in ("cuda", "gpu"):
            out.append("cuda:0")
        else:
            raise ConfigurationError(f"unknown device {d!r}; use cpu, cuda:N (cuda:0) or all")
    return out


def _frameworks_arg(frameworks) -> list[str]:
    from .. import _frameworks

    if frameworks is None:
        return [f for f in FRAMEWORKS if _frameworks.installed_version(f)]
    names = [frameworks] if isinstance(frameworks, str) else list(frameworks)
    out = []
    for n in names:
        n = {"tf": "tensorflow", "keras": "tensorflow"}.get(n.strip().lower(), n.strip().lower())
        if n not in FRAMEWORKS:
            raise ConfigurationError(f"fwd9m probe has probes for {', '.join(FRAMEWORKS)}, not {n!r}")
        if not _frameworks.installed_version(n):
            raise ConfigurationError(f"{n} is not installed here; pip install it, or probe another framework")
        if n not in out:
            out.append(n)
    return out


def _threads_arg(threads) -> list[int]:
    if threads is None:
        return [os.cpu_count() or 1]
    items = [threads] if isinstance(threads, int) else list(threads)
    if not items or any(not isinstance(t, int) or t < 1 for t in items):
        raise ConfigurationError(f"threads must be whole numbers >= 1, got {threads!r}")
    return items


def _spec_items(framework: str, keys: list[str] | None) -> tuple[list[dict], dict[str, str]]:
    from .. import catalog
    from ._specs import load

    specs = load()
    items, skipped = [], {}
    for e in catalog.entries(framework):
        if e.kind != "op" or (keys is not None and e.id not in keys):
            continue
        spec = specs.get(e.id)
        if spec is None:
            skipped[e.id] = "no probe written for this entry yet"
        elif spec.skip:
            skipped[e.id] = spec.skip
        else:
            items.append({"key": e.id, "inputs": spec.inputs, "run": spec.run, "op": ", ".join(e.ops[:2])})
    return items, skipped


def probe(
    frameworks: str | list[str] | None = None,
    device: str | list[str] = "cpu",
    switch: str = "both",
    threads: int | list[int] | None = None,
    repeat: int = DEFAULT_REPEAT,
    entries: list[str] | None = None,
    progress: Callable[[dict], None] | None = None,
) -> ProbeReport:
    """Probe the catalog's op entries of ``frameworks`` (default: those installed).

    Args:
        device: "cpu", "cuda:N" or "all" (every device each framework sees), or a list.
        switch: "off", "on" (the framework's determinism switch) or "both".
        threads: CPU thread counts to probe at (default: this machine's CPU count).
        repeat: runs of each probe per setting (>= 2).
        entries: only these catalog entry ids.
        progress: called with each event of the children (framework, device, key, repeat).
    Raises:
        ConfigurationError: bad argument, a framework not installed, a device not there.
        RunError: a child process died.
    """
    fws = _frameworks_arg(frameworks)
    keys = list(entries) if entries is not None else None
    plan = []
    skipped: dict[str, str] = {}
    for fw in fws:
        items, sk = _spec_items(fw, keys)
        skipped.update(sk)
        plan.append((fw, items))
    if keys is not None:
        known = {i["key"] for _, its in plan for i in its} | set(skipped)
        unknown = [k for k in keys if k not in known]
        if unknown:
            raise ConfigurationError(
                f"no op entry {', '.join(map(repr, unknown))} for {', '.join(fws)}; "
                f"list them with: fwd9m catalog kind:op"
            )
    report = probe_items(plan, device=device, switch=switch, threads=threads, repeat=repeat, progress=progress)
    report.skipped = skipped
    from ._compare import expectations

    report.expected = expectations(report.results)
    return report


def probe_items(
    plan: list[tuple[str, list[dict]]],
    device="cpu",
    switch: str = "both",
    threads=None,
    repeat: int = DEFAULT_REPEAT,
    progress: Callable[[dict], None] | None = None,
) -> ProbeReport:
    """Run ``plan`` (framework, items: ``key``, ``inputs``, ``run``) at every setting."""
    from .. import environment

    if switch not in SWITCHES:
        raise ConfigurationError(f"switch must be off, on or both, not {switch!r}")
    if not isinstance(repeat, int) or repeat < 2:
        raise ConfigurationError(f"repeat must be a whole number >= 2 (one run shows no difference), got {repeat!r}")
    devices = _devices_arg(device)
    thread_counts = _threads_arg(threads)
    results: list[Result] = []
    for fw, items in plan:
        if not items:
            continue
        for sw in SWITCHES[switch]:
            for n in thread_counts:
                results += _run_child(fw, items, devices, sw, n, repeat, progress)
    settings = {
        "frameworks": [fw for fw, _ in plan],
        "devices": devices,
        "switch": switch,
        "threads": thread_counts,
        "repeat": repeat,
    }
    env = environment.collect(import_frameworks=False)
    return ProbeReport(results, env, settings)


def _run_child(
    fw: str, items: list[dict], devices: list[str], sw: bool, threads: int, repeat: int, progress
) -> list[Result]:
    import importlib

    backend = importlib.import_module(f"fwd9m.probe._{fw}")
    env = dict(os.environ, **backend.child_env(sw, threads))
    out: list[Result] = []
    for dev in _expand(devices, fw, env):
        request = {"framework": fw, "device": dev, "switch": sw, "threads": threads, "repeat": repeat, "items": items}
        for ev in _child_events(request, env):
            if ev.get("event") == "fatal":
                raise (
                    ConfigurationError(f"fwd9m probe {fw} on {dev}: {ev.get('error')}")
                    if ev.get("missing")
                    else RunError(f"fwd9m probe: the {fw} child could not start: {ev.get('error')}")
                )
            if progress is not None and ev.get("event") in ("progress", "result"):
                progress(
                    dict(
                        ev,
                        framework=fw,
                        device=dev,
                        switch=sw,
                        threads=threads,
                        index=len(out) + (ev["event"] == "progress"),
                        total=len(items),
                    )
                )
            if ev.get("event") == "result":
                op = next((i.get("op", "") for i in items if i["key"] == ev["key"]), "")
                out.append(
                    Result(
                        ev["key"],
                        fw,
                        dev,
                        sw,
                        threads,
                        ev.get("status", "error"),
                        ev.get("distinct", 0),
                        ev.get("repeats", 0),
                        ev.get("max_ulp"),
                        ev.get("error"),
                        ev.get("seconds", 0.0),
                        op,
                    )
                )
    return out


_DEVICES_SEEN: dict[str, list[str]] = {}


def _expand(devices: list[str], fw: str, env: dict) -> list[str]:
    """``all`` -> every device the framework sees (asked once, in a child)."""
    if "all" not in devices:
        return devices
    if fw not in _DEVICES_SEEN:
        request = {"framework": fw, "device": "cpu", "switch": False, "threads": 1, "repeat": 2, "items": []}
        for ev in _child_events(request, env):
            if ev.get("event") == "start":
                _DEVICES_SEEN[fw] = ev.get("devices", ["cpu"])
    seen = _DEVICES_SEEN.get(fw, ["cpu"])
    return [d for d in seen if d in devices or "all" in devices]


def _child_events(request: dict, env: dict):
    """Start a child, feed it ``request``, yield its JSON events as they come."""
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "fwd9m.probe._child"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            env=env,
        )
        timer = threading.Timer(CHILD_TIMEOUT_S, proc.kill)
        timer.start()
        try:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(json.dumps(request).encode())
            proc.stdin.close()
            ended = False
            for line in proc.stdout:
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue
                ended = ended or ev.get("event") in ("end", "fatal")
                yield ev
            rc = proc.wait()
        finally:
            timer.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if not ended:
            err.seek(0)
            tail = err.read()[-1500:].decode("utf-8", "replace")
            raise RunError(
                f"fwd9m probe: the {request['framework']} child on {request['device']} died "
                f"(exit {rc}) before it finished; its last output:\n{tail}"
            )


from ._cost import CostReport, CostRow, probe_cost  # noqa: E402 - it uses the helpers above
