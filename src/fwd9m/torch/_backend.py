"""The PyTorch backend (:class:`fwd9m._backend.Backend`): everything fwd9m's core asks
about torch. torch is imported only inside the methods."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .._backend import Adapter, BackendBase, Source, env_threads

__all__ = ["TorchBackend"]


def _np():
    import numpy

    return numpy


def _cap_cuda():
    import torch

    if not torch.cuda.is_initialized():
        return None
    return {"states": [t.numpy() for t in torch.cuda.get_rng_state_all()]}


def _set_cuda(s):
    import torch

    from ..errors import ConfigurationError

    states = [torch.from_numpy(_np().array(a, dtype=_np().uint8)) for a in s["states"]]
    if torch.cuda.device_count() != len(states):
        raise ConfigurationError(
            f"the state has {len(states)} CUDA generators but this process sees {torch.cuda.device_count()} devices"
        )
    torch.cuda.set_rng_state_all(states)


def _array(t: Any):
    import torch

    from ..compare._values import Tensor

    t = t.detach()
    if t.layout != torch.strided:
        t = t.to_dense()
    if getattr(t, "is_quantized", False):
        t = t.int_repr()
    t = t.cpu().resolve_conj().resolve_neg().contiguous()
    name = str(t.dtype).replace("torch.", "")
    try:
        return Tensor(t.numpy(), name)
    except TypeError:  # dtypes NumPy lacks: bfloat16, float8_*, ...
        pass
    try:
        import ml_dtypes

        mlt = getattr(ml_dtypes, name)
        bits = {1: torch.uint8, 2: torch.int16}[t.element_size()]
        return Tensor(t.view(bits).numpy().view(mlt), name)
    except (ImportError, AttributeError, KeyError, RuntimeError, TypeError):
        # exact for bfloat16/float16/float8 (float32 holds every value)
        return Tensor(t.float().numpy(), name)


def _quantized(t: Any) -> tuple[Mapping[str, Any], bool]:
    """A quantized tensor as what it is made of: its integers and its quantization
    parameters (per tensor, or per channel with the axis), so that a scale that differs
    is a difference."""
    import torch

    parts: dict[str, Any] = {"int_repr": t.int_repr(), "qscheme": str(t.qscheme()).replace("torch.", "")}
    if t.qscheme() in (torch.per_tensor_affine, torch.per_tensor_symmetric):
        parts.update(scale=float(t.q_scale()), zero_point=int(t.q_zero_point()))
    else:
        parts.update(
            scales=t.q_per_channel_scales(), zero_points=t.q_per_channel_zero_points(), axis=t.q_per_channel_axis()
        )
    return parts, False


class TorchBackend(BackendBase):
    type_roots = ("torch",)
    optional_sources = ("torch.cuda",)
    rng_kinds = ("torch.Generator", "torch DataLoader")
    capture_rank = 0
    captures_state = True  # fwd9m.torch._capture
    state_roots = ("torch",)

    def seed(self, seed: int) -> None:
        import torch

        # Seeds the CPU generator and every CUDA/MPS/XPU device ("Sets the seed for
        # generating random numbers on all devices"):
        # https://github.com/pytorch/pytorch/blob/main/torch/random.py
        torch.manual_seed(seed)

    def rng_sources(self) -> dict[str, Source]:
        import torch

        # restore order: CUDA generators before the CPU one
        return {
            "torch.cuda": (_cap_cuda, _set_cuda),
            "torch": (
                lambda: torch.get_rng_state().numpy(),
                lambda s: torch.set_rng_state(torch.from_numpy(_np().array(s, dtype=_np().uint8))),
            ),
        }

    def rng_adapter(self, obj: Any) -> Adapter | None:
        from ._rng import adapter

        return adapter(obj)

    def to_numpy(self, value: Any):
        import torch

        if not isinstance(value, torch.Tensor) or getattr(value, "is_quantized", False):
            return None  # a quantized tensor is its integers and its quantization (expand)
        return _array(value)

    def expand(self, value: Any) -> tuple[Mapping[str, Any], bool] | None:
        import torch

        if isinstance(value, torch.Tensor):
            return _quantized(value) if getattr(value, "is_quantized", False) else None
        if isinstance(value, torch.nn.Module):
            state = dict(value.state_dict())
            for name, buffer in value.named_buffers():  # non-persistent ones (not in the state_dict)
                state.setdefault(name, buffer)
            return state, False
        if isinstance(value, torch.optim.Optimizer) or callable(getattr(value, "state_dict", None)):
            return value.state_dict(), False
        return None

    def digest(self, value: Any) -> int | None:
        if not (type(value).__module__ or "").startswith("torch"):
            return None
        from ._digest import digest as torch_digest

        return torch_digest(value)

    def digest_partial(self, value: Any) -> tuple[Any, int] | None:
        if not (type(value).__module__ or "").startswith("torch"):
            return None
        from ._digest import partial

        return partial(value)

    def runtime_info(self) -> dict[str, Any]:
        import torch

        return {
            "version": torch.__version__,
            "intra_op_threads": torch.get_num_threads(),
            "inter_op_threads": torch.get_num_interop_threads(),
            "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
            "cuda_devices": torch.cuda.device_count() if torch.cuda.is_available() else 0,
            "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
            "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
            "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
            "mkldnn": bool(torch.backends.mkldnn.is_available()),
        }

    def intra_op_threads(self, environ: Mapping[str, str], cores: int) -> int:
        """ATen reads ``OMP_NUM_THREADS``, then ``MKL_NUM_THREADS``, which wins when both
        hold a positive number; else one thread per usable core (``intraop_default_num_threads``
        in aten/src/ATen/ParallelCommon.cpp,
        https://github.com/pytorch/pytorch/blob/main/aten/src/ATen/ParallelCommon.cpp;
        checked with torch 2.13: ``taskset -c 0`` gives 1 thread, ``OMP_NUM_THREADS=3
        MKL_NUM_THREADS=1`` gives 1)."""
        return env_threads(environ, "MKL_NUM_THREADS", "OMP_NUM_THREADS") or cores

    def recorder(self, rec: Any) -> Any:
        from ._recorder import TorchRecorder

        return TorchRecorder(rec)

    def keep_alive(self, keep: Callable[[Any], Any]) -> None:
        from ._capture import keep_alive

        keep_alive(keep)
