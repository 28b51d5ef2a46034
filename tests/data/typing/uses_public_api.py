"""A user's script, as a type checker sees it: every call here must type-check
(tests/test_typing.py runs mypy on it). Never run."""

from __future__ import annotations

import fwd9m
import fwd9m.debug
import fwd9m.rng
from fwd9m.check import CheckResult, check_script
from fwd9m.debug import DebugOptions, Report, debug_script, record_script

seed: int = fwd9m.seed_everything(0)
child: int = fwd9m.derive_seed(seed, "worker", 3)
changes = fwd9m.enable_determinism(seed=1)
state: dict = fwd9m.rng.state_dict()
fwd9m.rng.load_state_dict(state)
captured = fwd9m.capture_rng_state()
fwd9m.restore_rng_state(captured)

result: CheckResult = check_script("train.py", ["--epochs", "1"], runs=3, timeout=60.0)
same: CheckResult = fwd9m.check_script("train.py")
ok: bool = bool(result) and result.reproducible

options = DebugOptions(level="full", steps="0:2", frameworks=("torch",), timeout=600.0)
report: Report = debug_script("train.py", ["--epochs", "1"], options, progress=print)
again: Report = fwd9m.debug.debug_script("train.py")
text: str = report.render("json")
status: int = record_script("train.py", [], "run.trace", options)
other: Report = fwd9m.debug.diff("a.trace", "b.trace")
first_op: str | None = report.first.op if report.first is not None else None
