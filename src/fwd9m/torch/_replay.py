"""PyTorch side of replay (:mod:`fwd9m.debug._replay`): write one aten call (its
overload, every argument, the full input tensors with dtype, shape, stride and device)
to a capture file, and rebuild and run it alone.

The capture is an ``.npz`` of raw bytes (``uint8`` arrays, one per tensor) and one
``call`` array holding the call's JSON; it is read with ``allow_pickle=False``. A float
argument is stored as ``float.hex()`` (exact); a value of another type stops the
capture with its type named ("cannot be rebuilt").
"""

from __future__ import annotations

import json

from ._private import op_arguments, op_name

__all__ = ["FRAMEWORK", "Unrebuildable", "capture", "op_arguments"]

FRAMEWORK = "torch"


class Unrebuildable(TypeError):
    """An argument replay cannot write down exactly."""


def _encode(x, tensors: list, torch):
    if isinstance(x, torch.Tensor):
        if x.is_sparse or x.layout != torch.strided or x.is_quantized:
            raise Unrebuildable(f"a {x.layout} tensor")
        tensors.append(x)
        return {"tensor": len(tensors) - 1}
    if x is None or isinstance(x, (bool, int, str)):
        return x
    if isinstance(x, float):
        return {"float": x.hex()}
    if isinstance(x, (list, tuple)):
        return {"list" if isinstance(x, list) else "tuple": [_encode(v, tensors, torch) for v in x]}
    if isinstance(x, torch.dtype):
        return {"dtype": str(x).replace("torch.", "")}
    if isinstance(x, torch.device):
        return {"device": str(x)}
    if isinstance(x, torch.layout):
        return {"layout": str(x).replace("torch.", "")}
    if isinstance(x, torch.memory_format):
        return {"memory_format": str(x).replace("torch.", "")}
    raise Unrebuildable(f"an argument of type {type(x).__qualname__}")


def capture(func, args, kwargs) -> tuple[dict, dict]:
    """(call JSON, arrays) of one dispatched aten call, before it runs. Raises
    Unrebuildable for an argument it cannot write exactly."""
    import numpy as np
    import torch

    from ._compiled import NAME_PREFIX, narrow

    if isinstance(getattr(func, "name", None), str) and func.name.startswith(NAME_PREFIX):
        # a compiled graph's call: narrowed here, in the targeted run (fwd9m.torch._compiled)
        return {"framework": FRAMEWORK, "op": func.name, "narrowed": narrow(func, args)}, {}
    tensors: list = []
    call = {
        "framework": FRAMEWORK,
        "op": op_name(func)[0],
        "overload": op_name(func)[1],
        "args": [_encode(a, tensors, torch) for a in args],
        "kwargs": {k: _encode(v, tensors, torch) for k, v in kwargs.items()},
        "threads": torch.get_num_threads(),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "torch": torch.__version__,
        "tensors": [],
    }
    arrays = {}
    for i, t in enumerate(tensors):
        t = t.detach()
        dense = t.cpu().contiguous()
        arrays[f"t{i}"] = np.frombuffer(
            dense.view(torch.uint8).numpy().tobytes() if dense.numel() else b"", dtype=np.uint8
        )
        call["tensors"].append(
            {
                "dtype": str(t.dtype).replace("torch.", ""),
                "shape": list(t.shape),
                "stride": list(t.stride()),
                "device": str(t.device),
                "requires_grad": bool(t.requires_grad),
            }
        )
    return call, arrays


def devices() -> list[str]:
    import torch

    return ["cpu"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())]


def _decode(x, tensors: list, torch):
    if isinstance(x, dict):
        ((kind, v),) = x.items()
        if kind == "tensor":
            return tensors[v]
        if kind == "float":
            return float.fromhex(v)
        if kind in ("list", "tuple"):
            items = [_decode(i, tensors, torch) for i in v]
            return items if kind == "list" else tuple(items)
        if kind == "dtype":
            return getattr(torch, v)
        if kind == "device":
            return torch.device(v)
        if kind in ("layout", "memory_format"):
            return getattr(torch, v)
        raise Unrebuildable(f"unknown argument kind {kind!r}")
    return x


def _tensor(meta: dict, data, torch):
    dtype = getattr(torch, meta["dtype"])
    flat = (
        torch.frombuffer(bytearray(data.tobytes()), dtype=torch.uint8)
        if data.size
        else torch.empty(0, dtype=torch.uint8)
    )
    dense = flat.view(dtype).reshape(meta["shape"]) if data.size else torch.empty(meta["shape"], dtype=dtype)
    out = torch.empty_strided(meta["shape"], meta["stride"], dtype=dtype, device=meta["device"])
    out.copy_(dense)  # the recorded layout (strides), on the recorded device
    return out.requires_grad_(meta["requires_grad"]) if meta["requires_grad"] and dtype.is_floating_point else out


class Replayer:
    """Rebuilds the call once; :meth:`run` executes it on fresh copies of the inputs."""

    def __init__(self, call: dict, arrays: dict, switch: bool):
        import torch

        self.torch = torch
        torch.set_num_threads(int(call.get("threads") or torch.get_num_threads()))
        torch.use_deterministic_algorithms(bool(switch))
        try:
            self.func = getattr(getattr(torch.ops.aten, call["op"].split("::", 1)[-1]), call["overload"] or "default")
        except AttributeError:
            raise Unrebuildable(f"torch {torch.__version__} has no op {call['op']}.{call['overload']}") from None
        self.call = call
        self.inputs = [_tensor(m, arrays[f"t{i}"], torch) for i, m in enumerate(call["tensors"])]

    def run(self) -> list:
        """One replay, from the same generator state each time: a random op (``uniform_``,
        dropout's ``bernoulli_``) draws the same numbers in every replay when its kernel is
        deterministic; the caller's generator state is left as it was."""
        torch = self.torch
        cuda = sorted({t.device.index or 0 for t in self.inputs if t.device.type == "cuda"})
        with torch.random.fork_rng(devices=cuda):
            torch.manual_seed(0)
            return self._run_once()

    def _run_once(self) -> list:
        torch = self.torch
        fresh = [t.detach().clone() for t in self.inputs]  # an in-place op writes its inputs
        args = [_decode(a, fresh, torch) for a in self.call["args"]]
        kwargs = {k: _decode(v, fresh, torch) for k, v in self.call["kwargs"].items()}
        with torch.no_grad():
            result = self.func(*args, **kwargs)
        outs = result if isinstance(result, (list, tuple)) else [result]
        arrays = []
        for t in outs:
            if isinstance(t, torch.Tensor):
                if t.device.type == "cuda":
                    torch.cuda.synchronize(t.device)
                t = t.detach().cpu().contiguous()
                arrays.append((t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy())
        return arrays

    def is_switch_error(self, exc: BaseException) -> bool:
        return isinstance(exc, RuntimeError) and "deterministic" in str(exc)


SWITCH = "torch.use_deterministic_algorithms(True)"


def dumps(call: dict) -> str:
    return json.dumps(call)
