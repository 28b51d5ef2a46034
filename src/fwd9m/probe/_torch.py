"""PyTorch side of the probe child (:mod:`fwd9m.probe._child`).

The switch is ``torch.use_deterministic_algorithms(True)``
(https://docs.pytorch.org/docs/stable/generated/torch.use_deterministic_algorithms.html);
on CUDA it needs ``CUBLAS_WORKSPACE_CONFIG`` set before cuBLAS starts, so the child
gets it in its environment. Threads: ``torch.set_num_threads``.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any

from ..torch._replay import op_arguments

_torch: Any = None


def child_env(switch: bool, threads: int) -> dict[str, str]:
    env = {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    if switch:
        env["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
    return env


def setup(device: str, switch: bool, threads: int) -> list[str]:
    """Import torch, apply the settings; the devices torch sees."""
    global _torch
    import torch

    _torch = torch
    torch.set_num_threads(threads)
    if switch:
        torch.use_deterministic_algorithms(True)
    found = ["cpu"]
    if torch.cuda.is_available():
        found += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    return found


def set_switch(on: bool) -> None:
    """The switch, toggled in this process (``fwd9m probe --cost`` times both sides)."""
    _torch.use_deterministic_algorithms(on)


def wait(value, device: str) -> None:
    """Let a CUDA op finish before its time is read (CPU ops have finished)."""
    if device != "cpu":
        _torch.cuda.synchronize(device)


def namespace(device: str) -> dict:
    torch = _torch

    def grad(fn, wrt):
        y = fn()
        g = torch.Generator(device="cpu").manual_seed(1234)
        gy = torch.randn(y.shape, generator=g, dtype=y.dtype).to(y.device)
        xs = wrt if isinstance(wrt, tuple) else (wrt,)
        got = torch.autograd.grad(y, xs, gy)
        return got if isinstance(wrt, tuple) else got[0]

    return {
        "torch": torch,
        "F": torch.nn.functional,
        "grad": grad,
        "device": device,
        "rebuild": lambda name, metas, args: rebuild(name, metas, args, device),
        "prepared": lambda name, metas, args: prepared(name, metas, args, device),
    }


def _value(text: str):
    import ast

    torch = _torch
    if text.startswith("torch.") and hasattr(torch, text[6:]):
        return getattr(torch, text[6:])  # a dtype, layout or memory format
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text  # a device ("cpu") or another name: as written


def _fresh(meta: str, device: str, g):
    torch = _torch
    dtype, dims = meta.split("[", 1)
    shape = [int(s) for s in dims.rstrip("]").split(",") if s]
    dt = getattr(torch, dtype)
    if dt.is_floating_point:
        return torch.randn(shape, generator=g, dtype=torch.float32).to(dt).to(device)
    return torch.zeros(shape, dtype=dt, device=device)  # valid indices, all into one slot


def rebuild(name: str, metas: list, args: str, device: str):
    """Run aten op ``name`` on fresh tensors of ``metas`` (recorded order) and the
    recorded argument text ``args`` (``name=value`` joined by \\x1f), trying each of the
    op's schemas; ValueError when none fits."""
    return prepared(name, metas, args, device)()


def prepared(name: str, metas: list, args: str, device: str):
    """:func:`rebuild`'s call, its tensors made once: a function running the op alone."""
    torch = _torch
    named = {}
    for item in filter(None, args.split("\x1f")):
        k, _, v = item.partition("=")
        named[k] = _value(v)
    g = torch.Generator().manual_seed(0)
    tensors = [_fresh(m, device, g) for m in metas]
    packet = getattr(torch.ops.aten, name.split("::", 1)[1])
    for overload in packet.overloads():
        func = getattr(packet, overload)
        call = _fit(op_arguments(func), tensors, named)
        if call is not None:
            return functools.partial(func, *call[0], **call[1])
    raise ValueError(f"no schema of {name} fits {len(metas)} tensors and arguments {sorted(named)}")


_ONE_TENSOR = ("Tensor", "Optional[Tensor]")


def _fit(params: list[dict], tensors: list, named: dict):
    """(args, kwargs) for an op's arguments (:func:`fwd9m.torch._replay.op_arguments`)
    from the tensors in order and named values, or None."""
    args: list = []
    kwargs: dict = {}
    i = 0
    for n, a in enumerate(params):
        kind, name = a["type"], a["name"]  # "Tensor", "Optional[Tensor]", "List[Optional[Tensor]]", ...
        if a["out"]:
            return None
        if kind in _ONE_TENSOR and name not in named:
            if i >= len(tensors):
                return None
            value, i = tensors[i], i + 1
        elif kind.startswith("List[") and "Tensor" in kind and name not in named:
            later = sum(1 for b in params[n + 1 :] if b["type"] in _ONE_TENSOR and b["name"] not in named)
            take = len(tensors) - i - later
            if take < 0:
                return None
            value, i = tensors[i : i + take], i + take
        elif name in named:
            value = named[name]
        elif a["has_default"]:
            continue
        else:
            return None
        (kwargs.__setitem__(name, value) if a["kwarg_only"] else args.append(value))
    return (args, kwargs) if i == len(tensors) else None


def convert(arrays: dict, device: str) -> dict:
    return {n: _torch.from_numpy(a.copy()).to(device) for n, a in arrays.items()}


def placement(device: str):
    return contextlib.nullcontext()


def to_numpy(value) -> list:
    import numpy as np

    torch = _torch
    if isinstance(value, (torch.Tensor, int, float, bool)):
        value = (value,)
    out = []
    for v in value:
        if isinstance(v, (tuple, list)):
            out.extend(to_numpy(v))
            continue
        if not isinstance(v, torch.Tensor):
            out.append(np.asarray(v))
            continue
        v = v.detach()
        if v.is_sparse:
            v = v.to_dense()
        if v.device.type != "cpu":
            torch.cuda.synchronize(v.device)
        out.append(v.cpu().contiguous().numpy())
    return out


def is_switch_error(exc: BaseException) -> bool:
    """The switch's refusal: "... does not have a deterministic implementation"."""
    return isinstance(exc, RuntimeError) and "deterministic" in str(exc)
