"""fwd9m.check / assert_reproducible in-process, and the pytest plugin."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import numpy as np
import pytest

import fwd9m
from fwd9m.errors import NondeterminismError, RunError, UncomparableError

pytest_plugins = ["pytester"]


def test_seeded_function_is_reproducible_and_result_is_truthy():
    def step(n):
        rng = np.random.default_rng(random.randrange(2**32))  # seeded through `random`
        return {"w": rng.standard_normal(n).astype(np.float32), "loss": float(n)}

    result = fwd9m.check(step, 8, runs=3, seed=1)
    assert result and result.reproducible
    assert result.report().startswith("REPRODUCIBLE: 3 runs")
    data = json.loads(result.to_json())
    assert data["reproducible"] is True and data["findings"] == [] and data["schema"] == "fwd9m.check"


def test_unseeded_function_differs_with_named_leaf():
    counter = iter(range(10))

    def step():
        return {"weights": np.full(3, float(next(counter)), dtype=np.float32), "const": 1}

    result = fwd9m.check(step, runs=2)
    assert not result
    (finding,) = result.findings
    assert finding.source == "value" and finding.diff.path == "weights" and finding.diff.n_diff == 3
    assert "weights (float32, 3): 3 of 3 elements differ" in result.report()
    assert "NOT REPRODUCIBLE" in result.report()
    data = result.to_dict()
    assert data["findings"][0]["diff"]["max_abs"] == 1.0


def test_result_is_built_once_and_frozen():
    """check() returns a frozen CheckResult (issue 20): its fields cannot be set again and
    its lists are not the ones the check's steps filled (a Draft, frozen once)."""
    import dataclasses

    from fwd9m.check._result import CheckResult, Draft

    counter = iter(range(10))
    result = fwd9m.check(lambda: next(counter), runs=2)
    assert not result and result.next_steps
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.notes = []
    draft = Draft(CheckResult, "t", [], [])
    draft.notes.append("a note")
    frozen = draft.freeze()
    draft.notes.append("added after freezing")
    assert frozen.notes == ["a note"] and frozen.reproducible and bool(draft)
    with pytest.raises(AttributeError, match="no field 'note'"):
        draft.note = "a misspelt field"


def test_assert_reproducible_raises_with_report_and_crashes_are_findings():
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) == 2:
            raise ValueError("boom")
        return 1.0

    with pytest.raises(NondeterminismError, match="raised ValueError: boom"):
        fwd9m.assert_reproducible(flaky, runs=3)

    def broken():
        raise KeyError("x")

    with pytest.raises(RunError, match="raised KeyError"):
        fwd9m.check(broken)
    with pytest.raises(ValueError):
        fwd9m.check(lambda: 1, runs=1)


def _index_put_sum(deterministic: bool):
    torch = pytest.importorskip("torch")
    torch.set_num_threads(2)
    torch.use_deterministic_algorithms(deterministic)
    try:
        g = torch.Generator().manual_seed(0)
        index = torch.randint(0, 10, (100_000,), generator=g)
        values = torch.randn(100_000, 16, generator=g)
        out = torch.zeros(10, 16)
        out.index_put_((index,), values, accumulate=True)
        return out
    finally:
        torch.use_deterministic_algorithms(False)


def test_torch_index_put_accumulate_on_two_threads():
    """index_put_(accumulate=True) on CPU adds float32 values in parallel when more than
    one thread runs and the problem is large (aten/src/ATen/native/cpu/IndexKernel.cpp,
    https://github.com/pytorch/pytorch/blob/main/aten/src/ATen/native/cpu/IndexKernel.cpp);
    with deterministic algorithms it takes the serial path."""
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    try:
        for _ in range(5):  # a real race: on a busy machine 4 calls may all agree
            flaky = fwd9m.check(_index_put_sum, False, runs=4)
            if not flaky:
                break
        assert not flaky
        assert flaky.findings[0].diff.dtype == "float32" and flaky.findings[0].diff.max_ulp >= 1
        assert fwd9m.check(_index_put_sum, True, runs=4)
    finally:
        torch.set_num_threads(threads)


def test_keras_model_returned_from_a_training_step():
    keras = pytest.importorskip("keras")

    def train():
        model = keras.Sequential(
            [keras.Input((3,)), keras.layers.Dense(2), keras.layers.Dropout(0.5), keras.layers.Dense(1)]
        )
        model.compile(optimizer="sgd", loss="mse")
        model.fit(np.ones((8, 3)), np.ones((8, 1)), epochs=2, verbose=0)
        return model

    assert fwd9m.check(train, runs=2, seed=3)


