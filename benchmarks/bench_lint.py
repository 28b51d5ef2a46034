"""``fwd9m lint`` against flake8 + flake8-bugbear on the frameworks' own sources.

Corpus: the ``.py`` files of the installed TensorFlow, PyTorch, Keras and JAX packages
(``--quick``: every 8th file of Keras, sorted). Both tools get the same explicit file
list. Cases:

1. ``fwd9m lint`` CLI vs ``flake8 -j1 --select=B`` CLI, each in a fresh interpreter.
   This is the comparison a user sees. flake8 runs pycodestyle and pyflakes on every file
   whatever ``--select`` says (it filters reported codes afterwards), and our flake8
   plugin does no work when ``--select`` names no FWD code, so the baseline is
   "flake8 with bugbear as people run it" without fwd9m's rules in it.
2. fwd9m's engine vs bugbear's own checker in one process: read + parse +
   ``BugBearChecker(tree, filename, lines).run()`` for every file, against read + parse +
   fwd9m's default rules. This isolates the rule machinery (one AST pass each) from
   flake8's other plugins, so it is the strict comparison.

Both targets are "at most as slow as the baseline" (ratio <= 1).
"""

from __future__ import annotations

import ast
import subprocess
import sys
import sysconfig
from pathlib import Path

from _harness import Case

FRAMEWORKS = ("tensorflow", "torch", "keras", "jax")


def corpus(quick: bool) -> list[Path]:
    site = Path(sysconfig.get_paths()["purelib"])
    if quick:
        return sorted((site / "keras").rglob("*.py"))[::8]
    return sorted(p for fw in FRAMEWORKS if (site / fw).is_dir() for p in (site / fw).rglob("*.py"))


def cases(quick: bool):
    import bugbear  # flake8-bugbear; ImportError skips this module

    from fwd9m.lint import Config, _Selection
    from fwd9m.lint._engine import lint_bytes

    files = corpus(quick)
    if not files:
        raise ImportError("no framework sources installed to lint")
    names = [str(p) for p in files]
    exe = sys.executable

    def flake8_cli():
        subprocess.run([exe, "-m", "flake8", "-j1", "--select=B", "--exit-zero", *names],
                       stdout=subprocess.DEVNULL, check=True)

    def fwd9m_cli():
        res = subprocess.run([exe, "-m", "fwd9m", "lint", "--isolated", *names],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert res.returncode in (0, 1), res.returncode

    def bugbear_inprocess():
        for p in files:
            data = p.read_bytes()
            try:
                tree = ast.parse(data)
            except (SyntaxError, ValueError):
                continue
            lines = data.decode("utf-8", "replace").splitlines(True)
            list(bugbear.BugBearChecker(tree=tree, filename=str(p), lines=lines).run())

    sel = _Selection(Config())

    def fwd9m_inprocess():
        for p in files:
            lint_bytes(p.read_bytes(), str(p), sel.rules, trigger_re=sel.trigger_re)

    n = f"{len(files)} files"
    return [
        Case(f"fwd9m lint CLI vs flake8+bugbear ({n})", flake8_cli, fwd9m_cli,
             baseline_name="flake8 -j1 --select=B", target=1.0, repeat=1 if not quick else 3,
             note="same explicit file list; fresh interpreter each"),
        Case(f"lint engine vs BugBearChecker in-process ({n})", bugbear_inprocess, fwd9m_inprocess,
             baseline_name="ast.parse + BugBearChecker", target=1.0, repeat=1 if not quick else 3,
             note="parse + one AST pass each; no flake8 machinery"),
    ]
