"""PyTorch step boundaries: one pair of global optimizer step hooks for every part of
fwd9m that needs them (``fwd9m run --digests`` :mod:`fwd9m.steps._torch`, ``fwd9m check
--resume`` :mod:`fwd9m.check._resume_child`, ``fwd9m check``'s final state
:mod:`fwd9m.torch._capture`, ``fwd9m run --check-replicas``
:mod:`fwd9m.distributed._replicas`, ``fwd9m debug``'s recorder
:mod:`fwd9m.torch._recorder`); each subscribes a ``pre`` and/or a ``post`` callable
``(optimizer, args, kwargs)``, called in the order they subscribed.

``torch.optim.optimizer.register_optimizer_step_pre_hook`` / ``..._post_hook`` put a
hook in a module-level dict that ``Optimizer.profile_hook_step``'s wrapper (the
``step`` of every optimizer class) iterates: the global pre-hooks, then the
optimizer's own, the step, then the optimizer's own post-hooks and the global ones
(torch/optim/optimizer.py, torch 2.13). A pre-hook returning anything but None would
replace the step's arguments: the hook here returns None.

Under ``torch.compile`` (``opt.step = torch.compile(opt.step)``, or a compiled function
that calls ``opt.step()``) Dynamo traces that wrapper and, with it, every global hook:
what Dynamo can trace of a hook's Python runs at trace time only and is replayed with
the values it had then (``torch.compiler.is_compiling()`` true), what it cannot falls
back to eager piece by piece, and fwd9m's own functions become compiled frames
(measured, torch 2.13, Adam with ``opt.step = torch.compile(opt.step)``: 14 graph breaks
inside fwd9m's code under ``fwd9m run --digests``; ``fwd9m check --resume``'s child
recorded no state before any step, its digests failing on Dynamo's fake tensors
(``ReferenceError``, ``setStorage`` errors); ``fwd9m debug``'s recorder, whose hooks
return while compiling, counted no step: every op at step 0).

So both hooks here are wrapped by ``torch.compiler.disable``
(torch/compiler/__init__.py; Dynamo graph-breaks at a call of a function marked
``_torchdynamo_disable``, "Skip calling `torch.compiler.disable()`d function" in
torch/_dynamo/variables/functions.py, and the call runs eagerly, with Dynamo off in
everything it calls): each step boundary runs in eager Python, at every call, compiled
or not. The hooks are called in a ``for`` loop, where Dynamo cannot break a graph, so it
runs that wrapper's frame eagerly ("graph break in loop", frame skipped,
torch/_dynamo/symbolic_convert.py) and compiles the frames it calls: the update. Its
graph is the same as without fwd9m: torch already breaks the graph right before and
after the update (``_use_grad_for_differentiable`` calls ``torch._dynamo.graph_break()``
on both sides, torch/optim/optimizer.py); what runs eagerly instead of traced is only
the hook loop and ``record_function`` (which Dynamo ignores when it traces). Measured: the same
final weights, bit for bit, as the script run plainly, under ``fwd9m run --digests``,
``check``, ``check --resume``'s child and ``debug``, for a compiled ``opt.step`` and for
a compiled function calling ``opt.step()``. A hook is registered only while one of its
kind has a subscriber, so a run without any adds no break.

``torch.compiler.disable`` imports Dynamo (``torch._dynamo``, and sympy with it): 2.6 s
of CPU time in every run of a torch script that never compiles (measured, torch 2.13 on
2 cores: a ``fwd9m check`` of ``import torch`` 10.2 s → 6.9 s without it). Dynamo is
imported before it compiles anything (``torch.compile`` imports it), so a hook is
registered plain while it is not imported, and replaced in place, at its position among
the global hooks, by its disabled form just after ``torch._dynamo`` is imported
(:func:`fwd9m.torch._private.replace_hook`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

__all__ = ["Subscription", "eager", "subscribe"]

Hook = Callable[[Any, Any, Any], None]

_pre: list[Hook] = []
_post: list[Hook] = []
_handles: dict[str, Any] = {}


def eager(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` run eagerly, never traced by Dynamo (``torch.compiler.disable``; as is
    with a torch that has none)."""
    import torch

    compiler = getattr(torch, "compiler", None)
    disable = getattr(compiler, "disable", None)
    if disable is None:  # torch < 2.1
        return fn
    return disable(fn, reason="fwd9m: a step boundary runs in eager Python")


def _run_pre(optimizer, args, kwargs) -> None:
    for hook in list(_pre):
        hook(optimizer, args, kwargs)


def _run_post(optimizer, args, kwargs) -> None:
    for hook in list(_post):
        hook(optimizer, args, kwargs)


class Subscription:
    """What :func:`subscribe` returns: :meth:`remove` unsubscribes (idempotent)."""

    def __init__(self, pre: Hook | None, post: Hook | None) -> None:
        self.pre = pre
        self.post = post

    def remove(self) -> None:
        for kind, hooks, hook in (("pre", _pre, self.pre), ("post", _post, self.post)):
            if hook is not None and hook in hooks:
                hooks.remove(hook)
                if not hooks:
                    _handles.pop(kind).remove()
        self.pre = self.post = None


def _register(kind: str, run: Hook) -> Any:
    """Register ``run`` as the global ``kind`` ("pre"/"post") optimizer step hook: disabled
    for Dynamo now if Dynamo is imported, else plain until it is (:func:`_disable_hooks`)."""
    import torch.optim.optimizer as oo

    from . import _private

    register = oo.register_optimizer_step_pre_hook if kind == "pre" else oo.register_optimizer_step_post_hook
    if "torch._dynamo" in sys.modules:
        return register(eager(run))
    handle = register(run)
    if not _private.replaceable_hook(handle):  # a torch whose handles differ: disable now
        handle.remove()
        return register(eager(run))
    _watch_dynamo()
    return handle


_watching: list[Any] = []  # the import hook that waits for torch._dynamo (one per process)


def _watch_dynamo() -> None:
    if not _watching:
        from .._import_hook import after_import

        _watching.append(after_import(["torch._dynamo"], _disable_hooks))


def _disable_hooks(_name: str = "torch._dynamo") -> None:
    """Just after ``torch._dynamo`` is imported, before it compiles anything: each hook
    registered plain replaced by its ``torch.compiler.disable`` form, in place."""
    from . import _private

    for kind, run in (("pre", _run_pre), ("post", _run_post)):
        handle = _handles.get(kind)
        if handle is not None:
            _private.replace_hook(handle, run, eager(run))


def subscribe(pre: Hook | None = None, post: Hook | None = None) -> Subscription:
    """Call ``pre`` before and ``post`` after every optimizer's ``step()`` (eagerly, also
    when the step is compiled). An exception from a subscriber propagates out of the
    user's ``step()``, as from a global hook of its own: a subscriber that must never
    break training catches its own."""
    if pre is not None:
        if not _pre:
            _handles["pre"] = _register("pre", _run_pre)
        _pre.append(pre)
    if post is not None:
        if not _post:
            _handles["post"] = _register("post", _run_post)
        _post.append(post)
    return Subscription(pre, post)
