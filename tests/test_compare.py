"""fwd9m.compare: bitwise comparison of nested values, text and files."""

from __future__ import annotations

import collections
import copy
import dataclasses
import itertools
import struct
import subprocess
import sys
from collections import namedtuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fwd9m
from fwd9m.compare import NamedPath, compare, compare_flat, compare_text, flatten, read_structured
from fwd9m.errors import FileFormatError


def one(diffs):
    assert len(diffs) == 1, [d.summary() for d in diffs]
    return diffs[0]


def test_identical_nested_values_have_no_differences():
    Point = namedtuple("Point", "x y")

    @dataclasses.dataclass
    class State:
        w: np.ndarray
        step: int

    value = {"a": [1, 2.5, "s", None, b"x"], "p": Point(np.ones(3), 0.1), "s": State(np.arange(4), 3)}
    assert compare(value, value) == []
    assert list(flatten(value)) == ["a[0]", "a[1]", "a[2]", "a[3]", "a[4]", "p.x", "p.y", "s.w", "s.step"]


def test_differing_leaf_reports_path_counts_magnitudes_and_first_index():
    a = {"model": {"w": np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)}}
    b = {"model": {"w": np.array([[1.0, 2.0], [3.0, np.nextafter(np.float32(4), np.float32(5))]], dtype=np.float32)}}
    d = one(compare(a, b))
    assert (d.path, d.dtype, d.shape, d.n_diff, d.size) == ("model.w", "float32", (2, 2), 1, 4)
    assert d.max_ulp == 1 and d.first_index == (1, 1)
    assert d.max_abs == pytest.approx(4.76837158203125e-07)
    assert "1 of 4 elements differ" in d.summary() and "max 1 ULP" in d.summary()


def test_nan_with_same_bits_is_equal_and_signed_zero_is_not():
    nan = np.array([np.nan, 1.0])
    assert compare(nan, nan.copy()) == []
    other_nan = nan.copy()
    other_nan.view(np.uint64)[0] ^= 1  # a NaN with a different payload
    d = one(compare(nan, other_nan))
    assert d.n_diff == 1 and d.max_abs == 0.0
    d = one(compare(np.array([0.0]), np.array([-0.0])))
    assert d.n_diff == 1 and d.max_abs == 0.0
    assert compare(float("nan"), float("nan")) == []
    assert one(compare(0.0, -0.0)).kind == "values"


def test_ulps_cross_zero_and_float64_extremes_are_exact():
    # -0.0 and +0.0 differ in their bits, so they count as one ULP apart
    d = one(compare(np.array([np.float64(5e-324)]), np.array([-np.float64(5e-324)])))
    assert d.max_ulp == 3
    assert one(compare(np.array([0.0], np.float32), np.array([-0.0], np.float32))).max_ulp == 1
    d = one(compare(np.array([np.inf]), np.array([-np.inf])))
    assert d.max_ulp == 2 * 0x7FF0000000000000 + 1 and d.max_abs == float("inf")
    assert one(compare(1.0, 1.0 + 2**-52)).max_ulp == 1


@settings(max_examples=60, deadline=None)
@given(
    hnp.arrays(
        np.float32,
        hnp.array_shapes(max_dims=2, max_side=5),
        elements=st.floats(width=32, allow_nan=False, allow_infinity=False),
    ),
    st.integers(0, 1000),
)
def test_ulp_distance_matches_nextafter_steps(arr, steps):
    """Moving one element ``steps`` representable floats up gives exactly ``steps`` ULPs
    (fewer steps when it reaches infinity, where nextafter stops)."""
    moved = arr.copy()
    x = moved.reshape(-1)[0]
    for taken in range(steps):
        if np.isinf(x):
            steps = taken
            break
        x = np.nextafter(x, np.float32(np.inf))
    moved.reshape(-1)[0] = x
    diffs = compare(arr, moved)
    if np.signbit(arr.reshape(-1)[0]) and x > 0:
        return  # nextafter skips +0.0 when crossing zero; by bit pattern -0.0/+0.0 is one ULP
    if steps == 0:
        assert diffs == []
    else:
        assert one(diffs).max_ulp == steps and one(diffs).first_index[:1] == (0,) * min(1, arr.ndim)


