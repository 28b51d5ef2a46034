"""JAX: XLA's GPU determinism flag before the backend starts, and a PRNG key for the seed.

JAX has no global random state (https://docs.jax.dev/en/latest/random-numbers.html):
:func:`enable_determinism` returns the key in ``changes.key``. XLA reads ``XLA_FLAGS``
once, when JAX initialises its backends (the first computation or device query), so
the flag must be in the environment before that: ``fwd9m run`` sets it before start-up
(:func:`startup_env`); calling :func:`enable_determinism` after the backend is up warns
:class:`~fwd9m.errors.TooLateWarning`.
"""

from __future__ import annotations

from packaging.version import Version

from .. import _frameworks
from ..enable import Change, Changes, cite, env_change, seed_change, set_env, too_late

__all__ = ["enable_determinism", "startup_env", "XLA_DETERMINISM_FLAG", "NEWEST_KNOWN", "backend_initialized"]

# --- version gates -------------------------------------------------------------------
#: XLA's GPU determinism flag; "--xla_gpu_deterministic_ops is a superset of
#: --xla_gpu_exclude_nondeterministic_ops": https://github.com/openxla/xla/pull/12520.
#: Both flag names are present in jaxlib 0.10.2 (checked in libjax_common.so).
XLA_DETERMINISM_FLAG = "--xla_gpu_deterministic_ops=true"
#: Newest JAX this recipe was checked against (the version CI installs).
NEWEST_KNOWN = Version("0.10")

_FLAG_WHY = (
    "XLA on GPU implements scatter-add and autotuned GEMM/conv with "
    "nondeterministic kernels; the flag selects deterministic ones"
)
_GPU_PLATFORMS = {"cuda", "rocm", "gpu"}


def _source() -> str:
    return cite("jax.xla-gpu-scatter", "https://github.com/openxla/xla/pull/12520")


def startup_env(version: str | None = None, environ: dict | None = None) -> list[Change]:
    """``XLA_FLAGS += --xla_gpu_deterministic_ops=true``. Imports nothing; [] when JAX
    is not installed."""
    if version is None and _frameworks.installed_version("jax") is None:
        return []
    c = env_change("jax", "XLA_FLAGS", XLA_DETERMINISM_FLAG, _FLAG_WHY, _source(), append_flag=True, environ=environ)
    return [c] if c else []


def backend_initialized() -> tuple[bool, list[str]]:
    """(whether JAX has initialised its backends, their platform names). Never
    initialises a backend itself (reads JAX-private state: :mod:`fwd9m.jax._private`)."""
    from ._private import initialized_backends

    return initialized_backends()


def enable_determinism(seed: int | None = None) -> Changes:
    """Add ``--xla_gpu_deterministic_ops=true`` to ``XLA_FLAGS`` and, with a seed, seed
    Python and NumPy and make a JAX key.

    Args:
        seed: int in ``[0, 2**32 - 1]`` or None.

    Returns:
        :class:`~fwd9m.enable.Changes`; ``changes.key`` is ``jax.random.key(seed)``
        (typed key array, shape ``()``), made on first access (making it starts the
        backend), or None without a seed.

    Warns:
        TooLateWarning: the flag was not in ``XLA_FLAGS`` when a GPU backend started:
            it has no effect in this process. (On CPU-only backends the flag has no
            effect anyway; that case is logged, not warned.)
    """
    import jax

    changes = Changes()
    v = Version(Version(jax.__version__).public)
    if Version(f"{v.major}.{v.minor}") > NEWEST_KNOWN:
        changes.note(
            f"jax {jax.__version__} is newer than any version fwd9m knows "
            f"(newest checked: {NEWEST_KNOWN}); applied the newest recipe"
        )
    up, platforms = backend_initialized()
    change = set_env("jax", "XLA_FLAGS", XLA_DETERMINISM_FLAG, _FLAG_WHY, _source(), append_flag=True, changes=changes)
    if change is not None and up:
        _too_late(platforms)
    change = seed_change("jax", seed, ["jax"])
    if change:
        changes.append(change)
        changes._key_seed = change.new
    return changes


def _too_late(platforms: list[str]) -> None:
    fix = (
        "Fix: set the flag before the first JAX computation, best in the launching "
        "shell:\n    XLA_FLAGS=--xla_gpu_deterministic_ops=true python train.py\n"
        "or launch with `fwd9m run --seed 0 train.py`, or call "
        "fwd9m.jax.enable_determinism() right after `import jax`."
    )
    if _GPU_PLATFORMS & {p.lower() for p in platforms}:
        too_late(
            "JAX's backend (" + ", ".join(platforms) + ") was already initialised, so "
            f"XLA_FLAGS {XLA_DETERMINISM_FLAG} has no effect in this process.\n" + fix
        )
    else:
        from .._log import logger

        logger.info(
            "JAX backend (%s) already up: %s takes effect only in new processes; it matters on GPU only",
            ", ".join(platforms) or "unknown",
            XLA_DETERMINISM_FLAG,
        )
