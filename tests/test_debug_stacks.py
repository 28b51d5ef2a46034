"""``fwd9m debug`` on real stacks, each script written the way its users write it
(issue 27, case 6): a Keras ``tf.data`` pipeline with a random flip in a parallel
``map``, Keras on JAX unseeded, scikit-learn's ``KMeans`` feeding a torch model, and a
Keras ``PyDataset`` with workers. Each runs the real framework twice, as a user would."""

from __future__ import annotations

import pytest
from conftest import debug_script as _debug

TF_PARALLEL_FLIP = """\
import numpy as np
import tensorflow as tf
import keras

keras.utils.set_random_seed(0)

x = np.random.default_rng(0).uniform(size=(64, 16, 16, 3)).astype("float32")
y = (np.arange(64) % 4).astype("int64")


def augment(image, label):
    image = tf.image.random_flip_left_right(image)
    return image, label


ds = tf.data.Dataset.from_tensor_slices((x, y))
ds = ds.map(augment, num_parallel_calls=tf.data.AUTOTUNE)
ds = ds.batch(16).prefetch(tf.data.AUTOTUNE)

model = keras.Sequential([
    keras.Input((16, 16, 3)),
    keras.layers.Conv2D(4, 3, activation="relu"),
    keras.layers.GlobalAveragePooling2D(),
    keras.layers.Dense(4),
])
model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
history = model.fit(ds, epochs=1, verbose=0)
print("loss", history.history["loss"][-1])
"""


@pytest.mark.slow
def test_a_random_flip_in_a_parallel_tf_data_map_is_named_unconfirmed(tmp_path):
    """The flip's ops run on tf.data's threads: they are not recorded (never paired by
    order, never a kernel blamed); the batch differs, and the likely source is the map's
    random op at its line, unconfirmed, with the catalog's parallel-map entry. Before:
    "CULPRIT OP ... Conv2D ... not in fwd9m's catalog (please report it)" (the nested
    train step's batch argument was never digested), and earlier ReverseV2 from the
    map's threads paired by order."""
    pytest.importorskip("tensorflow")
    pytest.importorskip("keras")
    code, lines = _debug(tmp_path, "train.py", TF_PARALLEL_FLIP)
    report = "\n".join(lines)
    if code == 0 and lines[0].startswith("reproducible: "):  # 5 of 5 differed here (2 cores)
        pytest.skip("the map's threads drew in the same order in both runs")
    assert code == 1, report
    assert lines[0].startswith("EXTERNAL SOURCE (data, unconfirmed): first divergence at op #"), report
    assert "unconfirmed: the input batch differs" in lines[1] and "RandomUniform at train.py:12" in lines[1], report
    assert "  op:       IteratorGetNext" in lines, report
    assert "catalog: tensorflow.data-parallel-map" in report, report
    assert "enable_op_determinism()" in report, report
    assert "ds.shuffle(" not in report, report
    assert "ReverseV2" not in report and "please report it" not in report and "CULPRIT" not in report, report


KERAS_PYDATASET = """\
import numpy as np
import keras

keras.utils.set_random_seed(0)


class Noisy(keras.utils.PyDataset):
    def __init__(self, x, y, batch_size=16, **kwargs):
        super().__init__(**kwargs)
        self.x, self.y, self.batch_size = x, y, batch_size

    def __len__(self):
        return len(self.x) // self.batch_size

    def __getitem__(self, i):
        s = slice(i * self.batch_size, (i + 1) * self.batch_size)
        noise = np.random.default_rng().normal(0, 0.1, self.x[s].shape).astype("float32")
        return self.x[s] + noise, self.y[s]


x = np.linspace(0, 1, 64 * 8, dtype="float32").reshape(64, 8)
y = x.sum(axis=1, keepdims=True)
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4), keras.layers.Dense(1)])
model.compile("sgd", "mse")
model.fit(Noisy(x, y, workers=4), epochs=1, verbose=0)
print(model.evaluate(x, y, verbose=0))
"""


@pytest.mark.slow
def test_noise_in_a_pydataset_with_workers_names_its_draw_and_catalog_entry(tmp_path):
    """The batch differs at IteratorGetNext; the source is the draw in ``__getitem__``,
    which the PyDataset's workers run, with the catalog entry ``keras.pydataset-workers``
    (as check names it) and its fix; no tf.data shuffle the script does not have. Before:
    "CULPRIT OP ... MatMul ... please report it" (the train step's batch argument was
    never digested)."""
    pytest.importorskip("keras")
    code, lines = _debug(tmp_path, "train.py", KERAS_PYDATASET)
    report = "\n".join(lines)
    assert code == 1, report
    assert lines[0].startswith("EXTERNAL SOURCE (data): first divergence at op #"), report
    assert "source: the random draw in the PyDataset's workers" in lines[1], report
    assert "train.py:17 in Noisy.__getitem__ (np.random.default_rng)" in lines[1], report
    assert "catalog: keras.pydataset-workers" in report, report
    assert report.index("catalog: keras.pydataset-workers") == report.index("catalog: "), report
    assert "shuffle(" not in report and "CULPRIT" not in report, report