def test_structure_differences():
    diffs = compare({"a": np.zeros(2), "b": 1}, {"a": np.zeros(3), "c": 1})
    kinds = {d.path: d.kind for d in diffs}
    assert kinds == {"a": "shape", "b": "only_a", "c": "only_b"}
    assert one(compare(np.zeros(2, np.float32), np.zeros(2, np.float64))).kind == "dtype"
    assert one(compare({"x": {"p", "q"}}, {"x": {"p"}})).kind == "value"
    assert compare({"x": {"p", "q"}}, {"x": {"q", "p"}}) == []
    assert one(compare([1, 2], [1, 3])).max_abs == 1.0
    assert one(compare("abc", "abd")).kind == "value"


def test_complex_bool_and_int_arrays():
    assert one(compare(np.array([1 + 1j]), np.array([1 + 2j]))).n_diff == 1
    assert one(compare(np.array([True, False]), np.array([True, True]))).max_abs is None
    d = one(compare(np.array([2**62], np.int64), np.array([2**62 + 3], np.int64)))
    assert d.max_abs == pytest.approx(3.0, abs=1024) and d.max_ulp is None


def test_large_equal_arrays_take_the_fast_path():
    a = np.random.default_rng(0).random(3_000_000, dtype=np.float32)
    assert compare(a, a.copy()) == []
    b = a.copy()
    b[-1] += 1
    assert one(compare(a, b)).first_index == (2_999_999,)


