"""Name and digest the values of one step: nested dicts, lists, tuples and pytrees of
arrays (NumPy, torch, TensorFlow, Keras, JAX) and Python numbers.

Digests are those of :mod:`fwd9m.fingerprint` (exact, order-sensitive). A step's CPU
torch tensors (parameters, gradients, optimizer moments: many, mostly small) are
digested together, in place by one call of the compiled kernel (:mod:`fwd9m._ckernel`)
or else in a few NumPy calls (:func:`_cpu_digests`, the same values as
``fwd9m.torch._digest.digest`` one by one, tested); tensors on an accelerator
are reduced there and their sums come back in one transfer.
"""

from __future__ import annotations

import array
import random
import sys
from collections.abc import Iterator
from typing import Any

from .. import _frameworks, fingerprint

#: CPU torch tensors up to this many bytes are digested together (:func:`_cpu_digests`);
#: a larger one alone (no copy; its rows in parallel, :mod:`fwd9m.fingerprint`)
_BATCHED = 4 << 20
#: words per batch of :func:`_cpu_digests` (bounds its temporary arrays to ~64 MiB)
_BATCH_WORDS = 1 << 22


def flatten(prefix: str, value: Any) -> Iterator[tuple[str, Any]]:
    """``(name, leaf)`` for every leaf under ``value`` (dict keys in their order,
    sequence indices, a torch module's named parameters); None is skipped."""
    if value is None:
        return
    if isinstance(value, dict) or (hasattr(value, "items") and hasattr(value, "keys") and not hasattr(value, "shape")):
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


_META: dict[tuple, str] = {}


def _torch_meta(t) -> str:
    key = (t.dtype, t.shape)
    meta = _META.get(key)
    if meta is None:
        meta = _META[key] = f"{str(t.dtype).removeprefix('torch.')}[{','.join(map(str, t.shape))}]"
    return meta


#: :func:`meta_of` by (type, dtype, shape) for values whose shape is a tuple: reading
#: a NumPy dtype's name runs Python code (~2 us a leaf, a JAX step has many leaves)
_METAS: dict[tuple, str] = {}


def meta_of(value: Any) -> str:
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        return type(value).__name__
    shape = getattr(value, "shape", ())
    if type(shape) is not tuple:
        return _meta(dtype, shape)
    key = (type(value), dtype, shape)
    try:
        meta = _METAS.get(key)
    except TypeError:  # an unhashable dtype
        return _meta(dtype, shape)
    if meta is None:
        if len(_METAS) >= 4096:  # many shapes (a varying batch): bound the cache
            _METAS.clear()
        meta = _METAS[key] = _meta(dtype, shape)
    return meta


def _meta(dtype: Any, shape: Any) -> str:
    name = getattr(dtype, "name", None) or str(dtype).removeprefix("torch.")
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
        return np.asarray(value, np.int64) if -(2**63) <= value < 2**63 else str(value).encode()
    return np.asarray(value, np.float64)


def digest_leaves(group: str, leaves: list[tuple[str, Any]]) -> list[tuple[str, str, str, int]]:
    """``(group, name, meta, digest)`` for each leaf (:func:`digest_groups` of one group)."""
    return digest_groups([(group, leaves)])


