"""The one module that touches JAX's private dispatch API (as :mod:`fwd9m.torch._private`
is for torch).

Everything here is private to JAX and may change between releases; keep its use in
this file so a JAX upgrade breaks one place. Checked against jax 0.10.2 (source:
``jax/_src/core.py`` and ``jax/_src/pjit.py`` of the installed package):

* ``jax._src.core.EvalTrace.process_primitive(self, primitive, args, params)``: every
  primitive bound outside any transformation or trace (eager execution) reaches this
  method with concrete arguments; it runs ``primitive.impl``. A primitive bound under
  an eager transformation (``jax.grad`` outside ``jit``) reaches it too, after the
  transformation rewrote it. Source:
  https://github.com/jax-ml/jax/blob/main/jax/_src/core.py
* ``jax._src.core.trace_state_clean()``: True when no trace or transformation is
  active (the call is top level). ``jax._src.core.jaxprs_in_params(params)``: the
  jaxprs an equation's params hold (a nested jit, a scan body, cond branches); with
  ``ClosedJaxpr.jaxpr``, ``Jaxpr.eqns`` and ``eqn.primitive.name`` it lists the
  primitives inside a jitted function. Same source. ``jax._src.core.Literal``: a
  constant written into an equation (a static argument or a captured Python scalar
  becomes one); its text is ``str(value.item())`` for a scalar but ``[...]`` for an
  array. ``str(Jaxpr)`` (``pp_jaxpr``) writes ``0xXXXX`` for object addresses in
  equation params (``pp_kv_pair``), so equal programs print equal text in two
  processes. Same source.
* Host callbacks are primitives named ``pure_callback`` and ``io_callback``
  (``jax/_src/callback.py``) and ``buffer_callback`` (``jax/_src/buffer_callback.py``):
  they run Python during the compiled program and their results are its values.
  ``debug_callback`` (``jax/_src/debugging.py``) returns nothing to the program.
  Source: https://github.com/jax-ml/jax/blob/main/jax/_src/callback.py
* ``jax._src.pjit._run_python_pjit(p, args_flat, fun, args, kwargs)``: the Python path
  of a call to a ``jax.jit`` function; when the trace state is clean it runs the
  compiled executable of the whole function (``_pjit_call_impl_python``) and returns
  a tuple whose second item is the flat list of outputs; ``p.params["name"]`` is the
  function's name. ``_cpp_pjit``'s ``cache_miss`` looks it up as a module global.
  Source: https://github.com/jax-ml/jax/blob/main/jax/_src/pjit.py
* ``jax._src.pjit._get_fastpath_data(...)``: what the C++ ``jit`` dispatcher caches to
  run later calls without Python; when it returns None, later calls with the same
  signature come back to the Python path (``cache_miss``). Same source.

* ``jax._src.array.ArrayImpl._npy_value``: where ``numpy.asarray`` of a ``jax.Array``
  keeps the host copy it had to make (an array on an accelerator, or one sharded over
  several devices); a CPU array is viewed without a copy and nothing is kept. Source:
  https://github.com/jax-ml/jax/blob/main/jax/_src/array.py
* ``jax._src.xla_bridge``: ``_backends`` (the initialised backends by platform) and
  ``backends_are_initialized()``, read by :func:`fwd9m.jax.backend_initialized` to
  warn when XLA flags come too late. Source:
  https://github.com/jax-ml/jax/blob/main/jax/_src/xla_bridge.py

A call of a jitted function whose signature is already in the C++ cache never enters
Python. While :func:`eager_hooks` is active, its thread runs under a JAX user context
(public: ``jax.make_user_context``, part of the jit cache key,
https://docs.jax.dev/en/latest/_autosummary/jax.make_user_context.html), so the first
call of each jitted function there misses the C++ cache: JAX traces and compiles the
whole function again (the same jaxpr, the same program) and, because the fast-path
data is withheld under that context, every later call there goes through Python and
is seen. Programs are never run op by op.

Every function imports JAX when called: importing this module imports no framework.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable, Iterator
from typing import Any

__all__ = [
    "CALLBACK_PRIMITIVES",
    "CHECKED_VERSION",
    "eager_hooks",
    "host_array",
    "op_name",
    "primitive_names",
    "program_parts",
    "initialized_backends",
]

#: The jax release whose private functions above were read.
CHECKED_VERSION = "0.10.2"

#: primitives that run Python inside a compiled program and return its values (names of
#: jax 0.10.2, see above); a culprit jit holding one is most likely that callback.
CALLBACK_PRIMITIVES = ("pure_callback", "io_callback", "buffer_callback")

_TOKEN = "fwd9m.debug.record"
_user_context = None
_local = threading.local()

#: handler(name, inputs, run, fun, jaxpr, params) -> result: ``inputs`` the flat list of
#: argument values, ``run()`` executes the op and returns (result to return, flat
#: outputs), ``fun`` the user's Python function for a jit call (else None), ``jaxpr``
#: the ClosedJaxpr a call primitive runs (else None; see :func:`primitive_names`),
#: ``params`` an eager primitive's equation params (``integer_pow``'s ``y``; None for
#: a jit call, whose params are its program).
Handler = Callable[[str, list, Callable[[], tuple[Any, list]], Any, Any, Any], Any]


def initialized_backends() -> tuple[bool, list[str]]:
    """(whether JAX has initialised its backends, their platform names) from
    ``jax._src.xla_bridge`` (see above); never initialises a backend itself."""
    import importlib

    try:
        xb = importlib.import_module("jax._src.xla_bridge")
    except ImportError:
        return False, []
    backends = dict(getattr(xb, "_backends", {}) or {})
    up = xb.backends_are_initialized() if hasattr(xb, "backends_are_initialized") else bool(backends)
    platforms = sorted({str(getattr(b, "platform", name)) for name, b in backends.items()})
    return bool(up), platforms


def op_name(primitive_name: str, params: dict) -> str:
    """``jit(train_step)`` for a call primitive with a ``name`` param, else the
    primitive's name (``scatter-add``)."""
    name = params.get("name") if "jaxpr" in params else None
    return f"{primitive_name}({name})" if name else primitive_name


