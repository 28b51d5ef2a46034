"""Narrow a nondeterministic ``jax.jit`` call to the equation inside it.

The recorder sees a jitted call as one op (:mod:`fwd9m.jax._recorder`). When replay's
targeted run reaches that call (``--capture SEQ:0``), :func:`narrow` evaluates the
call's jaxpr equation by equation twice on the same inputs, with an exact digest
(:mod:`fwd9m.fingerprint`) of every equation's inputs and outputs, and names the first
equation whose inputs agree and outputs differ, with its file:line from the jaxpr's
source info (``eqn.source_info.traceback``). Nested ``jit`` / ``closed_call``
equations are entered, so the answer is a primitive (``pure_callback``,
``scatter-add``), not a sub-function.

Caveat, said in the result: each equation is then run alone (JAX compiles and runs one
primitive at a time), which is not the fused program XLA compiled for the call; a
difference that only fusion produces does not show, and the result says "not narrowed".
Public API used: ``jax.extend.core`` (``Literal``, ``ClosedJaxpr``, ``DropVar``),
``Primitive.bind``, ``JaxprEqn.source_info``.
"""

from __future__ import annotations

from .._recording._common import _is_library, _short

#: call primitives whose body is evaluated equation by equation (others run whole)
_ENTER = ("pjit", "jit", "closed_call", "core_call")


def _digest(x) -> str:
    import numpy as np

    from .. import fingerprint
    from ._private import host_array

    try:
        a = np.asarray(host_array(x))
    except Exception:  # noqa: BLE001 - a token, a key array: named by type
        return type(x).__name__
    if a.dtype.hasobject:
        return type(x).__name__
    return f"{a.dtype}{list(a.shape)}={fingerprint.numpy_digest(a):016x}"


def location(eqn) -> str:
    """The user's file:line of ``eqn`` (first frame outside JAX and installed packages)."""
    tb = getattr(getattr(eqn, "source_info", None), "traceback", None)
    frames = list(getattr(tb, "frames", None) or [])
    for f in frames:
        if not _is_library(f.file_name) and "/fwd9m/" not in f.file_name:
            return f"{_short(f.file_name)}:{f.line_num}"
    return f"{_short(frames[0].file_name)}:{frames[0].line_num}" if frames else ""


def _evaluate(jaxpr, consts, args, path: tuple, log: list) -> list:
    from jax.extend.core import ClosedJaxpr, DropVar, Literal

    env: dict = {}

    def read(v):
        return v.val if isinstance(v, Literal) else env[v]

    for v, c in zip(jaxpr.constvars, consts):
        env[v] = c
    for v, a in zip(jaxpr.invars, args):
        env[v] = a
    for i, eqn in enumerate(jaxpr.eqns):
        invals = [read(v) for v in eqn.invars]
        sub = eqn.params.get("jaxpr") if eqn.primitive.name in _ENTER else None
        if isinstance(sub, ClosedJaxpr):
            outs = _evaluate(sub.jaxpr, sub.consts, invals, path + (i,), log)
        else:
            outs = eqn.primitive.bind(*invals, **eqn.params)
            if not eqn.primitive.multiple_results:
                outs = [outs]
            log.append((path + (i,), eqn, [_digest(x) for x in invals], [_digest(x) for x in outs]))
        for v, o in zip(eqn.outvars, outs):
            if not isinstance(v, DropVar):
                env[v] = o
    return [read(v) for v in jaxpr.outvars]


def narrow(closed_jaxpr, args, runs: int = 2) -> dict:
    """Evaluate ``closed_jaxpr`` on ``args`` ``runs`` times; the first equation whose
    inputs agree across runs and whose outputs do not (``found``), with its primitive,
    file:line and position (``path``: equation indices, outer to inner)."""
    logs = []
    for _ in range(runs):
        log: list = []
        _evaluate(closed_jaxpr.jaxpr, closed_jaxpr.consts, list(args), (), log)
        logs.append(log)
    base = logs[0]
    for k in range(1, runs):
        other = logs[k]
        for (path, eqn, ins, outs), (_, _, ins2, outs2) in zip(base, other):
            if outs != outs2:
                if ins != ins2:
                    break
                return {
                    "found": True,
                    "primitive": eqn.primitive.name,
                    "location": location(eqn),
                    "path": list(path),
                    "equations": len(base),
                    "runs": runs,
                    "equation": str(eqn)[:300],
                }
    return {"found": False, "equations": len(base), "runs": runs}
