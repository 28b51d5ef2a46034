"""PyTorch side of the probe child (:mod:`fwd9m.probe._child`).

The switch is ``torch.use_deterministic_algorithms(True)``
(https://docs.pytorch.org/docs/stable/generated/torch.use_deterministic_algorithms.html);
on CUDA it needs ``CUBLAS_WORKSPACE_CONFIG`` set before cuBLAS starts, so the child
gets it in its environment. Threads: ``torch.set_num_threads``.
"""

from __future__ import annotations

import contextlib

_torch = None


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


def namespace(device: str) -> dict:
    torch = _torch

    def grad(fn, wrt):
        y = fn()
        g = torch.Generator(device="cpu").manual_seed(1234)
        gy = torch.randn(y.shape, generator=g, dtype=y.dtype).to(y.device)
        xs = wrt if isinstance(wrt, tuple) else (wrt,)
        got = torch.autograd.grad(y, xs, gy)
        return got if isinstance(wrt, tuple) else got[0]

    return {"torch": torch, "F": torch.nn.functional, "grad": grad, "device": device}


def convert(arrays: dict, device: str) -> dict:
    return {n: _torch.from_numpy(a.copy()).to(device) for n, a in arrays.items()}


def placement(device: str):
    return contextlib.nullcontext()


def to_numpy(value) -> list:
    torch = _torch
    if isinstance(value, torch.Tensor):
        value = (value,)
    out = []
    for v in value:
        if isinstance(v, (tuple, list)):
            out.extend(to_numpy(v))
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
