"""What fwd9m costs each process it starts, before the user's script runs."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import fwd9m


def test_the_suite_runs_fwd9m_from_bytecode():
    """tests/conftest.py compiles fwd9m before the tests start (PYTHONDONTWRITEBYTECODE
    would have every child compile it from source again)."""
    root = Path(fwd9m.__file__).parent
    for name in ("__init__.py", "_runtime/capture.py", "compare/_files.py", "steps/_session.py"):
        assert Path(importlib.util.cache_from_source(str(root / name))).is_file(), name


def test_fwd9m_run_of_a_plain_script_imports_no_check_package(tmp_path):
    """``fwd9m run`` asks which frameworks the script uses (fwd9m._lint_hints), not
    fwd9m.check (0.08 CPU s), nor fwd9m.compare for a path in a message (0.05 s), before it execs the
    script (-X importtime lists the imports of fwd9m run's own process)."""
    import subprocess
    import sys

    script = tmp_path / "s.py"
    script.write_text("print('ran')\n")
    p = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "fwd9m", "run", str(script)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    assert "ran" in p.stdout
    imported = [line.rsplit("|", 1)[-1].strip() for line in p.stderr.splitlines() if line.startswith("import time:")]
    assert "fwd9m._lint_hints" in imported
    assert not [m for m in imported if m.startswith(("fwd9m.check", "fwd9m.compare"))]
