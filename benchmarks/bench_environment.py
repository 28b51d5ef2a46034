"""Environment fingerprint cost against a bare interpreter start (both in-process)."""

from __future__ import annotations

import subprocess
import sys

from _harness import Case


def cases(quick: bool):
    from fwd9m import environment

    def interpreter():
        subprocess.run([sys.executable, "-c", "pass"], check=True)

    return [
        Case(
            "environment.collect (no framework import)",
            interpreter,
            environment.collect,
            baseline_name="python -c pass",
            target=1.0,
            repeat=3 if quick else 7,
            note="fingerprint must cost less than starting an interpreter",
        )
    ]
