"""``fwd9m probe`` (the default run: every installed framework, CPU, switch off and on)
against its floor: the same number of fresh interpreters importing the same frameworks.

The issue's budget is 60 s wall on a 2-core CPU for the default run; the ratio keeps
the figure meaningful on a busier or faster machine (the absolute time is printed)."""

from __future__ import annotations

import subprocess
import sys

from _harness import Case


def cases(quick: bool):
    from fwd9m import _frameworks
    from fwd9m.probe import FRAMEWORKS

    fws = [f for f in FRAMEWORKS if _frameworks.installed_version(f)]
    if not fws:
        raise ImportError("no framework with probes installed")

    def imports():  # one child per framework and switch setting, as probe starts
        for fw in fws:
            for _ in range(2):
                subprocess.run([sys.executable, "-c", f"import {fw}"], check=True, stderr=subprocess.DEVNULL)

    def default_probe():
        subprocess.run(
            [sys.executable, "-m", "fwd9m", "probe", "-q"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )

    def torch_probe():
        subprocess.run(
            [sys.executable, "-m", "fwd9m", "probe", "-q", "-f", "torch"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )

    def torch_imports():
        for _ in range(2):
            subprocess.run([sys.executable, "-c", "import torch"], check=True)

    out = [
        Case(
            "probe: torch entries, switch off and on",
            torch_imports,
            torch_probe,
            baseline_name="2 interpreters importing torch",
            target=3.0,
            repeat=1 if quick else 3,
            note="33 torch op probes x 5 repeats x 2 settings",
        )
    ]
    if not quick:
        out.append(
            Case(
                "probe: default run (all installed frameworks, cpu, both switch settings)",
                imports,
                default_probe,
                baseline_name="interpreters importing the same frameworks",
                target=2.5,
                repeat=1,
                note="the issue's budget: <= 60 s wall on a 2-core CPU (candidate_s)",
            )
        )
    return out
