"""Switch on determinism for every framework in the process, in one call.

:func:`enable_determinism` is the framework-agnostic front: it acts on the frameworks
this process has already imported (``sys.modules``), or on the ones named, and imports
nothing else. Each framework module (:mod:`fwd9m.tensorflow`, :mod:`fwd9m.torch`,
:mod:`fwd9m.jax`, :mod:`fwd9m.keras`) has the same two public functions:

``enable_determinism(seed=None, **options) -> Changes``
    applies the recipe for the installed version, now, in this process.
``startup_env(version=None) -> list[Change]``
    the environment variables that only work when set before the interpreter (or the
    framework) starts; ``fwd9m run`` sets them. Reads package metadata, imports nothing.

Every action is recorded as a :class:`Change` (what, old value, new value, why,
source) and logged on the ``fwd9m`` logger; nothing is printed. Calling twice is
harmless: the second call finds the settings in place and records only what it did
again (re-seeding).
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from . import _frameworks
from ._log import logger
from .errors import TooLateWarning

__all__ = [
    "Change",
    "Changes",
    "enable_determinism",
    "set_env",
    "env_change",
    "cite",
    "seed_change",
    "is_fully_imported",
    "too_late",
]

_UNSET = "<unset>"


@dataclass(frozen=True)
class Change:
    """One thing :func:`enable_determinism` (or ``fwd9m run``) changed.

    Attributes:
        framework: ``"tensorflow"``, ``"keras"``, ``"torch"``, ``"jax"`` or ``"python"``
            (the front's single seeding: the names joined by ``+``).
        what: the setting, as code or as ``"env:NAME"`` for an environment variable.
        old: the value before (None when unset or not readable).
        new: the value after.
        why: one sentence: what would go wrong without it.
        source: catalog entry ids (``fwd9m catalog --show ID``) and/or upstream URLs,
            separated by spaces.
    """

    framework: str
    what: str
    old: Any
    new: Any
    why: str
    source: str

    def to_dict(self) -> dict:
        return {
            k: (v if isinstance(v, (str, int, float, bool, type(None))) else repr(v)) for k, v in asdict(self).items()
        }

    def __str__(self) -> str:
        old = _UNSET if self.old is None else repr(self.old)
        return f"[{self.framework}] {self.what}: {old} -> {self.new!r} ({self.why}) [{self.source}]"


class Changes(list):
    """The list of :class:`Change` records a call made.

    ``notes`` holds remarks that are not changes (for example "TensorFlow 3.1 is newer
    than anything fwd9m knows; applied the newest recipe"). ``key`` is a JAX PRNG key
    for the seed (:func:`fwd9m.jax.enable_determinism` only; None without a seed or for
    other frameworks). It is made on first access, because making a key starts the JAX
    backend, which must not happen inside an import hook.
    """

    def __init__(self, items: Iterable[Change] = ()):
        super().__init__(items)
        self.notes: list[str] = []
        self._key_seed: int | None = None
        self._key: Any = None

    @property
    def key(self) -> Any:
        if self._key is None and self._key_seed is not None:
            from .seed import jax_key

            self._key = jax_key(self._key_seed)
        return self._key

    def note(self, text: str) -> None:
        self.notes.append(text)
        logger.info("%s", text)

    def extend_from(self, other: Changes) -> None:
        self.extend(other)
        self.notes.extend(other.notes)
        if other._key_seed is not None:
            self._key_seed = other._key_seed


def cite(*ids_or_urls: str) -> str:
    """``source`` text: catalog entry ids (``fwd9m catalog`` shows them) and URLs,
    space-separated. Not checked at run time (loading the catalog would slow every
    ``fwd9m run``); ``tests/test_enable.py`` checks that every id cited exists."""
    return " ".join(ids_or_urls)


def set_env(
    framework: str,
    name: str,
    value: str,
    why: str,
    source: str,
    *,
    append_flag: bool = False,
    changes: list | None = None,
) -> Change | None:
    """Set ``os.environ[name]`` (or append the flag ``value`` to a flag list such as
    ``XLA_FLAGS`` when ``append_flag``), log it, append it to ``changes`` and return
    the Change; None (and nothing done) when it was already so."""
    change = env_change(framework, name, value, why, source, append_flag=append_flag, environ=os.environ)
    if change is None:
        return None
    os.environ[name] = change.new
    logger.info("%s", change)
    if changes is not None:
        changes.append(change)
    return change


def env_change(
    framework: str,
    name: str,
    value: str,
    why: str,
    source: str,
    *,
    append_flag: bool = False,
    environ: dict | None = None,
) -> Change | None:
    """The Change that setting ``name`` in ``environ`` (default: os.environ) would make,
    or None when it is already so; changes nothing. With ``append_flag``, ``value`` is a
    ``--flag=value`` added to a space-separated list unless that flag is present."""
    environ = os.environ if environ is None else environ
    old = environ.get(name)
    if append_flag:
        flag_name = value.split("=", 1)[0]
        present = (old or "").split()
        if any(f.split("=", 1)[0] == flag_name for f in present):
            return None
        new = " ".join([*present, value])
    elif old == value:
        return None
    else:
        new = value
    return Change(framework, f"env:{name}", old, new, why, source)


def seed_change(framework: str, seed: int | None, frameworks: list[str]) -> Change | None:
    """Seed through :func:`fwd9m.seed.seed_everything` and record it."""
    if seed is None:
        return None
    from .seed import current_seed, seed_everything

    old = current_seed()
    used = seed_everything(seed, frameworks=frameworks)
    change = Change(
        framework,
        f"seed_everything(frameworks={frameworks})",
        old,
        used,
        "unseeded generators (initializers, dropout, shuffling) draw different numbers in every process",
        cite(
            *(["keras.seed-generator"] if "keras" in frameworks else []),
            "https://docs.python.org/3/library/random.html",
        ),
    )
    logger.info("%s", change)
    return change


def is_fully_imported(module: str) -> bool:
    """True when ``module`` is in sys.modules and has finished executing (not merely
    partially initialised by an import in progress)."""
    mod = sys.modules.get(module)
    if mod is None:
        return False
    spec = getattr(mod, "__spec__", None)
    return not getattr(spec, "_initializing", False)


def too_late(message: str) -> None:
    """Warn :class:`TooLateWarning` (pointing at the caller of enable_determinism) and
    log it."""
    logger.warning("%s", message)
    warnings.warn(message, TooLateWarning, stacklevel=4)


def enable_determinism(
    seed: int | None = None, frameworks: str | list[str] | tuple[str, ...] | None = None, **options: Any
) -> Changes:
    """Apply every determinism setting the installed versions need, for each framework
    already imported (``frameworks=None``) or each one named.

    Args:
        seed: int in ``[0, 2**32 - 1]`` to seed Python, NumPy and the frameworks
            (through :func:`fwd9m.seed.seed_everything`); None: no seeding.
        frameworks: None for the frameworks in ``sys.modules`` (nothing else is
            imported); or names among ``"tensorflow"``, ``"keras"``, ``"torch"``,
            ``"jax"``, which are imported.
        **options: passed to the framework modules that accept them (``warn_only``
            for torch).

    Returns:
        :class:`Changes`: the list of :class:`Change` records, with ``notes`` and, when
        JAX is among the frameworks and a seed is given, ``key``.

    Raises:
        ConfigurationError: an unknown framework name or a seed out of range.
        UnsupportedVersionError: a framework version fwd9m cannot make deterministic
            (TensorFlow older than 1.14).

    Warns:
        TooLateWarning: a setting that only works before start-up (CUDA context, JAX
            backend) came too late; the message says how to fix it (``fwd9m run``).
    """
    import importlib

    names = _frameworks.resolve(frameworks)
    result = Changes()
    if not names:
        logger.info("enable_determinism: no framework imported or named; seeding Python and NumPy only")
        change = seed_change("python", seed, [])
        if change:
            result.append(change)
        return result
    backend = None
    if "keras" in names:  # the framework Keras runs on (its backend's answer, through the registry)
        backend = _frameworks.backend("keras").recorded_by()
    order = [n for n in _frameworks.FRAMEWORKS if n in names]  # registry order
    for name in order:
        module = importlib.import_module(f"fwd9m.{name}")
        kwargs = {k: v for k, v in options.items() if k in _accepted(module.enable_determinism)}
        if name == "keras":
            kwargs["include_backend"] = backend not in names
        # seed once, below, for every framework together
        result.extend_from(module.enable_determinism(seed=None, **kwargs))
    # the backend that reseeds others first (seed_everything's order)
    first = [b.name for b in _frameworks.backends(list(_frameworks.FRAMEWORKS)) if b.seeds_others]
    seeded = [n for n in (*first, *_frameworks.FRAMEWORKS) if n in names or n == backend]
    change = seed_change("+".join(names), seed, list(dict.fromkeys(seeded)))
    if change:
        result.append(change)
        if "jax" in names:
            result._key_seed = change.new
    return result


def _accepted(func) -> set[str]:
    import inspect

    return set(inspect.signature(func).parameters)
