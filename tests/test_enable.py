"""enable_determinism: the front, the per-framework recipes, too-late warnings.

In-process tests restore every global they touch (environment, torch and TensorFlow
switches, monkey-patches) so that other test files see a clean process.
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import textwrap
import warnings

import pytest

import fwd9m
from fwd9m import enable as fwd9m_enable
from fwd9m.errors import ConfigurationError, TooLateWarning, UnsupportedVersionError

FRAMEWORK_MODULES = ("tensorflow", "torch", "jax", "keras")


@pytest.fixture
def clean_env():
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture
def torch_state(clean_env):
    torch = pytest.importorskip("torch")
    import torch.utils.deterministic as det

    saved = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.backends.cudnn.deterministic,
        torch.backends.cudnn.benchmark,
        det.fill_uninitialized_memory,
        torch.get_num_threads(),
        torch.get_rng_state(),
    )
    yield torch
    torch.use_deterministic_algorithms(saved[0], warn_only=saved[1])
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = saved[2], saved[3]
    det.fill_uninitialized_memory = saved[4]
    torch.set_num_threads(saved[5])
    torch.set_rng_state(saved[6])


def _disable_op_determinism():
    # not exported under tf.config in TF 2.21; the function enable_op_determinism pairs with
    from tensorflow.python.framework.config import disable_op_determinism

    disable_op_determinism()


@pytest.fixture
def tf_state(clean_env):
    tf = pytest.importorskip("tensorflow")
    from tensorflow.python.framework.config import is_op_determinism_enabled

    was = is_op_determinism_enabled()
    yield tf
    import fwd9m.tensorflow as fw_tf

    fw_tf._unpatch()
    if not was:
        _disable_op_determinism()


# --- conformance ------------------------------------------------------------------


@pytest.mark.parametrize("name", FRAMEWORK_MODULES)
def test_framework_modules_share_the_protocol(name):
    """Same public functions in every framework module; seed first, default None."""
    import importlib

    module = importlib.import_module(f"fwd9m.{name}")
    for func in ("enable_determinism", "startup_env"):
        assert callable(getattr(module, func)), f"fwd9m.{name}.{func} missing"
        assert func in module.__all__
    params = list(inspect.signature(module.enable_determinism).parameters.values())
    assert params[0].name == "seed" and params[0].default is None
    startup = inspect.signature(module.startup_env).parameters
    assert list(startup)[:2] == ["version", "environ"]
    assert "NEWEST_KNOWN" in module.__all__
    assert module.startup_env.__doc__ and module.enable_determinism.__doc__


def test_modules_import_no_framework_and_front_imports_nothing_else():
    """Importing the enable modules, planning `fwd9m run` and calling the front with no
    framework imported must import no framework (fresh interpreter)."""
    code = textwrap.dedent("""
        import sys, fwd9m, fwd9m.tensorflow, fwd9m.torch, fwd9m.jax, fwd9m.keras
        import fwd9m._runtime.bootstrap, fwd9m._cli.run as r
        r.plan(0, threads=2)
        for m in (fwd9m.tensorflow, fwd9m.torch, fwd9m.jax, fwd9m.keras):
            m.startup_env()
        ch = fwd9m.enable_determinism(seed=5)
        assert [c.what for c in ch] == ["seed_everything(frameworks=[])"], ch
        bad = [m for m in ("tensorflow", "torch", "jax", "keras", "jaxlib") if m in sys.modules]
        print("IMPORTED:" + ",".join(bad))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "IMPORTED:\n" in out.stdout or out.stdout.strip().endswith("IMPORTED:")


def test_front_rejects_unknown_framework():
    with pytest.raises(ConfigurationError):
        fwd9m.enable_determinism(frameworks=["caffe"])


def test_change_record_renders():
    c = fwd9m_enable.Change("torch", "env:X", None, "1", "why", "torch.cudnn-benchmark")
    assert c.to_dict() == {
        "framework": "torch",
        "what": "env:X",
        "old": None,
        "new": "1",
        "why": "why",
        "source": "torch.cudnn-benchmark",
    }
    assert "<unset> -> '1'" in str(c)


