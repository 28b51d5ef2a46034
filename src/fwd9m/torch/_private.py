"""The one module that touches PyTorch's private dispatch API.

Everything here is private to torch and may change between releases; keep its use in
this file so a torch upgrade breaks one place:

* ``torch.utils._python_dispatch.TorchDispatchMode``: a Python mode that sees every
  aten op below autograd (forward, backward and optimizer ops alike). While its
  ``__torch_dispatch__`` runs, the mode is popped from the mode stack, so ops the
  handler itself runs are not seen again. Source:
  https://github.com/pytorch/pytorch/blob/main/torch/utils/_python_dispatch.py
* ``torch._C._current_autograd_node()``: the autograd ``Node`` whose backward is being
  executed by the engine on this thread, or None outside backward. Used by
  ``torch.utils._debug_mode`` for the same purpose. Source:
  https://github.com/pytorch/pytorch/blob/main/torch/csrc/autograd/python_engine.cpp
* ``torch._C._autograd._get_sequence_nr()``: the thread-local autograd sequence
  number, which the next autograd ``Node`` created on this thread will take
  (``Node._sequence_nr()``); autograd creates an op's node before dispatching the op
  below autograd, so inside the dispatch handler of a forward op ``value - 1`` is the
  node that op created (the profiler links forward and backward ops the same way).
  Source: https://github.com/pytorch/pytorch/blob/main/torch/csrc/autograd/function.h
* ``TorchDispatchMode.ignore_compile_internals()``: when False (the default), Dynamo
  skips every frame it would compile while the mode is on the stack ("non-infra torch
  dispatch mode present, this is not supported today in torch.compile",
  ``torch/_dynamo/convert_frame.py`` ``ConvertFrame.__call__``, torch 2.13), so a
  ``torch.compile``d function runs eagerly: measured, its aten ops were recorded one by
  one and Inductor's kernels never ran, nor afterwards: once Dynamo met a function
  under such a mode it skips its code for the rest of the process (measured: 0 compiled
  graph calls after the mode was exited). The recorder's mode returns True, as
  ``torch.utils._debug_mode.DebugMode`` does: the compiled program runs, and the mode
  does not see the ops inside it (measured: not even the extern ``addmm``). Source:
  https://github.com/pytorch/pytorch/blob/main/torch/utils/_python_dispatch.py
* ``torch._inductor.output_code.CompiledFxGraph``: one Inductor-compiled FX graph (a
  forward or a backward graph after AOTAutograd). ``__call__(self, inputs)`` runs it
  with the boxed calling convention (it empties the ``inputs`` list);
  ``__init__(self, current_callable, graph, gm, ...)`` gets the post-grad aten graph
  ``gm``, which runs eagerly as ``gm(*inputs)``: the graph's eager equivalent.
  ``fx_kwargs["is_backward"]`` / ``["graph_id"]`` say which graph it is. Checked on torch
  2.13. Source: https://github.com/pytorch/pytorch/blob/main/torch/_inductor/output_code.py
* ``torch._inductor.config.fx_graph_cache`` and
  ``torch._functorch.config.enable_autograd_cache``: a graph loaded from these caches is
  not built by ``__init__`` (no ``gm``); the narrowing run turns them off (compilation
  only: the same kernels are generated). Sources: ``torch/_inductor/config.py``,
  ``torch/_functorch/config.py``.
* ``torch._dynamo.eval_frame.OptimizedModule``: what ``torch.compile(module)`` returns;
  the user's module is its submodule ``_orig_mod``, and its ``forward`` is the compiled
  ``_orig_mod.__call__`` (``OptimizedModule._initialize``), so the global module hooks
  of the modules inside run only while Dynamo traces them. Checked on torch 2.13.
  Source: https://github.com/pytorch/pytorch/blob/main/torch/_dynamo/eval_frame.py
* ``torch.utils.data.dataloader._BaseDataLoaderIter``: the base class of the single-
  and multi-process DataLoader iterators; its ``__next__`` fetches every batch, so the
  debug recorder marks the ops it runs as the "data" phase. Source:
  https://github.com/pytorch/pytorch/blob/main/torch/utils/data/dataloader.py
* ``torch.utils.hooks.RemovableHandle``'s ``hooks_dict_ref`` (a weak reference to the
  dict of hooks it was registered in) and ``id`` (its key there): the optimizer step
  hooks are registered plain and replaced in place by their ``torch.compiler.disable``
  form once Dynamo is imported (:mod:`fwd9m.torch._steps`), keeping their order among the
  global hooks. Checked on torch 2.13. Source:
  https://github.com/pytorch/pytorch/blob/main/torch/utils/hooks.py
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = [
    "compiled_graph_hooks",
    "compiled_module_inner",
    "COMPILED_MODULE_ATTR",
    "compile_caches_off",
    "graph_info",
    "current_autograd_node",
    "dataloader_iter_class",
    "dispatch_mode",
    "next_sequence_nr",
    "op_arguments",
    "op_name",
    "op_schema_info",
    "replace_hook",
    "replaceable_hook",
    "run_graph",
    "tensor_version",
]


def dispatch_mode(handler: Callable[[Any, tuple, dict], Any], compiled: bool = True):
    """A TorchDispatchMode instance calling ``handler(func, args, kwargs)`` for every
    aten op; the handler must call ``func(*args, **kwargs)`` and return its result.
    Enter it with ``with mode:``. ``compiled``: let ``torch.compile`` run compiled under
    it (the ops inside compiled graphs are then not seen); False: Dynamo runs every
    compiled function eagerly under it."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Fwd9mRecordMode(TorchDispatchMode):
        @classmethod
        def ignore_compile_internals(cls) -> bool:  # see the module's docstring
            return compiled

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return handler(func, args, kwargs or {})

    return _Fwd9mRecordMode()


