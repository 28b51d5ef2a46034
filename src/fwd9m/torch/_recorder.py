"""Record every aten op PyTorch runs (forward, backward, optimizer) into a trace.

A dispatch mode (:mod:`fwd9m.torch._private`) sees each op; global module hooks
(``torch.nn.modules.module.register_module_forward_pre_hook`` / ``..._forward_hook``,
https://pytorch.org/docs/stable/generated/torch.nn.modules.module.register_module_forward_pre_hook.html)
give the module path; global optimizer hooks
(``torch.optim.optimizer.register_optimizer_step_pre_hook`` / ``..._post_hook``,
https://pytorch.org/docs/stable/optim.html, subscribed through :mod:`fwd9m.torch._steps`,
so that they run eagerly at each step also when the step is compiled) give the optimizer
phase and the step count; the autograd node being executed marks backward ops; a patch of the
DataLoader iterator's ``__next__`` (restored on exit) marks the data phase.

Every non-tensor argument and keyword of an op (``other=0.37`` of ``aten::mul``, an
``alpha``, a shape, a dtype) is one more input, last: the ``args`` record
(:meth:`fwd9m._recording._common.Recording.args_record`), named by the schema's argument
names, so a Python value that differs between runs is an input that differs. An
exception inside a hook is the recorder's, never the program's: the op runs once,
unchanged, and is written as "not recorded" (:meth:`Recording.failed`).
"""

from __future__ import annotations

import functools
import os
import weakref
from typing import Any

from .. import fingerprint as fp
from .._recording._capture import keep_budget, keep_call, take_call
from .._recording._common import ENV_STOP_AFTER, Recording, WindowDone, guarded, user_location
from .._recording._store import HAS_SAMPLE, IS_MODEL_INPUT, IS_PARAM
from . import _digest
from ._foreign import ForeignMemory

__all__ = ["TorchRecorder"]

#: ops whose output is uninitialised memory: its bytes are not part of the program's
#: result, so they are not digested (they differ run to run by design).
UNINITIALISED_OUTPUT = frozenset(
    {
        "aten::empty",
        "aten::empty_like",
        "aten::empty_strided",
        "aten::new_empty",
        "aten::new_empty_strided",
        "aten::empty_permuted",
        "aten::resize_",
        "aten::set_",
    }
)
#: ops that are not recorded at all: profiler annotations carry no values, and in the
#: data phase, tensors arriving from DataLoader worker processes are rebuilt from shared
#: memory with empty + set_, a number of times that depends on how many batches the
#: workers had prefetched (timing), not on the program. The batch's values are still
#: seen, as the inputs of the first op that uses them.
NOT_RECORDED = ("profiler::",)
NOT_RECORDED_IN_DATA = frozenset({"aten::empty", "aten::set_"})
#: ops that allocate memory and write nothing into it: it holds no value until an op
#: writes it (:meth:`TorchRecorder._unwritten_input`)
ALLOCATES = frozenset(UNINITIALISED_OUTPUT - {"aten::resize_", "aten::set_"})
#: in-place ops that overwrite their first argument without reading it (``set_`` points
#: it at other memory: ``Tensor.__deepcopy__`` calls it on a ``new_empty`` tensor).
OVERWRITES_SELF = frozenset(
    {
        "aten::copy_",
        "aten::set_",
        "aten::zero_",
        "aten::fill_",
        "aten::normal_",
        "aten::uniform_",
        "aten::random_",
        "aten::bernoulli_",
        "aten::exponential_",
        "aten::geometric_",
        "aten::cauchy_",
        "aten::log_normal_",
        "aten::randperm",
        "aten::randint",
    }
)


def _forget(known: dict, key: tuple, ref) -> None:
    entry = known.get(key)
    if entry is not None and entry[0] is ref:
        del known[key]


class _OpInfo:
    __slots__ = (
        "name_id",
        "name",
        "random",
        "out_args",
        "skip_self",
        "skip_out",
        "mutates",
        "ignore",
        "ignore_in_data",
        "arg_names",
        "allocates",
    )


#: recorders between start() and stop(), left by a forked child (:func:`_after_fork`)
_active: weakref.WeakSet = weakref.WeakSet()


