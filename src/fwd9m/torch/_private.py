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
* ``torch.utils.data.dataloader._BaseDataLoaderIter``: the base class of the single-
  and multi-process DataLoader iterators; its ``__next__`` fetches every batch, so the
  debug recorder marks the ops it runs as the "data" phase. Source:
  https://github.com/pytorch/pytorch/blob/main/torch/utils/data/dataloader.py
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["dispatch_mode", "current_autograd_node", "next_sequence_nr", "op_schema_info", "dataloader_iter_class"]


def dispatch_mode(handler: Callable[[Any, tuple, dict], Any]):
    """A TorchDispatchMode instance calling ``handler(func, args, kwargs)`` for every
    aten op; the handler must call ``func(*args, **kwargs)`` and return its result.
    Enter it with ``with mode:``."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Fwd9mRecordMode(TorchDispatchMode):
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


def dataloader_iter_class() -> type:
    """``torch.utils.data.dataloader._BaseDataLoaderIter`` (private; see above)."""
    from torch.utils.data import dataloader

    return dataloader._BaseDataLoaderIter