def _jaxprs(closed_jaxpr) -> Iterator[tuple[Any, list]]:
    """(Jaxpr, its consts) for ``closed_jaxpr`` (a ClosedJaxpr or Jaxpr) and every jaxpr
    nested in its equations' params, each once."""
    from jax._src import core

    todo = [closed_jaxpr]
    seen: set[int] = set()
    while todo:
        j = todo.pop()
        consts = list(j.consts) if isinstance(j, core.ClosedJaxpr) else []
        jaxpr = j.jaxpr if isinstance(j, core.ClosedJaxpr) else j
        if id(jaxpr) in seen:
            continue
        seen.add(id(jaxpr))
        yield jaxpr, consts
        for eqn in jaxpr.eqns:
            for val in eqn.params.values():
                for v in val if isinstance(val, tuple) else (val,):
                    if isinstance(v, (core.Jaxpr, core.ClosedJaxpr)):
                        todo.append(v)


def primitive_names(closed_jaxpr) -> frozenset[str]:
    """Names of every primitive in ``closed_jaxpr`` and the jaxprs nested in it
    (``scatter-add``, ``dot_general``, ...)."""
    return frozenset(eqn.primitive.name for jaxpr, _ in _jaxprs(closed_jaxpr) for eqn in jaxpr.eqns)


_ADDRESS = re.compile(r"0x[0-9a-fA-F]{4,}")


def program_parts(closed_jaxpr) -> tuple[str, list]:
    """What a compiled program is made of: (its jaxpr's text, the values that text does
    not spell out). Two calls run the same program when both parts are equal.

    The text holds every equation, its params and its scalar literals, exactly (a
    static argument ``lr=0.5`` reads ``mul a 0.5:f32[]``); object addresses are masked.
    The values are the consts of the jaxpr and of the jaxprs nested in it (arrays a
    function closes over) and every non-scalar literal (printed ``[...]``), in a fixed
    order: NumPy arrays, ``jax.Array`` s or Python scalars.
    """
    import numpy as np
    from jax._src import core

    values: list = []
    for jaxpr, consts in _jaxprs(closed_jaxpr):
        values += consts
        for eqn in jaxpr.eqns:
            values += [v.val for v in eqn.invars if isinstance(v, core.Literal) and np.ndim(v.val)]
        values += [v.val for v in jaxpr.outvars if isinstance(v, core.Literal) and np.ndim(v.val)]
    jaxpr = closed_jaxpr.jaxpr if isinstance(closed_jaxpr, core.ClosedJaxpr) else closed_jaxpr
    return _ADDRESS.sub("0x?", str(jaxpr)), values


