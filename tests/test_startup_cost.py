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
