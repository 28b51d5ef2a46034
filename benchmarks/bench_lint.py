"""``fwd9m lint`` against flake8 + flake8-bugbear on the same training code.

    python benchmarks/bench_lint.py [CORPUS] [--quick]     # or through benchmarks/run.py

Corpus: every ``.py`` file under CORPUS, else under ``$FWD9M_LINT_CORPUS`` (the
extracted repositories of ``lint_corpus/repos.txt``, e.g. ``/tmp/corpus``), else the
bundled fallback: this repository's own training scripts (``examples/``,
``tests/e2e/stacks/``, ``tests/data/``), so it runs anywhere. ``--quick``: every 4th file.
Both tools get the same explicit file list, in the same run, interleaved. Cases:

1. ``fwd9m lint`` CLI vs ``flake8 -j1 --select=B`` CLI, each in a fresh interpreter:
   what a user sees, timed in CPU seconds of the child process (user + system), which a
   busy shared machine does not inflate as it does wall-clock time. flake8 runs pycodestyle
   and pyflakes on every file whatever
   ``--select`` says (it filters reported codes afterwards), and our flake8 plugin does
   no work when ``--select`` names no FWD code, so the baseline is "flake8 with bugbear
   as people run it" without fwd9m's rules in it. Target (issue 15): fwd9m at least
   10x faster, ratio <= 0.1.
2. fwd9m's engine vs bugbear's own checker in one process: read + parse +
   ``BugBearChecker(tree, filename, lines).run()`` for every file, against read + parse +
   fwd9m's default rules: the rule machinery alone (one AST pass each). Target: no
   slower (ratio <= 1).
"""

from __future__ import annotations

import ast
import os
import resource
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import Case  # noqa: E402

REPO = HERE.parent
BUNDLED = ("examples", "tests/e2e/stacks", "tests/data")
CLI_TARGET = 0.1  #: fwd9m lint at least 10x faster than flake8 + bugbear


def corpus(quick: bool, folder: str | None = None) -> tuple[list[Path], str]:
    """The files to lint and where they come from."""
    folder = folder or os.environ.get("FWD9M_LINT_CORPUS")
    if folder and Path(folder).is_dir():
        files, where = sorted(Path(folder).rglob("*.py")), folder
    else:
        files = sorted(p for d in BUNDLED for p in (REPO / d).rglob("*.py"))
        where = "bundled examples"
    return (files[::4] if quick else files), where


def cases(quick: bool, folder: str | None = None):
    import bugbear  # flake8-bugbear; ImportError skips this module

    from fwd9m.lint import Config, _Selection
    from fwd9m.lint._engine import lint_bytes

    files, where = corpus(quick, folder)
    if not files:
        raise ImportError("no Python files to lint")
    names = [str(p) for p in files]
    exe = sys.executable

    def flake8_cli():
        subprocess.run(
            [exe, "-m", "flake8", "-j1", "--select=B", "--exit-zero", *names], stdout=subprocess.DEVNULL, check=True
        )

    def fwd9m_cli():
        res = subprocess.run(
            [exe, "-m", "fwd9m", "lint", "--isolated", *names], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
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

    n = f"{len(files)} files of {where}"

    def children_cpu() -> float:
        """CPU seconds (user + system) of finished child processes: the two CLIs' own
        work, not the time they wait for a busy machine's cores."""
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r.ru_utime + r.ru_stime

    return [
        Case(
            f"fwd9m lint CLI vs flake8+bugbear ({n})",
            flake8_cli,
            fwd9m_cli,
            baseline_name="flake8 -j1 --select=B",
            target=CLI_TARGET,
            repeat=1 if not quick else 3,
            clock=children_cpu,
            note="same explicit file list; fresh interpreter each; CPU seconds; target: 10x faster",
        ),
        Case(
            f"lint engine vs BugBearChecker in-process ({n})",
            bugbear_inprocess,
            fwd9m_inprocess,
            baseline_name="ast.parse + BugBearChecker",
            target=1.0,
            repeat=1 if not quick else 3,
            note="parse + one AST pass each; no flake8 machinery",
        ),
    ]


def main(argv=None) -> int:
    import argparse

    from _harness import run_case

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "corpus", nargs="?", help="folder of .py files (default: $FWD9M_LINT_CORPUS, else the bundled examples)"
    )
    p.add_argument("--quick", action="store_true", help="every 4th file, 3 repeats")
    a = p.parse_args(argv)
    failed = False
    for case in cases(a.quick, a.corpus):
        r = run_case(case)
        failed |= r["meets_target"] is False
        print(
            f"{r['name']}: {r['candidate_s']:.2f} s vs {r['baseline_s']:.2f} s ({r['baseline']}): "
            f"ratio {r['ratio']:.3f} ({1 / r['ratio']:.1f}x faster), target <= {r['target']}: "
            f"{'ok' if r['meets_target'] else 'MISSED'}"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO / "src"))
    sys.exit(main())
