"""The torch part of ``fwd9m check``'s final state (:mod:`fwd9m._runtime.capture`):
every top-level ``torch.nn.Module`` with state (its ``state_dict``) and every
``torch.optim.Optimizer`` with state.

Modules that went out of scope before the end (a model local to ``main()``) are kept
alive from construction by torch's global module registration hooks
(``torch.nn.modules.module.register_module_*_registration_hook``,
https://github.com/pytorch/pytorch/blob/main/torch/nn/modules/module.py; they run at
construction, not at every forward call), optimizers by the global step hook
(``torch.optim.optimizer.register_optimizer_step_post_hook``), so both are still there
at the end. torch is imported only when it is already in ``sys.modules``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from .._backend import outermost

__all__ = ["keep_alive", "state_types", "final_state"]


def keep_alive(keep: Callable[[Any], Any]) -> None:
    """Pass ``keep`` every torch module that registers a parameter, buffer or
    submodule, and every optimizer that steps."""
    import torch.nn.modules.module as mm

    def hook(module, name, value):
        keep(module)

    for reg in (
        "register_module_parameter_registration_hook",
        "register_module_buffer_registration_hook",
        "register_module_module_registration_hook",
    ):
        fn = getattr(mm, reg, None)
        if fn is not None:  # torch >= 2.0
            fn(hook)
    import torch.optim.optimizer as oo

    def step_hook(optimizer, args, kwargs):  # one dict lookup per optimizer step
        keep(optimizer)

    if hasattr(oo, "register_optimizer_step_post_hook"):  # torch >= 2.0
        from ._steps import subscribe

        subscribe(post=step_hook)


def state_types() -> tuple[type, ...]:
    torch = sys.modules.get("torch")
    nn = getattr(torch, "nn", None)
    optim = getattr(torch, "optim", None)
    return tuple(c for c in (getattr(nn, "Module", None), getattr(optim, "Optimizer", None)) if c is not None)


def final_state(
    found: list[Any], name_of: Callable[[Any], str | None], label: Callable[[str, Any], str], taken: set[int]
) -> dict[str, Any]:
    """The root modules with state (named ones first, by name), then the optimizers
    with state; their parameters and buffers go into ``taken``."""
    if not found:
        return {}
    module_type = sys.modules["torch"].nn.Module
    modules = [o for o in found if isinstance(o, module_type)]
    optimizers = [o for o in found if not isinstance(o, module_type)]
    roots = outermost(modules, lambda m: list(m.modules())[1:])

    def by_name(m):
        return name_of(m) is None, name_of(m) or "", type(m).__name__

    out: dict[str, Any] = {}
    for m in sorted(roots, key=by_name):
        if m.state_dict():
            out[label("torch", m)] = m
    for o in optimizers:
        if o.state_dict().get("state"):
            out[label("torch", o)] = o
    for m in roots:
        taken.update(id(t) for t in (*m.parameters(), *m.buffers()))
    return out
