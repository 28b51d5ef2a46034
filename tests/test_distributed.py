"""fwd9m.distributed in this process: ranks, seeds, samplers, replica reports.

Multi-process launches (torchrun, MirroredStrategy) are in test_distributed_launch.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import fwd9m.distributed as fd
from fwd9m.distributed._replicas import compare_digests, install_from_env
from fwd9m.errors import ConfigurationError, NondeterminismError


def file_store(tmp_path_factory) -> str:
    """An ``init_method`` for a one-rank group that needs no port: a free port found
    first and bound later by the group's store can be taken in between (a race)."""
    return "file://" + str(tmp_path_factory.mktemp("store") / "store")


# ----------------------------------------------------------------------------- ranks


def test_import_loads_no_framework():
    code = (
        "import sys, fwd9m.distributed as fd; fd.rank_info(); "
        "print(sorted(m for m in ('torch', 'tensorflow', 'jax', 'keras') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stderr


@pytest.mark.parametrize(
    "env, expected",
    [
        ({}, fd.RankInfo()),
        (
            {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"},
            fd.RankInfo(1, 2, 1, 2, "torchrun"),
        ),
        ({"HOROVOD_RANK": "3", "HOROVOD_SIZE": "4", "HOROVOD_LOCAL_RANK": "1"}, fd.RankInfo(3, 4, 1, None, "horovod")),
        ({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2"}, fd.RankInfo(0, 2, None, None, "mpi")),
        # torchrun's variables win over an MPI launcher around it
        (
            {"RANK": "1", "WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "1"},
            fd.RankInfo(1, 2, None, None, "torchrun"),
        ),
    ],
)
def test_rank_info_from_launcher_variables(env, expected):
    assert fd.rank_info(env) == expected


def _tf_config(kind, index, chief=True):
    cluster = {"worker": ["h:1", "h:2"], "ps": ["h:3"]}
    if chief:
        cluster["chief"] = ["h:0"]
    return {"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": kind, "index": index}})}


def test_rank_info_from_tf_config_numbers_chief_first():
    assert fd.rank_info(_tf_config("chief", 0)) == fd.RankInfo(0, 3, None, None, "TF_CONFIG", "chief")
    assert fd.rank_info(_tf_config("worker", 1)).rank == 2
    assert fd.rank_info(_tf_config("worker", 1, chief=False)) == fd.RankInfo(1, 2, None, None, "TF_CONFIG", "worker")
    assert fd.rank_info(_tf_config("ps", 0)).role == "ps"


@pytest.mark.parametrize(
    "env", [{"RANK": "x", "WORLD_SIZE": "2"}, {"RANK": "2", "WORLD_SIZE": "2"}, {"TF_CONFIG": "{not json"}]
)
def test_rank_info_rejects_bad_settings(env):
    with pytest.raises(ConfigurationError):
        fd.rank_info(env)


# ----------------------------------------------------------------------------- seeds


def test_seeder_shares_what_must_be_shared(monkeypatch):
    monkeypatch.delenv("FWD9M_SEED", raising=False)
    r0 = fd.seeder(7, info=fd.RankInfo(0, 2))
    r1 = fd.seeder(7, info=fd.RankInfo(1, 2))
    assert r0.seed("init", shared=True) == r1.seed("init", shared=True)
    assert r0.seed("dropout") != r1.seed("dropout")
    monkeypatch.setenv("FWD9M_SEED", "7")
    assert fd.seeder(info=fd.RankInfo(1, 2)).seed("dropout") == r1.seed("dropout")


def test_seeder_without_any_seed_refuses_to_guess_on_several_ranks(monkeypatch):
    monkeypatch.delenv("FWD9M_SEED", raising=False)
    with pytest.raises(ConfigurationError, match="fwd9m run --seed"):
        fd.seeder(info=fd.RankInfo(1, 2))
    assert fd.seeder(info=fd.RankInfo(0, 1)).world_size == 1  # one process: a fresh seed is fine


def test_sampler_shards_are_disjoint_and_reshuffled_each_epoch():
    torch = pytest.importorskip("torch")
    data = torch.utils.data.TensorDataset(torch.arange(20))
    seeds = [fd.seeder(3, info=fd.RankInfo(r, 2)) for r in (0, 1)]
    samplers = [fd.sampler(data, s) for s in seeds]
    orders = []
    for _epoch in fd.epochs(2, *samplers):
        shards = [list(s) for s in samplers]
        assert sorted(shards[0] + shards[1]) == list(range(20))  # a partition: same permutation
        orders.append(shards[0])
    assert orders[0] != orders[1]
    # without set_epoch the sampler would repeat epoch 1's order: the bug epochs() prevents
    assert list(samplers[0]) == orders[1]
    loader = torch.utils.data.DataLoader(data, sampler=samplers[0])
    assert fd.set_epoch(0, loader) == ["DistributedSampler"]
    assert list(samplers[0]) == orders[0]
    with pytest.raises(TypeError):
        fd.set_epoch(0, object())


# ----------------------------------------------------------------------------- replicas


def _table(values):
    return [(name, "parameter", "float32", (2,), d) for name, d in values]


def test_compare_digests_groups_replicas_and_keeps_model_order():
    diffs = compare_digests(
        [
            _table([("a", 1), ("b", 2), ("c", 3)]),
            _table([("a", 1), ("b", 9), ("c", 4)]),
            _table([("a", 1), ("b", 2), ("c", 5)]),
        ]
    )
    assert [d.name for d in diffs] == ["b", "c"]
    assert diffs[0].groups == ((0, 2), (1,))
    assert "rank 1 differs from ranks 0, 2" in diffs[0].summary()
    missing = compare_digests([_table([("a", 1)]), _table([])])
    assert "missing on rank 1" in missing[0].summary()


def test_report_render_and_raise():
    diffs = compare_digests([_table([("bn.running_mean", 1)]), _table([("bn.running_mean", 2)])])
    report = fd.ReplicaReport(3, ["rank 0", "rank 1"], 4, diffs)
    assert not report and report.first.name == "bn.running_mean"
    assert "REPLICAS DIFFER at step 3" in report.render()
    assert report.to_dict()["diffs"][0]["groups"] == [[0], [1]]
    with pytest.raises(NondeterminismError, match="bn.running_mean"):
        report.raise_if_inconsistent()
    assert "CONSISTENT" in fd.ReplicaReport(1, ["rank 0"], 4).render()


def test_check_replicas_in_a_one_rank_gloo_group(tmp_path_factory):
    torch = pytest.importorskip("torch")
    dist = torch.distributed
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
    alone = fd.check_replicas(model)  # no process group: one replica
    assert alone and alone.checked == 7 and alone.replicas == ["rank 0"]
    dist.init_process_group("gloo", init_method=file_store(tmp_path_factory), rank=0, world_size=1)
    try:
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
        monitor = fd.watch_replicas(ddp, opt, every=2)
        for _ in range(4):
            ddp(torch.randn(4, 3)).sum().backward()
            opt.step()
        assert (monitor.steps, monitor.checks, monitor.first) == (4, 2, None)
        report = fd.check_replicas(ddp, step=4)
        assert report and report.checked == 7 and report.step == 4
        monitor.remove()
    finally:
        dist.destroy_process_group()
    with pytest.raises(TypeError):
        fd.check_replicas(object())


def test_install_from_env_needs_the_variable():
    pytest.importorskip("torch")
    assert install_from_env({}) is False
    assert install_from_env({fd.ENV_CHECK_REPLICAS: "x"}) is False


# ----------------------------------------------------------------------------- debug per rank


def test_record_rank_traces_collectives_and_diff_ranks(tmp_path, tmp_path_factory, monkeypatch):
    torch = pytest.importorskip("torch")
    from conftest import run_fwd9m

    dist = torch.distributed
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    dist.init_process_group("gloo", init_method=file_store(tmp_path_factory), rank=0, world_size=1)
    try:
        for run, seed in (("a", 1), ("b", 1), ("c", 2)):
            torch.manual_seed(seed)
            with fd.record_rank(tmp_path / run, framework="torch"):
                x = torch.randn(4)
                dist.all_reduce(x)
                (x * 2).sum()
    finally:
        dist.destroy_process_group()
    from fwd9m.debug import TraceReader

    names = [op.name for op in TraceReader(str(tmp_path / "a" / "rank0.trace"))]
    assert "c10d::allreduce_" in names  # a collective is an op like any other
    assert fd.diff_ranks(tmp_path / "a", tmp_path / "b").reproducible
    differ = fd.diff_ranks(tmp_path / "a", tmp_path / "c")
    assert not differ.reproducible and differ.first_rank == 0
    assert "rank 0 diverges first" in differ.render()
    out = run_fwd9m("debug", "diff", str(tmp_path / "a"), str(tmp_path / "c"), timeout=120)
    assert out.returncode == 1 and "=== rank 0 ===" in out.stdout, out.stderr
    with pytest.raises(ConfigurationError):
        fd.diff_ranks(tmp_path, tmp_path / "a")


def test_launchers_do_not_record_themselves():
    from fwd9m.distributed._debug import is_launcher

    assert is_launcher(["python", "-m", "torch.distributed.run", "--nproc-per-node", "2", "t.py"])
    assert is_launcher(["python", "/venv/bin/torchrun", "t.py"])
    assert not is_launcher(["python", "-u", "train.py"])
    assert not is_launcher(["python", "-m", "fwd9m", "run", "train.py"])


def test_run_flags_need_the_import_hook():
    from conftest import run_fwd9m

    out = run_fwd9m("run", "--check-replicas", "0", "--", sys.executable, "-c", "pass", timeout=60)
    assert out.returncode == 2 and "--check-replicas N needs N >= 1" in out.stderr
    out = run_fwd9m("run", "--no-enable", "--record-ranks", "d", "--", sys.executable, "-c", "pass", timeout=60)
    assert out.returncode == 2 and "drop --no-enable" in out.stderr


@pytest.mark.parametrize(
    "mode, how, var",
    [
        ("prefix", "compared rank by rank, by the rank prefix of each line", "RANK"),
        ("plain", "compared as a multiset of lines, as they carry no rank prefix", "OMPI_COMM_WORLD_RANK"),
        ("swap", None, "RANK"),
    ],
)
def test_ranks_interleaving_a_shared_stdout_is_no_difference(tmp_path, mode, how, var):
    """Regression: two ranks of a launcher fwd9m does not know (no per-rank output; ranks
    told by RANK, or by Open MPI's variable) that print the same lines in another order
    were NOT REPRODUCIBLE. Lines with a rank
    prefix are compared rank by rank, in order (so two lines of rank 0 that swap are
    still a difference); lines without one as a multiset."""
    from conftest import run_fwd9m

    work = tmp_path / "work"
    work.mkdir()
    out = run_fwd9m(
        "check",
        "--format",
        "json",
        "-q",
        "--no-hashseed-check",
        "--",
        sys.executable,
        str(Path(__file__).parent / "data" / "distributed" / "two_printers.py"),
        cwd=work,
        env={"ORDER_FILE": str(tmp_path / "order"), "PRINT": mode, "RANK_VAR": var},
        timeout=300,
    )
    result = json.loads(out.stdout)
    # the final state is compared rank by rank, the rank told by RANK or by Open MPI's variable
    assert any("rank 0: 0 difference(s), rank 1: 0 difference(s)" in n for n in result["notes"]), out.stdout
    if how is None:
        assert out.returncode == 1 and [f["source"] for f in result["findings"]] == ["stdout"], out.stdout
        return
    assert out.returncode == 0 and result["findings"] == [], out.stdout
    assert any(
        n.startswith("the shared standard output differs only in how the ranks' lines interleave in run 2 (" + how)
        for n in result["notes"]
    ), result["notes"]


@pytest.mark.parametrize("mode, reproducible", [("prefix", True), ("swap", False), ("plain", False)])
def test_ranks_a_script_starts_itself_interleaving_stdout_is_no_difference(tmp_path, mode, reproducible):
    """Regression (``torch.multiprocessing.spawn`` of two DDP ranks, each printing
    ``[rank r] step ...``): no launcher told fwd9m of the ranks, and lines that only
    interleaved differently were NOT REPRODUCIBLE. Lines of two ranks or more with a rank
    prefix are compared rank by rank, in order; an order change within a rank, or lines
    without a prefix, still differ (nothing says which process wrote them)."""
    from conftest import run_fwd9m

    work = tmp_path / "work"
    work.mkdir()
    out = run_fwd9m(
        "check",
        "--format",
        "json",
        "-q",
        "--no-hashseed-check",
        str(Path(__file__).parent / "data" / "distributed" / "two_printers.py"),
        cwd=work,
        env={"ORDER_FILE": str(tmp_path / "order"), "PRINT": mode, "RANK_VAR": "MY_RANK"},
        timeout=300,
    )
    result = json.loads(out.stdout)
    if not reproducible:
        assert out.returncode == 1 and [f["source"] for f in result["findings"]] == ["stdout"], out.stdout
        return
    assert out.returncode == 0 and result["findings"] == [], out.stdout
    assert any("compared rank by rank, by the rank prefix of each line" in n for n in result["notes"]), result


def test_finding_the_model_of_an_optimizer_warns_nothing():
    # scanning live objects with isinstance read torch.distributed.reduce_op's __class__,
    # which printed torch's FutureWarning into the user's output
    import warnings

    torch = pytest.importorskip("torch")

    from fwd9m.torch._model import model_of

    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert model_of(optimizer) is model
    assert [str(w.message) for w in caught] == []


def test_a_rank_trace_is_named_when_its_process_ends_and_never_replaces_another(tmp_path, monkeypatch):
    # fwd9m run --record-ranks with torch.multiprocessing.spawn: every child (and the
    # parent) looked like rank 0 when it imported torch, and all wrote rank0.trace at once
    # (a trace "truncated inside its header"); the name is now decided at the end
    import os

    from fwd9m.distributed import _debug

    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "TF_CONFIG"):
        monkeypatch.delenv(var, raising=False)

    def ended(name: str, joined: dict) -> list[str]:
        pending = tmp_path / f".pending-{name}.trace"
        pending.write_text(name)
        _debug._settle(str(pending), str(tmp_path), joined)
        return sorted(p.name for p in tmp_path.iterdir())

    assert ended("child1", {"rank": 1}) == ["rank1.trace"]  # spawned, joined as rank 1
    assert ended("child0", {"rank": 0}) == ["rank0.trace", "rank1.trace"]
    parent = ended("parent", {})  # never joined a group, no launcher rank: rank 0 was taken
    assert parent == ["rank0.trace", "rank1.trace", f"single-{os.getpid()}.trace"]
    assert (tmp_path / "rank0.trace").read_text() == "child0"  # not replaced
