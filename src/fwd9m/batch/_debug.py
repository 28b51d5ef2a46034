"""``fwd9m debug --vary batch``: record the model's ops at two batch sizes holding the
same first samples, align them by op and occurrence, compare each op's rows of the
shared samples, and name the first op whose shared input rows agree and output rows
differ; that op is then replayed alone at the two shapes to prove it."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import ConfigurationError
from . import _frame

#: times the culprit op is replayed alone at each shape
REPLAYS = 5


@dataclass
class BatchDebugResult:
    """The first op whose output rows for the same samples depend on the batch size, or
    none (``culprit`` None: every op agreed on the shared rows)."""

    model: str
    sizes: tuple[int, int]  #: (the smaller batch, the larger one); the smaller's samples are in both
    batch_dim: int
    ops: tuple[int, int]  #: ops recorded at each size
    compared: int  #: ops aligned and compared on the shared rows
    culprit: dict | None = None
    replay: dict | None = None
    fixes: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return self.culprit is None

    def report(self) -> str:
        from ..compare import escape_control

        small, large = self.sizes
        if self.culprit is None:
            lines = [f"BATCH INVARIANT: every op gave the same bits for the {small} shared sample(s)"]
        else:
            lines = self._culprit_lines()
        lines.append(
            f"Compared: {self.compared} ops of {self.model}"
            + (" (up to the first that differs)" if self.culprit else "")
            + " aligned by op and occurrence "
            f"({self.ops[0]} at batch {small}, {self.ops[1]} at batch {large}), on the rows of the "
            f"{small} sample(s) both batches hold (batch dimension {self.batch_dim} of the inputs)"
        )
        lines += [f"Note: {n}" for n in self.notes]
        return escape_control("\n".join(lines), keep="\n")

    def _culprit_lines(self) -> list[str]:
        c, small, large = self.culprit or {}, *self.sizes
        lines = [
            f"VARIES WITH THE BATCH: first at op #{c['index']} {c['op']}: its input rows agree and its output "
            f"rows differ between batches of {small} and {large}",
            f"  module:   {c['module'] or '(top level)'}",
            f"  location: {c['location'] or '(not in your code)'}",
            f"  shapes:   {c['shapes_small']} at batch {small}, {c['shapes_large']} at batch {large}",
            f"  differs:  {c['n_diff']} of {c['size']} elements of the shared rows, max {c['max_ulp']} ULP",
        ]
        if self.replay:
            lines.append(f"  replay:   {_replay_text(self.replay)}")
        if self.fixes:
            lines.append("What is known to fix it (catalog):")
            for i, f in enumerate(self.fixes):
                if i == 0 or f["id"] != self.fixes[i - 1]["id"]:
                    lines.append(f"  {f['id']} (fwd9m probe --batch-invariance measures it here):")
                lines.append(f"  - {f['text']}")
                lines += [f"      {code}" for code in f.get("code", "").splitlines()]
        return lines

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["invariant"] = self.culprit is None
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BatchDebugResult:
        keys = set(cls.__dataclass_fields__)
        d = {k: d[k] for k in keys}
        d["sizes"], d["ops"] = tuple(d["sizes"]), tuple(d["ops"])
        return cls(**d)


def _replay_text(r: dict) -> str:
    stable = "the same bits every time at each shape" if r["stable"] else "NOT the same bits at one shape"
    if not r["differ"]:
        return f"the op alone, {r['times']} times at each shape: {stable}; the shared rows agree alone (not proven)"
    return (
        f"the op alone, {r['times']} times at each shape: {stable}; the shared rows differ between "
        f"the shapes ({r['n_diff']} elements, max {r['max_ulp']} ULP): proven"
    )


def shared(a: Any, b: Any, small: int, large: int) -> tuple[Any, Any] | None:
    """The rows of the shared samples in ``a`` (recorded at batch ``small``) and ``b``
    (at ``large``): the whole of ``a`` and the first rows of ``b`` along the one
    dimension whose sizes are ``small * m`` and ``large * m`` (a batch dimension, or
    batch and sequence flattened into one); both whole when the shapes are equal (a
    weight); None when the shapes match neither way."""
    if a is None or b is None:
        return None
    if a.shape == b.shape:
        return a, b
    if len(a.shape) != len(b.shape):
        return None
    dims = [d for d, (x, y) in enumerate(zip(a.shape, b.shape)) if x != y]
    if len(dims) != 1:
        return None
    d = dims[0]
    x, y = a.shape[d], b.shape[d]
    if x % small or y % large or x // small != y // large:
        return None
    return a, b.take(range(x), axis=d)


def _agree(pairs: list) -> bool:
    from ._rows import equal_bits

    return all(p is not None and equal_bits(*p) for p in pairs)


def find_culprit(ops_s: list[dict], ops_l: list[dict], small: int, large: int) -> tuple[int, int, dict | None]:
    """(ops compared, index in ``ops_s``, the culprit's description) of the first op of
    the small run whose inputs' shared rows agree with its twin's and whose outputs'
    rows do not; the twin is the op of the same name and occurrence in the large run."""
    from ._rows import diff

    twins: dict[tuple[str, int], dict] = {}
    seen: dict[str, int] = {}
    for op in ops_l:
        k = seen[op["op"]] = seen.get(op["op"], -1) + 1
        twins[(op["op"], k)] = op
    seen.clear()
    compared = 0
    for i, op in enumerate(ops_s):
        k = seen[op["op"]] = seen.get(op["op"], -1) + 1
        twin = twins.get((op["op"], k))
        if twin is None:
            continue
        compared += 1
        ins = [shared(a, b, small, large) for a, b in zip(op["inputs"], twin["inputs"])]
        outs = [shared(a, b, small, large) for a, b in zip(op["outputs"], twin["outputs"])]
        if not _agree(ins) or all(p is None for p in outs) or _agree([p for p in outs if p is not None]):
            continue
        d = next(diff(*p) for p in outs if p is not None and diff(*p) is not None)
        culprit = {
            "index": i,
            "op": op["op"],
            "module": op["module"],
            "location": op["location"],
            "shapes_small": _shapes(op),
            "shapes_large": _shapes(twin),
            **d,
        }
        return compared, i, culprit
    return compared, -1, None


def _shapes(op: dict) -> str:
    ins = ", ".join("x".join(map(str, a.shape)) for a in op["inputs"] if a is not None)
    outs = ", ".join("x".join(map(str, a.shape)) for a in op["outputs"] if a is not None)
    return f"({ins}) -> ({outs})"


def _record(fw: Any, fn: Callable, model: Any, items: list, order: list[int], dim: int, keep: int | None = None):
    args = [_frame.take(x, order, dim) for x in items]
    with _frame.inference(model, items), fw.OpRecorder(model, keep=keep) as rec:
        fn(*args)
    return rec


def _pick_sizes(fn: Callable, items: list, dim: int, model: Any, sizes: Sequence[int] | None) -> tuple[int, int]:
    """The two batch sizes: the smallest and largest of ``sizes``, else the reference of
    :func:`check_invariance` and the smallest size it found to differ (or 1)."""
    if sizes:
        return min(sizes), max(sizes)
    from ._check import check_invariance

    res = check_invariance(fn, items, batch_dim=dim, model=model)
    if res.nondeterministic:
        raise ConfigurationError(
            "the model is nondeterministic from run to run (the same batch gave different bits twice): "
            "batch invariance undecided, no op to name; fwd9m check --vary batch shows the rows"
        )
    prefix = [d.batch for d in res.differences if d.variant.startswith("first ")]
    return (min(prefix) if prefix else 1), res.reference


def debug_invariance(
    fn: Callable,
    samples: Any,
    sizes: Sequence[int] | None = None,
    batch_dim: int = 0,
    model: Any = None,
) -> BatchDebugResult:
    """Name the first op of ``fn(*batch)`` whose output rows for the same samples differ
    between a batch of ``small`` and one of ``large`` rows (``sizes``; by default found
    by :func:`fwd9m.batch.check_invariance`), and replay it alone at both shapes.

    Raises:
        ConfigurationError: the inputs have no batch dimension, or fwd9m records no ops
            of their framework.
    """
    from ._check import _batched, _name

    items, n = _batched(samples, batch_dim)
    model = fn if model is None else model
    fw = _frame.framework_of(model) or _frame.framework_of(items[0])
    if fw is None or not hasattr(fw, "OpRecorder"):
        raise ConfigurationError(
            "fwd9m debug --vary batch records PyTorch models op by op; for this model use "
            "fwd9m check --vary batch (which samples and sizes differ)"
        )
    small, large = _pick_sizes(fn, items, batch_dim, model, sizes)
    base = [i % n for i in range(large)]
    rec_s = _record(fw, fn, model, items, base[:small], batch_dim)
    rec_l = _record(fw, fn, model, items, base, batch_dim)
    compared, index, culprit = find_culprit(rec_s.ops, rec_l.ops, small, large)
    result = BatchDebugResult(_name(model), (small, large), batch_dim, (len(rec_s.ops), len(rec_l.ops)), compared)
    if culprit is None:
        return result
    result.culprit = culprit
    twin = _twin_index(rec_s.ops, rec_l.ops, index)
    kept_s = _record(fw, fn, model, items, base[:small], batch_dim, keep=index).kept
    kept_l = _record(fw, fn, model, items, base, batch_dim, keep=twin).kept
    result.replay = replay_proof(fw, kept_s, kept_l, small, large)
    from ._catalog import fixes_for

    result.fixes = fixes_for(fw.FRAMEWORK, culprit["op"])
    return result


def _twin_index(ops_s: list[dict], ops_l: list[dict], index: int) -> int:
    name = ops_s[index]["op"]
    k = sum(1 for op in ops_s[:index] if op["op"] == name)
    found = [j for j, op in enumerate(ops_l) if op["op"] == name]
    return found[k]


def replay_proof(fw: Any, kept_s: tuple, kept_l: tuple, small: int, large: int, times: int = REPLAYS) -> dict:
    """The op alone ``times`` times at each shape: whether each shape gives the same bits
    every time (``stable``) and whether the shared rows differ between the shapes."""
    from ._rows import diff, equal_bits

    outs_s, outs_l = fw.replay(kept_s, times), fw.replay(kept_l, times)
    stable = all(all(equal_bits(a, b) for a, b in zip(run, runs[0])) for runs in (outs_s, outs_l) for run in runs[1:])
    pairs = [shared(a, b, small, large) for a, b in zip(outs_s[0], outs_l[0])]
    d = next((diff(*p) for p in pairs if p is not None and diff(*p) is not None), None)
    return {
        "times": times,
        "stable": stable,
        "differ": d is not None,
        "n_diff": d["n_diff"] if d else 0,
        "max_ulp": d["max_ulp"] if d else 0,
    }
