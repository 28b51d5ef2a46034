"""PyTorch side of :mod:`fwd9m.cost`: the wall time of every aten op, by op name."""

from __future__ import annotations

import time


class OpTimer:
    """Sums the wall time of each aten op run while started (CPU ops: the time is the
    op's; a CUDA op's launch only, unless the caller synchronises)."""

    def __init__(self) -> None:
        self.ops: dict[str, list] = {}
        self._mode = None

    def _on_op(self, func, args, kwargs):
        t0 = time.perf_counter()
        out = func(*args, **kwargs)
        dt = time.perf_counter() - t0
        name = f"{func.namespace}::{func.overloadpacket.__name__}"  # public OpOverload API: aten::add, all overloads
        slot = self.ops.setdefault(name, [0, 0.0])
        slot[0] += 1
        slot[1] += dt
        return out

    def start(self) -> None:
        from ._private import dispatch_mode

        self._mode = dispatch_mode(self._on_op, compiled=True)
        self._mode.__enter__()

    def stop(self) -> dict[str, list]:
        if self._mode is not None:
            self._mode.__exit__(None, None, None)
            self._mode = None
        return self.ops