def host_array(x):
    """``numpy.asarray(x)`` of a ``jax.Array`` without leaving a host copy cached on it:
    a zero-copy view for a CPU array; for an accelerator array a copy that lives only
    as long as the caller holds it (JAX would otherwise keep it as long as the array).

    Raises:
        RuntimeError: the array was deleted (donated to a jit call).
    """
    import numpy as np

    had = getattr(x, "_npy_value", None) is not None
    a = np.asarray(x)
    if not had and getattr(x, "_npy_value", None) is not None:
        try:
            x._npy_value = None
        except AttributeError:  # pragma: no cover - a future Array without the slot
            pass
    return a


def _context():
    global _user_context
    if _user_context is None:  # once per process: make_user_context is not thread-safe
        import jax

        _user_context = jax.make_user_context(default_value=None)
    return _user_context


@contextlib.contextmanager
def eager_hooks(handler: Handler) -> Iterator[None]:
    """Call ``handler`` for every top-level primitive and jit call on the calling thread.

    Ops that run inside a handled op (the primitives a jit call traces on a cache
    miss, the jit that executes an eager primitive) are not handled again.

    Raises:
        UnsupportedVersionError: the installed JAX lacks a function listed above.
    """
    import jax

    from ..errors import UnsupportedVersionError

    try:
        from jax._src import core, pjit

        orig_process = core.EvalTrace.__dict__["process_primitive"]
        orig_run = pjit._run_python_pjit
        orig_fast = pjit._get_fastpath_data
        clean = core.trace_state_clean
        jit_name = pjit.jit_p.name
    except (ImportError, AttributeError, KeyError) as exc:
        raise UnsupportedVersionError(
            f"fwd9m.debug cannot hook jax {jax.__version__} ({exc}); it was written against "
            f"jax {CHECKED_VERSION}: record with that version, or report this"
        ) from None
    ctx = _context()
    owner = threading.get_ident()
    process_primitive = _primitive_hook(handler, core, orig_process, jit_name, owner)
    run_python_pjit = _pjit_hook(handler, orig_run, clean, jit_name, owner)

    def get_fastpath_data(*a, **k):
        if ctx.value == _TOKEN:
            return None
        return orig_fast(*a, **k)

    core.EvalTrace.process_primitive = process_primitive
    pjit._run_python_pjit = run_python_pjit
    pjit._get_fastpath_data = get_fastpath_data
    try:
        with ctx(_TOKEN):
            yield
    finally:
        core.EvalTrace.process_primitive = orig_process
        pjit._run_python_pjit = orig_run
        pjit._get_fastpath_data = orig_fast


def _primitive_hook(handler: Handler, core, orig_process, jit_name: str, owner: int):
    """``EvalTrace.process_primitive`` that hands a top-level eager primitive (or jit
    call) on thread ``owner`` to ``handler``; any other goes straight to the original."""
    depth = _local

    def process_primitive(self, primitive, args, params, /):
        if getattr(depth, "n", 0) or type(self) is not core.EvalTrace or threading.get_ident() != owner:
            return orig_process(self, primitive, args, params)
        depth.n = 1
        try:

            def run():
                out = orig_process(self, primitive, args, params)
                return out, (list(out) if primitive.multiple_results else [out])

            is_jit = primitive.name == jit_name
            return handler(
                op_name(primitive.name, params),
                list(args),
                run,
                None,
                params.get("jaxpr") if is_jit else None,
                None if is_jit else params,
            )
        finally:
            depth.n = 0

    return process_primitive


def _pjit_hook(handler: Handler, orig_run, clean, jit_name: str, owner: int):
    """``pjit._run_python_pjit`` that hands a top-level jit call on thread ``owner``,
    outside any trace, to ``handler``; any other goes straight to the original."""
    depth = _local

    def run_python_pjit(p, args_flat, fun, args, kwargs):
        if getattr(depth, "n", 0) or threading.get_ident() != owner or not clean():
            return orig_run(p, args_flat, fun, args, kwargs)
        depth.n = 1
        try:

            def run():
                res = orig_run(p, args_flat, fun, args, kwargs)
                return res, list(res[1])

            name = f"{jit_name}({p.params.get('name', '?')})"
            return handler(name, list(args_flat), run, fun, p.params.get("jaxpr"), None)
        finally:
            depth.n = 0

    return run_python_pjit
