"""In-process checks: :func:`check` calls a function several times from the same seeded
state and compares what it returns."""

from __future__ import annotations

import sys
import time
from typing import Any, Callable

from ..compare import Tensor, _Opaque, compare_flat, flatten
from ..errors import NondeterminismError, RunError
from ._hints import _catalog_hints
from ._result import CheckResult, Finding, RunInfo


# --------------------------------------------------------------------------- seeding

def _seed_all(seed: int) -> None:
    """Seed every RNG this process uses: ``fwd9m.seed_everything`` where it exists,
    else Python, NumPy and each framework already imported."""
    try:
        from ..seed import seed_everything
    except ImportError:
        seed_everything = None
    if seed_everything is not None:
        seed_everything(seed)
        return
    import random

    random.seed(seed)
    mods = sys.modules
    if "numpy" in mods:
        mods["numpy"].random.seed(seed)
    if "torch" in mods:
        mods["torch"].manual_seed(seed)
    if "tensorflow" in mods:
        mods["tensorflow"].random.set_seed(seed)
    if "keras" in mods and hasattr(mods["keras"], "utils"):
        mods["keras"].utils.set_random_seed(seed)


# --------------------------------------------------------------------------- in-process

def _snapshot(value: Any) -> dict[str, Any]:
    """Flatten and copy, so a later run that mutates shared tensors cannot change it."""
    flat = flatten(value)
    return {k: Tensor(v.array.copy(), v.dtype) if isinstance(v, Tensor) else v for k, v in flat.items()}


def check(fn: Callable[..., Any], *args: Any, runs: int = 2, seed: int | None = 0,
          **kwargs: Any) -> CheckResult:
    """Call ``fn(*args, **kwargs)`` ``runs`` times and compare the results bit for bit.

    Before each call every RNG is seeded with ``seed`` (``fwd9m.seed_everything`` when
    available; Python, NumPy, and the imported frameworks otherwise); ``seed=None``
    seeds nothing. The result may be any nesting of dicts, lists, tuples and
    dataclasses holding arrays, tensors, variables, Keras models (weights and optimizer
    state), torch modules and optimizers, JAX arrays and Python numbers
    (see :mod:`fwd9m.compare`).

    Returns:
        A :class:`CheckResult`, truthy when every call returned the same bits. A call
        that raises where the first did not is a finding.

    Raises:
        ValueError: ``runs < 2``.
        RunError: the first call raised (the function cannot be checked); the
            exception is chained.
    """
    if runs < 2:
        raise ValueError(f"runs must be at least 2, got {runs}")
    name = getattr(fn, "__qualname__", None) or repr(fn)
    infos: list[RunInfo] = []
    findings: list[Finding] = []
    first: dict[str, Any] | None = None
    for i in range(runs):
        label = f"run {i + 1}"
        info = RunInfo(label, [name])
        infos.append(info)
        if seed is not None:
            _seed_all(seed)
        t0 = time.perf_counter()
        try:
            value = fn(*args, **kwargs)
        except Exception as exc:
            info.seconds = time.perf_counter() - t0
            info.error = f"{type(exc).__name__}: {exc}"
            if first is None:
                raise RunError(f"{name} raised {info.error} in run 1, so its reproducibility "
                               f"cannot be checked; fix the error first") from exc
            findings.append(Finding("exit", label, f"raised {info.error}; run 1 returned normally"))
            continue
        info.seconds = time.perf_counter() - t0
        info.returncode = 0
        flat = _snapshot(value)
        if first is None:
            first = flat
            continue
        findings += [Finding("value", label, d.summary(), d) for d in compare_flat(first, flat)]
        del flat, value
    result = CheckResult(name, infos, findings, {"values": len(first or {})})
    opaque = [f"{k}: {v!r}" for k, v in (first or {}).items() if isinstance(v, _Opaque)]
    if opaque:  # an agreement on these says little
        result.notes.append(f"{len(opaque)} returned value(s) fwd9m cannot look into were compared by type "
                            f"only: {', '.join(opaque[:3])}{', ...' if len(opaque) > 3 else ''}; return "
                            f"arrays, tensors, numbers or models instead")
    elif first == {}:
        result.notes.append(f"{name} returned nothing fwd9m can compare (an empty container, or an "
                            f"object without data attributes such as a function); return what it computes")
    if findings:
        result.next_steps.append("localise the first op that differs: "
                                 "fwd9m.debug.localize(fn, *args) (see `fwd9m debug --help`)")
        result.catalog = _catalog_hints(None, device=None)
    return result


def assert_reproducible(fn: Callable[..., Any], *args: Any, runs: int = 2, seed: int | None = 0,
                        **kwargs: Any) -> CheckResult:
    """:func:`check`, raising when the runs differ.

    Raises:
        NondeterminismError: the runs differ; its message is the full report.
        RunError: the first call raised.
    """
    result = check(fn, *args, runs=runs, seed=seed, **kwargs)
    if not result:
        raise NondeterminismError(result.report())
    return result
