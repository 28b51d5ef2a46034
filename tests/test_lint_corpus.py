"""``fwd9m lint`` over every ``.py`` file of the installed TensorFlow, PyTorch, Keras and
JAX packages (about 5,600 files, 110 MB): no crash, no rule failure, and a ceiling on
findings per default rule (library code is not a training script, so a noisy rule here
is a false-alarm regression). Takes ~60-90 s on 2 busy cores."""

from __future__ import annotations

import sysconfig
import time
from pathlib import Path

import pytest

from fwd9m import lint
from fwd9m.lint import Config

FRAMEWORKS = ("tensorflow", "torch", "keras", "jax")
#: most findings any default rule may give on the whole corpus (measured: FWD402 66, the others <= 25)
CEILING = 100


@pytest.mark.slow
def test_lint_framework_sources_without_a_crash():
    site = Path(sysconfig.get_paths()["purelib"])
    roots = [site / fw for fw in FRAMEWORKS if (site / fw).is_dir()]
    if not roots:
        pytest.skip("no framework installed")
    t0 = time.perf_counter()
    report = lint.lint_paths(roots, Config())
    seconds = time.perf_counter() - t0
    stats = report.statistics()
    print(f"\n{report.files} files in {seconds:.1f} s; findings per rule: {stats}")
    assert report.files > 1000 * len(roots) // 2
    assert "FWD004" not in stats, [f for f in report.findings if f.code == "FWD004"][:5]
    rules = lint.all_rules()
    noisy = {c: n for c, n in stats.items() if c in rules and rules[c].default and n > CEILING}
    assert not noisy, f"rules noisier than {CEILING} findings on framework sources: {noisy}"


def test_precision_and_recall_on_the_judged_corpus():
    """Re-lints the third-party corpus of ``benchmarks/lint_corpus`` when it is present
    (``FWD9M_LINT_CORPUS=/tmp/corpus``); skipped in CI, where it is absent."""
    import os
    import sys

    corpus = os.environ.get("FWD9M_LINT_CORPUS")
    if not corpus or not Path(corpus).is_dir():
        pytest.skip("set FWD9M_LINT_CORPUS to the extracted corpus of benchmarks/lint_corpus/repos.txt")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "lint_corpus"))
    import measure

    result = measure.measure(Path(corpus))
    assert result["unjudged"] == 0, "judge the new findings (measure.py --unjudged)"
    assert result["precision"] >= 0.95 and result["recall"] >= 0.85
