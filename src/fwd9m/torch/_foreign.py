"""Memory that code outside torch can write without torch knowing.

The recorder's digest cache (:meth:`fwd9m.torch._recorder.TorchRecorder._tensor`) trusts
a tensor's version counter: every in-place op torch runs bumps it. A write through
NumPy (``t.numpy()[:] = ...``, the array a ``torch.from_numpy`` tensor wraps refilled in
place: an RL replay buffer) or through another library holding the memory (DLPack) does
not, so a cached digest would describe bytes that are gone. The memory spans of such
tensors are remembered here, and the recorder digests a tensor in them again at every
use.

The spans are found where the sharing starts, through public calls only:
``torch.from_numpy``, ``torch.as_tensor`` / ``torch.asarray`` on something that is not a
tensor (an array, a buffer), ``torch.frombuffer``, ``torch.from_dlpack`` (and
``torch.utils.dlpack.from_dlpack``): the tensor made; ``Tensor.numpy()`` (which
``np.asarray(tensor)`` calls, through ``Tensor.__array__``) and ``Tensor.__dlpack__``:
the tensor shared. A span covers the tensor's whole storage
(``Tensor.untyped_storage()``), so views of it are covered too. Spans are kept for the
run (freed memory reused by another tensor is then digested at every use as well: slower,
never wrong), merged, and past :data:`MAX_SPANS` every tensor is digested at every use.
"""

from __future__ import annotations

import bisect
import functools
from typing import Any

__all__ = ["ForeignMemory", "MAX_SPANS"]

#: past this many disjoint spans, the cache is off for every tensor
MAX_SPANS = 100_000

#: (module attribute path, which argument makes the result shared) of the torch functions
#: whose result may share memory with another library: "always" or "not a tensor"
_MAKERS = (
    ("from_numpy", "always"),
    ("frombuffer", "always"),
    ("from_dlpack", "always"),
    ("as_tensor", "foreign"),
    ("asarray", "foreign"),
)
#: Tensor methods that hand the tensor's memory to another library
_SHARERS = ("numpy", "__dlpack__")
_MISSING = object()


class ForeignMemory:
    """Disjoint, sorted memory spans ``[start, end)`` that another library can write."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ends: list[int] = []
        self.everywhere = False  #: too many spans: treat all memory as foreign
        self._patched: list[tuple[Any, str, Any]] = []

    def __bool__(self) -> bool:
        return self.everywhere or bool(self._starts)

    def add(self, start: int, nbytes: int) -> None:
        """Remember ``[start, start + nbytes)``, merged with the spans it touches."""
        if nbytes <= 0 or self.everywhere:
            return
        end = start + nbytes
        lo = bisect.bisect_left(self._ends, start)  # first span ending at or after start
        hi = bisect.bisect_right(self._starts, end)  # spans starting at or before end
        if lo < hi:
            start = min(start, self._starts[lo])
            end = max(end, self._ends[hi - 1])
        self._starts[lo:hi] = [start]
        self._ends[lo:hi] = [end]
        if len(self._starts) > MAX_SPANS:
            self.everywhere = True
            self._starts, self._ends = [], []

    def covers(self, start: int, nbytes: int) -> bool:
        """True when ``[start, start + nbytes)`` overlaps a remembered span."""
        if self.everywhere:
            return True
        i = bisect.bisect_left(self._starts, start + max(nbytes, 1)) - 1
        return i >= 0 and self._ends[i] > start

    def add_tensor(self, t: Any) -> None:
        """Remember a CPU tensor's whole storage (never raises)."""
        try:
            if t.device.type != "cpu":
                return
            storage = t.untyped_storage()
            self.add(storage.data_ptr(), storage.nbytes())
        except Exception:  # noqa: BLE001 - sparse, meta, a subclass: nothing to remember
            pass

    # ------------------------------------------------------------------ patches
    def start(self, torch: Any, compiling: Any) -> None:
        """Wrap the makers and sharers (restored by :meth:`stop`); each wrapper calls the
        original once, unchanged, and remembers the memory after it returned. While
        Dynamo traces, the wrappers only call the original."""
        for name, when in _MAKERS:
            original = getattr(torch, name, None)
            if original is not None:
                self._patch(torch, name, functools.partial(_made, self, original, when, torch, compiling))
        dlpack = getattr(getattr(torch, "utils", None), "dlpack", None)
        original = getattr(dlpack, "from_dlpack", None)
        if original is not None:
            self._patch(dlpack, "from_dlpack", functools.partial(_made, self, original, "always", torch, compiling))
        for name in _SHARERS:
            original = getattr(torch.Tensor, name, None)
            if original is not None:
                self._patch(torch.Tensor, name, _sharer(self, original, compiling))

    def _patch(self, owner: Any, name: str, wrapper: Any) -> None:
        functools.update_wrapper(wrapper, getattr(owner, name), updated=())
        # on a class, only its own attribute is put back (Tensor.numpy is TensorBase's)
        previous = owner.__dict__.get(name, _MISSING) if isinstance(owner, type) else getattr(owner, name)
        setattr(owner, name, wrapper)
        self._patched.append((owner, name, previous))

    def stop(self) -> None:
        for owner, name, previous in reversed(self._patched):
            if previous is _MISSING:
                delattr(owner, name)
            else:
                setattr(owner, name, previous)
        self._patched = []


def _made(memory: ForeignMemory, original: Any, when: str, torch: Any, compiling: Any, *args: Any, **kwargs: Any):
    result = original(*args, **kwargs)
    if compiling():
        return result
    source = args[0] if args else next(iter(kwargs.values()), None)
    if when == "always" or not isinstance(source, (torch.Tensor, list, tuple, int, float, bool, complex)):
        if isinstance(result, torch.Tensor):
            memory.add_tensor(result)
    return result


def _sharer(memory: ForeignMemory, original: Any, compiling: Any):
    def wrapper(self, *args: Any, **kwargs: Any):
        result = original(self, *args, **kwargs)
        if not compiling():
            memory.add_tensor(self)
        return result

    return wrapper
