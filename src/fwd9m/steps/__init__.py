"""Step digests: a small file with one record per training step (the digests of the
loss, parameters, gradients, buffers, optimizer state, RNG state and input batch), to
keep as a reference and to compare a later run against, live.

Sources: PyTorch's global optimizer hooks under ``fwd9m run --digests FILE``
(:mod:`fwd9m.steps._torch`), the callbacks :mod:`fwd9m.steps.lightning`,
:mod:`fwd9m.steps.transformers` and :mod:`fwd9m.steps.keras` (each imports its library
only when imported), and :func:`step_digest` for a custom loop or a jitted JAX step.
``fwd9m run --against REF`` stops the run at the first step that differs from REF;
:func:`diff_steps` compares two files. The format: :mod:`fwd9m.steps._format`.
"""

from __future__ import annotations

import os
from typing import Any

from ._compare import StepDifference, StepsReport, diff_steps
from ._format import (
    FORMAT_VERSION,
    MAGIC,
    StepReader,
    StepRecord,
    StepWriter,
    is_step_digest_file,
)
from ._session import DivergenceExit, StepSession

__all__ = [
    "FORMAT_VERSION",
    "MAGIC",
    "DivergenceExit",
    "StepDifference",
    "StepReader",
    "StepRecord",
    "StepSession",
    "StepWriter",
    "StepsReport",
    "diff_steps",
    "is_step_digest_file",
    "step_digest",
]


def step_digest(
    step: int | None = None,
    *,
    loss: Any = None,
    params: Any = None,
    grads: Any = None,
    buffers: Any = None,
    optimizer: Any = None,
    batch: Any = None,
    key: Any = None,
    rng: Any = None,
    values: Any = None,
    global_rng: bool = True,
    path: str | os.PathLike[str] | None = None,
) -> bool:
    """Record one training step's digests.

    Call it once per step, outside ``jax.jit`` (with the step's outputs), in a custom
    loop of any framework. Each argument is an array/tensor, a number, or a dict, list,
    tuple or pytree of them (a torch module stands for its named parameters); None is
    left out. ``key`` (a JAX PRNG key) and ``rng`` go to the ``rng`` group, with the
    global RNG states of Python, NumPy and torch unless ``global_rng`` is False.

    Args:
        step: the step number (default: the count of recorded steps).
        path: digest file to write (created on first call, replaced only if it is a
            digest file, finished at exit); default: the file and reference of
            ``fwd9m run --digests FILE --against REF``.
    Returns:
        True when recorded; False when an automatic source or a callback records this
        run instead.
    Raises:
        ConfigurationError: no ``path`` and not under ``fwd9m run --digests/--against``,
            or ``path`` exists and is not a digest file.
        TypeError: a value is neither an array nor a number.
        DivergenceExit: under ``--against``, this step differs from the reference (the
            report is on stderr; the process exits with status 1).
    """
    from ..errors import ConfigurationError
    from ._session import for_path
    from ._values import digest_groups, flatten, global_rng_leaves

    if path is None and for_path(None) is None:
        raise ConfigurationError(
            "step_digest() has nowhere to write: pass path='run.steps', or run the "
            "script with: fwd9m run --digests run.steps train.py"
        )
    groups = [
        (group, [(n or group, v) for n, v in flatten("", value)])
        for group, value in (
            ("batch", batch),
            ("loss", loss),
            ("grads", grads),
            ("params", params),
            ("buffers", buffers),
            ("optimizer", optimizer),
            ("values", values),
        )
    ]
    rng_leaves = list(flatten("key", key)) + list(flatten("rng", rng))
    if global_rng:
        rng_leaves += global_rng_leaves()
    groups.append(("rng", rng_leaves))
    entries = digest_groups(groups)  # all groups at once: one call of the kernel
    session = for_path(path)  # after the digests: a value of the wrong type leaves no file
    assert session is not None
    session.claim("step_digest")
    return session.record(entries, step, source="step_digest")
