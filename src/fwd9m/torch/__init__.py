"""PyTorch: deterministic algorithms, cuDNN flags, cuBLAS workspace, memory filling, seeds.

:func:`enable_determinism` applies the settings to the imported torch;
:func:`startup_env` lists what ``fwd9m run`` sets before start-up. Version gates below,
each with its source; features are also detected with ``hasattr`` so that a version
newer than :data:`NEWEST_KNOWN` gets the same recipe (and a note).
"""

from __future__ import annotations

import os

from packaging.version import Version

from .. import _frameworks
from .._log import logger
from ..enable import Change, Changes, cite, env_change, seed_change, set_env, too_late

__all__ = [
    "enable_determinism",
    "startup_env",
    "DETERMINISTIC_ALGORITHMS_SINCE",
    "WARN_ONLY_SINCE",
    "FILL_UNINITIALIZED_MEMORY_SINCE",
    "CUBLAS_WORKSPACE_CONFIG",
    "NEWEST_KNOWN",
]

# --- version gates -------------------------------------------------------------------
#: ``torch.use_deterministic_algorithms`` (the switch):
#: https://pytorch.org/docs/1.8.1/generated/torch.use_deterministic_algorithms.html
DETERMINISTIC_ALGORITHMS_SINCE = Version("1.8")
#: ``warn_only=`` keyword, PR 66233 (Oct 2021, first in 1.11):
#: https://github.com/pytorch/pytorch/pull/66233
WARN_ONLY_SINCE = Version("1.11")
#: ``torch.utils.deterministic.fill_uninitialized_memory``: docs page created
#: 2023-10-26, so first in 2.2 -- inferred from that date, not verified; the code
#: detects the attribute with hasattr instead of relying on this constant:
#: https://docs.pytorch.org/docs/stable/deterministic.html
FILL_UNINITIALIZED_MEMORY_SINCE = Version("2.2")
#: Value for cuBLAS reproducibility with several streams (cuBLAS docs, "Results
#: reproducibility"): https://docs.nvidia.com/cuda/cublas/index.html#results-reproducibility
CUBLAS_WORKSPACE_CONFIG = ":4096:8"
#: Newest PyTorch this recipe was checked against (the version CI installs).
NEWEST_KNOWN = Version("2.13")

_SWITCH_DOC = "https://docs.pytorch.org/docs/stable/generated/torch.use_deterministic_algorithms.html"
_RANDOMNESS = "https://docs.pytorch.org/docs/stable/notes/randomness.html"
_CUBLAS_ENTRY = "torch.cublas-workspace-config"
_CUBLAS_DOC = "https://docs.nvidia.com/cuda/cublas/index.html#results-reproducibility"


def _cublas_why() -> str:
    return (
        "cuBLAS results can depend on the workspace when streams share it; PyTorch "
        "before PR 161749 raises on cuBLAS calls under deterministic mode without it"
    )


def startup_env(version: str | None = None, environ: dict | None = None) -> list[Change]:
    """``CUBLAS_WORKSPACE_CONFIG`` (read when cuBLAS handles are created, so it belongs
    before start-up). Imports nothing; [] when torch is not installed."""
    if version is None and _frameworks.installed_version("torch") is None:
        return []
    env = dict(os.environ if environ is None else environ)
    if env.get("CUBLAS_WORKSPACE_CONFIG") in (":4096:8", ":16:8"):
        return []
    c = env_change(
        "torch",
        "CUBLAS_WORKSPACE_CONFIG",
        CUBLAS_WORKSPACE_CONFIG,
        _cublas_why(),
        cite(_CUBLAS_ENTRY, _CUBLAS_DOC),
        environ=env,
    )
    return [c] if c else []


def enable_determinism(seed: int | None = None, warn_only: bool = False) -> Changes:
    """Make PyTorch deterministic: ``torch.use_deterministic_algorithms(True,
    warn_only=warn_only)``, ``torch.backends.cudnn.deterministic = True``,
    ``torch.backends.cudnn.benchmark = False``,
    ``torch.utils.deterministic.fill_uninitialized_memory = True`` (``torch.empty``
    and friends return NaN/max-int instead of leftover bytes),
    ``CUBLAS_WORKSPACE_CONFIG=:4096:8``, and with a seed ``torch.manual_seed`` (CPU and
    every device) plus Python and NumPy through :func:`fwd9m.seed.seed_everything`.

    Sources: https://docs.pytorch.org/docs/stable/generated/torch.use_deterministic_algorithms.html,
    https://docs.pytorch.org/docs/stable/notes/randomness.html

    Args:
        seed: int in ``[0, 2**32 - 1]`` or None for no seeding.
        warn_only: ops without a deterministic implementation warn instead of raising
            RuntimeError (torch >= 1.11).

    Returns:
        :class:`~fwd9m.enable.Changes`.

    Raises:
        UnsupportedVersionError: torch without ``use_deterministic_algorithms`` (< 1.8).

    Warns:
        TooLateWarning: CUDA is already initialised and ``CUBLAS_WORKSPACE_CONFIG`` was
            not set before: cuBLAS handles created so far keep their workspace setting.
    """
    import torch

    changes = Changes()
    version = Version(Version(torch.__version__).public)
    _check_version(torch, version, changes)
    _set_switch(torch, version, warn_only, changes)
    _set_cudnn(torch, changes)
    _set_fill_memory(torch, changes)
    _set_cublas(torch, version, changes)
    change = seed_change("torch", seed, ["torch"])
    if change:
        changes.append(change)
    return changes


