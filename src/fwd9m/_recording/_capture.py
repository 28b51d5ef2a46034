"""The capture of one op's whole call, for replay (:mod:`fwd9m.debug._replay`): a
recorder hands :func:`take_call` the call of an op the capture spec selects, and the
framework's ``_replay`` module (found through the registry) writes its arguments."""

from __future__ import annotations

import importlib
import json
import os

__all__ = ["ENV_KEEP_CALLS", "MAX_CALLS", "backend_module", "capture_path", "keep_call", "keep_budget", "take_call"]

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
    _write_call(rec, seq, framework, call)


#: set by ``fwd9m debug``'s early stop in op-level run 1 of one step: how many bytes of
#: input tensors the run may write as whole calls (:func:`keep_call`)
ENV_KEEP_CALLS = "FWD9M_DEBUG_KEEP_CALLS"


def keep_budget() -> int:
    """The bytes :data:`ENV_KEEP_CALLS` allows (0: none)."""
    try:
        return max(0, int(os.environ.get(ENV_KEEP_CALLS, "0")))
    except ValueError:
        return 0


def keep_call(rec, seq: int, framework: str, *call) -> bool:
    """Recorder hook in an op-level run of one step under :data:`ENV_KEEP_CALLS`: write
    the whole call of op ``seq`` (as :func:`take_call` does) while the run's budget lasts,
    so that a culprit among them is replayed without a targeted run; False once the
    budget is spent (the ops after it are not kept: the replay then needs its run)."""
    left = getattr(rec, "_keep_left", None)
    if left is None:
        left = keep_budget()
    if left <= 0:
        rec._keep_left = 0
        return False
    rec._keep_left = left - _write_call(rec, seq, framework, call)
    return True


def _write_call(rec, seq: int, framework: str, call: tuple) -> int:
    """Write op ``seq``'s whole call beside the trace; the bytes of its tensors (0 when
    the file exists or the call cannot be written exactly)."""
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
        return 0
    return sum(a.nbytes for a in arrays.values())
