"""Seeder and the data-loading helpers (DataLoader workers, samplers, tf.data seeds)."""

from __future__ import annotations

import random

import pytest

np = pytest.importorskip("numpy")

from fwd9m import data  # noqa: E402
from fwd9m.errors import ConfigurationError  # noqa: E402
from fwd9m.seed import Seeder, derive_seed  # noqa: E402

# ------------------------------------------------------------------ Seeder


def test_seeder_coordinates_do_not_collide():
    s = Seeder(1, rank=0, world_size=2)
    seeds = {s.seed("t", epoch=e, step=k) for e in range(30) for k in range(30)}
    assert len(seeds) == 900
    assert s.seed("t", epoch=1, step=12) != s.seed("t", epoch=11, step=2)
    assert s.seed("t", epoch=0) != s.seed("t", epoch=None)


def test_seeder_ranks_and_shared(monkeypatch):
    a, b = Seeder(5, rank=0, world_size=2), Seeder(5, rank=1, world_size=2)
    assert a.seed("drop", epoch=1) != b.seed("drop", epoch=1)
    assert a.seed("init", shared=True) == b.seed("init", shared=True)
    assert a.seed("x", worker=0) != a.seed("x", worker=1)
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert Seeder(5).rank == 1 and Seeder(5).seed("drop", epoch=1) == b.seed("drop", epoch=1)
    with pytest.raises(ConfigurationError, match="rank"):
        Seeder(5, rank=2, world_size=2)
    assert Seeder(5, rank=0, world_size=1).seed("a", bits=32) < 2**32
    assert s_golden() == derive_seed(5, "fwd9m.Seeder", "drop", 1, None, 1, None)


def test_seeder_without_seed_uses_env_else_warns_a_fresh_one(monkeypatch, caplog):
    """The same fallback as seed_everything (one function): FWD9M_SEED, else fresh."""
    monkeypatch.setenv("FWD9M_SEED", "77")
    assert Seeder().base_seed == 77
    monkeypatch.setenv("FWD9M_SEED", "not-an-int")
    with pytest.raises(ConfigurationError, match="FWD9M_SEED"):
        Seeder()
    monkeypatch.delenv("FWD9M_SEED")
    with caplog.at_level("WARNING", logger="fwd9m"):
        s = Seeder()
    assert 0 <= s.base_seed < 2**32
    assert (
        f"Seeder: no seed given and FWD9M_SEED unset; using fresh random seed "
        f"{s.base_seed}. Pass seed={s.base_seed}" in caplog.text
    )


def s_golden():
    return Seeder(5, rank=1, world_size=2).seed("drop", epoch=1)


def test_seeder_registered_generators_reseeded_per_epoch():
    torch = pytest.importorskip("torch")
    s = Seeder(3, rank=0, world_size=1)
    g = s.register(np.random.default_rng(), "np")
    r = s.register(random.Random(), "py")  # noqa: FWD103  (reseeding on purpose)
    tg = s.register(torch.Generator(), "torch")

    def draws():
        return g.random(), r.random(), torch.rand(1, generator=tg).item()

    s.set_epoch(2)
    a = draws()
    draws()  # extra draws within epoch 2 do not affect epoch 3
    s.set_epoch(3)
    b = draws()
    s.set_epoch(2)
    assert draws() == a
    s.set_epoch(3)
    assert draws() == b != a
    t = Seeder(3, rank=0, world_size=1)
    assert t.numpy("x", epoch=1).random() == t.numpy("x", epoch=1).random()
    assert torch.equal(torch.rand(2, generator=t.torch("x")), torch.rand(2, generator=t.torch("x")))


# ------------------------------------------------------------------ DataLoader workers


class GenDataset:
    """A dataset holding a NumPy Generator: without reseeding, every forked/spawned
    worker starts from a copy of the same generator state."""

    def __init__(self):
        self.rng = np.random.default_rng(0)

    def __len__(self):
        return 8

    def __getitem__(self, i):
        import torch.utils.data

        return torch.utils.data.get_worker_info().id, float(self.rng.random())


def _per_worker(init_fn, seed=1):
    torch = pytest.importorskip("torch")
    loader = torch.utils.data.DataLoader(
        GenDataset(),
        batch_size=None,
        num_workers=2,
        worker_init_fn=init_fn,
        generator=data.torch_generator(seed),
        multiprocessing_context="spawn",
    )
    out = {0: [], 1: []}
    for wid, value in loader:
        out[int(wid)].append(value)
    return out


