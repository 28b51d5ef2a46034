"""The digest of :mod:`fwd9m.fingerprint` for torch tensors: CPU tensors through a
zero-copy NumPy view of their bytes, tensors on an accelerator reduced on their device
with torch ops (only the 8-byte partial sum comes back; callers can batch those
transfers with :func:`partial` and :func:`fwd9m.fingerprint.finalize`)."""

from __future__ import annotations

from typing import Any

from ..fingerprint import ROW_WORDS, finalize, numpy_digest, row_multipliers, word_multipliers

_cache: dict[Any, Any] = {}


def _torch_const(name: str, device):
    key = (name, str(device))
    t = _cache.get(key)
    if t is None:
        import torch

        t = torch.from_numpy(word_multipliers().copy()).to(device)
        _cache[key] = t
    return t


def _torch_rows(rows: int, device):
    """``K[:rows]`` as an int64 tensor on ``device``, cached (grown by doubling) so that
    repeated digests do not copy it from the host."""
    key = ("K", str(device))
    k = _cache.get(key)
    if k is None or k.numel() < rows:
        import torch

        n = max(rows, 2 * (k.numel() if k is not None else 2048))
        k = _cache[key] = torch.from_numpy(row_multipliers(n).copy()).to(device)
    return k[:rows]


def partial(tensor):
    """``(S, nbytes)`` for a torch tensor, with ``S`` a 0-d int64 tensor on the tensor's
    device (no host transfer; call ``finalize(int(S), nbytes)`` later, batching the
    transfers). Must run outside any recording dispatch mode (the caller's job)."""
    import torch

    t = tensor.detach()
    if t.is_complex():
        t = torch.view_as_real(t)
    if not t.is_contiguous():
        t = t.contiguous()
    if t.numel() == 0:
        return torch.zeros((), dtype=torch.int64, device=t.device), 0
    flat = t.reshape(-1)
    if flat.dtype == torch.bool:
        flat = flat.view(torch.uint8)
    u8 = flat.view(torch.uint8)
    nbytes = u8.numel()
    if nbytes % 4:
        u8 = torch.cat([u8, u8.new_zeros(4 - nbytes % 4)])
    words = u8.view(torch.int32)
    n = words.numel()
    m = _torch_const("M", words.device)
    rows = n // ROW_WORDS
    total = torch.zeros((), dtype=torch.int64, device=words.device)
    if rows:
        full = words[: rows * ROW_WORDS].view(rows, ROW_WORDS).to(torch.int64)
        row_sums = (full * m).sum(1)
        total = (row_sums * _torch_rows(rows, words.device)).sum()
    tail = n - rows * ROW_WORDS
    if tail:
        ts = (words[rows * ROW_WORDS :].to(torch.int64) * m[:tail]).sum()
        total = total + ts * int(row_multipliers(rows + 1)[rows])
    return total, nbytes


def digest(tensor) -> int:
    """Digest of a torch tensor. CPU tensors are read through a zero-copy NumPy view;
    tensors on other devices are reduced there (:func:`partial`) and only 8
    bytes come back."""
    if tensor.device.type == "cpu":
        return numpy_digest(cpu_bytes(tensor))
    s, nbytes = partial(tensor)
    return finalize(int(s.item()), nbytes)


def dense_permuted(shape, stride) -> bool:
    """True when the strides are a permutation of a contiguous layout (no gaps, no
    overlap, no broadcasting)."""
    expected = 1
    for size, st in sorted((p for p in zip(shape, stride) if p[0] != 1), key=lambda p: p[1]):
        if st != expected:
            return False
        expected *= size
    return True


class _RawBytes:
    """Exposes a contiguous CPU tensor's bytes to NumPy by address; NumPy keeps this
    object, and so the tensor, alive as the array's ``base``."""

    def __init__(self, t) -> None:
        self._tensor = t
        self.__array_interface__ = {
            "shape": (t.numel() * t.element_size(),),
            "typestr": "|u1",
            "data": (t.data_ptr(), True),
            "version": 3,
        }


def cpu_bytes(tensor, memory_order: bool = False):
    """Zero-copy uint8 NumPy view of a CPU tensor's bytes in row-major order (a
    non-contiguous tensor is copied), or, with ``memory_order``, of a dense permuted
    tensor's bytes in memory order (no copy; used by ``fwd9m debug``, where both runs
    have the same layouts).

    The view goes through the data pointer, not ``Tensor.numpy()``: that call marks
    the tensor's storage non-resizable for good (``set_resizable(false)`` in
    https://github.com/pytorch/pytorch/blob/main/torch/csrc/utils/tensor_numpy.cpp),
    so a later ``resize_`` of a digested tensor (``torch.distributed.all_gather_object``
    does one) would fail with "Trying to resize storage that is not resizable"."""
    import numpy as np

    t = tensor.detach()
    if t.is_conj():
        t = t.resolve_conj()
    if t.is_neg():
        t = t.resolve_neg()
    if t.numel() == 0:
        return np.zeros(0, np.uint8)
    if not t.is_contiguous():
        if memory_order and dense_permuted(t.shape, t.stride()):
            # a permuted layout (e.g. channels_last, a transpose): digest the bytes in
            # memory order without a copy; the same layout gives the same digest
            t = t.as_strided((t.numel(),), (1,), t.storage_offset())
        else:
            t = t.contiguous()
    return np.asarray(_RawBytes(t))
