"""``fwd9m probe --trace``: probe the op kinds one kept debug trace ran, at their
recorded shapes, dtypes and non-tensor arguments, on fresh inputs (floats standard
normal, integer and bool tensors zero: valid indices, all into one slot, which is the
most contention an accumulating kernel can get). PyTorch traces: each op kind is
rebuilt from its aten name, the recorded tensor metas and argument text against the
op's schemas (:func:`fwd9m.probe._torch.rebuild`); a kind that does not fit any
schema is listed as not probed, with the reason."""

from __future__ import annotations

from .._files import shown
from ..errors import ConfigurationError, FileFormatError

__all__ = ["probe_trace", "trace_items"]

#: op kinds probed at most (the most frequent first)
MAX_KINDS = 300
#: not worth probing: uninitialised memory, RNG draws, views and copies
_SKIP = (
    "aten::empty",
    "aten::empty_like",
    "aten::empty_strided",
    "aten::new_empty",
    "aten::resize_",
    "aten::set_",
    "aten::detach",
    "aten::view",
    "aten::_unsafe_view",
    "aten::t",
    "aten::alias",
    "aten::lift_fresh",
    "aten::normal_",
    "aten::uniform_",
    "aten::bernoulli_",
    "aten::randperm",
    "aten::randint",
    "aten::randn",
    "aten::rand",
    "aten::random_",
)


def trace_items(path: str) -> tuple[str, list[dict], dict[str, str]]:
    """(framework, probe items, skipped kind -> why) of a trace."""
    from .._recording._store import ARGS_DTYPE, NOT_RECORDED, TraceReader, read_header

    header = read_header(path)
    fws = header.get("frameworks") or []
    if fws != ["torch"]:
        raise ConfigurationError(
            f"fwd9m probe --trace rebuilds PyTorch ops; {path} records "
            f"{', '.join(fws) or 'no framework'} (TensorFlow and JAX traces: not yet; "
            f"probe the catalog with fwd9m probe -f {fws[0] if fws else 'torch'})"
        )
    counts: dict[tuple, int] = {}
    skipped: dict[str, str] = {}
    reader = TraceReader(path)
    for op in reader:
        if (
            op.node.startswith(NOT_RECORDED)
            or op.node == "random"
            or op.name in _SKIP
            or not op.name.startswith("aten::")
        ):
            continue
        metas = tuple(t.meta for t in op.inputs if t.dtype != ARGS_DTYPE)
        args = next(((t.sample or b"").decode("utf-8", "replace") for t in op.inputs if t.dtype == ARGS_DTYPE), "")
        if args and len(args.encode()) >= 255:
            skipped[f"{op.name} {' '.join(metas)}"] = "its arguments' text was cut in the trace (255 bytes)"
            continue
        key = (op.name, metas, args)
        counts[key] = counts.get(key, 0) + 1
    if reader.truncated:  # the ops after the cut are not probed: say so, and refuse a trace with none before it
        if not counts:
            raise FileFormatError(f"{shown(path)} has no op to probe before it is {reader.truncated}; record it again")
        skipped["the rest of the trace"] = f"not read: {reader.truncated}"
    kinds = sorted(counts, key=lambda k: -counts[k])
    for k in kinds[MAX_KINDS:]:
        skipped[f"{k[0]} {' '.join(k[1])}"] = f"past the first {MAX_KINDS} op kinds"
    items = []
    for name, metas, args in kinds[:MAX_KINDS]:
        label = f"{name}({', '.join(metas)})"
        code = f"rebuild({name!r}, {list(metas)!r}, {args!r})"
        items.append({"key": label, "inputs": {}, "run": code, "op": name, "count": counts[(name, metas, args)]})
    return "torch", items, skipped


def probe_trace(path: str, device="cpu", switch: str = "both", threads=None, repeat: int = 5, progress=None):
    from . import probe_items

    fw, items, skipped = trace_items(path)
    report = probe_items([(fw, items)], device=device, switch=switch, threads=threads, repeat=repeat, progress=progress)
    report.skipped = skipped
    report.settings["trace"] = path
    return report
