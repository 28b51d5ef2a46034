"""fwd9m's own RNG state inside a checkpoint, compared generator by generator.

``fwd9m.rng.state_dict()`` puts ``{"format": "fwd9m.rng-state", "version": 1, "data":
uint8 tensor}`` into a checkpoint; its ``data`` is an npz archive (no pickle) of every
generator's state. Compared as one tensor, a difference says only that some generator
differs; expanded here into one leaf per generator's state (``ckpt.pt:rng.data.numpy...``),
it says which, and a check that knows a generator differs between runs for a reason of its
own (``fwd9m check --resume``: an unseeded one, differing between runs A and B before the
interruption) can leave that generator's leaves out, saying so."""

from __future__ import annotations

from ..compare import Flat, Tensor, flatten
from ..errors import FileFormatError
from ..rng._format import FORMAT, MAX_RNG_STATE_BYTES, from_bytes


def _blob_prefixes(flat: Flat) -> list[str]:
    """The prefixes (``"rng."``, ``""``) of the fwd9m RNG state dicts in ``flat``."""
    out = []
    for key, leaf in flat.items():
        if not (key == "format" or str(key).endswith(".format")) or leaf != FORMAT:
            continue
        prefix = str(key)[: -len("format")]
        data = flat.get(prefix + "data")
        if isinstance(data, Tensor) and str(data.dtype).endswith("uint8") and data.array.nbytes <= MAX_RNG_STATE_BYTES:
            out.append(prefix)
    return out


def expand(flat: Flat, unseeded: frozenset[str] = frozenset(), why: str = "") -> Flat:
    """``flat`` with each fwd9m RNG state blob replaced by its generators' leaves; the
    leaves of the generators named in ``unseeded`` (``"numpy"``, ``"python"``) are marked
    not compared, with ``why``. A blob that does not parse is left as it is."""
    prefixes = _blob_prefixes(flat)
    if not prefixes:
        return flat
    out = Flat(containers=flat.containers, ignored=flat.ignored)
    for key, leaf in flat.items():
        prefix = next((p for p in prefixes if key == p + "data"), None)
        if prefix is None:
            out[key] = leaf
            continue
        try:
            state = from_bytes(leaf.array.tobytes(), origin=str(key))
        except (FileFormatError, TypeError, ValueError):
            out[key] = leaf
            continue
        for source in sorted(state):
            sub = flatten(state[source], f"{key}.{source}")
            out.containers.update(sub.containers)
            for path, value in sub.items():
                out[path] = value
                if source in unseeded:
                    out.ignored[path] = why
    return out