def test_pytest_marker_and_fixture(pytester):
    pytester.makepyfile(
        """
        import itertools
        import numpy as np
        import pytest

        counter = itertools.count()

        @pytest.mark.reproducible(runs=3)
        def test_seeded_step():
            return {"w": np.random.rand(3)}      # numpy's global RNG is seeded each run

        @pytest.mark.reproducible
        def test_drifting_step():
            return {"w": np.full(2, next(counter), dtype=np.float32)}

        def test_fixture(fwd9m_check):
            fwd9m_check(lambda n: np.random.rand(n), 4, runs=2)

        def test_fixture_fails(fwd9m_check):
            fwd9m_check(lambda: next(counter) * 1.0)
        """
    )
    result = pytester.runpytest("-q", "-p", "no:randomly")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(["*NondeterminismError*", "*w (float32, 2): 2 of 2 elements differ*"])


def test_vary_specs():
    from fwd9m.check import Variant, parse_vary
    from fwd9m.errors import ConfigurationError

    variants = parse_vary(["threads=1,4", "--batch-size=32,64", "TF_ENABLE_ONEDNN_OPTS=0"])
    assert [v.label for v in variants] == [
        "threads=1",
        "threads=4",
        "--batch-size=32",
        "--batch-size=64",
        "TF_ENABLE_ONEDNN_OPTS=0",
    ]
    assert variants[0].env()["OMP_NUM_THREADS"] == "1" and variants[0].env()["TF_NUM_INTRAOP_THREADS"] == "1"
    bs = Variant("--batch-size", "64")
    assert bs.env() == {}
    assert bs.argv(["--epochs", "1", "--batch-size", "32"]) == ["--epochs", "1", "--batch-size", "64"]
    assert bs.argv(["--batch-size=32"]) == ["--batch-size=64"]
    assert bs.argv(["--epochs", "1"]) == ["--epochs", "1", "--batch-size", "64"]
    with pytest.raises(ConfigurationError, match="NAME=V1,V2"):
        parse_vary(["OMP_NUM_THREADS="])
    for bad in ("threads=abc", "threads=0,1", "threads=-1"):  # fwd9m run --threads refuses these too
        with pytest.raises(ConfigurationError, match="positive integers"):
            parse_vary([bad])


def test_values_compared_by_type_only_or_nothing_at_all_are_noted():
    with pytest.raises(UncomparableError, match="generator"):  # refused: tests/test_check_honesty.py
        fwd9m.check(lambda: (i for i in range(3)))
    empty = fwd9m.check(lambda: lambda: 1)
    assert empty and "returned nothing fwd9m can compare" in empty.report()
    assert not fwd9m.check(lambda: 3.0).notes


def test_catalog_hints_put_global_seed_first_for_a_script_that_seeds_nothing(tmp_path):
    """The script's own line comes first (lint FWD108: it seeds nothing); without a
    readable script, the global-seed entry does."""
    from fwd9m.check import _catalog_hints

    script = tmp_path / "train.py"
    script.write_text("import torch\nm = torch.nn.Linear(4, 1)\nm(torch.randn(2, 4)).sum().backward()\n")
    fp = {"frameworks": {"torch": {"version": "2.13.0"}}}
    hints = _catalog_hints(fp, "cpu", source=str(script))
    assert hints and hints[0]["id"] == "FWD108" and hints[0]["kind"] == "lint", [h["id"] for h in hints]
    lib = tmp_path / "lib.py"
    lib.write_text("import torch\ndef train(): return torch.nn.Linear(4, 1)\n")
    hints = [h for h in _catalog_hints(fp, "cpu", source=str(lib)) if h["kind"] != "lint"]
    assert hints and hints[0]["id"] == "torch.global-seed", [h["id"] for h in hints]