def digest_groups(groups: list[tuple[str, list[tuple[str, Any]]]]) -> list[tuple[str, str, str, int]]:
    """``(group, name, meta, digest)`` for each leaf of each group, in order. CPU torch
    tensors of up to :data:`_BATCHED` bytes are digested together, the partial sums of
    tensors on an accelerator come back to the host in one transfer, others one by one.

    Raises:
        TypeError: a leaf is neither an array nor a number (named in the message).
    """
    entries: list[Any] = []
    batched: list[int] = []
    device: list[int] = []
    torch = sys.modules.get("torch")
    tensor = torch.Tensor if torch is not None else ()
    backend = _frameworks.backend("torch")
    others: list[int] = []
    for group, leaves in groups:
        for name, v in leaves:
            if isinstance(v, (int, float, bool)):
                v = _plain(v)
            if isinstance(v, tensor):
                meta = _torch_meta(v)
                if v.is_cpu:
                    if v.nbytes <= _BATCHED and not v.is_complex():
                        batched.append(len(entries))
                        entries.append((group, name, meta, v))
                    else:
                        entries.append((group, name, meta, backend.digest(v)))
                else:
                    device.append(len(entries))
                    entries.append((group, name, meta, backend.digest_partial(v)))
                continue
            others.append(len(entries))
            entries.append((group, name, meta_of(v), v))
    if others:
        for i, d in zip(others, _other_digests([entries[i] for i in others])):
            entries[i] = (*entries[i][:3], d)
    if batched:
        for i, d in zip(batched, _cpu_digests([entries[i][3] for i in batched])):
            entries[i] = (*entries[i][:3], d)
    if device:
        assert torch is not None
        parts = [entries[i][3] for i in device]
        sums = torch.stack([s.to(parts[0][0].device) for s, _ in parts]).tolist()  # one transfer
        for i, (s, (_, nbytes)) in zip(device, zip(sums, parts)):
            entries[i] = (*entries[i][:3], fingerprint.finalize(s, nbytes))
    return entries


def _other_digests(entries: list) -> list[int]:
    """:func:`fwd9m.fingerprint.digests` of the values of ``(group, name, meta, value)``.

    Raises:
        TypeError: a value is neither an array nor a number, named in the message.
    """
    try:
        return fingerprint.digests([e[3] for e in entries])
    except (TypeError, ValueError):
        pass
    out = []
    for group, name, _, v in entries:  # again one by one, to name the value that fails
        try:
            out.append(fingerprint.digest(v))
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"step digest: {group}/{name} is a {type(v).__name__}, not an array or a "
                f"number ({exc}); pass arrays, tensors, numbers, or dicts/lists of them"
            ) from None
    return out


def _cpu_digests(tensors: list) -> list[int]:
    """``fwd9m.torch._digest.digest`` of each CPU torch tensor, computed together: by
    the compiled kernel in one call (:func:`_kernel_digests`) when it is available,
    else with NumPy in batches of about :data:`_BATCH_WORDS` words."""
    from .. import _ckernel

    if _ckernel.kernel() is not None:
        return _kernel_digests(tensors)
    out: list[int] = []
    start, words = 0, 0
    for k, t in enumerate(tensors):
        words += t.numel() * t.element_size() // 4 + fingerprint.ROW_WORDS
        if words >= _BATCH_WORDS:
            out += _cpu_batch(tensors[start : k + 1])
            start, words = k + 1, 0
    return out + _cpu_batch(tensors[start:])


def _kernel_digests(tensors: list) -> list[int]:
    """The digests of CPU torch tensors in one call of the compiled kernel, reading each
    tensor's bytes in place (a non-contiguous, conjugated or negated view is made
    contiguous first, a copy kept alive until the call returns)."""
    from .. import _ckernel

    keep, addresses, nbytes = [], [], []
    for t in tensors:
        if t.is_conj() or t.is_neg() or not t.is_contiguous():
            t = t.detach().resolve_conj().resolve_neg().contiguous()
            keep.append(t)
        addresses.append(t.data_ptr())
        nbytes.append(t.nbytes)
    return _ckernel.digests(addresses, nbytes)


