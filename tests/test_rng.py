"""RNG state capture/restore, the file format and its failure modes, seeded()."""

from __future__ import annotations

import io
import json
import os
import random
import zipfile

import pytest

np = pytest.importorskip("numpy")

import fwd9m  # noqa: E402
from fwd9m import rng  # noqa: E402
from fwd9m.errors import ConfigurationError, FileFormatError  # noqa: E402


@pytest.fixture(autouse=True)
def _clean_registry():
    yield
    for name in list(rng.registered()):
        rng.unregister(name)


def _draw_globals():
    out = [random.random(), float(np.random.rand())]
    torch = pytest.importorskip("torch")
    out.append(torch.rand(2).tolist())
    return out


def test_roundtrip_all_frameworks(tmp_path):
    torch = pytest.importorskip("torch")
    tf = pytest.importorskip("tensorflow")
    keras = pytest.importorskip("keras")
    g = rng.register(np.random.default_rng(1), "np")
    tg = rng.register(torch.Generator().manual_seed(3), "torch_gen")
    r = rng.register(random.Random(5), "pyrand")
    tfg = rng.register(tf.random.Generator.from_seed(4), "tfgen")
    sg = rng.register(keras.random.SeedGenerator(7), "sg")
    rs = rng.register(np.random.RandomState(2), "legacy")
    fwd9m.seed_everything(11)

    def draw():
        return (
            random.random(),
            np.random.rand(),
            torch.rand(2).tolist(),
            tf.random.uniform([2]).numpy().tolist(),  # eager op seed from context._rng
            keras.random.uniform([2]).numpy().tolist(),  # global SeedGenerator
            g.random(),
            torch.rand(1, generator=tg).item(),
            r.random(),
            tfg.uniform([1]).numpy().tolist(),
            tf.random.get_global_generator().normal([1]).numpy().tolist(),
            keras.random.uniform([1], seed=sg).numpy().tolist(),
            rs.rand(),
        )

    draw()
    state = rng.capture_rng_state()
    assert {
        "python",
        "numpy",
        "torch",
        "tensorflow",
        "tensorflow.global_generator",
        "keras",
        "user.np",
        "user.torch_gen",
        "user.pyrand",
        "user.tfgen",
        "user.sg",
        "user.legacy",
    } <= set(state)
    a = draw()
    assert draw() != a
    report = rng.restore_rng_state(state)
    assert not report.missing and draw() == a
    # through the file format
    path = rng.save_rng_state(tmp_path / "s.npz", state)
    draw()
    loaded = fwd9m.load_rng_state(path)
    assert draw() == a
    assert set(loaded) == set(state)


def test_keras_model_seed_generators_by_path():
    keras = pytest.importorskip("keras")
    import fwd9m.rng as r

    def make():
        return keras.Sequential([keras.Input((4,)), keras.layers.Dropout(0.5), keras.layers.GaussianNoise(0.1)])

    m = rng.register(make(), "model")
    x = np.ones((2, 4), "float32")
    st = rng.capture_rng_state(["user.model"])["user.model"]
    assert len(st) == 2 and all("seed_generator" in p for p in st)
    a = np.asarray(m(x, training=True))
    r.restore_rng_state({"user.model": st})
    assert (np.asarray(m(x, training=True)) == a).all()


def test_keras_private_api_matches_installed_keras():
    """fwd9m.keras._private's facts hold for the installed Keras: where
    keras.utils.set_random_seed stores the seed, that it drops the global SeedGenerator,
    that keras.random recreates it, and that a model's seed generators are found."""
    keras = pytest.importorskip("keras")
    from fwd9m.keras import _private as kp

    keras.utils.set_random_seed(5)
    assert kp.global_seed() == 5 and kp.global_seed_generator() is None
    keras.random.uniform([1])  # no seed: uses (and creates) the global SeedGenerator
    gen = kp.global_seed_generator()
    assert isinstance(gen, keras.random.SeedGenerator)
    kp.set_global_seed(6)
    kp.set_global_seed_generator(None)
    assert kp.global_seed() == 6 and kp.global_seed_generator() is None
    kp.set_global_seed_generator(gen)
    assert kp.global_seed_generator() is gen
    model = keras.Sequential(
        [keras.Input((4,)), keras.layers.Dropout(0.5), keras.Sequential([keras.layers.GaussianNoise(0.1)])]
    )
    assert len(kp.layer_seed_generators(model)) == 2
    assert kp.layer_seed_generators(keras.layers.Dense(2)) == []


