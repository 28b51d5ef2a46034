"""JAX training-step boundaries, found without changing the user's program: shared by
``fwd9m check``'s early stop (:mod:`fwd9m.steps._jax`) and ``fwd9m check --resume``'s
child (:mod:`fwd9m.check._resume_child`).

- A jitted function is a training step when its trace calls ``optax.apply_updates``
  (a jitted step calls it only while tracing, so it is seen at the first call):
  ``jax.jit`` is wrapped so that each host call of the first such function is a step.
  The argument holding the leaves ``apply_updates`` received as ``params`` is the
  model's weights (with what it holds besides: flax's ``TrainState``), and the leaves
  of the function's outputs that ``apply_updates`` returned are the updated weights.
  Outside any trace, the call runs as jitted (the wrapper only looks at its arguments
  and outputs, which are concrete arrays after it returned).
- ``optax.apply_updates`` called with concrete arrays (an eager loop) is a step of its own.

- Without optax (not imported): a jitted function is a training step when it returns
  what one of its arguments is, as a pytree of the same structure, shapes and dtypes
  (``step(w, x, y) -> w - lr * grad``, a ``tree_map`` of the update, or a jitted
  gradient function whose result is applied outside): that argument is the weights.

Not seen: a step jitted by another wrapper (``flax.nnx.jit``, ``pmap``), or a loop with
no jitted function (JAX's eager ops): check then compares the runs' end states only.

Each hook is installed when its module finishes importing (:func:`install_jit` after
``jax``, :func:`install_optax` after ``optax``); a :class:`Listener` added with
:func:`listen` hears the steps.
"""

from __future__ import annotations

import functools
import sys
import types
import weakref
from typing import Any

__all__ = ["JaxStep", "Listener", "install_jit", "install_optax", "listen"]


class Listener:
    """What a step-boundary user overrides (every method does nothing by default)."""

    def first(self, step: JaxStep, args: tuple, kwargs: dict) -> Any:
        """Before the first host call of a jitted function (whether it is a training step
        is known only after it: its trace runs in this call); returns a token handed to
        :meth:`after`."""
        return None

    def before(self, step: JaxStep, args: tuple, kwargs: dict) -> None:
        """Before each later call of the training step."""

    def after(self, step: JaxStep, args: tuple, kwargs: dict, out: Any, token: Any) -> None:
        """After each call of the training step (the first one with :meth:`first`'s token)."""

    def eager(self, params: Any, new_params: Any) -> None:
        """``optax.apply_updates`` returned ``new_params`` outside any trace."""

    def error(self, where: str, exc: BaseException) -> None:
        """A hook failed (the program goes on)."""


_listeners: list[Listener] = []
#: the traces in progress of wrapped jitted functions
_tracing: list[_Trace] = []
#: the _Traced of the training step (the first jitted function whose trace applied updates)
_step: list[Any] = [None]
_installed: set[str] = set()


def listen(listener: Listener) -> None:
    """Add ``listener`` (the hooks are installed on their own: :func:`install_jit`,
    :func:`install_optax`)."""
    if listener not in _listeners:
        _listeners.append(listener)


def _tell(name: str, *args: Any) -> list[Any]:
    out = []
    for listener in list(_listeners):
        try:
            out.append(getattr(listener, name)(*args))
        except BaseException as exc:
            if not isinstance(exc, Exception):  # a stop (SystemExit) goes through
                raise
            out.append(None)
            listener.error(f"jax {name} hook", exc)
    return out


class _Traced:
    """What the traces of one function said: which argument held the params, and which
    output leaves (by position in the flattened outputs) are updated params."""

    params: int | None = None
    outputs: tuple[int, ...] = ()
    by_shape = False  #: found by :func:`_weights_by_shape` (no optax), not by ``apply_updates``


class _Trace:
    """One trace in progress: its function's :class:`_Traced`, the traced arguments, and
    the ids of the leaves ``optax.apply_updates`` returned in it."""

    def __init__(self, info: _Traced, args: tuple) -> None:
        self.info, self.args, self.updated = info, args, set()


