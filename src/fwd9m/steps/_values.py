"""Name and digest the values of one step: nested dicts, lists, tuples and pytrees of
arrays (NumPy, torch, TensorFlow, Keras, JAX) and Python numbers.

Digests are those of :mod:`fwd9m.fingerprint` (exact, order-sensitive). Small CPU
torch tensors, the bulk of an optimizer's state, are digested together in a few NumPy
calls (:func:`_small_cpu_digests`, the same values as :func:`fwd9m.fingerprint.digest`
one by one, tested); the rest one by one.
"""

from __future__ import annotations

import random
import sys
from typing import Any, Iterator

from .. import fingerprint

#: a tensor of at most this many bytes is digested in the batched path (one row)
_SMALL = fingerprint.ROW_WORDS * 4


def flatten(prefix: str, value: Any) -> Iterator[tuple[str, Any]]:
    """``(name, leaf)`` for every leaf under ``value`` (dict keys in their order,
    sequence indices, a torch module's named parameters); None is skipped."""
    if value is None:
        return
    if isinstance(value, dict) or (hasattr(value, "items") and hasattr(value, "keys")
                                   and not hasattr(value, "shape")):
        for k, v in value.items():
            yield from flatten(f"{prefix}.{k}" if prefix else str(k), v)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from flatten(f"{prefix}.{i}" if prefix else str(i), v)
    elif hasattr(value, "named_parameters") and callable(value.named_parameters):  # torch module
        for k, v in value.named_parameters():
            yield (f"{prefix}.{k}" if prefix else k), v
    else:
        yield prefix, value


def _torch_meta(t) -> str:
    return f"{str(t.dtype).removeprefix('torch.')}[{','.join(map(str, t.shape))}]"


def meta_of(value: Any) -> str:
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        return type(value).__name__
    name = getattr(dtype, "name", None) or str(dtype).removeprefix("torch.")
    shape = getattr(value, "shape", ())
    try:
        dims = ",".join(str(int(d)) if d is not None else "?" for d in tuple(shape))
    except (TypeError, ValueError):
        dims = "?"
    return f"{name}[{dims}]"


def _plain(value: Any):
    """A Python number or bool as a 0-d NumPy array (a float as float64, an int as int64
    when it fits, else its decimal text's bytes)."""
    import numpy as np

    if isinstance(value, bool):
        return np.asarray(value)
    if isinstance(value, int):
        return np.asarray(value, np.int64) if -2**63 <= value < 2**63 else str(value).encode()
    return np.asarray(value, np.float64)


def digest_leaves(group: str, leaves: list[tuple[str, Any]]) -> list[tuple[str, str, str, int]]:
    """``(group, name, meta, digest)`` for each leaf.

    Raises:
        TypeError: a leaf is neither an array nor a number (named in the message).
    """
    entries: list[Any] = [None] * len(leaves)
    small = []
    torch = sys.modules.get("torch")
    for i, (name, v) in enumerate(leaves):
        if isinstance(v, (int, float, bool)):
            v = _plain(v)
        if torch is not None and isinstance(v, torch.Tensor):
            if v.device.type == "cpu" and v.numel() * v.element_size() <= _SMALL and not v.is_complex():
                small.append(i)
                entries[i] = (group, name, _torch_meta(v), v)
                continue
            entries[i] = (group, name, _torch_meta(v), fingerprint.torch_digest(v))
            continue
        try:
            dig = fingerprint.digest(v)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"step digest: {group}/{name} is a {type(v).__name__}, not an array or a "
                            f"number ({exc}); pass arrays, tensors, numbers, or dicts/lists of them") from None
        entries[i] = (group, name, meta_of(v), dig)
    if small:
        digs = _small_cpu_digests([entries[i][3] for i in small])
        for i, d in zip(small, digs):
            g, n, m, _ = entries[i]
            entries[i] = (g, n, m, d)
    return entries


def _small_cpu_digests(tensors: list) -> list[int]:
    """:func:`fwd9m.fingerprint.torch_digest` of each small (one row at most) CPU torch
    tensor, computed together: the bytes are joined (each tensor zero-padded to whole
    words), each word multiplied by its position's multiplier, and summed per tensor
    (integer sums: exact in any order), so the Python cost per tensor is a few views."""
    import numpy as np
    import torch

    parts, nbytes = [], []
    for t in tensors:
        t = t.detach()
        if t.is_conj():
            t = t.resolve_conj()
        if t.is_neg():
            t = t.resolve_neg()
        b = t.reshape(-1).contiguous().view(torch.uint8) if t.numel() else t.new_zeros(0, dtype=torch.uint8)
        n = b.numel()
        nbytes.append(n)
        parts.append(b if n % 4 == 0 else torch.cat([b, b.new_zeros(4 - n % 4)]))
    if not parts:
        return []
    flat = torch.cat(parts) if len(parts) > 1 else parts[0]
    words = flat.numpy().view(np.int32).astype(np.int64)  # a copy: cat made a new tensor
    counts = np.array([p.numel() // 4 for p in parts], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    pos = np.arange(words.size, dtype=np.int64) - np.repeat(starts, counts)
    with np.errstate(over="ignore"):
        prod = words * fingerprint.word_multipliers()[pos]
        nonempty = counts > 0
        sums = np.zeros(len(parts), dtype=np.int64)
        if prod.size:
            sums[nonempty] = np.add.reduceat(prod, starts[nonempty])
    k0 = fingerprint._K0
    mask = (1 << 64) - 1
    return [fingerprint.finalize((int(s) * k0) & mask if c else 0, n)
            for s, c, n in zip(sums.tolist(), counts.tolist(), nbytes)]


def global_rng_leaves() -> list[tuple[str, Any]]:
    """The global RNG states of Python, NumPy (when imported) and torch (CPU, and CUDA
    when initialised), as arrays: cheap (no state file is written)."""
    import numpy as np

    state = random.getstate()
    leaves: list[tuple[str, Any]] = [("python", np.asarray(state[1], dtype=np.uint64))]
    if "numpy" in sys.modules:
        leaves.append(("numpy", np.random.get_state()[1]))
    torch = sys.modules.get("torch")
    if torch is not None:
        leaves.append(("torch", torch.random.default_generator.get_state()))
        if torch.cuda.is_initialized():
            leaves += [(f"torch.cuda{i}", s) for i, s in enumerate(torch.cuda.get_rng_state_all())]
    return leaves