def test_every_cited_catalog_entry_exists():
    """Each Change's source cites catalog ids through cite(); they must all exist."""
    import ast
    from pathlib import Path

    from fwd9m import catalog

    src = Path(fwd9m.__file__).parent
    cited = set()
    files = [
        src / rel for rel in ("enable.py", "torch/__init__.py", "jax/__init__.py", "keras/__init__.py", "_cli/run.py")
    ]
    files += sorted((src / "tensorflow").glob("*.py"))
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "cite":
                cited |= {
                    a.value for a in node.args if isinstance(a, ast.Constant) and not a.value.startswith("https://")
                }
    cited |= {"torch.cublas-workspace-config"}  # via _CUBLAS_ENTRY
    assert len(cited) >= 10
    for entry_id in sorted(cited):
        catalog.get(entry_id)  # CatalogError if the catalog renamed or dropped it


# --- TensorFlow recipe table (pure; old versions cannot be installed here) ----------------


@pytest.mark.parametrize(
    "version,ngc,name,envs",
    [
        ("1.14.0", None, "cudnn-deterministic+patch", {"TF_CUDNN_DETERMINISTIC"}),
        ("2.0.1", None, "cudnn-deterministic+patch", {"TF_CUDNN_DETERMINISTIC"}),
        ("2.1.0", None, "env-deterministic-ops", {"TF_DETERMINISTIC_OPS"}),
        ("2.4.4", None, "env-deterministic-ops", {"TF_DETERMINISTIC_OPS"}),
        ("2.5.0", None, "env-deterministic-ops", {"TF_DETERMINISTIC_OPS", "TF_CUDNN_USE_FRONTEND"}),
        ("2.7.4", None, "env-deterministic-ops", {"TF_DETERMINISTIC_OPS", "TF_CUDNN_USE_FRONTEND"}),
        ("2.8.0", None, "op-determinism", {"TF_CUDNN_USE_FRONTEND"}),
        ("2.9.0", None, "op-determinism", set()),
        ("2.21.0", None, "op-determinism", set()),
        ("1.13.1", "19.06-tf1", "env-deterministic-ops", {"TF_DETERMINISTIC_OPS"}),
        ("2.6.0+nv21.11", "21.11-tf2", "env-deterministic-ops", {"TF_DETERMINISTIC_OPS", "TF_CUDNN_USE_FRONTEND"}),
    ],
)
def test_tensorflow_recipe_by_version(version, ngc, name, envs):
    """Simulated versions: TF 1.x/2.0-2.20 and NGC images cannot be installed here."""
    from fwd9m.tensorflow import recipe

    plan = recipe(version, ngc=ngc)
    assert plan.name == name
    assert {s.name for s in plan.steps if s.kind == "env"} == envs
    assert all(s.source for s in plan.steps)
    if name == "cudnn-deterministic+patch":
        assert [s.kind for s in plan.steps].count("patch") == 2


def test_tensorflow_recipe_newer_and_unsupported_versions():
    from fwd9m.tensorflow import recipe

    plan = recipe("3.4.0", ngc="")
    assert plan.name == "op-determinism" and "newer than any version" in plan.notes[0]
    with pytest.raises(UnsupportedVersionError, match=r"1\.13\.1.*\n.*pip install"):
        recipe("1.13.1", ngc="")
    with pytest.raises(UnsupportedVersionError, match="19.05"):
        recipe("1.13.1", ngc="19.05-tf1")
    with pytest.raises(ConfigurationError):
        recipe("not-a-version", ngc="")


def test_tensorflow_ngc_version_read_from_environment(clean_env):
    from fwd9m.tensorflow import recipe, startup_env

    os.environ["NVIDIA_TENSORFLOW_VERSION"] = "20.03-tf1"
    assert recipe("1.15.2").name == "env-deterministic-ops"
    names = {c.what for c in startup_env(version="1.15.2")}
    assert {"env:TF_DETERMINISTIC_OPS", "env:XLA_FLAGS"} <= names


# --- TensorFlow, real ---------------------------------------------------------------


def test_tensorflow_enable_is_idempotent_and_disables_keras_auto_xla(tf_state):
    from tensorflow.python.framework.config import is_op_determinism_enabled

    import fwd9m.tensorflow as fw_tf

    _disable_op_determinism()
    first = fw_tf.enable_determinism(seed=1)
    assert is_op_determinism_enabled()
    whats = [c.what for c in first]
    assert "tf.config.experimental.enable_op_determinism()" in whats
    assert any(w.startswith("seed_everything") for w in whats)
    assert all(c.source for c in first)
    second = fw_tf.enable_determinism()
    assert second == []  # nothing left to change, nothing re-seeded without a seed
    # Keras 3 resolves jit_compile="auto" to False once op determinism is on (the
    # claim fwd9m.tensorflow makes; Keras' own function, real model):
    keras = pytest.importorskip("keras")
    from keras.src.trainers.trainer import model_supports_jit

    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    assert model_supports_jit(model) is False
    _disable_op_determinism()
    assert model_supports_jit(model) is True