def test_plain_data_imports_no_framework():
    code = (
        "import sys, numpy as np; from fwd9m.compare import compare; "
        "compare({'a': np.ones(2), 'b': [1.0]}, {'a': np.ones(2), 'b': [2.0]}); "
        "print(sorted(m for m in ('torch', 'tensorflow', 'jax', 'keras') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stderr


def test_torch_modules_optimizers_and_bfloat16():
    torch = pytest.importorskip("torch")

    def train(seed):
        torch.manual_seed(seed)
        model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
        opt = torch.optim.Adam(model.parameters())
        model(torch.randn(5, 3)).sum().backward()
        opt.step()
        return {"model": model, "opt": opt}

    assert compare(train(0), train(0)) == []
    paths = {d.path for d in compare(train(0), train(1))}
    assert {"model.0.weight", "model.1.running_mean", "opt.state[0].exp_avg"} <= paths  # int keys in brackets
    a = torch.tensor([1.0, 2.0], dtype=torch.bfloat16)
    b = torch.tensor([1.0, 2.015625], dtype=torch.bfloat16)  # the next bfloat16 after 2.0
    d = one(compare(a, b))
    assert d.dtype == "bfloat16" and d.max_ulp == 1


def test_tensorflow_keras_and_jax_values():
    tf = pytest.importorskip("tensorflow")
    keras = pytest.importorskip("keras")

    def build(seed):
        keras.utils.set_random_seed(seed)
        m = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
        m.compile(optimizer="adam", loss="mse")
        m.fit(np.ones((4, 3)), np.ones((4, 2)), verbose=0)
        return m

    # a second model built in one process is named dense_1: leaves pair up by position
    first, second = build(0), build(0)
    assert compare(first, second) == []
    paths = [d.path for d in compare(build(0), build(1))]
    assert any(p.endswith("kernel") for p in paths) and any("optimizer/" in p for p in paths)
    # ... but only below the user's own keys, which must match exactly
    flat = flatten({"step_0": first})
    assert all(isinstance(k, NamedPath) and k.start == len("step_0") for k in flat), list(flat)
    diffs = compare({"step_0": first}, {"step_1": second})
    assert {d.kind for d in diffs} == {"only_a", "only_b"} and len(diffs) == 2 * len(flat)
    d = one(compare(tf.Variable([1.0, 2.0]), tf.constant([1.0, 2.5])))
    assert d.first_index == (1,)
    jax = pytest.importorskip("jax")
    diffs = compare(
        {"key": jax.random.key(0), "x": jax.numpy.ones(2)}, {"key": jax.random.key(1), "x": jax.numpy.ones(2)}
    )
    assert one(diffs).path == "key" and one(diffs).dtype.startswith("key<")


def test_compare_text_numbers_as_numbers_and_volatile_parts(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("epoch 1 loss 0.50 took 3.2s\n5/5 - 1s 12ms/step - acc 1.0\nat 0x7f00aa11bb22\nend\n")
    b.write_text("epoch 1 loss 0.5 took 4.7s\n5/5 - 2s 30ms/step - acc 1.00\nat 0x7f00cc33dd44\nend\n")
    assert compare_text("stdout", a, b) is None
    b.write_text("epoch 1 loss 0.51 took 4.7s\n5/5 - 2s 30ms/step - acc 1.0\nat 0x7f00cc33dd44\nfin\n")
    d = compare_text("stdout", a, b)
    assert d.n_diff == 2 and d.first_index == (1,) and d.max_abs == pytest.approx(0.01)
    b.write_text("epoch 1 loss 0.50 took 3.2s\n")
    d = compare_text("stdout", a, b)
    assert d.first_index == (2,) and d.b.startswith("<no line")


def test_read_structured_files(tmp_path):
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.save(tmp_path / "w.npy", w)
    np.savez(tmp_path / "p.npz", w=w, b=np.ones(2))
    assert set(read_structured(tmp_path / "p.npz")) == {"w", "b"}
    assert read_structured(tmp_path / "w.npy")[""].array.tolist() == w.tolist()
    safetensors = pytest.importorskip("safetensors.numpy")
    safetensors.save_file({"w": w}, str(tmp_path / "p.safetensors"))
    leaf = read_structured(tmp_path / "p.safetensors")["w"]
    assert leaf.dtype == "float32" and leaf.array.tolist() == w.tolist()
    (tmp_path / "bad.npy").write_bytes(b"not numpy")
    with pytest.raises(FileFormatError, match="bad.npy"):
        read_structured(tmp_path / "bad.npy")


def test_read_safetensors_bfloat16_without_a_framework(tmp_path):
    torch = pytest.importorskip("torch")
    st_torch = pytest.importorskip("safetensors.torch")
    st_torch.save_file({"w": torch.tensor([1.0, 2.0], dtype=torch.bfloat16)}, str(tmp_path / "b.safetensors"))
    leaf = read_structured(tmp_path / "b.safetensors")["w"]
    assert leaf.dtype == "bfloat16" and [float(x) for x in leaf.array] == [1.0, 2.0]


def test_compare_text_progress_bars_redraw_like_a_terminal(tmp_path):
    """Keras's progress bar redraws a line with \\r a timing-dependent number of times,
    pads with backspaces and colours with ANSI escapes; only the finished line counts."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text(
        "\x1b[1m1/8\x1b[0m 104ms/step - loss: 6.24\x08\x08\x08\r\x1b[1m8/8\x1b[0m 9ms/step - loss: 5.59  \n", newline=""
    )
    b.write_text(
        "\x1b[1m1/8\x1b[0m 12ms/step - loss: 6.24\x08\x08\r\x1b[1m4/8\x1b[0m 3ms/step - loss: 5.9\x08\r"
        "\x1b[1m8/8\x1b[0m 10ms/step - loss: 5.59 \n",
        newline="",
    )
    assert compare_text("stdout", a, b) is None
    b.write_text("\x1b[1m8/8\x1b[0m 10ms/step - loss: 5.58 \n", newline="")
    assert compare_text("stdout", a, b).max_abs == pytest.approx(0.01)


def test_saved_model_fingerprint_ignores_the_per_save_uuid(tmp_path):
    """fingerprint.pb: field 1 saved_model_checksum (varint), field 7 uuid (string),
    written here in protobuf wire format by hand."""

    def message(checksum: int, uuid: bytes) -> bytes:
        return bytes([0x08, checksum]) + bytes([0x3A, len(uuid)]) + uuid

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "fingerprint.pb").write_bytes(message(5, b"1234"))
    (tmp_path / "b" / "fingerprint.pb").write_bytes(message(5, b"9876"))
    fa = read_structured(tmp_path / "a" / "fingerprint.pb")
    assert fa == {"saved_model_checksum": 5}
    assert fa == read_structured(tmp_path / "b" / "fingerprint.pb")


def test_differing_keys_are_differences_not_a_renaming():
    """Regression: ``{"step_0": x}`` and ``{"step_1": x}`` were paired by position as one
    leaf (auto-numbering was guessed from the key text) and reported identical."""
    assert [(d.path, d.kind) for d in compare({0: 1.0}, {1: 1.0})] == [("[0]", "only_a"), ("[1]", "only_b")]
    assert len(compare({"epoch3": 1}, {"epoch4": 1})) == 2
    diffs = compare({"step_0": 1.0}, {"step_1": 1.0})
    assert [(d.path, d.kind) for d in diffs] == [("step_0", "only_a"), ("step_1", "only_b")]
    assert diffs[0].summary() == "step_0: only in the first run (float), not in the other"
    assert diffs[1].summary() == "step_1: only in the other run (float), not in the first"
    # keys that look like Keras names are still the user's keys
    assert (
        len(
            compare(
                {"net/dense/kernel": 1, "adam/dense_1_kernel_m": 2},
                {"net_1/dense_2/kernel": 1, "adam/dense_3_kernel_m": 2},
            )
        )
        == 4
    )


def test_only_names_a_framework_made_up_pair_up():
    """NamedPath marks where Keras/TF names begin (flatten sets it; here by hand)."""
    w = 1.0
    a = {NamedPath("m.seq/dense/kernel", 1): w, NamedPath("m.seq/dense_1/kernel", 1): w + 1}
    b = {NamedPath("m.seq_1/dense_2/kernel", 1): w, NamedPath("m.seq_1/dense_3/kernel", 1): w + 1}
    assert compare_flat(a, b) == []
    d = one(compare_flat(a, {**b, NamedPath("m.seq_1/dense_3/kernel", 1): w}))
    assert d.path == "m.seq/dense_1/kernel" and d.kind == "values"  # named as in run 1
    # an extra layer in one run: counts differ, nothing is paired by position
    extra = {**b, NamedPath("m.seq_1/dense_4/kernel", 1): w}
    assert {d.kind for d in compare_flat(a, extra)} == {"only_a", "only_b"}
    # the user's part of the path (before start) must match exactly
    c = {NamedPath("n.seq_1/dense_2/kernel", 1): w, NamedPath("n.seq_1/dense_3/kernel", 1): w + 1}
    assert len(compare_flat(a, c)) == 4
    # a plain key that would collide with a new name: no renaming at all
    mixed = {**b, "m.seq/dense/kernel": w}
    assert compare_flat(a, mixed) != []
    assert NamedPath("x.d_1", 1) == "x.d_1" and {NamedPath("x.d_1", 1): 0}["x.d_1"] == 0
    import pickle

    back = pickle.loads(pickle.dumps(NamedPath("x.d_1", 1)))
    assert isinstance(back, NamedPath) and back.generic == "x.d"


@dataclasses.dataclass
class _A:
    lr: float


@dataclasses.dataclass
class _B:
    rate: float


_P = collections.namedtuple("_P", "u v")


@pytest.mark.parametrize(
    "a, b, kinds",
    [
        ([1.0, 2.0], [1.0, 2.0, 3.0], {"only_b"}),  # list lengths
        ({"x": 1}, {"x": 1.0}, {"type"}),  # int vs float
        ({"x": True}, {"x": 1}, {"type"}),  # bool vs int
        ({"x": np.zeros(2)}, {"x": None}, {"type"}),  # array vs None
        ({"x": _A(0.1)}, {"x": _B(0.1)}, {"type", "only_a", "only_b"}),  # dataclass class and fields
        ({"x": np.zeros(2, np.float32)}, {"x": np.zeros(2, np.float64)}, {"dtype"}),
        ({"x": np.zeros((2, 1))}, {"x": np.zeros((1, 2))}, {"shape"}),
        ({"x": [], "y": 1}, {"y": 1}, {"only_a"}),  # an empty container is a leaf
        ({"x": {}}, {"y": {}}, {"only_a", "only_b"}),
        ({"x": []}, {"x": {}}, {"type"}),
        ({"x": []}, {"x": [0]}, {"only_a", "only_b"}),
        ({1: 0}, {"1": 0}, {"only_a", "only_b"}),  # int vs str key
        ({"x": {1: 5}}, {"x": {"1": 5}}, {"only_a", "only_b"}),  # nested
        ({1.0: 0}, {1: 0}, {"only_a", "only_b"}),  # float vs int key
        ({True: 0}, {1: 0}, {"only_a", "only_b"}),  # bool vs int key
        ({None: 0}, {"None": 0}, {"only_a", "only_b"}),
        ({(1, 2): 0}, {"(1, 2)": 0}, {"only_a", "only_b"}),
        ((1, 2), [1, 2], {"type"}),  # container type
        ({"x": (1,)}, {"x": [1]}, {"type"}),
        ({"x": [[1]]}, {"x": [(1,)]}, {"type"}),
        ([0], {0: 0}, {"type"}),  # a list and an int-keyed dict
        ((), [], {"type"}),  # empty, as the whole value
        ({"x": _P(1, 2)}, {"x": (1, 2)}, {"type", "only_a", "only_b"}),  # named tuple fields vs indices
    ],
)
def test_structural_differences_are_never_the_same_leaf(a, b, kinds):
    diffs = compare(a, b)
    assert diffs and {d.kind for d in diffs} == kinds, [d.summary() for d in diffs]
    assert compare(b, a) and compare(a, a) == [] and compare(b, b) == []
    assert all(d.summary() for d in diffs)


def test_key_and_container_notation():
    """String keys keep their dotted paths; any other key is its repr in brackets, and a
    container of another kind at one path is one "type" difference, listed first."""
    assert list(flatten({"a": {"b": 1, 2: 3, (4, "5"): 6, None: 7}, "c": [8]})) == [
        "a.b",
        "a[2]",
        "a[(4, '5')]",
        "a[None]",
        "c[0]",
    ]
    assert flatten({"a": (1, [2]), "b": {}}).containers == {"<value>": "dict", "a": "tuple", "a[1]": "list"}
    assert flatten(collections.OrderedDict(x=1)).containers == {"<value>": "dict"}  # any mapping is a dict
    assert compare(collections.OrderedDict(x=1), collections.defaultdict(int, x=1)) == []
    (d, *rest) = compare({"w": (1.0, 2.0)}, {"w": [1.0, 2.5]})
    assert d.summary() == "w: type differs: tuple vs list" and rest[0].path == "w[1]"
    assert compare(1, 1) == [] and compare((), ()) == [] and compare([], [])[:1] == []


def test_a_leaf_whose_equality_raises_is_an_error_not_a_value_difference():
    class BadEq:
        def __eq__(self, other):
            raise ValueError("eq \x1b[2J boom")

        __hash__ = object.__hash__

    d = one(compare({"m": BadEq()}, {"m": BadEq()}))
    assert d.kind == "error" and d.dtype.endswith("BadEq") and "0x" not in d.summary()
    assert d.summary().startswith("m: cannot be compared: == on a ") and "ValueError: eq \\x1b[2J boom" in d.summary()


_KEYS = st.sampled_from(["x", "x_1", "x_2", "y"])
_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(0, 2),
    st.sampled_from([0.0, -0.0, 1.0, float("nan")]),
    st.sampled_from(["s", ""]),
    hnp.arrays(
        st.sampled_from([np.float32, np.float64, np.int32]),
        hnp.array_shapes(min_dims=0, max_dims=2, max_side=2),
        elements=st.integers(0, 1),
    ),
)
_ANY_KEYS = _KEYS | st.sampled_from([0, 1, "0", "1", 1.0, True, None, "None", (1,), "(1,)"])
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(_ANY_KEYS, inner, max_size=3)
    ),
    max_leaves=6,
)


def _same(a, b) -> bool:
    """Strict equality: same types, keys, lengths, dtypes, shapes and bits."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):  # keys of one type each: 1 == 1.0 == True as dict keys
        return {(type(k), k) for k in a} == {(type(k), k) for k in b} and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    return a == b


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_KEYS, _VALUES, min_size=1, max_size=3), st.dictionaries(_KEYS, _VALUES, min_size=1, max_size=3))
def test_no_difference_exactly_when_strictly_equal(a, b):
    """Property: compare() finds nothing exactly when the two values are strictly equal,
    for nested dicts (keys that differ only by a number, or by type: 1, "1", 1.0, True),
    lists and tuples of mixed leaves."""
    assert (compare(a, b) == []) == _same(a, b), (a, b, [d.summary() for d in compare(a, b)])
    assert compare(a, copy.deepcopy(a)) == []


