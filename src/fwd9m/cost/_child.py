"""Child process of ``fwd9m check --cost``: run a script with the framework's determinism
switch on or off, timing the whole run and each op (PyTorch), and write them as JSON.

``python -m fwd9m.cost._child OUT SPEC SCRIPT [ARGS...]``; SPEC: ``{"enable": bool, "module": bool}``.
"""

from __future__ import annotations

import json
import os
import sys
import time


def main(argv: list[str]) -> int:
    out, spec_text, target, *args = argv
    spec = json.loads(spec_text)
    from .._runtime import bootstrap

    if spec["enable"]:
        bootstrap.install()  # as `fwd9m run --seed 0`: each framework enabled when imported
    timers: list = []

    def timed(name: str) -> None:
        from ..torch._cost import OpTimer

        timers.append(OpTimer())
        timers[-1].start()

    bootstrap.after_import(["torch"], timed)
    t0 = time.perf_counter()
    status = _run(target, bool(spec.get("module")), args)
    seconds = time.perf_counter() - t0
    ops = timers[0].stop() if timers else {}
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"seconds": seconds, "ops": ops, "status": status}, f)
    return 0


def _run(target: str, module: bool, args: list[str]) -> int:
    import runpy

    sys.argv = [target, *args]
    try:
        if module:
            sys.path.insert(0, os.getcwd())
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
            runpy.run_path(target, run_name="__main__")
    except SystemExit as exc:
        if exc.code is None:
            return 0  # sys.exit() and sys.exit(None) succeed
        return exc.code if isinstance(exc.code, int) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
