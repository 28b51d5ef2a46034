"""The capture of one op's whole call, for replay (:mod:`fwd9m.debug._replay`): a
recorder hands :func:`take_call` the call of an op the capture spec selects, and the
framework's ``_replay`` module (found through the registry) writes its arguments."""

from __future__ import annotations

import importlib
import json
import os

__all__ = ["MAX_CALLS", "backend_module", "capture_path", "take_call"]

#: capture files one trace may get (each op a window selects: SEQ:RADIUS is bounded)
MAX_CALLS = 64


def backend_module(framework: str):
    """The replay module of a framework's package (``fwd9m.torch._replay``); the
    registry validates the name."""
    from .._frameworks import backend

    return importlib.import_module(f"fwd9m.{backend(framework).name}._replay")


def capture_path(trace: str, seq: int) -> str:
    return f"{os.fspath(trace)}.op{int(seq)}.npz"


def take_call(rec, seq: int, framework: str, *call) -> None:
    """Recorder hook, for an op the capture spec selects by sequence window: write its
    whole call to :func:`capture_path`. Never overwrites a file; an argument that cannot
    be written exactly gives a capture holding only the reason (replay then says so)."""
    if not any(a <= seq <= b for a, b in rec.capture.windows):
        return
    taken = getattr(rec, "_calls_taken", 0)
    if taken >= MAX_CALLS:
        return
    rec._calls_taken = taken + 1
    import numpy as np

    backend = backend_module(framework)
    try:
        spec, arrays = backend.capture(*call)
    except backend.Unrebuildable as exc:
        spec, arrays = {"framework": framework, "error": f"the op has {exc}"}, {}
    except Exception as exc:  # noqa: BLE001 - never the program's failure, nor an extra trace record
        # (a jit call that donated its inputs has them deleted by the time JAX returns)
        spec, arrays = (
            {"framework": framework, "error": f"capturing it failed ({type(exc).__name__}: {str(exc)[:200]})"},
            {},
        )
    spec["seq"] = seq
    data = json.dumps(spec).encode("utf-8")
    try:
        with open(capture_path(rec.writer.path, seq), "xb") as f:
            np.savez(f, call=np.frombuffer(data, dtype=np.uint8), **arrays)
    except FileExistsError:
        pass