def _cpu_batch(tensors: list) -> list[int]:
    """The digests of CPU torch tensors in a few NumPy calls: each tensor's bytes are
    zero-padded to whole rows of :data:`~fwd9m.fingerprint.ROW_WORDS` words and all are
    joined into one matrix, so one product with ``M`` gives every row sum (step 2 of
    :mod:`fwd9m.fingerprint`); each row sum is multiplied by ``K`` of its row within its
    tensor and summed per tensor (step 3). Zero padding adds nothing and integer sums
    wrap modulo 2**64, exact in any order, so each result is the tensor's partial sum
    ``S``, as one by one (tested)."""
    import numpy as np
    import torch

    if not tensors:
        return []
    row_bytes = fingerprint.ROW_WORDS * 4
    parts, nbytes, rows = [], [], []
    for t in tensors:
        b = t.detach().resolve_conj().resolve_neg().reshape(-1).contiguous().view(torch.uint8)
        n = b.numel()
        r = -(-n // row_bytes)
        nbytes.append(n)
        rows.append(r)
        parts.append(b)
        if r * row_bytes > n:
            parts.append(b.new_zeros(r * row_bytes - n))
    flat = torch.cat(parts) if len(parts) > 1 else parts[0].clone()
    counts = np.array(rows, dtype=np.int64)
    if not counts.sum():
        return [fingerprint.finalize(0, n) for n in nbytes]
    grid = flat.numpy().view(np.int32).reshape(-1, fingerprint.ROW_WORDS)  # flat is new: nothing of the user's
    # int64 products and sums wrap modulo 2**64 (NumPy does not check array overflow)
    row_sums = grid.astype(np.int64) @ fingerprint.word_multipliers()
    starts = np.cumsum(counts) - counts
    within = np.arange(row_sums.size, dtype=np.int64) - np.repeat(starts, counts)
    row_sums *= fingerprint.row_multipliers(int(counts.max()))[within]
    sums = np.zeros(len(tensors), dtype=np.int64)
    nonempty = counts > 0
    sums[nonempty] = np.add.reduceat(row_sums, starts[nonempty])
    return [fingerprint.finalize(int(s), n) for s, n in zip(sums.tolist(), nbytes)]


def global_rng_leaves() -> list[tuple[str, Any]]:
    """The global RNG states of Python, NumPy (when imported) and torch (CPU, and CUDA
    when initialised), as arrays: cheap (no state file is written)."""
    import numpy as np

    state = random.getstate()
    # the same uint64 array as np.asarray(state[1], np.uint64), built faster by array
    leaves: list[tuple[str, Any]] = [("python", np.frombuffer(array.array("Q", state[1]), np.uint64))]
    if "numpy" in sys.modules:
        leaves.append(("numpy", _numpy_key(np)))
    torch = sys.modules.get("torch")
    if torch is not None:
        leaves.append(("torch", torch.random.default_generator.get_state()))
        if torch.cuda.is_initialized():
            leaves += [(f"torch.cuda{i}", s) for i, s in enumerate(torch.cuda.get_rng_state_all())]
    return leaves


#: the global NumPy generator whose key :func:`_numpy_key` reads in place, and that view
_KEY_VIEW: list[Any] = [None, None]


def _numpy_key(np) -> Any:
    """``np.random.get_state()[1]``, the MT19937 key (uint32[624]) of NumPy's legacy
    global generator, to digest at once. ``get_state`` copies it element by element
    (~30 us); this reads the key in place through the generator's public
    ``ctypes.state_address`` instead, once the bytes there were seen to equal
    ``get_state()[1]`` for this generator (the same bytes, so the same digest)."""
    get = getattr(np.random, "get_bit_generator", None)  # NumPy >= 1.25
    try:
        bg = get() if get is not None else None
        if bg is not None and _KEY_VIEW[0] is bg:
            return _KEY_VIEW[1]
        key = np.random.get_state()[1]  # type: ignore[index]  # legacy: a tuple
        if bg is not None and type(bg).__name__ == "MT19937" and key.dtype == np.uint32 and key.size == 624:
            import ctypes

            view = np.ctypeslib.as_array((ctypes.c_uint32 * 624).from_address(bg.ctypes.state_address))
            view.flags.writeable = False
            if np.array_equal(view, key):
                _KEY_VIEW[:] = [bg, view]
        return key
    except Exception:  # noqa: BLE001 - a digest never breaks the user's step
        return np.random.get_state()[1]  # type: ignore[index]
