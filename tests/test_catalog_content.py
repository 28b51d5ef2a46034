"""The catalog's content against its sources: the installed torch docstring, the seed
status page, and the installed frameworks' public symbols."""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

import pytest

from fwd9m import catalog

# --- every op in the installed torch.use_deterministic_algorithms docstring ----------------


def _torch_docstring_lists() -> tuple[list[str], list[str]]:
    """(made deterministic, raise) symbol lists, parsed from torch/__init__.py's source
    text so torch need not be imported."""
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        pytest.skip("torch is not installed")
    src = Path(spec.origin).read_text(encoding="utf-8")
    start = src.index("def use_deterministic_algorithms(")
    doc = src[start : src.index('"""', src.index('r"""', start) + 4)]
    det_part, _, rest = doc.partition("will act\n    deterministically")[2].partition(
        "The following normally-nondeterministic operations will throw"
    )
    raise_part = rest.partition("In addition, several operations")[0]
    bullet = re.compile(r"^\s*\* :(?:class|func|meth):`([^`]+)`", re.M)
    return bullet.findall(det_part), bullet.findall(raise_part)


def test_torch_docstring_lists_parse():
    det, rai = _torch_docstring_lists()
    assert len(det) >= 15 and len(rai) >= 15
    assert "torch.index_add" in det and "torch.histc" in rai


@pytest.mark.parametrize("which,behaviour", [(0, "deterministic"), (1, "raises")])
def test_every_torch_docstring_op_is_in_the_catalog(which, behaviour):
    symbols = _torch_docstring_lists()[which]
    version = catalog.installed_version("torch")
    missing = [s for s in symbols if not any(e.behaviour == behaviour for e in catalog.for_symbol(s, version=version))]
    assert not missing, f"not in the catalog as {behaviour!r} for torch {version}: {missing}"


# --- every row of the seed status page (tensorflow-determinism README, tables + notes) -----
# Each row of the old page's "Confirmed Current GPU-Specific Sources" tables (notes 1-14),
# as the public symbols or catalog ids that must be present.
SEED_ROWS = {
    1: ["id:tensorflow.cudnn-autotune"],
    2: ["tf.nn.conv1d", "tf.nn.conv2d", "tf.nn.conv3d", "tf.keras.layers.Conv2D"],
    3: ["tf.nn.max_pool1d", "tf.nn.max_pool2d", "tf.nn.max_pool3d", "tf.keras.layers.MaxPool2D"],
    4: ["tf.nn.bias_add"],
    5: ["id:tensorflow.xla-reductions"],
    6: ["tf.nn.ctc_loss"],
    7: ["tf.nn.softmax_cross_entropy_with_logits", "tf.nn.sparse_softmax_cross_entropy_with_logits"],
    8: ["tf.image.resize", "tf.keras.layers.UpSampling2D", "id:tensorflow.resize-bilinear-backprop"],
    9: ["tf.image.resize", "tf.keras.layers.UpSampling2D", "id:tensorflow.resize-nearest-backprop"],
    10: [
        "tf.math.segment_sum",
        "tf.math.unsorted_segment_sum",
        "tf.convert_to_tensor",
        "tf.gather",
        "tfa.image.dense_image_warp",
    ],
    11: ["tf.image.crop_and_resize"],
    12: ["tf.sparse.sparse_dense_matmul"],
    13: ["tf.math.unsorted_segment_mean", "tf.math.unsorted_segment_prod", "tf.math.unsorted_segment_sqrt_n"],
    14: ["tf.compat.v1.nn.fused_batch_norm"],
}
# The seed's "other possible sources" (files calling atomicAdd) and non-GPU sources.
SEED_OTHER = [
    "tf.math.bincount",
    "tf.nn.depthwise_conv2d",
    "op:Dilation2DBackpropFilter",
    "op:Multinomial",
    "tf.scatter_nd",
    "op:Svd",
    "op:ResourceScatterAdd",
    "tf.while_loop",
    "tf.data.Dataset.shard",
    "tf.gradients",
    "id:tensorflow.horovod-tensor-fusion",
    "id:tensorflow.tensorrt",
    "id:tensorflow.mirrored-strategy-shuffle",
    "id:tensorflow.cpu-threads",
]


def _present(ref: str) -> bool:
    if ref.startswith("op:"):
        return bool(catalog.for_op("tensorflow", ref[3:]))
    if ref.startswith("id:"):
        try:
            catalog.get(ref[3:])
        except LookupError:
            return False
        return True
    return bool(catalog.for_symbol(ref))


@pytest.mark.parametrize("note", sorted(SEED_ROWS))
def test_every_seed_status_row_is_in_the_catalog(note):
    missing = [r for r in SEED_ROWS[note] if not _present(r)]
    assert not missing, f"seed status row {note}: missing {missing}"


def test_seed_other_sources_are_in_the_catalog():
    assert [r for r in SEED_OTHER if not _present(r)] == []


# --- every symbol importable in the installed framework version -------------------------
_TOP = {"tf": "tensorflow", "jnp": "jax.numpy", "np": "numpy", "tfa": "tensorflow_addons", "hvd": "horovod.tensorflow"}
_BUILTINS = {"hash", "set", "frozenset", "dict", "id", "sorted", "iter", "list"}


def _resolve(symbol: str):
    import builtins

    head, _, rest = symbol.partition(".")
    if head in _BUILTINS or (hasattr(builtins, head) and importlib.util.find_spec(head) is None):
        obj = getattr(builtins, head)
        for attr in rest.split(".") if rest else ():
            obj = getattr(obj, attr)
        return obj
    parts = (_TOP.get(head, head) + ("." + rest if rest else "")).split(".")
    obj = importlib.import_module(parts[0])
    for i, attr in enumerate(parts[1:], start=2):
        try:
            obj = getattr(obj, attr)
        except AttributeError:  # a submodule not imported by its parent
            obj = importlib.import_module(".".join(parts[:i]))
    return obj


def _external(symbol: str) -> bool:
    """Symbols of packages that are not installed here (tfa, horovod, ...)."""
    import builtins

    head = symbol.split(".")[0]
    top = _TOP.get(head, head).split(".")[0]
    return (
        top not in ("tensorflow", "keras", "torch", "jax", "numpy")
        and importlib.util.find_spec(top) is None
        and not hasattr(builtins, head)
    )


@pytest.mark.parametrize("framework", catalog.FRAMEWORKS)
def test_symbols_exist_in_installed_versions(framework):
    version = catalog.installed_version(framework)
    if version is None or (framework != "python" and importlib.util.find_spec(framework) is None):
        pytest.skip(f"{framework} is not installed")
    bad = []
    for e in catalog.entries(framework):
        if not e.applies_to(version):
            continue
        for s in e.symbols:
            if _external(s):
                continue
            try:
                _resolve(s)
            except (ImportError, AttributeError) as exc:
                bad.append(f"{e.id}: {s} ({exc.__class__.__name__}: {exc})")
    assert not bad, "\n".join(bad)