def current_autograd_node():
    """The autograd node being executed (backward), or None."""
    import torch

    return torch._C._current_autograd_node()


def next_sequence_nr() -> int:
    """The sequence number the next autograd node on this thread will get."""
    import torch

    return torch._C._autograd._get_sequence_nr()


def op_schema_info(func) -> dict[str, Any]:
    """What the recorder needs from an OpOverload's schema: its qualified name
    (``aten::index_put_``), whether it draws from a Generator (a random op), which
    positional/keyword arguments it only writes (``out=`` tensors), and which
    arguments it mutates (``Tensor(a!)``), and the names of its arguments in order."""
    import torch

    schema = func._schema
    # ops tagged nondeterministic_seeded draw from the RNG (native_functions.yaml tags)
    random = torch.Tag.nondeterministic_seeded in getattr(func, "tags", ()) or any(
        "Generator" in str(a.type) for a in schema.arguments
    )
    out_args = {a.name for a in schema.arguments if getattr(a, "is_out", False)}
    mutated = [i for i, a in enumerate(schema.arguments) if a.alias_info is not None and a.alias_info.is_write]
    return {
        "name": schema.name,
        "overload": schema.overload_name,
        "random": random,
        "out_args": out_args,
        "mutated": mutated,
        "arg_names": [a.name for a in schema.arguments],
    }


def op_arguments(func) -> list[dict[str, Any]]:
    """An OpOverload's arguments in order, as plain values: ``name``, ``type`` (the
    schema's spelling: ``Tensor``, ``Optional[Tensor]``, ``List[Tensor]``...), ``out``,
    ``kwarg_only`` and ``has_default``."""
    return [
        {
            "name": a.name,
            "type": str(a.type),
            "out": a.name == "out" or bool(getattr(a, "is_out", False)),
            "kwarg_only": bool(a.kwarg_only),
            "has_default": bool(a.has_default_value()),
        }
        for a in func._schema.arguments
    ]


def op_name(func) -> tuple[str, str]:
    """``(qualified name, overload name)`` of an OpOverload: ``("aten::add", "Tensor")``."""
    return func._schema.name, func._overloadname


