"""The probe child's timing (``fwd9m probe --cost``): one item's call timed with the
determinism switch off and on.

A backend with ``set_switch(on)`` (PyTorch: ``use_deterministic_algorithms`` can be
toggled in one process) is timed in alternating pairs in this process, the order
flipped every pair (off-on, on-off, ...) so that a slow drift of the machine falls on
both sides. A backend without it (a switch that cannot be turned off once on, or one
read when the framework starts) is timed at the one setting its process was started
with; the parent pairs two such processes. Each sample is the mean of ``calls`` calls,
``calls`` chosen once (after a warm-up call at each setting) so that a sample lasts
about ``min_seconds``.
"""

from __future__ import annotations

import math
import time

from ._child import _execute


def _once(backend, item: dict, ns: dict, device: str) -> None:
    with backend.placement(device):
        out = _execute(item["run"], ns)
    wait = getattr(backend, "wait", None)
    if wait is not None:
        wait(out, device)


def _sample(backend, item: dict, ns: dict, device: str, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        _once(backend, item, ns, device)
    return (time.perf_counter() - start) / calls


def _namespace(backend, item: dict, device: str) -> dict:
    from ._specs import draw

    inputs = {n: tuple(v[:1]) + (tuple(v[1]),) + tuple(v[2:]) for n, v in item.get("inputs", {}).items()}
    ns = backend.namespace(device)
    ns.update(backend.convert(draw(inputs, item.get("seed_key", item["key"])), device))
    if item.get("prepare"):
        exec(item["prepare"], ns)  # noqa: S102 - the probe's own code (specs.toml, trace items)
    return ns


def time_item(backend, item: dict, device: str, switches: list[bool], pairs: int, min_seconds: float) -> dict:
    """``{"status": "timed", "calls": n, "off": [s, ...], "on": [s, ...]}`` (seconds per
    call, one per pair; a side not timed here is absent), or ``raises`` / ``error``."""
    ns = _namespace(backend, item, device)
    toggle = getattr(backend, "set_switch", None) if len(switches) > 1 else None
    longest = 0.0
    for sw in switches:  # warm-up: first-call costs (allocation, compilation) left out
        if toggle is not None:
            toggle(sw)
        try:
            longest = max(longest, _sample(backend, item, ns, device, 1))
        except Exception as exc:  # noqa: BLE001 - the op's failure is the measurement
            status = "raises" if sw and backend.is_switch_error(exc) else "error"
            return {"status": status, "error": f"{type(exc).__name__}: {exc}"[:400]}
    calls = max(1, math.ceil(min_seconds / max(longest, 1e-9)))
    samples: dict[str, list[float]] = {("on" if sw else "off"): [] for sw in switches}
    for p in range(pairs):
        for sw in switches if p % 2 == 0 else switches[::-1]:
            if toggle is not None:
                toggle(sw)
            samples["on" if sw else "off"].append(_sample(backend, item, ns, device, calls))
    if toggle is not None:
        toggle(False)
    return {"status": "timed", "calls": calls, **samples}