SKLEARN_KMEANS = """\
import numpy as np
import torch
from sklearn.cluster import KMeans

torch.manual_seed(0)
points = np.random.default_rng(0).normal(size=(200, 4)).astype("float32")
kmeans = KMeans(n_clusters=4, n_init=1).fit(points)
centers = torch.from_numpy(kmeans.cluster_centers_.astype("float32"))

model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    loss = (model(centers) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(step, loss.item())
"""


def test_kmeans_without_random_state_is_named_at_its_line(tmp_path):
    """The centers differ where torch reads them (``torch.from_numpy`` at line 8); the
    report names the ``KMeans`` call at line 7 that made them, with ``random_state=0``
    as the fix. Before: only line 8, and a DataLoader fix for a script without one."""
    pytest.importorskip("sklearn")
    pytest.importorskip("torch")
    code, lines = _debug(tmp_path, "train.py", SKLEARN_KMEANS)
    report = "\n".join(lines)
    assert code == 1, report
    assert lines[0].startswith("EXTERNAL SOURCE (data): first divergence at op #0"), report
    assert "made at train.py:7 by KMeans(n_clusters=4, n_init=1) without random_state" in lines[1], report
    assert "    KMeans(n_clusters=4, n_init=1, random_state=0)" in lines, report
    assert "DataLoader(" not in report.split("  fix:")[1], report


def test_the_origin_of_a_value_is_read_only_from_installed_libraries(tmp_path):
    """A call of the script's own module is never imported to read its signature."""
    from fwd9m._lint_hints import unseeded_origin

    (tmp_path / "mine.py").write_text("raise SystemExit('imported')\n")
    (tmp_path / "s.py").write_text(
        "from mine import make\nimport numpy as np\nv = make(3)\nw = np.random.default_rng()\nprint(v, w)\n"
    )
    assert unseeded_origin(tmp_path / "s.py", 5) == (
        4,
        "np.random.default_rng()",
        "seed",
        "np.random.default_rng(seed=0)",
    )
    assert unseeded_origin(tmp_path / "s.py", 3) is None


KERAS_JAX_UNSEEDED = """\
import os

os.environ["KERAS_BACKEND"] = "jax"
import keras
import numpy as np

x = np.linspace(0, 1, 64 * 8, dtype="float32").reshape(64, 8)
y = (x.sum(axis=1, keepdims=True) > 4).astype("float32")

model = keras.Sequential([
    keras.Input((8,)),
    keras.layers.Dense(16, activation="relu"),
    keras.layers.Dropout(0.5),
    keras.layers.Dense(1),
])
model.compile(optimizer="adam", loss="mse")
model.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0)
print(model.evaluate(x, y, verbose=0))
"""


@pytest.mark.slow
def test_keras_on_jax_unseeded_names_the_seed_generator_state(tmp_path):
    """The first differing value is a Keras SeedGenerator's [seed, counter] state: said
    so, with keras.utils.set_random_seed as the fix. Before: "the input batch differs"
    with a NumPy batch-order fix."""
    pytest.importorskip("keras")
    pytest.importorskip("jax")
    code, lines = _debug(tmp_path, "train.py", KERAS_JAX_UNSEEDED)
    report = "\n".join(lines)
    assert code == 1, report
    assert lines[0].startswith("EXTERNAL SOURCE (seed): first divergence at op #"), report
    assert lines[1].startswith("  Keras SeedGenerator state differs: seed with keras.utils.set_random_seed(S)"), report
    assert "    keras.utils.set_random_seed(0)" in " ".join(lines) or any(
        "keras.utils.set_random_seed(0)" in x for x in lines
    )
    assert "input batch" not in report and "batches = np.random" not in report, report


def test_a_culprit_outside_the_catalog_that_no_replay_confirmed_is_unconfirmed():
    """Issue 27: an op is never blamed as a nondeterministic kernel "not in catalog"
    without a replay: when the replay could not run (or --no-replay), it is unconfirmed,
    with no "please report it"; an op the catalog lists keeps its entry."""
    from dataclasses import replace

    from fwd9m.debug._compare import DebugReport, Divergence
    from fwd9m.debug._explain import explain, not_replayed

    first = Divergence(
        kind="culprit",
        seq=49,
        step=0,
        op="ReverseV2",
        module="random_flip_left_right",
        phase="forward",
        location="train.py:12",
        node="",
        device="CPU:0",
        detail="all 3 inputs of ReverseV2 are bit-identical in both runs but output(s) [0] differ: "
        "the op is nondeterministic",
    )
    first = replace(first, explanation=explain(first, "tensorflow", {}, {}))
    assert "please report it" in first.explanation["headline"]  # what the diff alone says
    ex = not_replayed(first, "tensorflow", "--no-replay")
    assert ex["unconfirmed"] and ex["headline"].startswith("unconfirmed: ReverseV2 ")
    assert "not replayed (--no-replay)" in ex["headline"] and "please report it" not in ex["headline"]
    report = DebugReport(
        a="a",
        b="b",
        framework="tensorflow",
        reproducible=False,
        kind="culprit",
        ops_a=60,
        ops_b=60,
        first=replace(first, explanation=ex),
    )
    assert report.render().splitlines()[0].startswith("CULPRIT OP (unconfirmed): first divergence at op #49")
    listed = replace(first, op="UnsortedSegmentSum", explanation={"catalog": [{"id": "tensorflow.segment-reduction"}]})
    assert not not_replayed(listed, "tensorflow", "--no-replay").get("unconfirmed")
