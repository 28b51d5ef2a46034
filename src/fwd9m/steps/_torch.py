"""PyTorch step digests: what one optimizer step holds, and the optimizer step hooks
that ``fwd9m run --digests/--against`` subscribes (:mod:`fwd9m.torch._steps`, eager
also when the step is compiled).

``torch.optim.optimizer.register_optimizer_step_pre_hook`` / ``..._post_hook`` register
hooks that every optimizer's ``step()`` calls, with ``(optimizer, args, kwargs)``,
before and after the update (``Optimizer.profile_hook_step`` in
https://github.com/pytorch/pytorch/blob/main/torch/optim/optimizer.py: global pre-hooks
run first; a pre-hook must return None or replace the step's arguments; the post-hooks
run after ``step`` returned, so the gradients are still there and the parameters are
updated). A pre-hook records the parameters before the first update (group
``initial``); the post-hook records parameters, gradients, buffers, optimizer state
and the global RNG states. The loss and the batch are not visible to an optimizer:
the callbacks and :func:`fwd9m.debug.step_digest` add them.

Parameters are named by the root module that holds them, found once per optimizer
among live objects (:func:`fwd9m.torch._model.model_of`).
"""

from __future__ import annotations

import weakref
from typing import Any

from ._values import digest_groups, digest_leaves, global_rng_leaves

__all__ = ["initial_entries", "install", "optimizer_entries"]

#: per optimizer: its model, held weakly (a strong reference kept a DDP model, and through its
#: reducer a gloo process group, alive past ``destroy_process_group()``: freed at exit, the
#: group's destructor joined a thread waiting for the GIL, a hang; pytorch/pytorch#56297),
#: and each parameter's name by id
_names: weakref.WeakKeyDictionary[Any, tuple[Any, dict[int, str]]] = weakref.WeakKeyDictionary()
_subscription: list[Any] = []


def _model_and_names(optimizer, model=None) -> tuple[Any, dict[int, str]]:
    """The root module of ``optimizer``'s parameters (or ``model``) and each parameter's
    name by id, cached per optimizer."""
    cached = _names.get(optimizer)
    if cached is not None:
        held = cached[0]() if cached[0] is not None else None
        if (held is not None or cached[0] is None) and (model is None or held is model):
            return held, cached[1]
    if model is None:
        import warnings

        from ..torch._model import model_of

        with warnings.catch_warnings():  # isinstance on every live object: deprecated torch
            warnings.simplefilter("ignore")  # aliases (torch.distributed.reduce_op) warn
            model = model_of(optimizer)
    names = {id(p): n for n, p in model.named_parameters()} if model is not None else {}
    _names[optimizer] = (weakref.ref(model) if model is not None else None, names)
    return model, names


def _params(optimizer, names: dict[int, str]) -> list[tuple[str, Any]]:
    out = []
    for gi, group in enumerate(optimizer.param_groups):
        for pi, p in enumerate(group["params"]):
            out.append((names.get(id(p)) or f"group{gi}.{pi}", p))
    return out


def initial_entries(optimizer, model=None) -> list[tuple[str, str, str, int]]:
    """Group ``initial``: the parameters and buffers as they are now (before the first
    update)."""
    model, names = _model_and_names(optimizer, model)
    entries = digest_leaves("initial", _params(optimizer, names))
    if model is not None:
        entries += digest_leaves("initial", [(f"buffer:{n}", b) for n, b in model.named_buffers()])
    return entries


def optimizer_entries(optimizer, model=None, *, grads: bool = True) -> list[tuple[str, str, str, int]]:
    """Groups ``grads``, ``params``, ``buffers``, ``optimizer`` (its per-parameter state
    and the hyper-parameters that change, such as the learning rate) and ``rng``."""
    import torch

    model, names = _model_and_names(optimizer, model)
    params = _params(optimizer, names)
    state = []
    for n, p in params:
        for k, v in optimizer.state.get(p, {}).items():
            if isinstance(v, (torch.Tensor, int, float)):
                state.append((f"{n}.{k}", v))
    for gi, group in enumerate(optimizer.param_groups):
        for k in ("lr", "momentum", "betas", "weight_decay"):
            if k in group:
                state.append((f"group{gi}.{k}", group[k]))
    groups = [
        ("grads", [(n, p.grad) for n, p in params if p.grad is not None] if grads else []),
        ("params", params),
        ("buffers", list(model.named_buffers()) if model is not None else []),
        ("optimizer", state),
        ("rng", global_rng_leaves()),
    ]
    return digest_groups(groups)  # one batched digest for the whole step


def install(session) -> None:
    """Install the global optimizer hooks feeding ``session`` (idempotent). A hook that
    fails logs a warning once and lets training go on, except for the stop at the first
    divergence (:class:`~fwd9m.steps._session.DivergenceExit`)."""
    if _subscription:
        return
    from ..torch._steps import subscribe

    seen: weakref.WeakSet[Any] = weakref.WeakSet()
    pending: list[tuple[str, str, str, int]] = []

    def pre(optimizer, args, kwargs) -> None:
        if optimizer in seen or session.claimed:
            return
        seen.add(optimizer)
        try:
            pending.extend(initial_entries(optimizer))
        except Exception as exc:  # noqa: BLE001 - never break the user's step
            session._warn(exc)
        return

    def post(optimizer, args, kwargs) -> None:
        def entries():
            out = pending + optimizer_entries(optimizer)
            pending.clear()
            return out

        session.record_safely(entries)

    _subscription.append(subscribe(pre, post))
    session.agree = ranks_that_differ


def ranks_that_differ(differs: bool) -> list[int] | None:
    """The ranks whose step differs from their reference, agreed by every rank of the
    job's default process group (one all-reduce of a flag per rank, on the job's own
    backend: CPU tensors for gloo, the current CUDA device for NCCL); None without an
    initialised process group (each process then stops on its own)."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return None
    cuda = dist.get_backend() == "nccl"
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    flags = torch.zeros(dist.get_world_size(), dtype=torch.int32, device=device)
    flags[dist.get_rank()] = int(differs)
    dist.all_reduce(flags)
    return [rank for rank, flag in enumerate(flags.tolist()) if flag]


def uninstall() -> None:
    """Remove the hooks (for tests)."""
    while _subscription:
        _subscription.pop().remove()
