"""Apply the TensorFlow recipe: :func:`enable_determinism` in this process and
:func:`startup_env` for ``fwd9m run``, plus XLA's GPU determinism flag.

:func:`_op_determinism_enabled` falls back to TensorFlow's private
``is_op_determinism_enabled`` through :mod:`._private`.
"""

from __future__ import annotations

import os

from .. import _frameworks
from .._log import logger
from ..enable import Change, Changes, cite, env_change, is_fully_imported, set_env
from . import _seeding
from ._patches import _apply_patches
from ._recipe import recipe

_XLA_FLAG = "--xla_gpu_deterministic_ops=true"
#: XLA's flag: "--xla_gpu_deterministic_ops is a superset of
#: --xla_gpu_exclude_nondeterministic_ops": https://github.com/openxla/xla/pull/12520
_XLA_SOURCE = "https://github.com/openxla/xla/pull/12520"


def startup_env(version: str | None = None, environ: dict | None = None) -> list[Change]:
    """Environment variables to set before TensorFlow starts (for ``fwd9m run``):
    the env-var switches of the recipe for ``version`` (default: installed) and
    XLA's GPU determinism flag. Imports nothing; returns [] when TensorFlow is not
    installed and no version is given."""
    if version is None and _frameworks.installed_version("tensorflow") is None:
        return []
    out: list[Change] = []
    env = dict(os.environ if environ is None else environ)
    for step in recipe(version).steps:
        if step.kind == "env":
            c = env_change("tensorflow", step.name, step.value, step.why, step.source, environ=env)
            if c:
                out.append(c)
                env[step.name] = c.new
    c = env_change(
        "tensorflow",
        "XLA_FLAGS",
        _XLA_FLAG,
        "XLA (jit_compile=True, Keras jit_compile) picks nondeterministic GPU "
        "kernels (scatter, autotuned GEMM/conv) without it; read once, when XLA "
        "starts",
        cite("keras.jit-compile", _XLA_SOURCE),
        append_flag=True,
        environ=env,
    )
    if c:
        out.append(c)
    return out


def enable_determinism(seed: int | None = None, *, _simulate_version: str | None = None) -> Changes:
    """Make TensorFlow deterministic with the recipe for the imported version.

    Imports TensorFlow (call it after ``import tensorflow`` or let ``fwd9m run`` call it).
    With a seed, seeds Python, NumPy and TensorFlow, plus Keras when Keras is already
    imported (Keras 3 initializers draw their seeds from Python's ``random``, which
    ``tf.random.set_seed`` alone does not seed: ``make_default_seed`` in
    https://github.com/keras-team/keras/blob/master/keras/src/random/seed_generator.py).

    Keras 3 on TensorFlow resolves ``jit_compile="auto"`` to False once op determinism
    is enabled (``model_supports_jit`` in
    https://github.com/keras-team/keras/blob/master/keras/src/trainers/trainer.py), so
    call this before ``model.compile``; XLA's GPU determinism flag is also added to
    ``XLA_FLAGS`` for explicit ``jit_compile=True``.

    Args:
        seed: int in ``[0, 2**32 - 1]``, or None for no seeding.
        _simulate_version: testing only: apply the recipe of this version (for versions
            that cannot be installed) to the TensorFlow that is installed.

    Returns:
        :class:`~fwd9m.enable.Changes`.

    Raises:
        UnsupportedVersionError: TensorFlow < 1.14 (see :func:`recipe`).
    """
    import tensorflow as tf

    version = _simulate_version or tf.version.VERSION
    plan = recipe(version)
    changes = Changes()
    for text in plan.notes:
        changes.note(text)
    for step in plan.steps:
        if step.kind == "env":
            set_env("tensorflow", step.name, step.value, step.why, step.source, changes=changes)
        elif step.kind == "op_determinism":
            old = _op_determinism_enabled(tf)
            if old is not True:
                tf.config.experimental.enable_op_determinism()
                _record(changes, Change("tensorflow", step.name, old, True, step.why, step.source))
        elif step.kind == "patch":
            for target, old in _apply_patches(tf):
                _record(changes, Change("tensorflow", target, old, step.value, step.why, step.source))
    set_env(
        "tensorflow",
        "XLA_FLAGS",
        _XLA_FLAG,
        "XLA (jit_compile=True) picks nondeterministic GPU kernels without it; only "
        "effective if XLA has not started in this process (use `fwd9m run`)",
        cite("keras.jit-compile", _XLA_SOURCE),
        append_flag=True,
        changes=changes,
    )
    if plan.name != "op-determinism" and is_fully_imported("tensorflow"):
        changes.note(
            "TensorFlow reads TF_DETERMINISTIC_OPS/TF_CUDNN_* when ops first run; "
            "call this before building the model, or launch with `fwd9m run`"
        )
    change = _seeding.seed(seed)
    if change:
        changes.append(change)
    return changes


def _op_determinism_enabled(tf) -> bool | None:
    """Whether op determinism is on (None if this TF cannot say). The query is not
    exported under tf.config in TF 2.21; Keras 3 reads the same private function
    (``model_supports_jit`` in keras/src/trainers/trainer.py)."""
    query = getattr(tf.config.experimental, "is_op_determinism_enabled", None)
    if query is None:
        from . import _private

        query = _private.op_determinism_query()
        if query is None:
            return None
    return bool(query())


def _record(changes: Changes, change: Change) -> None:
    logger.info("%s", change)
    changes.append(change)
