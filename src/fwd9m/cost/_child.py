"""Child process of ``fwd9m check --cost``: run a script with the framework's determinism
switch on or off, timing the whole run and each op (PyTorch), and write them as JSON.

``python -m fwd9m.cost._child OUT SPEC SCRIPT [ARGS...]``; SPEC: ``{"enable": bool, "module": bool}``.
"""

from __future__ import annotations

import json
import sys
import time


def main(argv: list[str]) -> int:
    out, spec_text, target, *args = argv
    spec = json.loads(spec_text)
    from .._import_hook import after_import
    from .._runtime import bootstrap
    from .._runtime.launch import run_as_main

    if spec["enable"]:
        from ..distributed._startup import after_enable

        bootstrap.install(then=after_enable)  # as `fwd9m run --seed 0`: each framework enabled when imported
    timers: list = []

    def timed(name: str) -> None:
        from ..torch._cost import OpTimer

        timers.append(OpTimer())
        timers[-1].start()

    after_import(["torch"], timed)
    t0 = time.perf_counter()
    status = run_as_main(target, args, module=bool(spec.get("module")))
    seconds = time.perf_counter() - t0
    ops = timers[0].stop() if timers else {}
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"seconds": seconds, "ops": ops, "status": status}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