def test_tensorflow_old_recipe_patches_on_real_tf(tf_state):
    """Simulated TF 2.0: the 1.14-2.0 recipe (TF_CUDNN_DETERMINISTIC + Python patches) is
    applied to the installed TF, whose Python API still has the patched functions;
    the patched ops must agree with the originals and repeat bit for bit."""
    tf = tf_state
    import fwd9m.tensorflow as fw_tf

    originals = (tf.nn.bias_add, tf.math.unsorted_segment_sum, tf.math.segment_sum)
    changes = fw_tf.enable_determinism(_simulate_version="2.0.0")
    assert os.environ["TF_CUDNN_DETERMINISTIC"] == "1"
    assert tf.nn.bias_add is not originals[0]
    assert any(c.what.endswith(".bias_add") for c in changes)
    assert fw_tf.enable_determinism(_simulate_version="2.0.0") == []  # patching twice: no-op

    rng = tf.random.stateless_normal
    x = rng((4, 3, 5, 6), seed=(1, 2))
    for fmt, bias in (("NHWC", rng((6,), seed=(3, 4))), ("NCHW", rng((3,), seed=(3, 4)))):
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(bias)
            new, old = tf.nn.bias_add(x, bias, data_format=fmt), originals[0](x, bias, data_format=fmt)
        tf.debugging.assert_near(new, old)
        tf.debugging.assert_near(tape.gradient(new, bias), tape.gradient(old, bias))
    data = rng((50, 3), seed=(5, 6))
    ids = tf.constant([i % 7 for i in range(49)] + [-1])  # -1 is dropped by the op
    got = [tf.math.unsorted_segment_sum(data, ids, 7).numpy().tobytes() for _ in range(3)]
    assert len(set(got)) == 1
    tf.debugging.assert_near(tf.math.unsorted_segment_sum(data, ids, 7), originals[1](data, ids, 7), atol=1e-5)
    sorted_ids = tf.sort(tf.constant([i % 5 for i in range(50)]))
    tf.debugging.assert_near(tf.math.segment_sum(data, sorted_ids), originals[2](data, sorted_ids), atol=1e-5)
    ints = tf.constant([[1], [2], [3]])
    assert tf.math.unsorted_segment_sum(ints, [0, 0, 1], 2).numpy().tolist() == [[3], [3]]
    assert fw_tf._unpatch() > 0 and tf.nn.bias_add is originals[0]


# --- PyTorch ------------------------------------------------------------------------


def _index_put_results(torch, calls: int) -> set[bytes]:
    g = torch.Generator().manual_seed(0)
    idx = torch.randint(0, 10, (1_000_000,), generator=g)
    vals = torch.randn(1_000_000, generator=g)
    return {torch.zeros(10).index_put_((idx,), vals, accumulate=True).numpy().tobytes() for _ in range(calls)}


def test_torch_index_put_accumulate_cpu_nondeterministic_until_enabled(torch_state):
    """torch 2.13 CPU, 2 threads: index_put_(accumulate=True) over 1e6 values into 10
    slots sums in thread order (differing bits across calls) until
    use_deterministic_algorithms(True), after which every call is bitwise identical."""
    torch = torch_state
    import fwd9m.torch as fw_torch

    torch.set_num_threads(2)
    torch.use_deterministic_algorithms(False)
    seen: set[bytes] = set()
    for _ in range(6):  # nondeterminism is probabilistic: allow a few tries
        seen |= _index_put_results(torch, 5)
        if len(seen) > 1:
            break
    assert len(seen) > 1, "expected differing results without determinism"
    changes = fw_torch.enable_determinism(seed=0)
    assert torch.are_deterministic_algorithms_enabled()
    assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    assert len(_index_put_results(torch, 10)) == 1
    assert any(c.what.startswith("torch.use_deterministic_algorithms") for c in changes)
    again = fw_torch.enable_determinism(warn_only=True)
    assert torch.is_deterministic_algorithms_warn_only_enabled()
    assert [c.what for c in again] == ["torch.use_deterministic_algorithms(True, warn_only=True)"]


