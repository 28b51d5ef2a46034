"""A captured model call turned into ``fn(*batched inputs)``: which arguments carry the
batch (arrays with the batch's size along the batch dimension), the rest held fixed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigurationError
from . import _frame


@dataclass
class Call:
    fn: Callable
    items: list[Any]
    batch_dim: int
    notes: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, fw: Any, model: Any, args: tuple, kwargs: dict, batch_dim: int | None) -> Call:
        """The call ``model(*args, **kwargs)`` with its batched arguments found: those
        whose size along ``batch_dim`` (default 0) is that of the first array argument.

        Raises:
            ConfigurationError: no argument is an array with that dimension.
        """
        dim = 0 if batch_dim is None else batch_dim
        slots = list(enumerate(args)) + list(kwargs.items())
        sizes = [(k, _frame.batch_size(v, dim)) for k, v in slots]
        first = next((s for _, s in sizes if s is not None), None)
        if first is None:
            raise ConfigurationError(
                f"no argument of the call has a dimension {dim} (the batch); name it with --batch-dim"
            )
        keys = [k for k, s in sizes if s == first]
        invoke = fw.invoker(model) if fw is not None and hasattr(fw, "invoker") else model

        def fn(*batched):
            a, kw = list(args), dict(kwargs)
            for k, v in zip(keys, batched):
                if isinstance(k, int):
                    a[k] = v
                else:
                    kw[k] = v
            return invoke(*a, **kw)

        items = [args[k] if isinstance(k, int) else kwargs[k] for k in keys]
        names = ", ".join(f"argument {k}" if isinstance(k, int) else k for k in keys)
        note = f"the script's first model call had {first} samples (along dimension {dim} of {names})"
        return cls(fn, items, dim, [note])
