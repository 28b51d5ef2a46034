"""JAX step digests for ``fwd9m check``'s early stop, at the step boundaries of
:mod:`fwd9m.jax._steps` (the jitted function whose trace calls ``optax.apply_updates``,
or ``optax.apply_updates`` itself in an eager loop).

The digests are taken from concrete values only, on the host, after the jitted step
returned: nothing is added to the user's computation (no callback inside the trace), so
its results are bit-identical with and without. Per step: the weights before the first
update (group ``initial``, from the weights argument when it was not donated), the
updated weights (``params``: the outputs ``apply_updates`` returned), the step's other
outputs (``outputs``: optimizer state, loss, metrics; a PRNG key goes to ``rng``) and
the global RNG states.
"""

from __future__ import annotations

import sys
from typing import Any

from ._values import digest_groups, global_rng_leaves

__all__ = ["SOURCE", "install", "install_optax"]

#: the stream's source: one record per call of the jitted step (or per eager update)
SOURCE = "jax"


def _named(tree: Any, prefix: str = "") -> list[tuple[str, Any]]:
    jax = sys.modules["jax"]
    leaves, _ = jax.tree_util.tree_flatten_with_path(tree)
    return [(prefix + (jax.tree_util.keystr(path) or "value"), leaf) for path, leaf in leaves]


def _plain(value: Any) -> tuple[bool, Any]:
    """``(is a PRNG key, value)``: a typed key as its raw data."""
    jax = sys.modules["jax"]
    try:
        if jax.dtypes.issubdtype(value.dtype, jax.dtypes.prng_key):
            return True, jax.random.key_data(value)
    except (AttributeError, TypeError):
        pass
    return False, value


def _live(leaves: list[tuple[str, Any]]) -> bool:
    """Whether no leaf was donated to the step (deleted once it ran)."""
    return not any(getattr(x, "is_deleted", lambda: False)() for _, x in leaves)


def step_entries(step: Any, args: tuple, out: Any, token: Any) -> list[tuple[str, str, str, int]]:
    """One step's entries: ``initial`` (``token``: the arguments of the first call),
    ``params``, ``outputs``, ``rng``."""
    initial: list[tuple[str, Any]] = []
    if token is not None and step._fwd9m_params is not None and step._fwd9m_params < len(token):
        initial = _named(token[step._fwd9m_params], "arg")
        if not _live(initial):
            initial = []
    updated = set(step._fwd9m_outputs)
    params, outputs, rng = [], [], []
    for i, (name, leaf) in enumerate(_named(out, "out")):
        key, value = _plain(leaf)
        (rng if key else params if i in updated else outputs).append((name, value))
    groups = [("initial", initial), ("params", params), ("outputs", outputs), ("rng", rng + global_rng_leaves())]
    return digest_groups(groups)


def eager_entries(params: Any, new: Any, first: bool) -> list[tuple[str, str, str, int]]:
    """An eager ``optax.apply_updates``: the weights before it (the first one only) and after."""
    groups = [("initial", _named(params) if first else []), ("params", _named(new)), ("rng", global_rng_leaves())]
    return digest_groups(groups)


def install(session: Any) -> None:
    """Feed ``session`` from the JAX step boundaries (call after jax finished importing;
    optax's hook is installed by :func:`install_optax` when it is)."""
    from ..jax import _steps

    def record(entries) -> None:
        if session.claimed not in (None, SOURCE):  # a callback or step_digest() records this run
            return
        session.claim(SOURCE)
        session.record_safely(entries, source=SOURCE)

    class _Check(_steps.Listener):
        eager_seen = False

        def first(self, step: Any, args: tuple, kwargs: dict) -> Any:
            return args  # references only: jax arrays do not change (a donated one is deleted)

        def after(self, step: Any, args: tuple, kwargs: dict, out: Any, token: Any) -> None:
            record(lambda: step_entries(step, args, out, token))

        def eager(self, params: Any, new: Any) -> None:
            first, self.eager_seen = not self.eager_seen, True
            record(lambda: eager_entries(params, new, first))

        def error(self, where: str, exc: BaseException) -> None:
            session._warn(exc)

    _steps.listen(_Check())
    _steps.install_jit()


def install_optax(session: Any) -> None:
    """``optax.apply_updates``'s hook (call after optax finished importing; the listener
    :func:`install` added hears it)."""
    from ..jax import _steps

    _steps.install_optax()