def test_catalog_hints_only_for_frameworks_the_script_trains_with(tmp_path):
    """JAX imported by another library (and so in the runs' fingerprint) is not the
    script's JAX; a library built on a framework counts as that framework; the script's
    own lint findings come before any catalog entry, and a general seeding entry is left
    out when lint points at the script's seeding line."""
    from fwd9m.check import _catalog_hints

    fp = {
        "frameworks": {
            "torch": {"version": "2.13.0"},
            "jax": {"version": "0.10.2"},
            "keras": {"version": "3.15.1", "backend": "tensorflow"},
            "tensorflow": {"version": "2.21.0"},
        }
    }
    lit = tmp_path / "lit.py"
    lit.write_text("import pytorch_lightning as pl\nmodel = pl.LightningModule()\n")
    ids = [h["id"] for h in _catalog_hints(fp, "cpu", source=str(lit), limit=20)]
    assert ids and all(i.split(".")[0] in ("torch", "python") for i in ids), ids
    ks = tmp_path / "ks.py"
    ks.write_text(
        "import numpy as np\nimport keras\nm = keras.Sequential([keras.layers.Dense(2)])\n"
        "keras.utils.set_random_seed(0)\n"
    )
    hints = _catalog_hints(fp, "cpu", source=str(ks), limit=20)
    ids = [h["id"] for h in hints]
    assert not [i for i in ids if i.startswith(("jax.", "torch."))], ids
    assert hints[0]["kind"] == "lint" and hints[0]["id"] == "FWD102", ids
    assert "tensorflow.op-seed-counter" not in ids, ids  # general seeding: the lint line says it