def test_torch_seed_makes_weights_repeat(torch_state):
    torch = torch_state
    import fwd9m.torch as fw_torch

    fw_torch.enable_determinism(seed=7)
    a = torch.nn.Linear(4, 3).weight.detach().clone()
    fw_torch.enable_determinism(seed=7)
    b = torch.nn.Linear(4, 3).weight.detach().clone()
    assert torch.equal(a, b)


@pytest.mark.parametrize("version,expect", [("2.9.1", "will raise RuntimeError"), ("2.13.0", "keep their workspace")])
def test_torch_cublas_too_late_message_follows_catalog(version, expect):
    """Only the message: a CUDA context cannot exist on CPU (the gpu test below covers
    the detection)."""
    import fwd9m.torch as fw_torch

    with pytest.warns(TooLateWarning, match=expect) as record:
        fw_torch._warn_cublas_too_late(version)
    assert "CUBLAS_WORKSPACE_CONFIG=:4096:8 python train.py" in str(record[0].message)


@pytest.mark.gpu
def test_torch_too_late_after_cuda_context():
    code = textwrap.dedent("""
        import os, warnings, torch
        os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
        torch.zeros(1, device="cuda")
        import fwd9m.torch
        from fwd9m.errors import TooLateWarning
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            fwd9m.torch.enable_determinism(seed=0)
        assert any(issubclass(x.category, TooLateWarning) for x in w), w
        print("OK")
    """)
    _run_child_ok(code, without="CUBLAS_WORKSPACE_CONFIG")


def _run_child_ok(code: str, without: str) -> None:
    """Run ``code`` in a fresh interpreter with ``without`` unset; it must print OK."""
    env = {k: v for k, v in os.environ.items() if k != without}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0 and "OK" in out.stdout, out.stderr


# --- JAX ----------------------------------------------------------------------------


def test_jax_flag_key_and_cpu_backend(clean_env):
    jax = pytest.importorskip("jax")
    import fwd9m.jax as fw_jax

    os.environ.pop("XLA_FLAGS", None)
    jax.numpy.zeros(1).block_until_ready()  # backend up (CPU here)
    up, platforms = fw_jax.backend_initialized()
    assert up and "cpu" in platforms
    with warnings.catch_warnings():
        warnings.simplefilter("error", TooLateWarning)  # CPU backend: logged, not warned
        changes = fw_jax.enable_determinism(seed=3)
    assert "--xla_gpu_deterministic_ops=true" in os.environ["XLA_FLAGS"]
    assert (jax.random.key_data(changes.key) == jax.random.key_data(jax.random.key(3))).all()
    assert fw_jax.enable_determinism().key is None
    front = fwd9m.enable_determinism(seed=4, frameworks=["jax"])
    assert (jax.random.key_data(front.key) == jax.random.key_data(jax.random.key(4))).all()
    assert [c.what for c in fw_jax.enable_determinism()] == []  # flag already there


def test_jax_too_late_warns_for_gpu_backends():
    """Simulated platform list (no GPU backend here): the warning and its fix."""
    import fwd9m.jax as fw_jax

    with pytest.warns(TooLateWarning, match="XLA_FLAGS=--xla_gpu_deterministic_ops=true python"):
        fw_jax._too_late(["cuda"])


@pytest.mark.gpu
def test_jax_too_late_after_gpu_backend():
    code = textwrap.dedent("""
        import os, warnings, jax
        jax.numpy.zeros(1, device=jax.devices("gpu")[0]).block_until_ready()
        import fwd9m.jax
        from fwd9m.errors import TooLateWarning
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            fwd9m.jax.enable_determinism(seed=0)
        assert any(issubclass(x.category, TooLateWarning) for x in w), w
        print("OK")
    """)
    _run_child_ok(code, without="XLA_FLAGS")


# --- Keras and the front --------------------------------------------------------------


def test_keras_and_front_on_tensorflow_backend(tf_state):
    keras = pytest.importorskip("keras")
    import fwd9m.keras as fw_keras

    if fw_keras.active_backend() != "tensorflow":
        pytest.skip("needs the TensorFlow backend")
    changes = fw_keras.enable_determinism(seed=2)
    assert any(c.what.startswith("seed_everything(frameworks=['keras', 'tensorflow']") for c in changes)
    a = keras.initializers.GlorotUniform()((3, 3))
    fwd9m.enable_determinism(seed=2, frameworks=["keras", "tensorflow"])
    b = keras.initializers.GlorotUniform()((3, 3))
    assert (a.numpy() == b.numpy()).all()