def test_check_reports_structural_differences_end_to_end():
    """fwd9m.check(fn) in-process: each of these returns a different structure per call."""
    calls = itertools.count()
    keys = fwd9m.check(lambda: {f"step_{next(calls)}": 1.0})
    assert not keys and "step_0: only in the first run" in keys.report()
    calls = itertools.count()
    grows = fwd9m.check(lambda: [1.0] * (1 + next(calls)))
    assert not grows and "[1]: only in the other run" in grows.report()
    calls = itertools.count()
    types = fwd9m.check(lambda: {"loss": 1 if next(calls) == 0 else 1.0, "w": None if next(calls) > 1 else np.ones(2)})
    assert not types and {d.kind for d in (f.diff for f in types.findings)} == {"type"}
    calls = itertools.count()
    dtypes = fwd9m.check(lambda: np.zeros(2, np.float32 if next(calls) == 0 else np.float64), runs=3)
    assert not dtypes and len(dtypes.findings) == 2
    assert fwd9m.check(lambda: {"step_0": [1.0, {"a": []}], "x": np.arange(3)})


def test_differing_lines_show_control_characters_as_escapes(tmp_path):
    """A differing line is shown as written but with ESC, BEL, tabs, carriage returns and
    bidi overrides escaped (a report printed to a terminal must not recolour or clear
    it); other unicode is kept, and a long line is clipped without cutting an escape."""
    from fwd9m.compare import _clip, escape_control

    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("\x1b[31mred 1\x1b[0m\a\tµ 日本 \u202eevil\n", newline="")
    b.write_text("\x1b[31mred 2\x1b[0m\a\tµ 日本 \u202eevil\n", newline="")
    d = compare_text("stdout", a, b)
    assert d.a == "\\x1b[31mred 1\\x1b[0m\\x07\\tµ 日本 \\u202eevil"
    assert "\x1b" not in d.summary() and "red 2" in d.b
    assert _clip("\x1b" * 100, 20) == "\\x1b" * 4 + "..."
    assert _clip("\r\n") == "" and _clip("x" * 160) == "x" * 160 and len(_clip("x" * 161)) == 160
    assert escape_control("C:\\temp\x00\x9b\u2028") == "C:\\temp\\x00\\x9b\\u2028"
    diffs = compare({"\x1b[2Jkey": 1}, {"key": 1})
    assert all("\x1b" not in d.summary() for d in diffs) and "\\x1b[2Jkey" in diffs[0].summary()


