"""Type checking of the public API: mypy (pinned in constraints.txt, configured in
pyproject.toml's ``[tool.mypy]``) on a file that uses the API as a user's code does
(tests/data/typing/uses_public_api.py) and on the modules that define it. A wrong
annotation there is a wrong promise to every user whose type checker reads it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
USER_FILE = "tests/data/typing/uses_public_api.py"
#: the modules that define the public names the user file calls
DEFINING = [
    "src/fwd9m/__init__.py",
    "src/fwd9m/errors.py",
    "src/fwd9m/check/__init__.py",
    "src/fwd9m/check/_api.py",
    "src/fwd9m/check/_script.py",
    "src/fwd9m/check/_result.py",
    "src/fwd9m/debug/__init__.py",
    "src/fwd9m/debug/_script.py",
    "src/fwd9m/debug/_compare.py",
    "src/fwd9m/seed/__init__.py",
    "src/fwd9m/rng/__init__.py",
    "src/fwd9m/_runtime/process.py",
]


def _mypy(tmp_path: Path, *files: str) -> subprocess.CompletedProcess:
    pytest.importorskip("mypy")
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            "pyproject.toml",
            "--cache-dir",
            str(tmp_path / "cache"),
            *files,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_public_api_type_checks_as_a_user_calls_it(tmp_path):
    p = _mypy(tmp_path, USER_FILE, *DEFINING)
    assert p.returncode == 0, p.stdout + p.stderr


def test_mypy_sees_the_lazy_names_and_their_types(tmp_path):
    """``import fwd9m`` loads its names lazily (a module ``__getattr__``, which a type
    checker reads as "anything goes"); the ``TYPE_CHECKING`` imports in
    ``fwd9m/__init__.py`` give them their real types, so a wrong call is found."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import fwd9m\nfrom fwd9m.debug import DebugOptions, debug_script\n"
        "x: str = fwd9m.seed_everything(0)\n"
        "debug_script('train.py', options='full')\n"
        "fwd9m.check_script('train.py', runs='2')\n"
        "DebugOptions(levels='full')\n"
    )
    p = _mypy(tmp_path, str(bad))
    assert p.returncode == 1, p.stdout + p.stderr
    for line in (3, 4, 5, 6):
        assert f"bad.py:{line}: error" in p.stdout, p.stdout
