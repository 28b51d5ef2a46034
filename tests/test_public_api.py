"""Every public import path keeps working (issue 20: the framework modules became
packages; their recorders and private-API modules moved into them).

The table is the public surface the README, ``docs/`` and the examples use; a name
removed or renamed here is a breaking change for users.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

PUBLIC = {
    "fwd9m": [
        "enable_determinism",
        "seed_everything",
        "derive_seed",
        "Seeder",
        "capture_rng_state",
        "restore_rng_state",
        "save_rng_state",
        "load_rng_state",
        "seeded",
        "check",
        "assert_reproducible",
        "CheckResult",
        "environment",
        "catalog",
        "debug",
        "lint",
        "tensorflow",
        "torch",
        "jax",
        "keras",
        "rng",
        "seed",
        "data",
        "callbacks",
        "distributed",
        "fingerprint",
        "compare",
        "__version__",
        "Fwd9mError",
        "ConfigurationError",
        "UnsupportedVersionError",
        "FileFormatError",
        "CatalogError",
        "RunError",
        "NondeterminismError",
        "Fwd9mWarning",
        "TooLateWarning",
    ],
    "fwd9m.torch": [
        "enable_determinism",
        "startup_env",
        "DETERMINISTIC_ALGORITHMS_SINCE",
        "WARN_ONLY_SINCE",
        "FILL_UNINITIALIZED_MEMORY_SINCE",
        "CUBLAS_WORKSPACE_CONFIG",
        "NEWEST_KNOWN",
    ],
    "fwd9m.tensorflow": [
        "enable_determinism",
        "startup_env",
        "recipe",
        "Recipe",
        "patch",
        "LegacyAPIWarning",
        "OP_DETERMINISM_SINCE",
        "NEWEST_KNOWN",
    ],
    "fwd9m.jax": ["enable_determinism", "startup_env", "XLA_DETERMINISM_FLAG", "NEWEST_KNOWN", "backend_initialized"],
    "fwd9m.keras": ["enable_determinism", "startup_env", "NEWEST_KNOWN", "MULTI_BACKEND_SINCE"],
    "fwd9m.rng": [
        "capture_rng_state",
        "restore_rng_state",
        "save_rng_state",
        "load_rng_state",
        "seeded",
        "register",
        "unregister",
        "registered",
        "RestoreReport",
        "State",
        "state_dict",
        "load_state_dict",
        "to_bytes",
        "from_bytes",
        "reseed",
        "JaxKey",
        "FORMAT",
        "FORMAT_VERSION",
    ],
    "fwd9m.seed": ["seed_everything", "derive_seed", "Seeder", "jax_key", "ENV_VAR", "MAX_SEED", "current_seed"],
    "fwd9m.debug": ["record", "diff", "localize", "Report", "Trace", "LEVELS", "FORMAT_VERSION", "TraceReader"],
    "fwd9m.cost": ["check_cost", "CostResult"],
    "fwd9m.batch": [
        "check_invariance",
        "debug_invariance",
        "check_script",
        "debug_script",
        "BatchResult",
        "BatchDebugResult",
        "RowDiff",
    ],
    "fwd9m.check": ["check", "assert_reproducible", "check_script", "CheckResult", "RunInfo", "Variant", "parse_vary"],
    "fwd9m.callbacks": ["RngStateCheckpoint"],
    "fwd9m.data": [
        "worker_init_fn",
        "torch_generator",
        "reseed_dataset_generators",
        "SampleSeeded",
        "ResumableSampler",
        "tf_shuffle_seed",
        "tf_stateless_seed",
        "tf_epochs",
    ],
    "fwd9m.distributed": [
        "rank_info",
        "seeder",
        "sampler",
        "set_epoch",
        "epochs",
        "check_replicas",
        "watch_replicas",
        "keras_callback",
        "record_rank",
        "diff_ranks",
    ],
    "fwd9m.catalog": ["entries", "get", "query", "for_op", "for_symbol", "switch", "advice"],
    "fwd9m.lint": ["lint_source", "lint_paths", "all_rules", "get_rule", "load_config"],
    "fwd9m.compare": ["compare", "compare_arrays", "compare_text", "file_digest", "flatten", "to_numpy"],
    "fwd9m.fingerprint": ["digest", "digest_bytes", "numpy_digest"],
    "fwd9m.environment": ["collect", "diff", "load", "dump", "render_text", "render_diff"],
    "fwd9m.errors": ["Fwd9mError", "ConfigurationError", "FileFormatError", "RunError"],
    "fwd9m.enable": ["Change", "Changes", "enable_determinism"],
    # entry points named in pyproject.toml
    "fwd9m.cli": ["main"],
    "fwd9m.lint.flake8": ["Plugin"],
    "fwd9m.pytest_plugin": ["pytest_configure"],
    # the legacy package (``import tfdeterminism; tfdeterminism.patch()``)
    "tfdeterminism": ["patch", "enable_determinism"],
}


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_public_names_import(module):
    mod = importlib.import_module(module)
    missing = [name for name in PUBLIC[module] if not hasattr(mod, name)]
    assert not missing, f"{module} lost public names: {missing}"


def test_framework_modules_import_no_framework():
    """The per-framework packages load without their framework (it is imported when a
    function is called): a fresh interpreter shows none in sys.modules."""
    code = (
        "import sys, fwd9m.torch, fwd9m.tensorflow, fwd9m.jax, fwd9m.keras, fwd9m.debug, "
        "fwd9m.rng, fwd9m.seed, fwd9m.check\n"
        "print(sorted(m for m in ('torch', 'tensorflow', 'jax', 'keras') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