def test_torch_state_dict_weights_only(tmp_path):
    torch = pytest.importorskip("torch")
    fwd9m.seed_everything(3)
    sd = rng.state_dict()
    torch.save({"rng": sd}, tmp_path / "ck.pt")
    a = _draw_globals()
    rng.load_state_dict(torch.load(tmp_path / "ck.pt", weights_only=True)["rng"])
    assert _draw_globals() == a


def test_missing_sources_tolerated_and_reported(caplog):
    st = rng.capture_rng_state(["python"])
    st["user.gone"] = {"state": {}}
    st["frobnicator"] = {}
    report = rng.restore_rng_state(st)
    assert report.missing == ["user.gone", "frobnicator"]
    assert "python" in report.restored and "numpy" in report.not_in_state
    assert "nothing to restore" in caplog.text
    with pytest.raises(ConfigurationError, match="register"):
        rng.restore_rng_state(st, strict=True)


def test_failed_restore_rolls_back():
    torch = pytest.importorskip("torch")
    fwd9m.seed_everything(1)
    good = rng.capture_rng_state()
    fwd9m.seed_everything(2)
    before = _draw_globals()
    fwd9m.seed_everything(2)  # noqa: FWD102  (reseeding on purpose)
    bad = dict(good)
    # passes the structural check but numpy refuses it, after torch was already set
    bad["numpy"] = {"bit_generator": "PCG64", "state": {"state": 1, "inc": 1}, "has_uint32": 0, "uinteger": 0}
    with pytest.raises(ValueError, match="MT19937"):
        rng.restore_rng_state(bad)
    assert _draw_globals() == before
    assert torch is not None


# ------------------------------------------------------------------ file format


