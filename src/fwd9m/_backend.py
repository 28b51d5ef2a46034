"""The protocol every framework package implements (``fwd9m/<framework>/_backend.py``).

The core (seeding, RNG state, comparison, environment, debug) asks a backend and names
no framework; :mod:`fwd9m._frameworks` is the one registry that says which backends
exist and which are loaded. A backend module imports its framework only inside its
methods, and a method is only called when the framework is already in ``sys.modules``
or the user named it (as einops' ``_backends.py`` creates a backend only for a
framework already imported: https://github.com/arogozhnikov/einops/blob/main/einops/_backends.py).

Adding a framework: one package ``fwd9m/<name>/`` with a ``_backend.py`` whose class
implements :class:`Backend`, plus one line in :data:`fwd9m._frameworks.FRAMEWORKS`;
``tests/test_backends.py`` checks every member and signature.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # pragma: no cover
    from .compare._values import Tensor
    from .enable import Change, Changes

__all__ = ["Adapter", "Backend", "BackendBase", "Source", "env_threads", "outermost"]

#: an RNG source: (capture() -> state, restore(state))
Source = tuple[Callable[[], Any], Callable[[Any], None]]


@dataclass(frozen=True)
class Adapter:
    """How :mod:`fwd9m.rng` reads, writes and reseeds one kind of generator object."""

    kind: str
    get: Callable[[Any], Any]
    set: Callable[[Any, Any], None]
    reseed: Callable[[Any, int], None]
    #: a warning for ``fwd9m.rng.register`` about this object, or None
    warning: Callable[[Any], str | None] | None = None


def env_threads(environ: Mapping[str, str], *names: str) -> int | None:
    """The thread count the first of the variables ``names`` that holds a positive
    integer sets, or None (unset, empty, ``0`` or not a number: the framework's default)."""
    for name in names:
        value = environ.get(name, "").strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
    return None


def outermost(objs: list[Any], children: Callable[[Any], Iterable[Any]]) -> list[Any]:
    """The objects of ``objs`` that are no other's child (top-level models), in order;
    an object whose ``children`` raises counts as having none."""
    inner: set[int] = set()
    for o in objs:
        try:
            inner.update(id(c) for c in children(o))
        except Exception:
            pass
    return [o for o in objs if id(o) not in inner]


@runtime_checkable
class Backend(Protocol):
    """What fwd9m needs from one framework."""

    name: str  #: fwd9m's name (``fwd9m.<name>`` is the package)
    module: str  #: top-level import name
    distributions: tuple[str, ...]  #: distributions that provide it, in preference order
    libraries: tuple[str, ...]  #: top-level modules of libraries that train through it
    #: its seed() also reseeds other frameworks, so it runs first and the others have
    #: the last word (Keras' ``set_random_seed`` seeds TF and torch too)
    seeds_others: bool
    #: it has process-global generators that :meth:`seed` sets (JAX has none: its keys
    #: are values), so seeding it needs it installed and a check seeds it
    global_rng: bool
    #: top-level modules whose types :meth:`to_numpy` and :meth:`expand` handle
    type_roots: tuple[str, ...]
    #: RNG sources that may have nothing to capture (not reported missing on restore)
    optional_sources: tuple[str, ...]
    #: the generator objects :meth:`rng_adapter` handles, as messages name them
    rng_kinds: tuple[str, ...]
    #: final-state capture order, lower first (Keras layers claim their TensorFlow
    #: variables before the loose ones are saved)
    capture_rank: int
    #: top-level modules whose tensors :meth:`final_state` saves through the framework's
    #: models and variables: a script global holding only those is not saved again
    state_roots: tuple[str, ...]

    def enable_determinism(self, seed: int | None = None, **options: Any) -> Changes:
        """The package's ``enable_determinism`` with the options it accepts."""
        ...

    def startup_env(self, version: str | None = None, environ: dict | None = None) -> list[Change]:
        """Environment variables that must be set before the framework starts."""
        ...

    def seed(self, seed: int) -> None:
        """Seed the framework's global generators (imports it)."""
        ...

    def rng_sources(self) -> dict[str, Source]:
        """Source name -> (capture, restore) of the framework's global RNG state; called
        only while the framework is imported."""
        ...

    def rng_adapter(self, obj: Any) -> Adapter | None:
        """How to read, write and reseed ``obj`` if it is one of this framework's
        generator objects (``fwd9m.rng.register``), else None; called only while the
        framework is imported."""
        ...

    def to_numpy(self, value: Any) -> Tensor | None:
        """``value`` as a :class:`~fwd9m.compare.Tensor` if it is this framework's array
        type, else None."""
        ...

    def expand(self, value: Any) -> tuple[Mapping[str, Any], bool] | None:
        """A framework container (module, model, optimizer) as a mapping, and whether its
        keys are names the framework made up; None for anything else."""
        ...

    def digest(self, value: Any) -> int | None:
        """Exact digest (:mod:`fwd9m.fingerprint`) of this framework's tensor, else None."""
        ...

    def digest_partial(self, value: Any) -> tuple[Any, int] | None:
        """Steps 1-3 of the digest of this framework's tensor, run on its device:
        ``(S, nbytes)`` with ``S`` a 0-d int64 tensor there, so that callers bring many
        sums back in one transfer (then :func:`fwd9m.fingerprint.finalize`); None for
        anything else, or where the framework has no device path."""
        ...

    def runtime_info(self) -> dict[str, Any]:
        """What the imported framework says about itself (threads, CUDA, devices)."""
        ...

    def intra_op_threads(self, environ: Mapping[str, str], cores: int) -> int:
        """The intra-op threads a process of this framework starts with, read from
        ``environ`` as the framework reads it at start-up (``OMP_NUM_THREADS`` and the
        like), else its default on ``cores`` usable cores; imports no framework (the
        process has not started yet: ``fwd9m check`` decides from it whether two runs
        fit side by side, :mod:`fwd9m.check._parallel`)."""
        ...

    def recorded_by(self) -> str | None:
        """Name of the backend whose debug recorder sees this framework's ops (Keras 3:
        its active backend), or None if fwd9m cannot record it."""
        ...

    def recorder(self, rec: Any) -> Any:
        """A debug recorder (``start()``/``stop()``) writing into ``rec``
        (:class:`fwd9m._recording._common.Recording`)."""
        ...

    # final-state capture (:mod:`fwd9m._runtime.capture`, at the end of a check run);
    # called whether or not the framework is imported: nothing to do when it is not

    def keep_alive(self, keep: Callable[[Any], Any]) -> None:
        """Install hooks passing ``keep`` each stateful object the framework creates, so
        that one local to a function that returned is still there at exit; called once
        the framework is imported. Nothing where it has no such hooks."""
        ...

    def state_types(self) -> tuple[type, ...]:
        """The imported framework's types whose live instances make up a run's final
        state (models, optimizers, variables), ``()`` when it is not imported."""
        ...

    def final_state(
        self,
        found: list[Any],
        name_of: Callable[[Any], str | None],
        label: Callable[[str, Any], str],
        taken: set[int],
    ) -> dict[str, Any]:
        """``{label: object}`` to save from ``found`` (the live instances of
        :meth:`state_types`, in the order found), named ones first. ``name_of`` gives
        an object's global name in the script, ``label(kind, obj)`` a unique label.
        Objects whose ids are in ``taken`` are saved already; add the ids of the
        tensors and variables the result holds."""
        ...

    def tree_leaves(self, value: Any) -> list[Any] | None:
        """The leaves of this framework's container ``value`` (a JAX pytree such as a
        Flax ``TrainState``), looked through for arrays among the script's globals;
        None for anything else."""
        ...


class BackendBase:
    """Registry metadata and the defaults most backends share."""

    seeds_others = False
    global_rng = True
    rng_kinds: tuple[str, ...] = ()
    capture_rank = 9
    state_roots: tuple[str, ...] = ()
    #: the package has a ``_capture`` module with ``state_types()`` and ``final_state()``,
    #: which the defaults below call (else the framework leaves no final state of its own)
    captures_state = False

    def __init__(self, name: str, module: str, distributions: tuple[str, ...], libraries: tuple[str, ...]):
        self.name, self.module = name, module
        self.distributions, self.libraries = distributions, libraries

    def __repr__(self) -> str:
        return f"<fwd9m backend {self.name}>"

    def _package(self):
        import importlib

        return importlib.import_module(f"fwd9m.{self.name}")

    def enable_determinism(self, seed: int | None = None, **options: Any) -> Changes:
        import inspect

        func = self._package().enable_determinism
        accepted = set(inspect.signature(func).parameters)
        return func(seed=seed, **{k: v for k, v in options.items() if k in accepted})

    def startup_env(self, version: str | None = None, environ: dict | None = None) -> list[Change]:
        return self._package().startup_env(version, environ)

    def rng_adapter(self, obj: Any) -> Adapter | None:
        return None

    def expand(self, value: Any) -> tuple[Mapping[str, Any], bool] | None:
        return None

    def digest(self, value: Any) -> int | None:
        return None

    def digest_partial(self, value: Any) -> tuple[Any, int] | None:
        return None

    def intra_op_threads(self, environ: Mapping[str, str], cores: int) -> int:
        return cores

    def recorded_by(self) -> str | None:
        return self.name

    def keep_alive(self, keep: Callable[[Any], Any]) -> None:
        return None

    def _capture(self):
        import importlib

        return importlib.import_module(f"fwd9m.{self.name}._capture") if self.captures_state else None

    def state_types(self) -> tuple[type, ...]:
        capture = self._capture()
        return capture.state_types() if capture is not None else ()

    def final_state(
        self,
        found: list[Any],
        name_of: Callable[[Any], str | None],
        label: Callable[[str, Any], str],
        taken: set[int],
    ) -> dict[str, Any]:
        capture = self._capture()
        return capture.final_state(found, name_of, label, taken) if capture is not None else {}

    def tree_leaves(self, value: Any) -> list[Any] | None:
        return None
