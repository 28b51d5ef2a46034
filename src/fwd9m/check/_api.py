"""In-process checks: :func:`check` calls a function several times from the same seeded
state and compares what it returns."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import _frameworks
from ..compare import Flat, LeafDiff, Tensor, _Opaque, compare_flat, escape_control, flatten
from ..errors import NondeterminismError, RunError
from ..seed import seed_everything
from ._hints import _catalog_hints
from ._result import CheckResult, Difference, Draft, RunInfo, leaf_finding

# --------------------------------------------------------------------------- seeding


def _seeded_frameworks() -> set[str]:
    """The imported frameworks that ``seed_everything`` seeds (JAX has no global RNG)."""
    return {n for n in _frameworks.imported() if _frameworks.backend(n).global_rng}


# --------------------------------------------------------------------------- in-process


def _snapshot(value: Any) -> dict[str, Any]:
    """Flatten and copy, so a later run that mutates shared tensors cannot change it."""
    flat = flatten(value)
    return Flat(
        ((k, Tensor(v.array.copy(), v.dtype) if isinstance(v, Tensor) else v) for k, v in flat.items()),
        containers=flat.containers,
    )


def check(fn: Callable[..., Any], *args: Any, runs: int = 2, seed: int | None = 0, **kwargs: Any) -> CheckResult:
    """Call ``fn(*args, **kwargs)`` ``runs`` times and compare the results bit for bit.

    Before each call every RNG is seeded with ``seed`` (:func:`fwd9m.seed_everything`:
    Python, NumPy and the frameworks imported at that moment); ``seed=None`` seeds
    nothing. A framework that ``fn`` imports itself during its first call was not seeded
    before that call, so when run 1 imports TensorFlow, Keras or PyTorch, run 1 is
    discarded and repeated with them seeded (``fn`` is then called at least ``runs + 1`` times;
    the result's notes say so). The result may be any nesting of dicts, lists, tuples and
    dataclasses holding arrays, tensors, variables, Keras models (weights and optimizer
    state), torch modules and optimizers, JAX arrays and Python numbers
    (see :mod:`fwd9m.compare`).

    Returns:
        A :class:`CheckResult`, truthy when every call returned the same bits. A call
        that raises where the first did not is a finding; so is a repeat of run 1
        (above) that raises although the first call returned normally: ``fn`` fails
        when called again, as it would in run 2 had the framework been imported before
        ``check``. Checking then stops, as there is no seeded run 1 to compare with.

    Raises:
        ValueError: ``runs < 2``.
        RunError: the first call raised (the function cannot be checked; the
            exception is chained), or the result holds an object whose ``==`` raises
            (such as a ``__eq__`` that raises, or a pandas DataFrame of objects), so no
            run can be compared with another.
    """
    if runs < 2:
        raise ValueError(f"runs must be at least 2, got {runs}")
    name = getattr(fn, "__qualname__", None) or repr(fn)
    calls = _Calls(name)
    while len(calls.infos) < runs and calls.call(fn, args, kwargs, seed):
        pass
    calls.refuse_uncomparable()
    result = Draft(CheckResult, name, calls.infos, calls.findings, {"values": len(calls.first or {})})
    result.notes += _check_notes(calls)
    if calls.findings:
        result.next_steps.append(
            "localise the first op that differs: fwd9m.debug.localize(fn, *args) (see `fwd9m debug --help`)"
        )
        result.catalog = _catalog_hints(None, device=None)
    return result.freeze()


#: generators of random numbers, by class name, from Python, NumPy or a registered
#: framework (a user's own ``Generator``, a GAN's module, is a result): a generator's
#: state is not its result, and two runs seeded alike hold equal ones
_RNG_CLASSES = frozenset({"Random", "SystemRandom", "Generator", "RandomState", "SeedGenerator", "BitGenerator"})


def _is_rng(kind: type) -> bool:
    top = kind.__module__.split(".", 1)[0]
    libraries = {"random", "numpy", *(f.module for f in _frameworks.FRAMEWORKS.values())}
    return top in libraries and (kind.__name__ in _RNG_CLASSES or kind.__name__.endswith("BitGenerator"))


def refuse_uncomparable_types(value: Any, name: str, path: str = "the result", depth: int = 0) -> None:
    """Raise when ``value`` is, or holds in its dicts, lists, tuples and dataclasses, a
    value whose comparison says nothing: an iterator or generator (consumed once: its
    type is all there is to compare), or a random generator (its state, not a result).

    Raises:
        UncomparableError: the path, the type, and what to return instead.
    """
    import dataclasses
    import random
    import types
    from collections.abc import Iterator, Mapping

    from ..errors import UncomparableError

    kind = type(value)
    qual = f"{kind.__module__}.{kind.__qualname__}"
    if isinstance(value, (Iterator, types.GeneratorType)) or isinstance(value, random.Random) or _is_rng(kind):
        what = (
            "a random generator: its state is not a result (two runs seeded alike hold equal ones whatever they drew)"
            if not isinstance(value, Iterator)
            else "an iterator: it is consumed once, so only its type could be compared"
        )
        fix = "return what you draw from it" if "an iterator" not in what else "return list(...) of it"
        raise UncomparableError(
            escape_control(f"fwd9m.check cannot compare what {name} returns: {path} is {qual}, {what}; {fix}")
        )
    if depth > 32:
        return
    if isinstance(value, Mapping):
        items = ((f"{path}[{k!r}]", v) for k, v in value.items())
    elif isinstance(value, (list, tuple)):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(value))
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        items = ((f"{path}.{f.name}", getattr(value, f.name)) for f in dataclasses.fields(value))
    else:
        return
    for sub, v in items:
        refuse_uncomparable_types(v, name, sub, depth + 1)


@dataclass
class _Calls:
    """The calls :func:`check` made and what they returned: the first result (flattened),
    the differences from it, the frameworks run 1 imported itself (``late``, so unseeded
    during it: run 1 is then repeated, ``discarded`` being its first call), and the
    values whose ``==`` raised."""

    name: str
    infos: list[RunInfo] = field(default_factory=list)
    findings: list[Difference] = field(default_factory=list)
    first: dict[str, Any] | None = None
    late: list[str] = field(default_factory=list)
    discarded: RunInfo | None = None
    uncomparable: list[LeafDiff] = field(default_factory=list)

    def call(self, fn: Callable[..., Any], args: tuple, kwargs: dict[str, Any], seed: int | None) -> bool:
        """One call, seeded; returns False when checking stops."""
        label = f"run {len(self.infos) + 1}"
        info = RunInfo(label, [self.name])
        if seed is not None:
            seed_everything(seed)
        before = _seeded_frameworks()
        t0 = time.perf_counter()
        try:
            value = fn(*args, **kwargs)
        except Exception as exc:
            info.seconds = time.perf_counter() - t0
            info.error = f"{type(exc).__name__}: {exc}"
            return self._raised(info, label, exc)
        info.seconds = time.perf_counter() - t0
        info.returncode = 0
        refuse_uncomparable_types(value, self.name)
        new = sorted(_seeded_frameworks() - before) if seed is not None and self.first is None else []
        if new and len(self.late) < len(_frameworks.FRAMEWORKS):  # bounded: each repeat needs a new import
            self.late += new
            self.discarded = info
            return True  # run 1 again, every framework it uses now seeded before it
        self.infos.append(info)
        self._compare(label, _snapshot(value))
        return True

    def _raised(self, info: RunInfo, label: str, exc: Exception) -> bool:
        if self.first is None and self.discarded is None:
            raise RunError(
                f"{self.name} raised {info.error} in run 1, so its reproducibility "
                f"cannot be checked; fix the error first"
            ) from exc
        if self.first is None:  # the repeat of run 1, while the user's first call returned normally:
            # reported as run 2, as it would be had the framework been imported before check
            info.label = "run 2"
            assert self.discarded is not None  # else raised above
            self.infos += [self.discarded, info]
            self.findings.append(
                Difference(
                    "exit",
                    info.label,
                    f"raised {info.error}; run 1 returned normally "
                    f"(this call repeated run 1 with "
                    f"{', '.join(self.late)} seeded)",
                )
            )
            return False
        self.infos.append(info)
        self.findings.append(Difference("exit", label, f"raised {info.error}; run 1 returned normally"))
        return True

    def _compare(self, label: str, flat: dict[str, Any]) -> None:
        if self.first is None:
            self.first = flat
            return
        for d in compare_flat(self.first, flat):
            if d.kind == "error":
                self.uncomparable.append(d)
            else:
                self.findings.append(leaf_finding("value", label, d, self.first, flat))

    def refuse_uncomparable(self) -> None:
        """No verdict when the only differences are values whose ``==`` raised."""
        if not self.uncomparable or self.findings:
            return
        d = self.uncomparable[0]
        more = f" (and {len(self.uncomparable) - 1} more value(s))" if len(self.uncomparable) > 1 else ""
        raise RunError(
            escape_control(
                f"fwd9m.check cannot compare what {self.name} returns: comparing {d.path} (a {d.dtype}) between "
                f"two runs with == raised {d.a}{more}, so whether the runs agree is unknown. Return the "
                f"arrays, tensors or numbers it computes, or a model's state_dict(), instead"
            )
        )


def _late_note(calls: _Calls) -> str:
    name, late = calls.name, calls.late
    names, one = ", ".join(late), len(late) == 1
    said = (
        f"{names} {'was' if one else 'were'} imported during run 1 (by {name} itself), so run 1 ran with "
        f"{'it' if one else 'them'} unseeded; "
    )
    if calls.first is None:
        return said + (
            f"fwd9m called {name} again to repeat run 1 with every framework seeded, and "
            f"that call (run 2 above) raised: {name} fails when called again in one process, "
            f"so nothing was compared"
        )
    return said + (
        "it was discarded and repeated with every framework seeded (import frameworks before "
        "fwd9m.check to avoid the extra call)"
    )


def _check_notes(calls: _Calls) -> list[str]:
    notes = []
    if calls.uncomparable:
        notes.append(
            f"{len(calls.uncomparable)} returned value(s) could not be compared: {calls.uncomparable[0].summary()}"
        )
    if calls.late:
        notes.append(_late_note(calls))
    opaque = [f"{k}: {v!r}" for k, v in (calls.first or {}).items() if isinstance(v, _Opaque)]
    if opaque:  # an agreement on these says little
        notes.append(
            f"{len(opaque)} returned value(s) fwd9m cannot look into were compared by type "
            f"only: {', '.join(opaque[:3])}{', ...' if len(opaque) > 3 else ''}; return "
            f"arrays, tensors, numbers or models instead"
        )
    elif calls.first == {}:
        notes.append(
            f"{calls.name} returned nothing fwd9m can compare (an empty container, or an "
            f"object without data attributes such as a function); return what it computes"
        )
    return notes


def assert_reproducible(
    fn: Callable[..., Any], *args: Any, runs: int = 2, seed: int | None = 0, **kwargs: Any
) -> CheckResult:
    """:func:`check`, raising when the runs differ.

    Raises:
        NondeterminismError: the runs differ; its message is the full report.
        RunError: the first call raised.
    """
    result = check(fn, *args, runs=runs, seed=seed, **kwargs)
    if not result:
        raise NondeterminismError(result.report())
    return result
