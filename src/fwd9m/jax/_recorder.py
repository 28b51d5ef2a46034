"""Record the ops JAX executes eagerly, and each top-level call of a jitted function,
into a trace.

The hooks (:mod:`fwd9m.jax._private`, the one place for JAX-private API) see:

* every primitive executed eagerly (``lax.add`` on concrete arrays, the primitives of
  ``jnp`` functions that are not jitted, ``jax.grad`` evaluated outside ``jit``): one
  op named after the primitive (``add``, ``gather``, ``scatter-add``, ``random_bits``),
  the names the catalog lists under ``ops`` (``src/fwd9m/catalog/data/jax.toml``);
* every call of a ``jax.jit`` function from outside any trace: ONE op named
  ``jit(NAME)`` (``jit(train_step)``; ``jnp`` functions are jitted too, e.g.
  ``jit(matmul)``), with a digest of every input and output leaf, and one more input,
  last: the digest of the compiled program (meta ``jaxpr[]``: the jaxpr's text and the
  arrays it closes over, :func:`fwd9m.jax._private.program_parts`). A static argument
  (``static_argnums``) and a global the function reads are baked into the program when
  JAX traces it (static arguments are part of the compilation cache key,
  https://docs.jax.dev/en/latest/_autosummary/jax.jit.html; a global is read at trace
  time, https://docs.jax.dev/en/latest/notebooks/Common_Gotchas_in_JAX.html), so such a
  value that differs shows as this input differing: a value from outside the recorded
  ops (external, ``python``), not a nondeterministic op. The digest is computed once
  per jaxpr object (JAX caches the jaxpr of each function and signature). A trace op
  holds at most 255 inputs and 255 outputs: the leaves past those are folded into one
  record ``leaves[N]`` whose digest covers theirs.

Ops inside a jitted function are not recorded individually: XLA compiles the function
as a whole, and running it op by op (``jax.disable_jit``) or re-tracing it with an
interpreter would be a different program, the same reason TF graphs are instrumented
rather than run eagerly. So when a jitted call gets identical inputs (program included)
in both runs and returns different outputs, that call is reported as the culprit at
that granularity (``jit(train_step)``), naming as suspects the host callbacks inside it
(``pure_callback``, ``io_callback``: Python run by the program, first) and the
primitives the catalog lists (the node field: ``jit:pure_callback,scatter-add``). To
see inside it, call its body without ``jax.jit`` while debugging, accepting that this
is another program. The first call of each jitted function inside a recording is
traced and compiled again (the same jaxpr), and every call goes through JAX's Python
dispatch, which is slower than the C++ fast path.

Digests use :mod:`fwd9m.fingerprint` on a host view of each array: zero-copy for CPU
arrays (``numpy.asarray`` of a CPU ``jax.Array``); arrays on an accelerator are
copied to the host first, a copy dropped after digesting (a known limit: slower, no
device-side digest yet; :func:`fwd9m.jax._private.host_array`). Typed
PRNG key arrays (``jax.random.key``) are digested through ``jax.random.key_data``
(https://docs.jax.dev/en/latest/_autosummary/jax.random.key_data.html).

JAX has no modules and no optimizer hooks: the module field is empty, the location is
the user's file:line, and the phase is "other". An input that is a host NumPy array
with at least one dimension (a batch, or batch indices, handed to JAX) is flagged as a
model input, so a difference entering there is classified as data; a differing scalar
stays a Python value. The step counts completed calls of jitted functions defined in
the user's code (a training loop's ``train_step``; an evaluation step counts too).
Level "modules" records only the top-level calls of jitted functions defined in the
user's code (the cheap first pass of ``fwd9m debug --fast``).
"""

from __future__ import annotations

import contextlib
import struct
import weakref
from typing import Any

from .. import fingerprint as fp
from .._recording._capture import take_call
from .._recording._common import Recording, _is_library, user_location, value_text
from .._recording._store import HAS_SAMPLE, IS_MODEL_INPUT, MAX_TENSORS, SEP, fold
from ._private import CALLBACK_PRIMITIVES  # for debug's explanations (a name list; imports no jax)

__all__ = ["CALLBACK_PRIMITIVES", "JaxRecorder", "PROGRAM_DTYPE", "PROGRAM_META"]