def test_framework_imported_inside_the_function_is_seeded_before_run_1():
    """A function that imports torch itself on its first call: run 1 used to run with
    torch unseeded (check seeded only the frameworks already in sys.modules) and check
    reported a false difference. Run in a fresh interpreter, where torch is not yet
    imported."""
    pytest.importorskip("torch")
    code = (
        "import sys, fwd9m\n"
        "assert 'torch' not in sys.modules\n"
        "def fn():\n"
        "    import torch\n"
        "    return torch.randn(4)\n"
        "r = fwd9m.check(fn, runs=2)\n"
        "print(r.report())\n"
        "sys.exit(0 if r else 1)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "REPRODUCIBLE: 2 runs" in out.stdout
    assert "torch was imported during run 1" in out.stdout, out.stdout  # said so in a note


def test_catalog_hints_need_the_symbols_an_entry_is_about(tmp_path):
    """Entries about torch.compile or torch.empty are not hinted for a script that uses
    neither (a word in a comment does not count); general ones (seeding, threads) are."""
    from fwd9m.check import _catalog_hints

    fp = {"frameworks": {"torch": {"version": "2.13.0"}}}
    plain = tmp_path / "plain.py"
    plain.write_text(
        "# we do not torch.compile or torch.empty here\nimport torch\nfrom torch import nn\n"
        "torch.manual_seed(0)\nm = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))\n"
    )
    ids = [h["id"] for h in _catalog_hints(fp, "cpu", source=str(plain))]
    assert "torch.inductor-rng" not in ids and "torch.fill-uninitialized-memory" not in ids, ids
    assert "torch.global-seed" in ids, ids
    # two runs with one thread count: threads cannot explain their difference
    assert "torch.cpu-threads" not in ids, ids
    ids = [h["id"] for h in _catalog_hints(fp, "cpu", source=str(plain), threads_differ=True)]
    assert "torch.cpu-threads" in ids, ids
    compiled = tmp_path / "compiled.py"
    compiled.write_text(
        "import torch\nfrom torch import nn\nm = torch.compile(nn.Dropout(0.5))\n"
        "x = torch.empty(3)\nout = torch.zeros(3)\nout.index_put_((x.long(),), x, accumulate=True)\n"
    )
    ids = [h["id"] for h in _catalog_hints(fp, "cpu", source=str(compiled), limit=20)]
    for expected in ("torch.inductor-rng", "torch.fill-uninitialized-memory", "torch.index-put-accumulate"):
        assert expected in ids, ids


def test_integer_leaves_rank_first_and_a_max_ulp_across_zero_says_signs_differ():
    """A permutation from an unseeded generator is the cause of the float differences
    after it: integer and bool leaves rank before float ones. A float32 pair on both
    sides of zero lies ~2e9 ULP apart, which says only that the signs differ."""
    calls = iter(range(5))

    def step():
        i = next(calls)
        sign = (-1) ** i
        return {
            "loss": np.float32(0.5 + i),
            "weights": np.array([1e-3 * sign, 2.0], np.float32),
            "perm": np.random.default_rng(i).permutation(512),
            "mask": np.array([True, i == 0]),
            # the largest distance is the same-sign pair, though the other pair crosses zero
            "same": np.array([1e-30 * (1 + i), -1e-45 * sign], np.float32),
        }

    result = fwd9m.check(step)
    ranked = [f.diff.path for f in result.ranked()]
    assert set(ranked[:2]) == {"perm", "mask"} and set(ranked[2:]) == {"loss", "weights", "same"}, ranked
    report = result.report()
    assert "integer values first: they are usually causes" in report
    by_path = {f.diff.path: f for f in result.findings}
    assert by_path["weights"].signs_differ and "signs differ" in by_path["weights"].summary
    assert by_path["weights"].diff.max_ulp > 1_900_000_000
    assert f"max {by_path['weights'].diff.max_ulp} ULP" not in by_path["weights"].summary
    assert not by_path["same"].signs_differ and "ULP" in by_path["same"].summary
    assert not by_path["loss"].signs_differ and "max 12582912 ULP" in by_path["loss"].summary
    data = {f["diff"]["path"]: f for f in result.to_dict()["findings"]}
    assert data["weights"]["signs_differ"] is True
    assert data["weights"]["diff"]["max_ulp"] == by_path["weights"].diff.max_ulp  # the number kept in JSON
    floats = fwd9m.check(lambda: -0.25 if next(calls) == 2 else 0.25)  # Python floats too
    assert floats.findings[0].signs_differ


class _BadEq:
    """A result whose == raises (a user's class, or a pandas DataFrame of objects)."""

    def __eq__(self, other):
        raise ValueError("eq boom")

    __hash__ = object.__hash__


def test_a_result_whose_equality_raises_cannot_be_checked():
    """Regression: `== raised` read "value differs: <_BadEq object at 0x...> vs ...", a
    difference made up from two memory addresses."""
    with pytest.raises(
        RunError,
        match=r"cannot compare what .* returns: comparing x \(a _BadEq\) between two "
        r"runs with == raised ValueError: eq boom.*state_dict\(\)",
    ):
        fwd9m.check(lambda: {"x": _BadEq(), "y": 1.0})
    calls = iter(range(3))  # another leaf differs: a finding, and the uncomparable one a note
    both = fwd9m.check(lambda: {"x": _BadEq(), "y": float(next(calls))})
    assert not both and [f.diff.path for f in both.findings] == ["y"]
    assert any("x: cannot be compared: == on a _BadEq raised ValueError: eq boom" in n for n in both.notes)


def test_type_changes_in_the_result_are_findings():
    """Regression: {1: 0} vs {"1": 0} and (1, 2) vs [1, 2] were REPRODUCIBLE."""

    def alternate(a, b):
        calls = iter(range(3))
        return lambda: a if next(calls) == 0 else b

    for a, b, expected in [
        ({1: 0}, {"1": 0}, "[1]: only in the first run"),
        ({"x": {1: 5}}, {"x": {"1": 5}}, "x[1]: only in the first run"),
        ((1, 2), [1, 2], "<value>: type differs: tuple vs list"),
        ({"h": (1.0,)}, {"h": [1.0]}, "h: type differs: tuple vs list"),
    ]:
        result = fwd9m.check(alternate(a, b))
        assert not result and expected in result.report(), (a, b, result.report())
    assert fwd9m.check(lambda: {1: (0.5, [2]), "1": {None: 3}})


def test_repeat_of_run_1_that_raises_is_a_failing_second_call():
    """fn imports torch on its first call (so check repeats run 1 with torch seeded) and
    raises when called again: the user's first call returned normally, so this reads as
    run 2 raising (as when torch is imported before check), not "raised in run 1"."""
    pytest.importorskip("torch")
    code = (
        "import itertools, sys, fwd9m\n"
        "calls = itertools.count()\n"
        "def fn():\n"
        "    import torch\n"
        "    if next(calls) == 1:\n"
        "        raise RuntimeError('second call fails')\n"
        "    return torch.ones(2)\n"
        "r = fwd9m.check(fn)\n"
        "print(r.report())\n"
        "sys.exit(0 if r else 1)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 1 and "RunError" not in out.stderr, out.stdout + out.stderr
    assert (
        "[exit, run 2] raised RuntimeError: second call fails; run 1 returned normally "
        "(this call repeated run 1 with torch seeded)" in out.stdout
    ), out.stdout
    assert "that call (run 2 above) raised: fn fails when called again" in out.stdout
