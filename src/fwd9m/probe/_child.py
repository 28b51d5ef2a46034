"""The probe's child process: one framework, device, switch setting and thread count.

Run as ``python -m fwd9m.probe._child``; reads one JSON request from stdin
(``framework``, ``device``, ``switch``, ``threads``, ``repeat``, ``items``: each a
``key``, ``inputs`` and ``run``) and writes JSON lines to its original stdout: ``start``
(devices seen), one ``progress`` per repeat, one ``result`` per item, ``end``. With
``"mode": "cost"`` (and ``switches``, ``min_seconds``) each item is timed instead
(:mod:`fwd9m.probe._timing`), ``repeat`` samples per setting. The
framework's own output goes to stderr. Nothing is unpickled; every value crossing the
process boundary is JSON.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import sys
import time
import traceback

#: max ULP is computed for at most this many distinct outputs (each against the first)
_ULP_OUTPUTS = 8


def _emit(stream, **event) -> None:
    stream.write(json.dumps(event) + "\n")
    stream.flush()


@functools.lru_cache(maxsize=256)
def _compiled(code: str):
    """(code object, is an expression), once per code text: its lambdas then keep one
    ``__code__`` across repeats, which the JAX probes' compile caches key on."""
    try:
        return compile(code, "<probe>", "eval"), True
    except SyntaxError:
        return compile(code, "<probe>", "exec"), False


def _execute(code: str, ns: dict):
    """The value of ``code``: an expression, or statements that set ``out``."""
    compiled, expression = _compiled(code)
    if expression:
        return eval(compiled, ns)
    exec(compiled, ns)  # noqa: S102
    if "out" not in ns:
        raise ValueError("probe code set no 'out'")
    return ns["out"]


def max_ulp(np, a, b) -> int | None:
    """Largest distance in ULPs between float arrays of one shape (None: not floats)."""
    from ..compare._bits import _ordered

    if a.dtype != b.dtype or a.shape != b.shape or a.dtype.kind != "f":
        return None
    size = a.dtype.itemsize
    ia = _ordered(np, np.ascontiguousarray(a).view(f"u{size}").copy(), size).astype(np.int64)
    ib = _ordered(np, np.ascontiguousarray(b).view(f"u{size}").copy(), size).astype(np.int64)
    return int(np.abs(ia - ib).max()) if ia.size else 0


def _digest(arrays) -> str:
    from .. import fingerprint

    return ":".join(f"{a.dtype}{list(a.shape)}={fingerprint.numpy_digest(a):016x}" for a in arrays)


def probe_item(backend, item: dict, device: str, repeat: int, stream) -> dict:
    """Run one item ``repeat`` times; its classification and measurements."""
    import numpy as np

    from ._specs import draw

    inputs = {n: tuple(v[:1]) + (tuple(v[1]),) + tuple(v[2:]) for n, v in item.get("inputs", {}).items()}
    arrays = draw(inputs, item.get("seed_key", item["key"]))
    seen: dict[str, int] = {}
    first = None
    ulp = None
    start = time.perf_counter()
    for r in range(repeat):
        _emit(stream, event="progress", key=item["key"], repeat=r + 1, of=repeat)
        ns = backend.namespace(device)
        ns.update(backend.convert(arrays, device))
        try:
            with backend.placement(device):
                outs = backend.to_numpy(_execute(item["run"], ns))
        except Exception as exc:  # noqa: BLE001 - the op's failure is the measurement
            status = "raises" if backend.is_switch_error(exc) else "error"
            return {
                "status": status,
                "error": f"{type(exc).__name__}: {exc}"[:400],
                "distinct": len(seen),
                "repeats": r,
                "seconds": time.perf_counter() - start,
            }
        key = _digest(outs)
        if key not in seen:
            seen[key] = r
            if first is None:
                first = outs
            elif len(seen) <= _ULP_OUTPUTS:
                for a, b in zip(first, outs):
                    u = max_ulp(np, a, b)
                    if u is not None:
                        ulp = u if ulp is None else max(ulp, u)
    return {
        "status": "nondeterministic" if len(seen) > 1 else "deterministic",
        "distinct": len(seen),
        "repeats": repeat,
        "max_ulp": ulp,
        "seconds": time.perf_counter() - start,
    }


def _measure(backend, item: dict, request: dict, proto) -> dict:
    """The item's result: its classification, or (``"mode": "cost"``) its timings."""
    if request.get("mode") != "cost":
        return probe_item(backend, item, request["device"], int(request["repeat"]), proto)
    from ._timing import time_item

    _emit(proto, event="progress", key=item["key"], repeat=1, of=1)
    switches = [bool(s) for s in request["switches"]]
    return time_item(backend, item, request["device"], switches, int(request["repeat"]), request["min_seconds"])


def main() -> int:
    proto = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # the framework's prints go to stderr, never into the protocol
    sys.stdout = sys.stderr
    request = json.loads(sys.stdin.read())
    backend = importlib.import_module(f"fwd9m.probe._{request['framework']}")
    try:
        found = backend.setup(request["device"], bool(request["switch"]), int(request["threads"]))
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which raises
        _emit(proto, event="fatal", error=f"{type(exc).__name__}: {exc}"[:600])
        return 2
    _emit(proto, event="start", devices=found)
    if request["device"] not in found:
        _emit(
            proto,
            event="fatal",
            missing=request["device"],
            devices=found,
            error=f"device {request['device']} is not there; {request['framework']} sees: {', '.join(found)}",
        )
        return 2
    for item in request["items"]:
        try:
            result = _measure(backend, item, request, proto)
        except Exception as exc:  # noqa: BLE001 - a broken probe is its own result
            result = {"status": "error", "error": "".join(traceback.format_exception_only(type(exc), exc))[:400]}
        _emit(proto, event="result", key=item["key"], **result)
    _emit(proto, event="end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