class JaxStep:
    """What ``jax.jit`` returned, called through. Attributes (``lower``, ``trace``, ...)
    are the jitted function's."""

    def __init__(self, jitted: Any, fun: Any, traced: _Traced) -> None:
        self._fwd9m_jitted = jitted
        self._fwd9m_names = _arg_names(fun)
        self._fwd9m_traced = traced
        self._fwd9m_step: bool | None = None  # None: not called yet

    @property
    def _fwd9m_params(self) -> int | None:
        """Which positional argument is the weights (None: its trace applied no updates)."""
        return self._fwd9m_traced.params

    @property
    def _fwd9m_outputs(self) -> tuple[int, ...]:
        """Which leaves of the flattened outputs are the updated weights."""
        return self._fwd9m_traced.outputs

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fwd9m_jitted, name)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:  # a jitted method, as jax.jit's binds
        return self if obj is None else types.MethodType(self, obj)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        jitted = self._fwd9m_jitted
        if not _listeners or self._fwd9m_step is False or _step[0] not in (None, self._fwd9m_traced):
            return jitted(*args, **kwargs)
        if _traced(args, kwargs):
            return jitted(*args, **kwargs)
        first = self._fwd9m_step is None
        tokens = _tell("first", self, args, kwargs) if first else _tell("before", self, args, kwargs)
        out = jitted(*args, **kwargs)
        if first:
            traced = self._fwd9m_traced
            if traced.params is None and _step[0] is None and "optax" not in sys.modules:
                _weights_by_shape(traced, args, out)  # a loop without optax: weights in, weights out
            self._fwd9m_step = traced.params is not None
            if not self._fwd9m_step:
                return out
            _step[0] = traced  # the function's: jax.jit(f) made again counts too
        for listener, token in zip(list(_listeners), tokens):
            try:
                listener.after(self, args, kwargs, out, token if first else None)
            except Exception as exc:  # noqa: BLE001 - never break the user's step
                listener.error("jax after hook", exc)
        return out


def _signature(tree: Any) -> tuple[Any, tuple[tuple[Any, str], ...]] | None:
    """A pytree's structure and its leaves' shapes and dtypes; None when it holds no
    floating-point array (weights are)."""
    jax = sys.modules["jax"]
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    shapes = tuple((getattr(x, "shape", None), str(getattr(x, "dtype", type(x).__name__))) for x in leaves)
    floats = any(
        getattr(x, "dtype", None) is not None and jax.numpy.issubdtype(x.dtype, jax.numpy.inexact) for x in leaves
    )
    return (treedef, shapes) if floats else None


def _weights_by_shape(traced: _Traced, args: tuple, out: Any) -> None:
    """Without ``optax.apply_updates`` (a plain JAX loop: ``w - lr * grad``, a
    ``tree_map`` of the update, or a jitted gradient applied outside): the function is the
    training step when it returns a pytree of the structure, shapes and dtypes of one of
    its positional arguments (the whole output, or an item of a tuple or list output);
    that argument is the weights, those output leaves the updated weights (or their
    gradients)."""
    jax = sys.modules["jax"]
    parts = [(0, out)]
    if isinstance(out, (tuple, list)):
        offset = 0
        for item in out:
            parts.append((offset, item))
            offset += len(jax.tree_util.tree_leaves(item))
    for i, arg in enumerate(args):
        sig = _signature(arg)
        if sig is None:
            continue
        for offset, part in parts:
            if _signature(part) == sig:
                traced.params, traced.outputs = i, tuple(range(offset, offset + len(sig[1])))
                traced.by_shape = True
                return


