"""The registry of user generators; capture_rng_state, restore_rng_state, seeded."""

from __future__ import annotations

import contextlib
import numbers
import os
import sys
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .._log import logger
from .._rng_adapters import _adapter_for, _np
from ..errors import ConfigurationError
from ._sources import _global_sources, optional_sources, restore_order

State = dict  # source name -> tree of JSON values and numpy arrays


# --------------------------------------------------------------------------- registry


class _Entry:
    __slots__ = ("ref", "adapter")

    def __init__(self, obj, adapter):
        try:
            self.ref = weakref.ref(obj)
        except TypeError:  # numpy Generators do not support weak references
            self.ref = lambda obj=obj: obj
        self.adapter = adapter


_REGISTRY: dict[str, _Entry] = {}


def register(obj: Any, name: str | None = None) -> Any:
    """Include ``obj``'s RNG state in :func:`capture_rng_state` as ``user.<name>``.

    Supported: :class:`random.Random`, ``numpy.random.Generator``/``RandomState``,
    ``torch.Generator``, ``torch.utils.data.DataLoader`` (its own, its sampler's and its
    batch sampler's generators), ``tf.random.Generator``, ``keras.random.SeedGenerator``,
    a Keras layer or model (every ``SeedGenerator`` inside it, keyed by variable path),
    :class:`JaxKey`, and any object with ``state_dict()``/``load_state_dict()``,
    ``get_state()``/``set_state()`` or ``getstate()``/``setstate()`` (reseeded, for
    :class:`fwd9m.Seeder`, through its ``set_seed``, ``manual_seed`` or ``seed``).

    Objects that support weak references are held weakly (a collected one drops out);
    others (NumPy ``Generator``) are held until :func:`unregister`.

    Args:
        obj: the generator.
        name: key in the state (default: the kind and ``id``; pass a stable name if the
            state is restored in another process).

    Returns:
        ``obj``, so ``rng = register(np.random.default_rng(1), "aug")`` works.

    Raises:
        TypeError: unsupported object.
    """
    adapter = _adapter_for(obj)
    warning = adapter.warning(obj) if adapter.warning is not None else None
    if warning:
        import warnings

        from ..errors import Fwd9mWarning

        warnings.warn(warning, Fwd9mWarning, stacklevel=2)
    if name is None:
        name = f"{adapter.kind}@{id(obj):x}"
        logger.info("register: %s has no name; it will not restore in another process", name)
    _REGISTRY[name] = _Entry(obj, adapter)
    return obj


def unregister(name: str) -> None:
    """Forget a registered generator (no error if unknown)."""
    _REGISTRY.pop(name, None)


def registered() -> dict[str, Any]:
    """Live registered generators by name."""
    out = {}
    for name, e in list(_REGISTRY.items()):
        obj = e.ref()
        if obj is None:
            _REGISTRY.pop(name, None)
        else:
            out[name] = obj
    return out


def capture_rng_state(sources: list[str] | None = None) -> State:
    """Snapshot every RNG in use: globals of imported frameworks and registered objects.

    Args:
        sources: restrict to these source names (see the module docstring), e.g.
            ``["python", "numpy", "torch"]``; ``None`` for all.

    Returns:
        ``dict`` source -> state tree (JSON values and NumPy arrays; copies, so later
        draws do not change it). Sources with nothing to capture (CUDA not initialised,
        TF global generator never created) are left out.
    """
    state: State = {}
    for name, (cap, _) in _global_sources().items():
        if sources is None or name in sources:
            value = cap()
            if value is not None:
                state[name] = value
    for name, obj in registered().items():
        key = "user." + name
        if sources is None or key in sources:
            state[key] = _REGISTRY[name].adapter.get(obj)
    return _copy_tree(state)


@dataclass
class RestoreReport:
    """What :func:`restore_rng_state` did.

    restored: sources set from the state. missing: sources in the state with nothing
    to restore them into here (framework not imported, generator not registered).
    not_in_state: live sources the state does not cover (left as they were).
    """

    restored: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    not_in_state: list[str] = field(default_factory=list)