def _check_version(torch, version: Version, changes: Changes) -> None:
    """Refuse a torch without ``use_deterministic_algorithms``; note one newer than known.

    Raises:
        UnsupportedVersionError: torch < 1.8.
    """
    if not hasattr(torch, "use_deterministic_algorithms"):
        from ..errors import UnsupportedVersionError

        raise UnsupportedVersionError(
            f"torch {torch.__version__} predates torch.use_deterministic_algorithms "
            f"({DETERMINISTIC_ALGORITHMS_SINCE}+).\nFix: pip install 'torch>=2.1'"
        )
    if Version(f"{version.major}.{version.minor}") > NEWEST_KNOWN:
        changes.note(
            f"torch {torch.__version__} is newer than any version fwd9m knows "
            f"(newest checked: {NEWEST_KNOWN}); applied the newest recipe"
        )


def _set_switch(torch, version: Version, warn_only: bool, changes: Changes) -> None:
    """``torch.use_deterministic_algorithms(True, warn_only=...)`` unless already so
    (strict mode, with a note, where this torch has no warn-only mode)."""
    switch_src = cite("torch.index-put-accumulate", "torch.scatter-add", _SWITCH_DOC)

    old = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled()
        if hasattr(torch, "is_deterministic_algorithms_warn_only_enabled")
        else False,
    )
    new = (True, bool(warn_only))
    if old != new:
        if warn_only and version < WARN_ONLY_SINCE:
            changes.note(f"warn_only needs torch >= {WARN_ONLY_SINCE}; using strict mode")
            torch.use_deterministic_algorithms(True)
            new = (True, False)
        elif version < WARN_ONLY_SINCE:
            torch.use_deterministic_algorithms(True)
        else:
            torch.use_deterministic_algorithms(True, warn_only=bool(warn_only))
        changes.append(
            _log(
                Change(
                    "torch",
                    f"torch.use_deterministic_algorithms(True, warn_only={new[1]})",
                    {"mode": old[0], "warn_only": old[1]},
                    {"mode": True, "warn_only": new[1]},
                    "ops with nondeterministic kernels (e.g. index_put_ accumulate on CPU, "
                    "scatter_add_ on CUDA) switch to deterministic ones or " + ("warn" if new[1] else "raise"),
                    switch_src,
                )
            )
        )


def _set_cudnn(torch, changes: Changes) -> None:
    """``cudnn.deterministic = True`` and ``cudnn.benchmark = False``, each only if not so."""
    cudnn = torch.backends.cudnn
    cudnn_src = cite("torch.cudnn-benchmark", _RANDOMNESS)
    for attr, value, why in (
        ("deterministic", True, "cuDNN may pick nondeterministic convolution algorithms"),
        ("benchmark", False, "cuDNN benchmarking times algorithms and may pick a different one in every run"),
    ):
        before = getattr(cudnn, attr)
        if before != value:
            setattr(cudnn, attr, value)
            changes.append(_log(Change("torch", f"torch.backends.cudnn.{attr}", before, value, why, cudnn_src)))


def _set_fill_memory(torch, changes: Changes) -> None:
    """``torch.utils.deterministic.fill_uninitialized_memory = True`` where this torch has it."""
    det = getattr(getattr(torch, "utils", None), "deterministic", None)
    if det is None:
        try:
            import torch.utils.deterministic as det
        except ImportError:
            det = None
    if det is not None and hasattr(det, "fill_uninitialized_memory"):
        before = det.fill_uninitialized_memory
        if before is not True:
            det.fill_uninitialized_memory = True
            changes.append(
                _log(
                    Change(
                        "torch",
                        "torch.utils.deterministic.fill_uninitialized_memory",
                        before,
                        True,
                        "torch.empty/resize_ would return leftover bytes that differ between runs",
                        "https://docs.pytorch.org/docs/stable/deterministic.html",
                    )
                )
            )


def _set_cublas(torch, version: Version, changes: Changes) -> None:
    """``CUBLAS_WORKSPACE_CONFIG`` unless set to a deterministic value; warns if CUDA is
    already up (handles made so far keep their setting)."""
    cuda_up = bool(getattr(torch, "cuda", None) and torch.cuda.is_initialized())
    had = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    if had not in (":4096:8", ":16:8"):
        set_env(
            "torch",
            "CUBLAS_WORKSPACE_CONFIG",
            CUBLAS_WORKSPACE_CONFIG,
            _cublas_why(),
            cite(_CUBLAS_ENTRY, _CUBLAS_DOC),
            changes=changes,
        )
        if cuda_up:
            _warn_cublas_too_late(str(version))


def _warn_cublas_too_late(version: str) -> None:
    """TooLateWarning, worded by what the catalog says this torch does without it."""
    try:
        from .. import catalog

        behaviour = catalog.get(_CUBLAS_ENTRY).behaviour_at(version)
    except Exception:
        behaviour = "raises"
    consequence = (
        "cuBLAS calls (matmul, linear) will raise RuntimeError under deterministic mode"
        if behaviour == "raises"
        else "cuBLAS handles already created keep their workspace configuration"
    )
    too_late(
        "CUDA was already initialised when CUBLAS_WORKSPACE_CONFIG was set, so "
        f"{consequence} in this process (torch {version}).\n"
        "Fix: set it before the first CUDA call, best in the launching shell:\n"
        "    CUBLAS_WORKSPACE_CONFIG=:4096:8 python train.py\n"
        "or launch with `fwd9m run --seed 0 train.py`, or call "
        "fwd9m.torch.enable_determinism() before touching CUDA."
    )


def _log(change: Change) -> Change:
    logger.info("%s", change)
    return change
