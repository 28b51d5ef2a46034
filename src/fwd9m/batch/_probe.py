"""``fwd9m probe --batch-invariance``: each framework's probe ops (``probe_ops()`` of
``fwd9m/<fw>/_batch.py``) on the same samples in batches of several sizes, each in a
fresh process per framework; a size "varies" when some sample's row differs from its row
in the reference batch."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict, dataclass, field

from ..errors import RunError

SIZES = (1, 2, 3, 4, 5, 7, 8, 16, 32)
REFERENCE = 64
FRAMEWORKS = ("torch", "tensorflow", "jax")


@dataclass
class ProbeRow:
    framework: str
    op: str
    varies_at: list[int] = field(default_factory=list)  #: sizes where a sample's row differs
    max_ulp: int = 0
    error: str = ""

    def line(self) -> str:
        if self.error:
            return f"  {self.framework:<10} {self.op:<11} not measured: {self.error}"
        if not self.varies_at:
            return f"  {self.framework:<10} {self.op:<11} invariant"
        sizes = ", ".join(map(str, self.varies_at))
        return f"  {self.framework:<10} {self.op:<11} VARIES at batch {sizes} (up to {self.max_ulp} ULP)"


def measure(framework: str) -> list[ProbeRow]:
    """In this process: every probe op of ``framework``, reference batch of 64 rows."""
    import importlib

    import numpy as np

    from ._rows import diff

    ops = importlib.import_module(f"fwd9m.{framework}._batch").probe_ops()
    x = np.random.RandomState(1).randn(REFERENCE, 512).astype("float32")
    rows = []
    for name, fn in ops.items():
        row = ProbeRow(framework, name)
        try:
            ref = fn(x)
            for b in SIZES:
                out = fn(x[:b])
                ds = [d for d in (diff(out[i], ref[i]) for i in range(b)) if d is not None]
                if ds:
                    row.varies_at.append(b)
                    row.max_ulp = max([row.max_ulp, *(d["max_ulp"] or 0 for d in ds)])
        except Exception as exc:  # noqa: BLE001 - one op failing leaves the others measured
            row.error = f"{type(exc).__name__}: {exc}"[:200]
        rows.append(row)
    return rows


def probe_batch_invariance(frameworks: list[str] | None = None) -> list[ProbeRow]:
    """Measure each framework (default: those installed) in a fresh process.

    Raises:
        RunError: a framework's process gave no result.
    """
    import importlib.util

    names = frameworks or [f for f in FRAMEWORKS if importlib.util.find_spec(f) is not None]
    out: list[ProbeRow] = []
    for name in names:
        done = subprocess.run(
            [sys.executable, "-m", "fwd9m.batch._probe", name], capture_output=True, text=True, timeout=600
        )
        try:
            out += [ProbeRow(**r) for r in json.loads(done.stdout.strip().splitlines()[-1])]
        except (ValueError, IndexError, TypeError):
            raise RunError(f"probing {name} gave no result: {done.stderr.strip()[-500:]}") from None
    return out


def render(rows: list[ProbeRow]) -> str:
    head = (
        f"Batch invariance on this machine: each op on the same samples in batches of "
        f"{', '.join(map(str, SIZES))}, each sample's row compared with its row in a batch of {REFERENCE}"
    )
    return "\n".join([head, *(r.line() for r in rows)])


if __name__ == "__main__":
    print(json.dumps([asdict(r) for r in measure(sys.argv[1])]))
