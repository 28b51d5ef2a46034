"""The controlled hash-seed experiment shared by ``fwd9m check`` and ``fwd9m debug``
(fwd9m._hashseed): pure policy tests with stand-in runs; the commands' own tests run it
for real (tests/test_check_cli.py, tests/test_debug.py, tests/test_debug_cli.py)."""

import itertools

import pytest

from fwd9m import _hashseed as hs
from fwd9m.errors import RunError

_FLAGGED = 'words = {"alpha", "beta", "gamma"}\nids = {w: i for i, w in enumerate(words)}\nprint(ids)\n'


def _run_from(results):
    """A ``run`` that returns the next of ``results`` (any seed) and logs the seeds."""
    it, seeds = iter(results), []

    def run(seed, k):
        seeds.append(seed)
        assert k == len(seeds) <= hs.MAX_RUNS
        return next(it)

    return run, seeds


def _same(a, b):
    return a == b


def test_every_coin_flip_sequence_is_at_most_likely(tmp_path):
    """Whatever a coin-flip script prints (every sequence of results), an experiment on
    a script without hash-order code never says "confirmed"."""
    script = tmp_path / "coin.py"
    script.write_text("import os\nprint(os.urandom(1)[0] < 128)\n")
    verdicts = set()
    for results in itertools.product("AB", repeat=hs.MAX_RUNS):
        run, _ = _run_from(results)
        verdicts.add(hs.experiment(run, _same, script=str(script)).verdict)
    assert hs.CONFIRMED not in verdicts
    assert verdicts == {hs.RULED_OUT, hs.NOT_CONFIRMED, hs.LIKELY}


@pytest.mark.parametrize("flagged, verdict", [(False, hs.LIKELY), (True, hs.CONFIRMED)])
def test_two_seeds_that_agree_do_not_clear_hash_order(tmp_path, flagged, verdict):
    """A two-element set: seeds 0 and 1 give one order, 2 the other; seed 2 is tried
    once the first three runs agree, and lint corroboration decides between likely and
    confirmed."""
    script = tmp_path / "two.py"
    script.write_text(_FLAGGED if flagged else 'print(sorted({"a", "b"}))\n')  # lint: no hash order
    order = {0: "ab", 1: "ab", 2: "ba"}
    seeds = []
    out = hs.experiment(lambda s, k: seeds.append(s) or order[s], _same, script=str(script), target="two.py")
    assert (out.verdict, out.seed, seeds) == (verdict, 2, [0, 1, 0, 2])
    text = out.message()
    assert text.startswith(f"PYTHONHASHSEED ({verdict})") and "not hash" not in text
    assert "PYTHONHASHSEED=1 agreed with them, and one with PYTHONHASHSEED=2 differed from them" in text
    if flagged:
        assert "two.py:1 FWD402" in text
    else:
        assert "fwd9m check --runs 4 --env PYTHONHASHSEED=0 two.py" in text


@pytest.mark.parametrize(
    "results, verdict, made",
    [
        ("ABA", hs.LIKELY, 3),  # the two 0-runs agree, the 1-run differs: hashing alone
        ("ABB", hs.RULED_OUT, 3),  # all differ from run 1: another source too
        ("AAB", hs.RULED_OUT, 3),
        ("AAAB", hs.LIKELY, 4),  # seeds 0 and 1 agree (a small set), 2 differs
        ("AAAA", hs.NOT_CONFIRMED, 4),
    ],
)
def test_verdicts_and_run_budget(results, verdict, made):
    """Runs 1 and 3 with PYTHONHASHSEED=0, run 2 with 1; a fourth (seed 2) only when the
    three agree."""
    run, seeds = _run_from(results)
    out = hs.experiment(run, _same)  # no script (a module or command): never confirmed
    assert (out.verdict, out.runs, len(seeds)) == (verdict, made, made)
    assert seeds == [0, 1, 0, 2][:made]
    assert out.hash_order == (verdict == hs.LIKELY)
    if verdict == hs.NOT_CONFIRMED:
        assert "hash seeds 0, 1, 2 all gave the same result" in out.message()
        assert "ruled out" not in out.message()
    if verdict == hs.RULED_OUT:
        assert "two runs with PYTHONHASHSEED=0 still differed" in out.message()


def test_the_first_three_runs_go_together():
    """``together`` gets runs 1-3 at once (the caller runs them side by side); run 4,
    which depends on them, comes after through ``run``."""
    batches = []

    def together(plan):
        batches.append(plan)
        return ["A" for _ in plan]

    def run(seed, k):
        batches.append([(seed, k)])
        return "B"

    out = hs.experiment(run, _same, together=together)
    assert batches == [[(0, 1), (1, 2), (0, 3)], [(2, 4)]] and out.verdict == hs.LIKELY and out.seed == 2


def test_a_run_that_does_not_complete_leaves_it_untested():
    def run(seed, k):
        if k == 2:
            raise RunError("timed out")
        return "A"

    out = hs.experiment(run, _same, errors=(RunError,))
    assert out.verdict == hs.INCOMPLETE and "remains a possible cause" in out.message()


def test_a_clock_seed_is_not_taken_for_hash_order(tmp_path):
    """Runs side by side start CLOCK_GAP_S apart: two PYTHONHASHSEED=0 runs of a script
    seeded from the clock in seconds read other seconds and differ, so hash order is
    ruled out as the only cause (started together, all three agreed and a later run
    blamed the hash seed)."""
    import os
    import subprocess
    import sys

    # a second of work first: two runs one after the other then read other seconds too
    script = "import random, time\ntime.sleep(1.1)\nprint(random.Random(int(time.time())).random())\n"
    (tmp_path / "train.py").write_text(script)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    r = subprocess.run(
        [sys.executable, "-m", "fwd9m", "check", "train.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 1, r.stdout + r.stderr
    assert "ruled out as the only cause" in r.stdout, r.stdout
