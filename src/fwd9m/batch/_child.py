"""Child process of ``fwd9m check|debug --vary batch``: run a script up to the first
call of its model (the outermost PyTorch module or Keras model called, or the function
named by ``--entry``), then check that call's inputs for batch invariance and write the
result as JSON.

``python -m fwd9m.batch._child OUT SPEC TARGET [ARGS...]``: SPEC is a JSON object
(``mode`` "check" or "debug", ``module``, ``entry``, ``batch_dim``, ``sizes``).
Exit status 0 when a result was written, 2 when none could be.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

#: frameworks whose model calls are found without --entry (registry names)
HOOKED = ("torch", "keras")


class Captured(BaseException):
    """Raised at the model's first call: the script stops there (a BaseException, so
    that the script's ``except Exception`` does not swallow it)."""

    def __init__(self, fw: Any, model: Any, args: tuple, kwargs: dict):
        from .._recording._common import user_location

        super().__init__("captured")
        self.fw, self.model, self.args, self.kwargs = fw, model, args, kwargs
        self.where = user_location(2)  #: the script's line that called the model


def _hook_frameworks() -> None:
    from .._import_hook import after_import

    def hooked(name: str) -> None:
        import importlib

        fw = importlib.import_module(f"fwd9m.{name}._batch")
        undo: list = []

        def on_call(model, args, kwargs):
            if fw.concrete(args, kwargs):
                for u in undo:
                    u()  # once: the checks call the model again
                raise Captured(fw, model, args, kwargs)

        undo.append(fw.first_call(on_call))

    after_import(list(HOOKED), hooked)


def _hook_entry(entry: str) -> None:
    """Stop at the first call of the function named ``entry`` (``name`` in the script or
    ``module:name``), with its arguments."""
    modname, _, name = entry.rpartition(":")

    def tracer(frame, event, arg):
        code = frame.f_code
        if code.co_name != name or (modname and frame.f_globals.get("__name__") != modname):
            return None
        fn = frame.f_globals.get(name)
        if fn is None or getattr(fn, "__code__", None) is not code:
            return None
        n = code.co_argcount + code.co_kwonlyargcount
        names = code.co_varnames[:n]
        args = tuple(frame.f_locals[k] for k in names[: code.co_argcount])
        kwargs = {k: frame.f_locals[k] for k in names[code.co_argcount :]}
        sys.settrace(None)
        raise Captured(None, fn, args, kwargs)

    sys.settrace(tracer)


def _run_script(target: str, module: bool, args: list[str]) -> Captured | None:
    import runpy

    sys.argv = [target, *args]
    try:
        if module:
            sys.path.insert(0, os.getcwd())
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
            runpy.run_path(target, run_name="__main__")
    except Captured as c:
        return c
    except SystemExit:
        pass
    finally:
        sys.settrace(None)
    return None


def analyse(c: Captured, spec: dict) -> dict:
    """Check (or debug) the captured call for batch invariance: the result as a dict."""
    from ._call import Call

    call = Call.of(c.fw, c.model, c.args, c.kwargs, spec.get("batch_dim"))
    if spec["mode"] == "debug":
        from ._debug import debug_invariance

        sizes = spec.get("sizes") or None
        res = debug_invariance(call.fn, call.items, sizes=sizes, batch_dim=call.batch_dim, model=c.model)
        if res.culprit is not None and not res.culprit["location"] and c.where:
            res.culprit["location"] = f"(the model's call: {c.where})"
        res.notes[:0] = call.notes
        return res.to_dict()
    from ._check import check_invariance

    res = check_invariance(call.fn, call.items, sizes=spec.get("sizes"), batch_dim=call.batch_dim, model=c.model)
    res.notes[:0] = [n + (f", at {c.where}" if c.where else "") for n in call.notes]
    return res.to_dict()


def main(argv: list[str]) -> int:
    out, spec_text, target, *args = argv
    spec = json.loads(spec_text)
    if spec.get("entry"):
        _hook_entry(spec["entry"])
    else:
        _hook_frameworks()
    c = _run_script(target, bool(spec.get("module")), args)
    if c is None:
        what = (
            f"a call of {spec['entry']}"
            if spec.get("entry")
            else ("a call of a PyTorch module (one with parameters or buffers, outside data loading) or a Keras model")
        )
        result: dict = {"error": f"the script ended without {what} on arrays; name the function with --entry"}
    else:
        try:
            result = analyse(c, spec)
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which exits 2
            result = {"error": f"{type(exc).__name__}: {exc}"}
    with open(out, "w", encoding="utf-8") as f:
        json.dump(result, f)
    return 2 if "error" in result else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
