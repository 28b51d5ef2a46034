"""Legacy entry points: ``tfdeterminism.patch()`` and ``fwd9m.tensorflow.patch()``."""

from __future__ import annotations

import os

import pytest

from fwd9m.errors import UnsupportedVersionError


@pytest.fixture
def tf():
    tf = pytest.importorskip("tensorflow")
    from tensorflow.python.framework.config import disable_op_determinism, is_op_determinism_enabled

    saved_env = dict(os.environ)
    was = is_op_determinism_enabled()
    yield tf
    import fwd9m.tensorflow as fw_tf

    fw_tf._unpatch()
    if not was:
        disable_op_determinism()
    os.environ.clear()
    os.environ.update(saved_env)


def test_tfdeterminism_patch_on_modern_tf_does_the_modern_thing(tf):
    from tensorflow.python.framework.config import disable_op_determinism, is_op_determinism_enabled

    import tfdeterminism
    from fwd9m.tensorflow import LegacyAPIWarning

    disable_op_determinism()
    with pytest.warns(LegacyAPIWarning, match="no meaning for TensorFlow 2") as record:
        changes = tfdeterminism.patch()
    assert record[0].filename == __file__  # points at the caller, not at fwd9m
    assert is_op_determinism_enabled()
    assert "tf.config.experimental.enable_op_determinism()" in [c.what for c in changes]
    assert tfdeterminism.__version__


def test_fwd9m_tensorflow_patch_on_simulated_tf_2_0_applies_old_recipe(tf):
    """Simulated TF 2.0 (cannot be installed here): the historic patch recipe."""
    import fwd9m.tensorflow as fw_tf

    with pytest.warns(fw_tf.LegacyAPIWarning, match="TF 1.14-2.0 patch recipe"):
        changes = fw_tf.patch(_simulate_version="2.0.0")
    assert os.environ["TF_CUDNN_DETERMINISTIC"] == "1"
    assert getattr(tf.nn.bias_add, "_fwd9m_patch", False)
    assert any(c.what.endswith("segment_sum") for c in changes)


def test_patch_on_unsupported_version_names_version_and_fix(tf):
    """Simulated TF 1.13 (cannot be installed here)."""
    import fwd9m.tensorflow as fw_tf

    with pytest.raises(UnsupportedVersionError) as info:
        fw_tf.patch(_simulate_version="1.13.2")
    assert "1.13.2" in str(info.value) and "Fix: pip install" in str(info.value)
    assert not getattr(tf.nn.bias_add, "_fwd9m_patch", False)
