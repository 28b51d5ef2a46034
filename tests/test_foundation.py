"""The package skeleton: no framework imported by the core, error family, CLI basics."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import run_fwd9m

import fwd9m
from fwd9m import errors

FRAMEWORK_MODULES = ("tensorflow", "torch", "jax", "keras", "tf_keras", "jaxlib", "flax")

_PROBE = """
import sys, runpy
sys.argv = {argv!r}
try:
    {body}
except SystemExit:
    pass
bad = sorted(m for m in {mods!r} if m in sys.modules)
print("IMPORTED:" + ",".join(bad))
"""


def _imported_after(body: str, argv=("fwd9m",)) -> list[str]:
    code = _PROBE.format(argv=list(argv), body=body, mods=FRAMEWORK_MODULES)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("IMPORTED:")]
    assert line, out.stderr
    return [m for m in line[-1][len("IMPORTED:") :].split(",") if m]


@pytest.mark.parametrize(
    "body,argv",
    [
        ("import fwd9m; fwd9m.errors; fwd9m.__all__", ("fwd9m",)),
        ("runpy.run_module('fwd9m', run_name='__main__')", ("fwd9m", "--help")),
        ("runpy.run_module('fwd9m', run_name='__main__')", ("fwd9m", "env")),
        ("runpy.run_module('fwd9m', run_name='__main__')", ("fwd9m", "lint", "--help")),
    ],
)
def test_core_imports_no_framework(body, argv):
    assert _imported_after(body, argv) == []


def test_error_family_inherits_builtins():
    assert issubclass(errors.NondeterminismError, AssertionError)
    assert issubclass(errors.FileFormatError, ValueError)
    assert issubclass(errors.CatalogError, LookupError)
    assert issubclass(errors.RunError, RuntimeError)
    for name in errors.__all__:
        cls = getattr(errors, name)
        if issubclass(cls, Warning):
            assert issubclass(cls, errors.Fwd9mWarning)
        else:
            assert issubclass(cls, errors.Fwd9mError)


def test_lazy_attribute_errors():
    with pytest.raises(AttributeError):
        fwd9m.no_such_thing  # noqa: B018


def test_cli_help_and_usage_errors():
    out = run_fwd9m("--help")
    assert out.returncode == 0 and "env" in out.stdout
    out = run_fwd9m("no-such-command")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    out = run_fwd9m()
    assert out.returncode == 2


def test_version():
    out = run_fwd9m("--version")
    assert out.returncode == 0 and fwd9m.__version__ in out.stdout


def test_output_write_error_is_a_clear_message_not_a_traceback():
    """``fwd9m catalog > /dev/full``: the write fails with ENOSPC."""
    import os

    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    with open("/dev/full", "w") as full:
        out = subprocess.run(
            [sys.executable, "-m", "fwd9m", "catalog"], stdout=full, stderr=subprocess.PIPE, text=True, timeout=120
        )
    assert out.returncode == 2 and "Traceback" not in out.stderr and "error" in out.stderr, out.stderr
