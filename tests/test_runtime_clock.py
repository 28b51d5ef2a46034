"""The clock each run of fwd9m check reads (fwd9m._runtime.clock): moved for the
user's own code only, by another amount in each run."""

from __future__ import annotations

import os
import subprocess
import sys

from fwd9m._runtime import clock

USER = """import logging
import time

print(round(time.time() - logging.makeLogRecord({}).created))
print(time.perf_counter_ns() - time.perf_counter_ns() <= 0)
"""


def _run(tmp_path, shift: str) -> list[str]:
    (tmp_path / "user.py").write_text(USER)
    env = {**os.environ, clock.ENV_SHIFT: shift}
    code = "from fwd9m._runtime import clock; clock.install(); import runpy; runpy.run_path('user.py')"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_the_users_code_reads_the_moved_clock_and_libraries_the_true_one(tmp_path):
    assert _run(tmp_path, "61.37") == ["61", "True"]  # logging (a library) reads the true clock
    assert _run(tmp_path, "0") == ["0", "True"]


def test_each_run_gets_another_shift_of_more_than_a_minute():
    shifts = [float(clock.shift_for(k)) for k in range(clock.CYCLE)]
    assert shifts[0] == 0 and len(set(shifts)) == clock.CYCLE
    assert min(b - a for a, b in zip(shifts, shifts[1:])) > 60 and max(shifts) < 3600