def _arg_names(fun: Any) -> list[str]:
    import inspect

    try:
        return [
            p.name
            for p in inspect.signature(fun).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        return []


def _traced(args: Any, kwargs: Any = None) -> bool:
    """Whether the values are tracers (a call made inside another trace)."""
    jax = sys.modules["jax"]
    try:
        leaves = jax.tree_util.tree_leaves((args, kwargs))
    except Exception:  # a pytree fwd9m cannot flatten: leave the call alone
        return True
    return any(isinstance(x, jax.core.Tracer) for x in leaves)


_TRACED: Any = None  # weakref.WeakKeyDictionary: function -> its traced wrapper


def _traced_of(fun: Any) -> Any:
    """The function jax.jit is given in place of ``fun``: it calls ``fun`` and notes what
    its trace does. One per ``fun``, so that ``jax.jit(f)`` made again (in a loop) hits
    jax's compilation cache as it would without fwd9m (keyed by the function)."""
    global _TRACED
    if _TRACED is None:
        _TRACED = weakref.WeakKeyDictionary()
    try:
        found = _TRACED.get(fun)
    except TypeError:  # not weakly referenceable or not hashable: one per jax.jit call
        found = None
    if found is not None:
        return found
    info = _Traced()

    @functools.wraps(fun)
    def traced(*a: Any, **kw: Any) -> Any:
        trace = _Trace(info, a)
        _tracing.append(trace)
        try:
            out = fun(*a, **kw)
        finally:
            _tracing.pop()
        if trace.updated:
            _note_outputs(info, out, trace.updated)
        return out

    traced.info = info  # type: ignore[attr-defined]
    try:
        _TRACED[fun] = traced
    except TypeError:
        pass
    return traced


def _note_outputs(info: _Traced, out: Any, updated: set[int]) -> None:
    try:
        leaves = sys.modules["jax"].tree_util.tree_leaves(out)
        info.outputs = tuple(i for i, x in enumerate(leaves) if id(x) in updated)
    except Exception:  # noqa: BLE001 - outputs fwd9m cannot flatten: none named
        info.outputs = ()


def install_jit() -> None:
    """Wrap ``jax.jit`` (once; call after jax finished importing)."""
    if "jax" in _installed:
        return
    _installed.add("jax")
    import jax

    original = jax.jit

    @functools.wraps(original)
    def jit(fun: Any = None, *args: Any, **kwargs: Any) -> Any:
        if fun is None or not callable(fun):  # jax.jit(static_argnums=...) as a decorator factory
            if fun is not None:
                args = (fun, *args)
            return lambda f: jit(f, *args, **kwargs)
        traced = _traced_of(fun)
        return JaxStep(original(traced, *args, **kwargs), fun, traced.info)

    jax.jit = jit


def install_optax() -> None:
    """Wrap ``optax.apply_updates`` (once; call after optax finished importing)."""
    if "optax" in _installed:
        return
    _installed.add("optax")
    import optax

    original = optax.apply_updates

    @functools.wraps(original)
    def apply_updates(params: Any, updates: Any, *args: Any, **kwargs: Any) -> Any:
        new = original(params, updates, *args, **kwargs)
        try:
            _noted(params, new)
        except Exception as exc:  # noqa: BLE001 - never break the user's update
            for listener in list(_listeners):
                listener.error("optax hook", exc)
        return new

    optax.apply_updates = apply_updates


def _noted(params: Any, new: Any) -> None:
    """In the trace of a wrapped jitted function: which of its arguments holds ``params``
    (the same tracers: the argument itself, or one that holds them with more, as flax's
    ``TrainState`` holds params and opt_state), and the leaves of ``new``. Outside any
    trace, with concrete arrays: an eager step."""
    jax = sys.modules["jax"]
    leaves = jax.tree_util.tree_leaves(params)
    if not _tracing:
        if leaves and not _traced(params):  # not under another jit (flax.nnx.jit)
            _tell("eager", params, new)
        return
    trace = _tracing[-1]
    mine = {id(x) for x in leaves}
    if not mine:
        return
    held = [{id(x) for x in jax.tree_util.tree_leaves(value)} for value in trace.args]
    exact = [i for i, ids in enumerate(held) if ids == mine]
    wider = [i for i, ids in enumerate(held) if mine <= ids]
    if exact or wider:
        trace.info.params = (exact or wider)[0]
        trace.updated |= {id(x) for x in jax.tree_util.tree_leaves(new)}