def _write(tmp_path, data: bytes, name="s.npz"):
    p = tmp_path / name
    p.write_bytes(data)
    return p


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty", "flip"])
def test_bad_file_clear_error_and_no_rng_change(tmp_path, damage):
    pytest.importorskip("torch")
    fwd9m.seed_everything(5)
    blob = rng.to_bytes()
    data = {
        "truncate": blob[: len(blob) // 2],
        "garbage": b"hello world" * 10,
        "empty": b"",
        "flip": blob[:200] + bytes([blob[200] ^ 0xFF]) + blob[201:],
    }[damage]
    p = _write(tmp_path, data)
    fwd9m.seed_everything(9)
    before = rng.capture_rng_state()
    with pytest.raises(FileFormatError) as exc:
        fwd9m.load_rng_state(p)
    assert str(p) in str(exc.value) and "Fix" in str(exc.value)
    after = rng.capture_rng_state()
    assert rng.to_bytes(after) == rng.to_bytes(before)


def _npz(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _header(**over):
    h = {"format": rng.FORMAT, "version": rng.FORMAT_VERSION, "sources": {}, "versions": {}}
    h.update(over)
    return np.frombuffer(json.dumps(h).encode(), dtype=np.uint8)


def test_unknown_version_and_foreign_files(tmp_path):
    with pytest.raises(FileFormatError, match="format version 99"):
        rng.from_bytes(_npz(__fwd9m_header__=_header(version=99)))
    with pytest.raises(FileFormatError, match="not an fwd9m RNG-state file"):
        rng.from_bytes(_npz(weights=np.zeros(3)))
    with pytest.raises(FileFormatError, match="expected 'fwd9m.rng-state'"):
        rng.from_bytes(_npz(__fwd9m_header__=_header(format="other")))
    with pytest.raises(FileFormatError, match="missing array"):
        rng.from_bytes(_npz(__fwd9m_header__=_header(sources={"x": {"__array__": "a9"}})))
    # object arrays would need pickle: refused
    with pytest.raises(FileFormatError):
        rng.from_bytes(_npz(__fwd9m_header__=_header(), a0=np.array([{}], dtype=object)))
    assert rng.from_bytes(_npz(__fwd9m_header__=_header())) == {}
    with pytest.raises(FileNotFoundError):
        fwd9m.load_rng_state(tmp_path / "nope.npz")


def test_file_has_no_pickle(tmp_path):
    p = rng.save_rng_state(tmp_path / "s.npz")
    with zipfile.ZipFile(p) as z:
        for name in z.namelist():
            with z.open(name) as f:
                arr = np.lib.format.read_array(f, allow_pickle=False)  # plain .npy
                assert arr.dtype != object
    assert not list(tmp_path.glob("*.tmp"))


# ------------------------------------------------------------------ seeded, JAX


def test_seeded_restores_state_and_env(monkeypatch):
    monkeypatch.setenv("FWD9M_SEED", "77")
    random.seed(123)
    np.random.seed(123)
    with fwd9m.seeded(3) as s:
        a = (random.random(), np.random.rand())
        assert s == 3 and os.environ["FWD9M_SEED"] == "3"
    after = (random.random(), np.random.rand())
    random.seed(123)  # noqa: FWD102  (reseeding on purpose)
    np.random.seed(123)
    assert after == (random.random(), np.random.rand())
    with fwd9m.seeded(3):
        assert (random.random(), np.random.rand()) == a
    assert os.environ["FWD9M_SEED"] == "77"
    with pytest.raises(KeyError):
        with fwd9m.seeded(3):
            raise KeyError("x")
    assert os.environ["FWD9M_SEED"] == "77"


def test_jax_key_holder():
    jax = pytest.importorskip("jax")
    k = rng.register(rng.JaxKey(1), "jaxkey")
    k.next()
    st = rng.capture_rng_state(["user.jaxkey"])
    a = jax.random.key_data(k.next())
    rng.restore_rng_state(st)
    assert (jax.random.key_data(k.next()) == a).all()
    blob = rng.to_bytes(st)
    rng.restore_rng_state(rng.from_bytes(blob))
    assert (jax.random.key_data(k.next()) == a).all()


def test_register_rejects_unknown_and_weakrefs():
    with pytest.raises(TypeError, match="cannot register"):
        rng.register(object(), "x")
    r = rng.register(random.Random(1), "tmp")
    assert "tmp" in rng.registered()
    del r
    import gc

    gc.collect()
    assert "tmp" not in rng.registered()


def test_register_dataloader_without_generator_warns():
    torch = pytest.importorskip("torch")
    from fwd9m.errors import Fwd9mWarning

    with pytest.warns(Fwd9mWarning, match="generator=None"):
        rng.register(torch.utils.data.DataLoader(range(4), shuffle=True), "loader")
    loader = rng.register(
        torch.utils.data.DataLoader(range(4), shuffle=True, generator=torch.Generator().manual_seed(1)), "loader"
    )
    st = rng.capture_rng_state(["user.loader"])
    a = list(loader)
    rng.restore_rng_state(st)
    assert list(loader) == a


class _DuckRng:
    """A user generator with only a get_state/set_state/seed API."""

    def __init__(self):
        self.n = 0

    def seed(self, s):
        self.n = s

    def get_state(self):
        return self.n

    def set_state(self, n):
        self.n = n

    def draw(self):
        self.n = (self.n * 6364136223846793005 + 1) % 2**64
        return self.n


def test_duck_typed_generator_registered_and_reseeded(tmp_path):
    from fwd9m.seed import Seeder

    d = rng.register(_DuckRng(), "duck")
    s = Seeder(1, rank=0, world_size=1)
    s.register(d, "duck")
    s.set_epoch(4)
    st = rng.capture_rng_state(["user.duck"])
    a = d.draw()
    fwd9m.load_rng_state(rng.save_rng_state(tmp_path / "d.npz", st))
    assert d.draw() == a


def _edited_file(tmp_path, edit):
    """An RNG-state file of the current Python and NumPy state whose header ``edit`` changed."""
    blob = rng.to_bytes(rng.capture_rng_state(["python", "numpy"]))
    with np.load(io.BytesIO(blob), allow_pickle=False) as z:
        header = json.loads(z["__fwd9m_header__"].tobytes())
        arrays = {k: z[k] for k in z.files if k != "__fwd9m_header__"}
    edit(header)
    raw = json.dumps(header).encode() if isinstance(header, dict) else header
    return _write(tmp_path, _npz(__fwd9m_header__=np.frombuffer(raw, dtype=np.uint8), **arrays))


def _set_pos(h, pos):
    h["sources"]["numpy"]["state"]["pos"] = pos


@pytest.mark.parametrize(
    "edit, says",
    [
        (lambda h: _set_pos(h, 999999), "position 999999"),  # NumPy would read key[999999]: a crash
        (lambda h: _set_pos(h, -1), "position -1"),
        (lambda h: h["sources"]["python"].update(version=-5), "does not fit its generator"),  # was ValueError
        (lambda h: h.update(sources=[[[[]]]] * 2), "not a mapping"),
    ],
)
def test_state_a_generator_would_misread_or_refuse_changes_nothing(tmp_path, edit, says):
    p = _edited_file(tmp_path, edit)
    random.seed(9)
    np.random.seed(9)
    before = (random.getstate(), np.random.get_state()[1].tobytes(), np.random.get_state()[2])
    with pytest.raises(FileFormatError, match=says):
        fwd9m.load_rng_state(p)
    assert before == (random.getstate(), np.random.get_state()[1].tobytes(), np.random.get_state()[2])


def test_deeply_nested_header_is_a_file_format_error():
    deep = b'{"format": "fwd9m.rng-state", "version": 1, "sources": ' + b"[" * 50000 + b"]" * 50000 + b"}"
    with pytest.raises(FileFormatError):  # was a RecursionError
        rng.from_bytes(_npz(__fwd9m_header__=np.frombuffer(deep, dtype=np.uint8)))


# ------------------------------------------------------- untrusted paths and bytes


def _npz_declaring(shape) -> bytes:
    """A ~250-byte archive whose header member declares ``shape`` of uint8 but holds 4 bytes."""
    member = io.BytesIO()
    head = np.lib.format.header_data_from_array_1_0(np.zeros(1, np.uint8))
    head["shape"] = shape
    np.lib.format.write_array_header_1_0(member, head)
    member.write(b"\0" * 4)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("__fwd9m_header__.npy", member.getvalue())
    return out.getvalue()


def test_load_refuses_devices_pipes_and_huge_files(tmp_path):
    """/dev/zero was read until MemoryError and a FIFO hung forever; a file larger than
    any RNG state is refused before reading. Nothing is restored."""
    fifo = tmp_path / "rng.npz"
    os.mkfifo(fifo)
    huge = tmp_path / "huge.npz"
    with open(huge, "wb") as f:  # sparse
        f.truncate(rng._format.MAX_RNG_STATE_BYTES + 1)
    before = random.getstate()
    for path, message in (
        (fifo, "is a named pipe, not a regular RNG-state file"),
        ("/dev/zero", "is a character device"),
        (tmp_path, "is a directory"),
        (huge, "more than any RNG-state file"),
    ):
        with pytest.raises(FileFormatError, match=message):
            fwd9m.load_rng_state(path)
    assert random.getstate() == before


def test_npz_declaring_a_huge_shape_is_a_format_error():
    """200 bytes declaring shape (2**40,) made np.load allocate a terabyte (MemoryError)."""
    data = _npz_declaring((2**40,))
    assert len(data) < 300
    with pytest.raises(FileFormatError, match=r"declares a uint8 array of shape \(1099511627776,\)"):
        rng.from_bytes(data)
    with pytest.raises(FileFormatError):
        rng.from_bytes(_npz_declaring((-5,)))


def test_keras_checkpoint_restore_refuses_a_pipe(tmp_path):
    """RngStateCheckpoint's restore read its file with read_bytes(): a FIFO hung fit()."""
    pytest.importorskip("keras")
    from fwd9m.callbacks import RngStateCheckpoint

    fifo = tmp_path / "rng.npz"
    os.mkfifo(fifo)
    with pytest.raises(FileFormatError, match="is a named pipe"):
        RngStateCheckpoint(fifo).on_train_begin()


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _from_bytes_or_format_error(data: bytes) -> None:
    try:
        rng.from_bytes(data)
    except FileFormatError:
        pass


@_FUZZ
@given(
    cut=st.integers(min_value=0, max_value=3000),
    flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), max_size=4),
)
def test_fuzz_truncated_and_flipped_state_files(cut, flips):
    random.seed(0)
    good = bytearray(rng.to_bytes({"python": random.getstate(), "numpy": np.random.get_state()} if False else None))
    data = good[: max(0, len(good) - cut)]
    for pos, x in flips:
        if data:
            data[pos % len(data)] ^= x
    _from_bytes_or_format_error(bytes(data))


