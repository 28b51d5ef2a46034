"""The code style the project keeps: ruff's lint rules and formatter, configured in
pyproject.toml ([tool.ruff]), clean over the repository."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO


def _ruff() -> str:
    exe = Path(sys.executable).with_name("ruff")
    found = str(exe) if exe.exists() else shutil.which("ruff")
    if not found:
        pytest.skip("ruff is not installed (it is in the dev extra: pip install -e '.[dev]')")
    return found


@pytest.mark.parametrize(
    "args", [["check", "--output-format", "concise", "."], ["format", "--check", "."]], ids=["lint", "format"]
)
def test_ruff_is_clean(args):
    done = subprocess.run([_ruff(), *args], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