def _after_fork() -> None:
    """In a child forked while recording (a DataLoader worker, ``multiprocessing``'s
    fork): record nothing there. The trace is the parent's (its writer drops a child's
    records, which would interleave with the parent's in a different order each run),
    and the child's ops need not pay for digests. What the child computes reaches the
    parent as values the parent's recorded ops read."""
    for recorder in list(_active):
        recorder._leave_child()


os.register_at_fork(after_in_child=_after_fork)


class TorchRecorder:
    """Installs the hooks for one ``record()`` block; :meth:`start` / :meth:`stop`."""

    framework = "torch"

    def __init__(self, rec: Recording):
        import torch

        from . import _private as _torch_dispatch

        self.torch = torch
        self.rec = rec
        self._module_level = rec.level == "modules"
        self._dispatch = _torch_dispatch
        self._infos: dict[Any, _OpInfo] = {}
        self._modules: list[Any] = []  # stack of entered modules
        self._paths: dict[int, str] = {}
        self._model_inputs: set[int] = set()
        self._phase_stack: list[str] = []
        self._handles: list[Any] = []
        self._mode = None
        self._patched: list[tuple[Any, str, Any]] = []
        self._float_dtypes = {torch.float16, torch.bfloat16, torch.float32, torch.float64}
        #: argument types digested by their str (``torch.float32``, ``cpu``, ...)
        self._str_types = (torch.dtype, torch.device, torch.layout, torch.memory_format)
        self._pending: list[tuple] = []  # ops waiting for device digests
        #: fwd9m debug's early stop, recording one step: write every op's whole call
        #: (:func:`keep_call`); decided when the window opens (:meth:`_window`)
        self._keep = False
        self._partials: list[Any] = []
        self._node_modules: dict[int, tuple[str, str]] = {}  # autograd seq nr -> (module, line)
        self._param_paths: dict[int, tuple[str, str]] = {}  # id(param) -> (module path, name)
        self._known: dict[tuple, tuple] = {}  # (data_ptr, nbytes, dtype) -> (ref, version, digest, sample)
        #: memory NumPy or DLPack can write behind the version counter's back: never cached
        self._foreign = ForeignMemory()
        #: storage address -> the tensor an allocating op (empty, new_empty) returned, while
        #: no op has written it: reading it reads bits no run can repeat, so it is not digested
        self._unwritten: dict[int, Any] = {}
        #: while Dynamo traces a compiled function it runs the global hooks too; they
        #: must leave no trace in the compiled program (public: torch.compiler.is_compiling)
        self._compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None) or (lambda: False)
        from ._compiled import CompiledGraphs

        self._compiled = CompiledGraphs(self)

    # ------------------------------------------------------------------ hooks
    def _path_of(self, module) -> str:
        p = self._paths.get(id(module))
        if p is None:
            root = self._modules[0] if self._modules else module
            base = self._type_name(root)
            for name, sub in root.named_modules():
                name = self._unwrapped(name)
                self._paths[id(sub)] = f"{base}.{name}" if name else base
            for name, prm in root.named_parameters():
                name = self._unwrapped(name)
                self._param_paths[id(prm)] = (f"{base}.{name}".rsplit(".", 1)[0], name.rsplit(".", 1)[-1])
            p = self._paths.get(id(module))
            if p is None:  # made on the fly (a loss module built inside forward): under its caller
                stack = [m for m in self._modules if m is not module]
                parent = ""
                for m in stack:  # outermost first, each named under the one before it
                    parent = self._paths.setdefault(id(m), f"{parent}.{type(m).__name__}".lstrip("."))
                p = self._paths[id(module)] = f"{parent}.{type(module).__name__}".lstrip(".")
        return p

    def _type_name(self, module) -> str:
        """The module's class name; for a ``torch.compile``d module, the user's module's."""
        inner = self._dispatch.compiled_module_inner(module)
        return type(module if inner is None else inner).__name__

    def _unwrapped(self, name: str) -> str:
        """A submodule's name without the compiled modules' wrapper level (``_orig_mod``):
        a compiled model's modules are named as the user's."""
        attr = self._dispatch.COMPILED_MODULE_ATTR
        return ".".join(part for part in name.split(".") if part != attr) if attr in name else name

    @guarded("<module pre-hook>")
    def _pre_hook(self, module, args):
        if self._compiling():
            return
        if not self._modules:
            self._model_inputs = {id(a) for a in args if isinstance(a, self.torch.Tensor)}
        self._modules.append(module)

    @guarded("<module hook>")
    def _post_hook(self, module, args, output):
        if self._compiling():
            return
        if self._module_level and self._modules:
            self._record_module(module, args, output)  # guarded: the stack below is kept
        if self._modules and self._modules[-1] is module:
            self._modules.pop()
        elif module in self._modules:  # an exception skipped a post hook
            del self._modules[self._modules.index(module) :]
        if not self._modules:
            self._model_inputs = set()

    @guarded("<optimizer pre-hook>")
    def _opt_pre(self, optimizer, args, kwargs):
        if self._compiling():
            return
        self._phase_stack.append("optimizer")
        if self._module_level:
            self._record_params(optimizer, grads=True)

    @guarded("<optimizer hook>")
    def _opt_post(self, optimizer, args, kwargs):
        if self._compiling():
            return
        if self._phase_stack:
            self._phase_stack.pop()
        self.rec.step += 1
        if self._module_level:
            self._record_params(optimizer, grads=False, step=self.rec.step - 1)
        self._window()

    # ------------------------------------------------------------------ step window
    def _window(self) -> None:
        """Enter the dispatch mode while the step is inside ``rec.steps``."""
        if self._module_level:
            return
        if self.rec.gate is not None:  # fwd9m debug decides the window as its digest runs go on
            self.rec.steps = self.rec.gate.steps_at(self.rec.step)
        steps = self.rec.steps
        inside = steps is None or steps[0] <= self.rec.step <= steps[1]
        if inside and self._mode is None:
            self._keep = steps is not None and steps[0] == steps[1] and keep_budget() > 0
            self._mode = self._dispatch.dispatch_mode(self._on_op, compiled=self._compiled.hooked)
            self._mode.__enter__()
        elif not inside and self._mode is not None:
            self.flush()
            self._mode.__exit__(None, None, None)
            self._mode = None
            if steps is not None and self.rec.step > steps[1] and os.environ.get(ENV_STOP_AFTER) == "1":
                raise WindowDone  # fwd9m debug's early stop: nothing after the window is needed

    # ------------------------------------------------------------------ module level
    @guarded("<module hook>")
    def _record_module(self, module, args, output) -> None:
        """Level "modules": one record per module call (inputs and outputs)."""
        torch = self.torch
        rec = self.rec
        ins = [(a, IS_MODEL_INPUT if len(self._modules) == 1 else 0) for a in args if isinstance(a, torch.Tensor)]
        outs = (
            [output]
            if isinstance(output, torch.Tensor)
            else [o for o in output if isinstance(o, torch.Tensor)]
            if isinstance(output, (tuple, list))
            else []
        )
        name = self._type_name(module)
        ctx = rec.ctx_id(self._path_of(module), "forward", user_location(3), "", "")
        in_recs = [self._tensor(t, f, True, False) for t, f in ins]
        other = [(str(i), a) for i, a in enumerate(args) if not isinstance(a, torch.Tensor)]
        if other:  # a Python value passed to the module (a scale, a flag): an input too
            in_recs.append(rec.args_record(other, self._str_types))
        rec.writer.op(
            rec.name_id(("module", name), f"module:{name}"),
            ctx,
            rec.step,
            in_recs,
            [self._tensor(t, 0, True, True) for t in outs],
        )

    @guarded("<optimizer hook>")
    def _record_params(self, optimizer, grads: bool, step: int | None = None) -> None:
        """Level "modules": gradients before the optimizer step (phase backward) and
        parameters after it (phase optimizer), one record per module (``grads`` /
        ``params``, outputs in the module's parameter order)."""
        rec = self.rec
        loc = user_location(3)
        by_module: dict[str, list] = {}
        for group in optimizer.param_groups:
            for prm in group["params"]:
                t = prm.grad if grads else prm
                if t is not None:
                    path = self._param_paths.get(id(prm), ("", "param"))[0]
                    by_module.setdefault(path, []).append(t.detach())
        kind = "grads" if grads else "params"
        name_id = rec.name_id(kind, kind)
        # the update's hyperparameters (lr, momentum, ...; a learning rate drawn per step)
        # are an input of each parameter record
        hyper = (
            []
            if grads
            else [
                rec.args_record(
                    [
                        (f"{k}" if len(optimizer.param_groups) == 1 else f"{i}.{k}", v)
                        for i, g in enumerate(optimizer.param_groups)
                        for k, v in g.items()
                        if k != "params"
                    ],
                    self._str_types,
                )
            ]
        )
        for path, tensors in by_module.items():
            ctx = rec.ctx_id(path, "backward" if grads else "optimizer", loc, "", "")
            rec.writer.op(
                name_id,
                ctx,
                rec.step if step is None else step,
                hyper,
                [self._tensor(t, IS_PARAM, True, True) for t in tensors],
            )

    def _patch_dataloader(self) -> None:
        try:
            from torch.utils.data import dataloader as dl
        except ImportError:  # pragma: no cover
            return
        phase_stack = self._phase_stack
        for cls, attr in ((self._dispatch.dataloader_iter_class(), "__next__"), (dl.DataLoader, "__iter__")):
            original = cls.__dict__.get(attr)
            if original is None:
                continue

            def wrapper(*a, __orig=original, **k):
                phase_stack.append("data")
                try:
                    return __orig(*a, **k)
                finally:
                    phase_stack.pop()

            setattr(cls, attr, wrapper)
            self._patched.append((cls, attr, original))

    def start(self) -> None:
        from torch.nn.modules import module as mod

        from ._steps import subscribe  # eager step boundaries, also for a compiled step

        self._handles = [
            mod.register_module_forward_pre_hook(self._pre_hook),
            mod.register_module_forward_hook(self._post_hook, always_call=True),
            subscribe(self._opt_pre, self._opt_post),
        ]
        self._patch_dataloader()
        self._foreign.start(self.torch, self._compiling)
        self._compiled.start()
        self._window()
        _active.add(self)

    def _leave_child(self) -> None:
        """:func:`_after_fork`: leave the dispatch mode and remove the hooks, writing nothing."""
        _active.discard(self)
        mode, self._mode = self._mode, None
        try:
            if mode is not None:
                mode.__exit__(None, None, None)
            for h in self._handles:
                h.remove()
        except Exception:  # noqa: BLE001 - a recorder never breaks the program
            pass
        self._handles, self._pending, self._partials = [], [], []

    def stop(self) -> None:
        _active.discard(self)
        if self._mode is not None:
            self._mode.__exit__(None, None, None)
            self._mode = None
        for h in self._handles:
            h.remove()
        self._handles = []
        for cls, attr, original in reversed(self._patched):
            setattr(cls, attr, original)
        self._patched = []
        self._foreign.stop()
        self.rec.notes.extend(self.notes())
        self._compiled.stop()
        self.flush()

    def notes(self) -> list[str]:
        """What the report must say about this run's recording so far (compiled code);
        :meth:`stop` adds them to the recording, and so does a ring's dump when the run
        is stopped by a signal, without stopping the recorder."""
        return self._compiled.notes()

    # ------------------------------------------------------------------ ops
    def _info(self, func) -> _OpInfo:
        info = _OpInfo()
        s = self._dispatch.op_schema_info(func)
        info.name = s["name"]
        info.name_id = self.rec.writer.string(s["name"])
        info.random = s["random"]
        info.out_args = s["out_args"]
        info.skip_self = s["name"] in OVERWRITES_SELF
        info.skip_out = s["name"] in UNINITIALISED_OUTPUT
        info.allocates = s["name"] in ALLOCATES
        info.mutates = bool(s["mutated"])
        info.ignore = s["name"].startswith(NOT_RECORDED)
        info.ignore_in_data = s["name"] in NOT_RECORDED_IN_DATA
        info.arg_names = s["arg_names"]
        self._infos[func] = info
        return info

    def _tensor(self, t, flags: int, digest: bool, want_sample: bool, cache: bool = True):
        """One tensor's record tuple; digests CPU tensors now, others later.

        A dense tensor's digest covers its bytes in memory order, so it depends only on
        the memory span (data pointer, byte length) and its content. Spans already
        digested are remembered while the tensor that was digested is alive and its
        version counter (shared by all views, bumped by every in-place write) is
        unchanged: inputs that are earlier outputs, views and unchanged parameters are
        not read again. Outputs of mutating ops bypass the cache (``cache=False``):
        autograd bumps the version counter only after the kernel returns. Memory that NumPy
        or DLPack shares (:mod:`fwd9m.torch._foreign`) is written without bumping it, so
        it bypasses the cache too: digested again at every use.
        """
        rec = self.rec
        dtype = t.dtype
        meta = rec.meta_id(str(dtype).replace("torch.", ""), tuple(t.shape))
        if not digest:
            return (meta, flags & ~HAS_SAMPLE, None, None, None)
        if t.device.type == "cpu":
            want_sample = want_sample and dtype in self._float_dtypes
            key = version = None
            if cache:
                try:
                    key = (t.data_ptr(), t.numel() * t.element_size(), dtype)
                    version = self._dispatch.tensor_version(t)
                    if self._foreign and self._foreign.covers(key[0], key[1]):
                        key = None
                except (RuntimeError, TypeError, AttributeError):  # sparse, inference tensors
                    key = None
            if key is not None:
                hit = self._known.get(key)
                if (
                    hit is not None
                    and hit[1] == version
                    and hit[0]() is not None
                    and (hit[3] is not None or not want_sample)
                ):
                    if want_sample:
                        return (meta, flags | HAS_SAMPLE, hit[2], hit[3], None)
                    return (meta, flags, hit[2], None, None)
            try:
                u8 = _digest.cpu_bytes(t, memory_order=True)
            except (RuntimeError, TypeError):  # sparse, quantized, meta...
                return (meta, flags, None, None, None)
            dig = fp.u8_digest(u8)
            sample = None
            if want_sample and u8.size:
                sample = rec.sample(u8, t.element_size())
                flags |= HAS_SAMPLE
            if key is not None and (t.is_contiguous() or _digest.dense_permuted(t.shape, t.stride())):
                try:
                    ref = weakref.ref(t, functools.partial(_forget, self._known, key))
                except TypeError:
                    ref = None
                if ref is not None:
                    if len(self._known) > 100_000:
                        self._known.clear()
                    self._known[key] = (ref, version, dig, sample)
            return (meta, flags, dig, sample, None)
        if t.is_sparse or t.layout != self.torch.strided or t.device.type == "meta":
            return (meta, flags, None, None, None)
        partial, nbytes = _digest.partial(t)
        self._partials.append(partial)
        return (meta, flags, ("partial", len(self._partials) - 1, nbytes), None, None)

    def _collect(self, args, kwargs, info: _OpInfo):
        """(tensor inputs with their flags, non-tensor arguments as (name, value))."""
        torch = self.torch
        Tensor = torch.Tensor
        Parameter = torch.nn.Parameter
        model_inputs = self._model_inputs
        out = []
        other = []
        names = info.arg_names
        for i, a in enumerate(args):
            if isinstance(a, Tensor):
                if not (i == 0 and info.skip_self):
                    flags = (IS_PARAM if isinstance(a, Parameter) else 0) | (
                        IS_MODEL_INPUT if id(a) in model_inputs else 0
                    )
                    out.append((a, flags))
                continue
            if isinstance(a, (list, tuple)):
                tensors = True
                for x in a:
                    if isinstance(x, Tensor):
                        out.append(
                            (
                                x,
                                (IS_PARAM if isinstance(x, Parameter) else 0)
                                | (IS_MODEL_INPUT if id(x) in model_inputs else 0),
                            )
                        )
                    else:
                        tensors = False
                if tensors and a:
                    continue
            other.append((names[i] if i < len(names) else str(i), a))
        for k, a in kwargs.items():
            if k in info.out_args:
                continue
            if isinstance(a, Tensor):
                out.append((a, IS_PARAM if isinstance(a, Parameter) else 0))
                continue
            if isinstance(a, (list, tuple)):
                tensors = [(x, 0) for x in a if isinstance(x, Tensor)]
                out.extend(tensors)
                if a and len(tensors) == len(a):
                    continue
            other.append((k, a))
        return out, other

    def _on_op(self, func, args, kwargs):
        """The dispatch handler: runs the op once, whatever happens in the recorder.

        An exception of the recorder (never of the op) is caught: the op is written as
        "not recorded" (:meth:`Recording.failed`) and the program goes on."""
        if self._compiled.depth:  # inside a compiled graph: part of its one op
            return func(*args, **kwargs)
        try:
            info = self._infos.get(func)
            if info is None:
                info = self._info(func)
            if info.ignore or (info.ignore_in_data and self._phase_stack and self._phase_stack[-1] == "data"):
                return func(*args, **kwargs)
            pre = self._before(info, args, kwargs)
            if pre[3]:  # a captured op: also its whole call, for replay (fwd9m.debug._replay)
                take_call(self.rec, self.rec.writer.ops + len(self._pending), "torch", func, args, kwargs)
            elif self._keep:  # fwd9m debug's op-level run 1 of one step: every call, while its budget lasts
                self._keep = keep_call(self.rec, self.rec.writer.ops + len(self._pending), "torch", func, args, kwargs)
        except Exception as exc:  # noqa: BLE001 - a recorder never breaks the program
            self._failed(func, exc)
            return func(*args, **kwargs)
        result = func(*args, **kwargs)
        try:
            self._after(info, pre, result)
        except Exception as exc:  # noqa: BLE001
            self._failed(func, exc)
        return result

    def _failed(self, func, exc: BaseException) -> None:
        try:
            name = self._infos[func].name if func in self._infos else str(self._dispatch.op_schema_info(func)["name"])
        except Exception:  # noqa: BLE001
            name = "aten::?"
        self._failed_name(name, exc)

    def _failed_name(self, name: str, exc: BaseException) -> None:
        try:
            name_id, ctx = self.rec.failed(name, exc)
            entry = (name_id, ctx, self.rec.step, [], [], None)
            if self._pending:
                self._pending.append(entry)
            else:
                self._write(entry)
        except Exception:  # noqa: BLE001
            pass

    def _before(self, info: _OpInfo, args, kwargs):
        """Digest the inputs (before the op: it may write them)."""
        rec = self.rec
        digest = rec.digests
        seq = rec.writer.ops + len(self._pending)
        capture = bool(rec.capture) and rec.capture.wants(seq, info.name)
        ins, other = self._collect(args, kwargs, info)
        unwritten = self._unwritten_input if self._unwritten else None
        in_recs = [self._tensor(t, f, digest and not (unwritten and unwritten(t)), False) for t, f in ins]
        if other:  # last, after the tensors (capture indices are tensor indices)
            in_recs.append(rec.args_record(other, self._str_types))
        in_caps = [self._bytes(t) for t, _ in ins] if capture else None
        return ins, in_recs, in_caps, capture

    def _after(self, info: _OpInfo, pre, result) -> None:
        ins, in_recs, in_caps, capture = pre
        rec = self.rec
        digest = rec.digests
        Tensor = self.torch.Tensor
        if isinstance(result, Tensor):
            outs = [result]
        elif isinstance(result, (list, tuple)):
            outs = [r for r in result if isinstance(r, Tensor)]
        else:
            outs = []
        if info.mutates and self._unwritten:  # written now: its memory holds a value
            self._track_unwritten(info, ins, outs)
        odig = digest and not info.skip_out
        unwritten = self._unwritten_input if self._unwritten else None  # a view of unwritten memory
        out_recs = [self._tensor(t, 0, odig and not (unwritten and unwritten(t)), True, not info.mutates) for t in outs]
        if info.allocates:
            self._track_unwritten(info, ins, outs)
        # context: module path, phase, location, autograd node, device
        node = self._dispatch.current_autograd_node()
        loc = None
        if node is not None:
            phase, node_name = "backward", node.name()
            module, loc = self._node_modules.get(node._sequence_nr(), ("", None))
        else:
            node_name = ""
            phase = self._phase_now("other")
            module = self._path_of(self._modules[-1]) if self._modules else ""
        if loc is None:
            loc = user_location(4)
        if node is None and module:
            # remember which module/line created the autograd node of this op (if any),
            # so its backward ops are attributed to them; first writer wins
            nodes = self._node_modules
            if len(nodes) > 500_000:
                nodes.clear()
            nodes.setdefault(self._dispatch.next_sequence_nr() - 1, (module, loc))
        device = ""
        for t in outs or [t for t, _ in ins]:
            device = t.device.type if t.device.index is None else str(t.device)
            break
        if info.random:
            node_name = node_name or "random"
        ctx = rec.ctx_id(module, phase, loc, node_name, device)
        entry = (
            info.name_id,
            ctx,
            rec.step,
            in_recs,
            out_recs,
            (in_caps, [self._bytes(t) for t in outs]) if capture else None,
        )
        self._emit(entry)

    def _storage(self, t) -> int | None:
        try:
            return t.untyped_storage().data_ptr() if t.device.type == "cpu" else None
        except (RuntimeError, TypeError, AttributeError, NotImplementedError):  # sparse, subclasses
            return None

    def _unwritten_input(self, t) -> bool:
        """Whether tensor ``t`` is memory an allocating op returned and ops have not yet
        written whole (``torch.empty(n, d)`` read, or viewed, before its rows are filled);
        memory NumPy or DLPack shares may have been written outside every op, so it is
        digested."""
        key = self._storage(t)
        entry = self._unwritten.get(key) if key is not None else None
        if entry is None:
            return False
        if entry[0]() is None:  # freed: its memory may be reused by a written tensor
            del self._unwritten[key]
            return False
        return not (self._foreign and self._foreign.covers(key, t.untyped_storage().nbytes()))

    def _track_unwritten(self, info: _OpInfo, ins, outs) -> None:
        """An allocating op's outputs hold no value yet; an op that writes (in place, or
        into ``out=``) writes the bytes of its arguments and outputs: memory written whole
        (as many bytes as it holds, in one op or row by row) holds a value."""
        if info.allocates:
            for t in outs:
                key = self._storage(t)
                if key and t.numel():
                    if len(self._unwritten) > 100_000:
                        self._unwritten.clear()
                    self._unwritten[key] = [weakref.ref(t), t.untyped_storage().nbytes()]
            return
        seen = set()
        for t in (*(t for t, _ in ins), *outs):
            key = self._storage(t)
            entry = self._unwritten.get(key) if key is not None else None
            if entry is not None and (key, t.data_ptr()) not in seen:
                seen.add((key, t.data_ptr()))  # an output that is its input: written once
                entry[1] -= t.numel() * t.element_size()
                if entry[1] <= 0:
                    del self._unwritten[key]

    def _phase_now(self, default: str) -> str:
        """The phase of an op that no autograd node runs (backward ops are those): the
        data phase inside a DataLoader's ``__next__``; forward inside a module's forward;
        inside ``optimizer.step``, the update only while grad mode is off. Optimizers run
        their update with grad off (``_use_grad_for_differentiable`` sets it to the
        ``differentiable`` default, False) and call a closure under ``torch.enable_grad()``:
        what a closure runs (Lightning's ``training_step`` runs in ``optimizer.step(closure)``)
        is the forward pass, not the optimizer's."""
        top = self._phase_stack[-1] if self._phase_stack else None
        if top == "data":
            return top
        if self._modules:
            return "forward"
        if top == "optimizer" and self.torch.is_grad_enabled():
            return "forward"
        return top or default

    def _bytes(self, t):
        """(meta id, raw bytes) for a full capture; copies the tensor to the host."""
        meta = self.rec.meta_id(str(t.dtype).replace("torch.", ""), tuple(t.shape))
        try:
            return meta, _digest.cpu_bytes(t.detach().cpu()).tobytes()
        except (RuntimeError, TypeError):
            return meta, b""

    def _emit(self, entry) -> None:
        """Write op ``entry`` now, or queue it behind the ops whose device digests are not
        back yet (in order; flushed every 256)."""
        if self._partials:
            self._pending.append(entry)
            if len(self._pending) >= 256:
                self.flush()
        else:
            self._write(entry)

    def _write(self, entry) -> None:
        name_id, ctx, step, ins, outs, caps = entry
        w = self.rec.writer
        seq = w.op(name_id, ctx, step, ins, outs)
        if caps is not None:
            in_caps, out_caps = caps
            for i, (meta, data) in enumerate(in_caps):
                w.capture(seq, False, i, meta, data)
            for i, (meta, data) in enumerate(out_caps):
                w.capture(seq, True, i, meta, data)

    def flush(self) -> None:
        """Resolve device-side digests with one host transfer, write queued ops."""
        if not self._pending:
            return
        values = []
        if self._partials:  # called inside the dispatch handler (mode popped) or after stop
            by_device: dict = {}
            for i, p in enumerate(self._partials):
                by_device.setdefault(p.device, []).append(i)
            values = [0] * len(self._partials)
            for idxs in by_device.values():  # one transfer per device
                got = self.torch.stack([self._partials[i] for i in idxs]).cpu().tolist()
                for i, v in zip(idxs, got):
                    values[i] = v

        def fix(t):
            d = t[2]
            if isinstance(d, tuple):
                return (t[0], t[1], fp.finalize(values[d[1]], d[2]), t[3], t[4])
            return t

        for name_id, ctx, step, ins, outs, caps in self._pending:
            self._write((name_id, ctx, step, [fix(t) for t in ins], [fix(t) for t in outs], caps))
        self._pending = []
        self._partials = []