@_FUZZ
@given(data=st.binary(max_size=400))
def test_fuzz_random_bytes(data):
    _from_bytes_or_format_error(b"PK\x03\x04" + data)
    _from_bytes_or_format_error(data)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3),
    max_leaves=12,
)


@_FUZZ
@given(
    sources=st.dictionaries(st.sampled_from(["python", "numpy", "torch", "x", "__array__"]), _json, max_size=3),
    arrays=st.dictionaries(
        st.sampled_from(["a0", "a1"]),
        st.sampled_from([np.zeros(3), np.arange(4, dtype=np.uint32), np.array(["s"]), np.zeros((2, 0))]),
        max_size=2,
    ),
)
def test_fuzz_crafted_headers(sources, arrays):
    """Valid archives whose JSON header names odd sources and arrays: FileFormatError only,
    and no RNG changed."""
    before = random.getstate()
    header = {"format": "fwd9m.rng-state", "version": 1, "sources": sources}
    blob = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    buf = io.BytesIO()
    np.savez(buf, __fwd9m_header__=blob, **arrays)
    try:
        state = rng.from_bytes(buf.getvalue())
        rng._format._restore(state, False, "<fuzz>")
    except FileFormatError:
        assert random.getstate() == before
    random.setstate(before)


def test_save_never_replaces_a_file_that_is_not_an_rng_state(tmp_path):
    """save_rng_state replaced whatever was at its path (a mistyped path: the user's script)."""
    script = tmp_path / "train.py"
    script.write_text("print(1)\n")
    with pytest.raises(ConfigurationError, match="is not an RNG-state file fwd9m wrote.*overwrite=True"):
        fwd9m.save_rng_state(script)
    assert script.read_text() == "print(1)\n"
    with pytest.raises(ConfigurationError, match="is a directory"):
        fwd9m.save_rng_state(tmp_path)
    p = fwd9m.save_rng_state(tmp_path / "rng.npz")
    fwd9m.save_rng_state(p)  # a checkpoint saved again: replaced
    fwd9m.save_rng_state(script, overwrite=True)
    fwd9m.load_rng_state(script)


def test_keras_checkpoint_with_a_malformed_progress_entry_changes_nothing(tmp_path):
    """An epoch entry that is not a count raised TypeError after every RNG was restored."""
    pytest.importorskip("keras")
    from fwd9m import callbacks

    path = tmp_path / "rng.npz"
    for progress in ("x", {"epoch": "3"}, {"epoch": -1}, [1]):
        random.seed(1)
        state = rng.capture_rng_state(["python"])
        random.seed(2)
        state[callbacks._PROGRESS] = progress
        rng.save_rng_state(path, state)
        before = random.getstate()
        with pytest.raises(FileFormatError, match="no RNG was changed"):
            callbacks.RngStateCheckpoint(path).on_train_begin()
        assert random.getstate() == before