#: inputs (and outputs) one trace op holds (a u8 count, :mod:`fwd9m._recording._store`)

#: the dtype name of a jit op's last input, the digest of its compiled program (its
#: jaxpr and the values baked into it); its meta reads ``jaxpr[]``
PROGRAM_DTYPE = "jaxpr"
PROGRAM_META = PROGRAM_DTYPE + "[]"

#: primitives that draw random bits from (or make) a PRNG key: marked "random" so that a
#: differing key input is classified as a seed, not a data value.
RANDOM_PRIMITIVES = frozenset(
    {
        "random_bits",
        "random_seed",
        "random_split",
        "random_fold_in",
        "random_wrap",
        "threefry2x32",
    }
)

#: ClosedJaxpr -> (node, program digest or None), shared by every recording of the
#: process: both are functions of the (immutable) jaxpr, which JAX keeps per function
#: and signature, so a later recording of the same functions does not print them again
_PROGRAMS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class JaxRecorder:
    """Installs the hooks for one ``record()`` block; :meth:`start` / :meth:`stop`."""

    framework = "jax"

    def __init__(self, rec: Recording):
        import jax
        import numpy as np

        from . import _private as _jax_private

        self.jax = jax
        self.np = np
        self.rec = rec
        self._private = _jax_private
        self._jit_only = rec.level == "modules"
        self._stack: contextlib.ExitStack | None = None
        self._array_types = (jax.Array, np.ndarray, np.generic)
        self._user_fun: dict[Any, bool] = {}
        self._known: dict[int, tuple] = {}  # id(jax.Array) -> (weakref, digest, sample)
        self._inner = _PROGRAMS
        self._catalog_ops: frozenset[str] | None = None

    def start(self) -> None:
        self._stack = contextlib.ExitStack()
        self._stack.enter_context(self._private.eager_hooks(self._on_op))

    def stop(self) -> None:
        if self._stack is not None:
            stack, self._stack = self._stack, None
            stack.close()

    # ------------------------------------------------------------------ ops
    def _in_window(self) -> bool:
        steps = self.rec.steps
        return steps is None or steps[0] <= self.rec.step <= steps[1]

    def _is_user(self, fun) -> bool:
        key = getattr(fun, "__code__", None)
        known = self._user_fun.get(key)
        if known is None:
            known = self._user_fun[key] = key is not None and not _is_library(key.co_filename)
        return known

    def _program(self, jaxpr) -> tuple[str, int | None]:
        """(node, program digest) of a jit call's ClosedJaxpr, computed once per jaxpr
        object in the process (:data:`_PROGRAMS`).

        node: ``jit`` plus the host callbacks inside the function, then the primitives
        inside it that the catalog lists (``jit:pure_callback,scatter-add``), so a
        jit-level culprit can still name its suspects. digest: of the program's text and
        the values it holds (:func:`fwd9m.jax._private.program_parts`), recorded as one
        more input of the op, so a static argument or a captured value that changes the
        compiled program shows as an input that differs (None at level "sequence")."""
        if jaxpr is None:
            return "jit", None
        try:
            hit = self._inner.get(jaxpr)
        except TypeError:
            return "jit", None
        if hit is not None and (hit[1] is not None or not self.rec.digests):
            return hit
        from .. import catalog

        if self._catalog_ops is None:
            try:
                self._catalog_ops = frozenset(catalog.normalize_op(o) for e in catalog.entries("jax") for o in e.ops)
            except Exception:  # noqa: BLE001 - the catalog is optional for recording
                self._catalog_ops = frozenset()
        private = self._private
        try:
            inside = private.primitive_names(jaxpr)
        except (AttributeError, TypeError):  # another jax: no suspects, still recorded
            inside = frozenset()
        suspects = [n for n in private.CALLBACK_PRIMITIVES if n in inside] + sorted(
            n for n in inside if n not in private.CALLBACK_PRIMITIVES and catalog.normalize_op(n) in self._catalog_ops
        )
        node = "jit:" + ",".join(suspects) if suspects else "jit"
        digest = None
        if self.rec.digests:
            try:
                text, values = private.program_parts(jaxpr)
            except (AttributeError, TypeError):  # another jax: the program is not compared
                text, values = None, []
            if text is not None:
                words = [fp.digest_bytes(text.encode())]
                for v in values:
                    d = (
                        self._digest(v, False, False)[2]
                        if isinstance(v, self._array_types) or type(v) in (bool, int, float, complex)
                        else fp.digest_bytes(type(v).__qualname__.encode())
                    )
                    words.append(d if d is not None else 0)
                digest = fp.digest_bytes(struct.pack(f"<{len(words)}Q", *words))
        self._inner[jaxpr] = node, digest
        return node, digest

    def _on_op(self, name: str, inputs: list, run, fun, jaxpr=None, params=None):
        """The hook: runs the op once, whatever happens in the recorder. An exception of
        the recorder (never of the op) is caught: the op is written as "not recorded"
        (:meth:`Recording.failed`) and the program goes on."""
        rec = self.rec
        try:
            skip = not self._in_window() or (self._jit_only and not (fun is not None and self._is_user(fun)))
            pre = None if skip else self._before(name, inputs, params)
        except Exception as exc:  # noqa: BLE001 - a recorder never breaks the program
            self._failed(name, exc)
            skip = True
        if skip:
            result, _ = run()
            if fun is not None and self._is_user(fun):
                rec.step += 1
            return result
        result, outputs = run()
        try:
            self._after(name, pre, outputs, fun, jaxpr)
        except Exception as exc:  # noqa: BLE001
            self._failed(name, exc)
        if fun is not None and self._is_user(fun):
            rec.step += 1
        return result

    def _failed(self, name: str, exc: BaseException) -> None:
        try:
            name_id, ctx = self.rec.failed(name, exc)
            self.rec.writer.op(name_id, ctx, self.rec.step, [], [])
        except Exception:  # noqa: BLE001
            pass

    def _params_text(self, params: dict) -> str:
        """An eager primitive's params (``integer_pow``'s ``y``, shapes, dtypes): a
        jaxpr-valued param (a ``cond`` branch, a ``scan`` body) by its program digest."""
        items = []
        for k, v in params.items():
            vs = v if isinstance(v, (tuple, list)) else (v,)
            if vs and all(hasattr(x, "jaxpr") and hasattr(x, "consts") for x in vs):
                v = tuple(f"jaxpr:{self._program(x)[1]}" for x in vs)
            items.append(f"{k}={value_text(v)}")
        return SEP.join(items)

    def _before(self, name: str, inputs: list, params):
        rec = self.rec
        seq = rec.writer.ops
        capture = bool(rec.capture) and rec.capture.wants(seq, name)
        ins = [x for x in inputs if isinstance(x, self._array_types) or type(x) in (bool, int, float, complex)]
        # digested before the call: a jit call may donate (delete) its input buffers
        in_recs = [self._tensor(x, False, True) for x in ins]
        in_caps = [self._bytes(x) for x in ins[: MAX_TENSORS - 1]] if capture else None
        args = rec.text_record(self._params_text(params)) if params else None
        return ins, in_recs, in_caps, capture, args, user_location(4)

    def _after(self, name: str, pre, outputs, fun, jaxpr) -> None:
        rec = self.rec
        ins, in_recs, in_caps, capture, args, loc = pre
        outs = [x for x in outputs if isinstance(x, self._array_types)]
        out_recs = [self._tensor(x, True, False) for x in outs]
        device = ""
        for x in outs or ins:
            device = self._device(x)
            break
        node = "random" if name in RANDOM_PRIMITIVES else ""
        if fun is not None or jaxpr is not None:
            node, program = self._program(jaxpr)
            if jaxpr is not None:  # the compiled program: one more input (see _program)
                in_recs = self._fold(in_recs, MAX_TENSORS - 1)
                in_recs.append((rec.meta_id(PROGRAM_DTYPE, ()), 0, program, None, None))
        if args is not None:  # last, after the arrays (capture indices are array indices)
            in_recs = self._fold(in_recs, MAX_TENSORS - 1)
            in_recs.append(args)
        in_recs = self._fold(in_recs, MAX_TENSORS)
        out_recs = self._fold(out_recs, MAX_TENSORS)
        ctx = rec.ctx_id("", "other", loc, node, device)
        w = rec.writer
        seq = w.op(rec.name_id(name, name), ctx, rec.step, in_recs, out_recs)
        if capture and jaxpr is not None:  # a jitted call: narrowed now, for replay (fwd9m.debug._replay)
            take_call(rec, seq, "jax", rec, jaxpr, ins)
        if capture:
            for i, (meta, data) in enumerate(in_caps):
                w.capture(seq, False, i, meta, data)
            for i, x in enumerate(outs[: MAX_TENSORS - 1]):
                meta, data = self._bytes(x)
                w.capture(seq, True, i, meta, data)

    def _fold(self, recs: list, limit: int) -> list:
        """:func:`_store.fold` with a ``leaves[N]`` meta record."""
        if len(recs) <= limit:
            return recs
        return fold(recs, limit, self.rec.meta_id("leaves", (len(recs) - limit + 1,)))

    @staticmethod
    def _device(x) -> str:
        try:
            d = next(iter(x.devices()))
        except (AttributeError, StopIteration, TypeError, RuntimeError):
            return "" if not hasattr(x, "dtype") else "cpu"  # NumPy / Python value: host
        return f"{d.platform}:{d.id}"

    def _host(self, x):
        """(dtype name, shape, host NumPy array or None, is a host input)."""
        np = self.np
        if isinstance(x, (bool, int, float, complex)):
            a = np.asarray(x)
            return a.dtype.name, (), a, False
        host = isinstance(x, (np.ndarray, np.generic))
        dtype = x.dtype
        shape = tuple(x.shape)
        if not host and self.jax.dtypes.issubdtype(dtype, self.jax.dtypes.prng_key):
            data = self.jax.random.key_data(x)  # runs inside the hook: not recorded
            return str(dtype), shape, np.asarray(data), False
        name = str(dtype)
        if not self.rec.digests:
            return name, shape, None, host
        try:
            # CPU jax.Array: a zero-copy host view; accelerator: a copy, not kept on the array
            a = np.asarray(x) if host else self._private.host_array(x)
        except (TypeError, ValueError, RuntimeError):  # deleted (donated) buffer, ...
            return name, shape, None, host
        return name, shape, a, host

    def _tensor(self, x, want_sample: bool, is_input: bool):
        """One array's record tuple. A ``jax.Array`` is immutable, so its digest is
        remembered while it lives: parameters and data passed again are not re-read."""
        rec = self.rec
        cached = rec.digests and isinstance(x, self.jax.Array)
        if cached:
            hit = self._known.get(id(x))
            if hit is not None and hit[0]() is x and (hit[3] is not None or not want_sample):
                if want_sample and hit[3]:
                    return (hit[1], HAS_SAMPLE, hit[2], hit[3], None)
                return (hit[1], 0, hit[2], None, None)
        out = self._digest(x, want_sample, is_input)
        if cached and out[2] is not None:
            try:
                ref = weakref.ref(x, lambda _, k=id(x), known=self._known: known.pop(k, None))  # noqa: B008 - binds the id now
            except TypeError:
                return out
            if len(self._known) > 100_000:
                self._known.clear()
            self._known[id(x)] = (ref, out[0], out[2], out[3])
        return out

    def _digest(self, x, want_sample: bool, is_input: bool):
        np = self.np
        rec = self.rec
        dtype, shape, a, host = self._host(x)
        meta = rec.meta_id(dtype, shape)
        flags = IS_MODEL_INPUT if (is_input and host and len(shape) >= 1) else 0
        if a is None or not rec.digests or a.dtype.hasobject:
            return (meta, flags, None, None, None)
        a = np.ascontiguousarray(a)
        u8 = a.reshape(-1).view(np.uint8)
        dig = fp.finalize(fp._numpy_partial(fp._bytes_to_words(u8)), u8.size)
        if want_sample and rec.samples and (a.dtype.kind == "f" or dtype == "bfloat16") and u8.size:
            return (meta, flags | HAS_SAMPLE, dig, rec.sample(u8, a.itemsize), None)
        return (meta, flags, dig, None, None)

    def _bytes(self, x):
        """(meta id, raw bytes) for a full capture (copies to the host)."""
        dtype, shape, a, _ = self._host(x)
        meta = self.rec.meta_id(dtype, shape)
        if a is None or a.dtype.hasobject:
            return meta, b""
        return meta, self.np.ascontiguousarray(a).tobytes()