def restore_rng_state(state: State, *, strict: bool = False) -> RestoreReport:
    """Set every RNG to ``state`` (from :func:`capture_rng_state` or a file).

    Sources in ``state`` that do not exist in this process are skipped and reported
    (logged at WARNING and listed in the returned report), unless ``strict``.
    All states are converted and checked before any RNG is changed, so a state that
    does not fit changes nothing (checked: types, shapes; a framework may still refuse
    a state it cannot read).

    Raises:
        ConfigurationError: ``strict`` and a source is missing, or a state does not fit
            its source (e.g. a model without the saved seed generators).
        TypeError: ``state`` is not a dict.
    """
    if not isinstance(state, dict):
        raise TypeError(f"state must be a dict from capture_rng_state, got {type(state)}")
    live = _global_sources()
    regs = registered()
    report = RestoreReport()
    plan: list[tuple[str, Callable[[], None]]] = []
    for name, sub in state.items():
        if name in live:
            plan.append((name, lambda f=live[name][1], s=sub: f(s)))
        elif name.startswith("user.") and name[5:] in regs:
            obj = regs[name[5:]]
            plan.append((name, lambda a=_REGISTRY[name[5:]].adapter, o=obj, s=sub: a.set(o, s)))
        else:
            report.missing.append(name)
    optional = optional_sources()
    report.not_in_state = sorted(
        [n for n in live if n not in state and n not in optional]
        + ["user." + n for n in regs if "user." + n not in state]
    )
    if report.missing:
        msg = (
            f"RNG state has sources with nothing to restore into: {report.missing} "
            f"(framework not imported or generator not registered here)"
        )
        if strict:
            raise ConfigurationError(
                msg + ". Fix: import the framework / register(obj, name) before restoring, or strict=False"
            )
        logger.warning(msg)
    _validate(state)
    # Snapshot what we are about to change, so a failure part-way rolls back.
    before = capture_rng_state([n for n, _ in plan])
    order = {n: i for i, n in enumerate(restore_order(live))}
    plan.sort(key=lambda p: order.get(p[0], -1))  # user generators first
    done = []
    try:
        for name, apply in plan:
            apply()
            done.append(name)
    except Exception:
        for name in done:
            if name in before:
                with contextlib.suppress(Exception):
                    _apply_one(name, before[name], live, regs)
        raise
    report.restored = done
    logger.info("restore_rng_state: restored %s", done)
    return report


def _apply_one(name, sub, live, regs):
    if name in live:
        live[name][1](sub)
    else:
        _REGISTRY[name[5:]].adapter.set(regs[name[5:]], sub)


def _validate(state: State) -> None:
    """Cheap structural checks of the well-known sources before changing anything."""
    np = _np()

    def need(cond, src, what):
        if not cond:
            raise ConfigurationError(f"RNG state for {src!r} is malformed: {what}")

    py = state.get("python")
    if py is not None:
        need(isinstance(py, dict) and _shape(py.get("words")) == (625,), "python", "expected 625 MT19937 words")
    t = state.get("torch")
    if t is not None:
        a = _array(t)
        need(a is not None and a.dtype == np.uint8 and a.ndim == 1, "torch", "expected a 1-D uint8 array")
    n = state.get("numpy")
    if n is not None:
        need(
            isinstance(n, dict) and "bit_generator" in n and "state" in n,
            "numpy",
            "expected numpy.random.get_state(legacy=False)",
        )
    for name, sub in state.items():
        _check_mt19937(sub, name, need)


def _array(value):
    """``value`` as a NumPy array; None when it is not one (a ragged list, as a crafted
    file may hold, makes ``np.asarray`` raise)."""
    try:
        return _np().asarray(value)
    except (ValueError, TypeError, OverflowError):
        return None


def _shape(value) -> tuple | None:
    a = _array(value)
    return None if a is None else a.shape


def _check_mt19937(tree, src, need, depth: int = 0) -> None:
    """NumPy's MT19937 takes any ``pos`` it is given and then reads ``key[pos]`` out of
    bounds (a crash, or garbage numbers): check every MT19937 state in ``tree``."""
    if depth > 8:
        return
    if isinstance(tree, dict):
        if tree.get("bit_generator") == "MT19937" and isinstance(tree.get("state"), dict):
            pos = tree["state"].get("pos")
            need(
                isinstance(pos, numbers.Integral) and not isinstance(pos, bool) and 0 <= pos <= 624,
                src,
                f"MT19937 position {pos!r} is outside 0..624",
            )
            need(_shape(tree["state"].get("key")) == (624,), src, "expected 624 MT19937 key words")
        for v in tree.values():
            _check_mt19937(v, src, need, depth + 1)
    elif isinstance(tree, list):
        for v in tree:
            _check_mt19937(v, src, need, depth + 1)


def _copy_tree(x):
    np = sys.modules.get("numpy")
    if isinstance(x, dict):
        return {str(k): _copy_tree(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_copy_tree(v) for v in x]
    if np is not None and isinstance(x, np.ndarray):
        return x.copy()
    if np is not None and isinstance(x, np.generic):
        return x.item()
    return x


@contextlib.contextmanager
def seeded(seed: int, frameworks: str | list[str] | None = None) -> Iterator[int]:
    """Run a block with every RNG seeded by ``seed``; restore the previous state after.

    ``with fwd9m.seeded(3): x = np.random.rand()`` gives the same ``x`` each time and
    leaves the RNGs (and ``FWD9M_SEED``) as they were before the block, even on error.
    Seeds as :func:`fwd9m.seed_everything` does; registered generators are neither
    reseeded nor restored.

    Yields:
        the seed.
    """
    from ..seed import ENV_VAR, seed_everything

    globals_only = list(_global_sources())
    before = capture_rng_state(globals_only)
    env = os.environ.get(ENV_VAR)
    try:
        yield seed_everything(seed, frameworks)
    finally:
        if env is None:
            os.environ.pop(ENV_VAR, None)
        else:
            os.environ[ENV_VAR] = env
        restore_rng_state(before)
