"""The README's first-ten-minutes commands run as written, from the checkout, with the
exit status each one's comment gives, and the sample output it shows is what they print
(lines without measured values, such as float differences, must appear as shown)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    start = README.index(f"## {title}")
    end = README.find("\n## ", start + 1)
    return README[start : end if end > 0 else None]


def _blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, re.S)


def _commands() -> list[tuple[str, int]]:
    out = []
    for line in _blocks(_section("The first ten minutes"), "bash")[0].splitlines():
        m = re.match(r"(fwd9m [^#]+?)\s+# exit (\d)", line)
        if m:
            out.append((m.group(1), int(m.group(2))))
    return out


def test_the_first_ten_minutes_block_is_what_this_test_runs():
    cmds = _commands()
    assert [c for c, _ in cmds][:3] == [
        "fwd9m check examples/keras_custom_layer/broken.py",
        "fwd9m debug examples/keras_custom_layer/broken.py",
        "fwd9m check examples/keras_custom_layer/fixed.py",
    ], cmds
    assert all((REPO / p).exists() for c, _ in cmds for p in c.split()[2:])


@pytest.mark.slow
def test_the_first_ten_minutes_run_as_written():
    pytest.importorskip("tensorflow")
    pytest.importorskip("keras")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}  # as on a user's machine
    outputs = {}
    for command, status in _commands():
        proc = subprocess.run(
            [sys.executable, "-m", "fwd9m", *command.split()[1:]],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == status, f"{command}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        outputs[command.split()[1]] = outputs.get(command.split()[1], "") + proc.stdout
    samples = _blocks(_section("The first ten minutes"), "text")
    for sample, command in zip(samples, ("check", "debug")):
        shown = [" ".join(line.split()) for line in outputs[command].splitlines()]
        for line in sample.splitlines():
            text = " ".join(line.split()).removesuffix("...").removesuffix(",").strip()
            if not text or text == "..." or re.search(r"\d\.\d", text):
                continue  # trimmed, or a measured value
            assert any(text in s for s in shown), f"README {command} sample line not in its output: {text!r}"


def test_cli_reference_is_up_to_date():
    from fwd9m._cli import reference

    assert reference.DEFAULT_PATH.read_text(encoding="utf-8") == reference.render(), (
        "docs/cli.md is out of date: run `python -m fwd9m._cli.reference`"
    )


def test_readme_links_resolve():
    for target in re.findall(r"\]\(((?:docs|examples)/[^)#]*)", README):
        assert (REPO / target).exists(), target
