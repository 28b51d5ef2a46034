"""The model an optimizer trains, found among live objects: ``fwd9m run
--check-replicas`` (:mod:`fwd9m.distributed._replicas`) compares its replicas, and step
digests (:mod:`fwd9m.steps._torch`) name its parameters."""

from __future__ import annotations

import gc
from typing import Any

__all__ = ["model_of"]


def model_of(optimizer: Any) -> Any:
    """The root module (DDP wrapper preferred) holding ``optimizer``'s first parameter,
    found among live objects; None when there is none."""
    import torch

    params = [p for g in optimizer.param_groups for p in g["params"]]
    if not params:
        return None
    first = params[0]
    module = torch.nn.Module
    # issubclass(type(o)), not isinstance: isinstance reads o.__class__, which on
    # torch.distributed.reduce_op (a deprecated alias) emits a FutureWarning to the user
    candidates = [
        o for o in gc.get_objects() if issubclass(type(o), module) and any(p is first for p in o.parameters())
    ]
    inner = {id(c) for o in candidates for c in o.modules() if c is not o}
    roots = [o for o in candidates if id(o) not in inner]
    return roots[0] if roots else None