def tensor_version(t) -> int:
    """The tensor's version counter (bumped by every in-place op the framework runs)."""
    return t._version


def dataloader_iter_class() -> type:
    """``torch.utils.data.dataloader._BaseDataLoaderIter`` (private; see above)."""
    from torch.utils.data import dataloader

    return dataloader._BaseDataLoaderIter


def compiled_graph_hooks(on_call: Callable[[Any, list, Callable], Any], on_init: Callable[[Any, Any], None]):
    """Route every Inductor graph call through ``on_call(graph, inputs, call)`` (which
    must return ``call(inputs)``) and tell ``on_init(graph, gm)`` of each graph built;
    returns the function that undoes both, or None when this torch has no
    ``CompiledFxGraph`` as described above."""
    try:
        from torch._inductor.output_code import CompiledFxGraph
        from torch.utils._python_dispatch import TorchDispatchMode
    except Exception:  # noqa: BLE001 - no Inductor, or another layout: nothing to hook
        return None
    if not hasattr(TorchDispatchMode, "ignore_compile_internals"):  # Dynamo would skip anyway
        return None
    call0, init0 = CompiledFxGraph.__dict__.get("__call__"), CompiledFxGraph.__dict__.get("__init__")
    if call0 is None or init0 is None:
        return None

    def call(self, inputs):
        return on_call(self, inputs, lambda boxed: call0(self, boxed))

    def init(self, current_callable, graph, gm, *args, **kwargs):
        init0(self, current_callable, graph, gm, *args, **kwargs)
        on_init(self, gm)

    CompiledFxGraph.__call__, CompiledFxGraph.__init__ = call, init

    def undo() -> None:
        CompiledFxGraph.__call__, CompiledFxGraph.__init__ = call0, init0

    return undo


def graph_info(graph) -> tuple[bool, int | None]:
    """(is a backward graph, AOTAutograd graph id) of a ``CompiledFxGraph``."""
    kw = getattr(graph, "fx_kwargs", None) or {}
    return bool(kw.get("is_backward")), kw.get("graph_id")


#: the attribute of ``OptimizedModule`` that holds the user's module
COMPILED_MODULE_ATTR = "_orig_mod"


def compiled_module_inner(module) -> Any:
    """The user's module inside a ``torch.compile``d module, or None for any other."""
    import sys

    eval_frame = sys.modules.get("torch._dynamo.eval_frame")  # not imported: nothing compiled
    cls = getattr(eval_frame, "OptimizedModule", None)
    return getattr(module, COMPILED_MODULE_ATTR, None) if cls is not None and isinstance(module, cls) else None


def run_graph(graph, inputs: list):
    """Run a ``CompiledFxGraph``'s compiled code itself (``current_callable``, what its
    ``__call__`` runs), not through the recorder's hook."""
    return graph.current_callable(inputs)


def compile_caches_off():
    """Turn off Inductor's FX graph cache and AOTAutograd's cache; returns the undo."""
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    old = inductor_config.fx_graph_cache, functorch_config.enable_autograd_cache
    inductor_config.fx_graph_cache = functorch_config.enable_autograd_cache = False

    def undo() -> None:
        inductor_config.fx_graph_cache, functorch_config.enable_autograd_cache = old

    return undo


def replaceable_hook(handle) -> bool:
    """Whether :func:`replace_hook` can replace the hook of ``handle`` (a
    ``RemovableHandle``) in place."""
    d = getattr(handle, "hooks_dict_ref", lambda: None)()
    return isinstance(d, dict) and getattr(handle, "id", None) in d


def replace_hook(handle, old: Callable[..., Any], new: Callable[..., Any]) -> bool:
    """Put ``new`` where ``handle``'s hook ``old`` is, at its position among the hooks of
    its dict; False when it is no longer there (removed)."""
    d = getattr(handle, "hooks_dict_ref", lambda: None)()
    if not isinstance(d, dict) or d.get(getattr(handle, "id", None)) is not old:
        return False
    d[handle.id] = new
    return True