def test_worker_init_fn_distinct_and_reproducible():
    a, b = _per_worker(data.worker_init_fn), _per_worker(data.worker_init_fn)
    assert a == b  # identical across runs
    assert not set(a[0]) & set(a[1])  # distinct streams per worker
    plain = _per_worker(None)
    assert plain[0] == plain[1]  # the bug it fixes: both workers draw the same numbers


def test_worker_init_fn_outside_worker():
    pytest.importorskip("torch")
    with pytest.raises(ConfigurationError, match="inside a DataLoader worker"):
        data.worker_init_fn(0)


def test_reseed_dataset_generators_walks_wrappers():
    torch = pytest.importorskip("torch")
    inner = GenDataset()
    inner.pyrng = random.Random(0)
    inner.tgen = torch.Generator()
    outer = data.SampleSeeded(inner, seed=1)
    assert sorted(data.reseed_dataset_generators(outer, 4)) == ["dataset.pyrng", "dataset.rng", "dataset.tgen"]


# ------------------------------------------------------------------ samplers


def test_resumable_sampler():
    pytest.importorskip("torch")
    s = data.ResumableSampler(10, seed=3)
    s.set_epoch(1)
    full = list(s)
    assert sorted(full) == list(range(10)) and full == s.order(1) != s.order(2)
    s.advance(4)
    st = s.state_dict()
    t = data.ResumableSampler(10, seed=3)
    t.load_state_dict(st)
    t.set_epoch(1)  # no-op right after restore
    assert list(t) == full[4:] and len(t) == 6
    t.set_epoch(2)
    assert list(t) == s.order(2)
    assert list(data.ResumableSampler(3, seed=0, shuffle=False, with_epoch=True)) == [(0, 0), (0, 1), (0, 2)]
    with pytest.raises(ConfigurationError, match="seed"):
        data.ResumableSampler(10, seed=4).load_state_dict(st)


class Aug:
    def __len__(self):
        return 5

    def __getitem__(self, i):
        import torch

        return i, random.random(), float(np.random.rand()), torch.rand(1).item()


def test_sample_seeded_is_order_independent_and_restores_globals():
    torch = pytest.importorskip("torch")
    ds = data.SampleSeeded(Aug(), seed=2)
    ds.set_epoch(1)
    torch.manual_seed(0)
    random.seed(0)
    fwd = [ds[i] for i in range(5)]
    back = [ds[i] for i in reversed(range(5))][::-1]
    assert fwd == back
    assert ds[(1, 3)] == fwd[3] and ds[(2, 3)] != fwd[3]
    after = (random.random(), torch.rand(1).item())
    torch.manual_seed(0)
    random.seed(0)  # noqa: FWD102  (reseeding on purpose)
    assert after == (random.random(), torch.rand(1).item())  # globals untouched


# ------------------------------------------------------------------ tf.data


def test_tf_seeds_and_epochs():
    tf = pytest.importorskip("tensorflow")
    assert 0 <= data.tf_shuffle_seed(1, 0) < 2**31
    assert data.tf_shuffle_seed(1, 0) != data.tf_shuffle_seed(1, 1)
    s = data.tf_stateless_seed(1, "aug")
    assert s.dtype == tf.int64 and s.shape == (2,)
    v = tf.Variable(0, dtype=tf.int64)

    def build(epoch, seed):
        idx = tf.random.experimental.stateless_shuffle(tf.range(6, dtype=tf.int64), seed=seed)
        return tf.data.Dataset.from_tensor_slices(idx).map(
            lambda i: (epoch, i, tf.random.stateless_uniform([], seed=tf.random.fold_in(seed, i))), num_parallel_calls=2
        )

    ds = data.tf_epochs(build, seed=1, epochs=3, first_epoch=v)
    a = [tuple(t.numpy().item() for t in x) for x in ds]
    assert [e for e, _, _ in a] == [0] * 6 + [1] * 6 + [2] * 6
    v.assign(1)  # what the Keras callback does on restore: resume at epoch 1
    b = [tuple(t.numpy().item() for t in x) for x in ds]
    assert b[:12] == a[6:]