def test_check_script_report_has_no_raw_escape(tmp_path):
    """End to end: a script printing a colour code and its process id (different in
    every run) is not reproducible, and the report shows the code escaped."""
    script = tmp_path / "colour.py"
    script.write_text("import os\nprint('\\x1b[31mred\\x1b[0m', os.getpid())\n")
    from fwd9m.check import check_script

    result = check_script(str(script))
    report = result.report()
    assert not result and "\\x1b[31mred" in report and "\x1b" not in report, report
    assert "\x1b" not in result.to_json()


def test_run_folders_named_by_the_clock_or_a_tracker_pair_up():
    """Hydra's outputs/<date>/<time>/, wandb's offline-run-<time>-<run id>/ (the id in
    its file names too), MLflow's mlruns/<exp>/<run id>/ and CleanRL's
    runs/<exp>__<seed>__<unix time>/ read the same in every run."""
    from fwd9m.compare._files import pair_names, renamed_folders

    a = pair_names(
        [
            "outputs/2026-12-02/10-31-40/.hydra/config.yaml",
            "wandb/offline-run-20261202_103236-gb0sf5m7/run-gb0sf5m7.wandb",
            "mlruns/0/0123456789abcdef0123456789abcdef/metrics/loss",
            "runs/cleanrl__1__1796207800/q.pt",
        ]
    )
    assert sorted(a.values()) == [
        "mlruns/0/<run id>/metrics/loss",
        "outputs/<time>/<time>/.hydra/config.yaml",
        "runs/cleanrl__1__<time>/q.pt",
        "wandb/offline-run-<time>-<run id>/run-<run id>.wandb",
    ]
    renames = dict(renamed_folders(a))
    assert renames["outputs/2026-12-02/10-31-40"] == "outputs/<time>/<time>" and renames["gb0sf5m7"] == "<run id>"
    assert pair_names(["model_1024-64-32.pt", "ckpt/12-30-45/x.pt"]) == {
        "model_1024-64-32.pt": "model_1024-64-32.pt",
        "ckpt/12-30-45/x.pt": "ckpt/12-30-45/x.pt",  # a time of day alone, under no date: kept
    }


def test_archives_are_compared_by_content_not_by_their_headers_times(tmp_path):
    import gzip
    import zipfile

    from fwd9m.compare import compare_flat
    from fwd9m.compare._files import read_structured

    for i, when in enumerate(((2020, 1, 1, 0, 0, 0), (2026, 12, 2, 10, 0, 0))):
        with zipfile.ZipFile(tmp_path / f"m{i}.zip", "w") as z:
            z.writestr(zipfile.ZipInfo("weights.bin", when), b"\x00\x01")
            z.writestr(zipfile.ZipInfo("data", when), f'{{"start_time": {i}, "f": "<function f at 0x7f{i}>"}}')
        with gzip.GzipFile(tmp_path / f"l{i}.gz", "wb", mtime=1000 + i) as g:
            g.write(b"loss 0.5\n")
    for name in ("m0.zip", "l0.gz"):
        fa, fb = read_structured(tmp_path / name), read_structured(tmp_path / name.replace("0", "1"))
        assert (tmp_path / name).read_bytes() != (tmp_path / name.replace("0", "1")).read_bytes()
        assert not compare_flat(fa, fb), name
