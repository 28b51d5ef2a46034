"""The catalog's "raises under the switch" claims, checked on CPU against the installed
frameworks (GPU-only claims need a GPU and are not simulated here)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from fwd9m import catalog


def _raises_claim(entry_id: str, framework: str) -> None:
    e = catalog.get(entry_id)
    assert "cpu" in e.devices, entry_id
    assert e.behaviour_at(catalog.installed_version(framework)) == "raises", entry_id


TORCH_CALLS = {
    "torch.put-overwrite": lambda torch: torch.zeros(3).put_(torch.tensor([0, 0]), torch.tensor([1.0, 2.0])),
    "torch.max-unpool": lambda torch: torch.nn.functional.max_unpool1d(
        torch.ones(1, 1, 2), torch.tensor([[[0, 1]]]), kernel_size=2
    ),
}


@pytest.mark.parametrize("entry_id", sorted(TORCH_CALLS))
def test_torch_cpu_raises_claims(entry_id):
    torch = pytest.importorskip("torch")
    _raises_claim(entry_id, "torch")
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        with pytest.raises(RuntimeError, match="deterministic"):
            TORCH_CALLS[entry_id](torch)
    finally:
        torch.use_deterministic_algorithms(before)


def test_torch_cpu_index_put_accumulate_is_deterministic_under_switch():
    """torch.index-put-accumulate says the switch makes the CPU kernel deterministic."""
    torch = pytest.importorskip("torch")
    e = catalog.get("torch.index-put-accumulate")
    assert e.behaviour_at(catalog.installed_version("torch")) == "deterministic"
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        g = torch.Generator().manual_seed(0)
        idx = torch.randint(0, 7, (20000,), generator=g)
        val = torch.randn(20000, generator=g)
        runs = {torch.zeros(7).index_put_((idx,), val, accumulate=True).numpy().tobytes() for _ in range(3)}
        assert len(runs) == 1
    finally:
        torch.use_deterministic_algorithms(before)


# enable_op_determinism cannot be undone, so TensorFlow runs in a child interpreter.
_TF_CHILD = r"""
import json, os
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tensorflow as tf
tf.config.experimental.enable_op_determinism()
checks = {
    "tensorflow.timestamp": lambda: tf.timestamp(),
    "tensorflow.data-shuffle-seed": lambda: tf.random.normal([2]),
    "tensorflow.random-generator-nondeterministic-state":
        lambda: tf.random.Generator.from_non_deterministic_state(),
    "tensorflow.unseeded-random-image-ops": lambda: tf.image.sample_distorted_bounding_box(
        [8, 8, 3], tf.constant([[[0.0, 0.0, 1.0, 1.0]]]), min_object_covered=0.1),
}
out = {}
for name, fn in checks.items():
    try:
        fn()
        out[name] = None
    except Exception as exc:
        out[name] = type(exc).__name__
print("RESULT:" + json.dumps(out))
"""


def test_tensorflow_cpu_raises_claims():
    pytest.importorskip("tensorflow")
    proc = subprocess.run([sys.executable, "-c", _TF_CHILD], capture_output=True, text=True, timeout=300)
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT:")]
    assert line, proc.stderr[-2000:]
    result = json.loads(line[-1][len("RESULT:") :])
    for entry_id, error in result.items():
        _raises_claim(entry_id, "tensorflow")
        assert error is not None, f"{entry_id}: expected an error under enable_op_determinism"
