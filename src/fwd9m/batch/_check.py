"""``fwd9m check --vary batch`` on a callable: the same samples at several batch sizes
and places in the batch, each sample's output rows compared bit for bit."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import ConfigurationError
from . import _frame

#: batch sizes tried by default (with the samples' own count, and never above the largest)
DEFAULT_SIZES = (1, 2, 3, 5, 8, 16, 32, 64)
#: samples also run alone (batch of one), besides the first
ALONE = 4


@dataclass(frozen=True)
class Variant:
    """One batch the samples were run in: ``order[p]`` is the sample at position ``p``."""

    label: str
    order: tuple[int, ...]


@dataclass(frozen=True)
class RowDiff:
    """A sample whose output rows in one batch differ from its rows in the reference batch."""

    variant: str
    batch: int  #: the batch size it ran in
    sample: int
    position: int  #: its row in that batch
    output: str  #: the output leaf
    n_diff: int
    size: int
    max_ulp: int | None
    max_abs: float | None

    def line(self) -> str:
        ulp = f"max {self.max_ulp} ULP" if self.max_ulp is not None else "not floats"
        return (
            f"sample {self.sample} at row {self.position} of a batch of {self.batch} ({self.variant}): "
            f"{self.output}: {self.n_diff} of {self.size} elements differ, {ulp}, max abs diff {self.max_abs:.3g}"
        )


@dataclass
class BatchResult:
    """The verdict of :func:`check_invariance`: true when every sample's outputs had the
    same bits in every batch."""

    model: str
    samples: int
    reference: int  #: the reference batch's size
    batch_dim: int
    sizes: list[int]
    variants: list[str]
    outputs: dict[str, int]  #: output leaf -> its batch dimension
    differences: list[RowDiff] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: ``fwd9m debug --vary batch`` records this model's ops (PyTorch)
    debuggable: bool = False
    #: the reference batch run twice gave other bits: the model is not deterministic from
    #: run to run (dropout in training mode, an unseeded random op...), so a difference
    #: between batches says nothing of the batch; ``differences`` are the repeat's
    nondeterministic: bool = False

    def __bool__(self) -> bool:
        return not self.differences and not self.nondeterministic

    @property
    def invariant(self) -> bool:
        """True when invariant; False when it varies, or is undecided (:attr:`nondeterministic`)."""
        return bool(self)

    def varying_sizes(self) -> list[int]:
        return sorted({d.batch for d in self.differences})

    def report(self, max_lines: int | None = 8) -> str:
        from ..compare import escape_control

        lines = [self._headline()]
        shown = self.differences if max_lines is None else self.differences[:max_lines]
        if shown:
            against = (
                "the first run of the same batch" if self.nondeterministic else "the same sample in the reference batch"
            )
            lines.append(f"What differs (each against {against}):")
            lines += [f"  {d.line()}" for d in shown]
            if len(shown) < len(self.differences):
                lines.append(f"  ... and {len(self.differences) - len(shown)} more (--format json lists them all)")
        lines.append("Compared:")
        lines.append(f"  model: {self.model}, inputs split along dimension {self.batch_dim}")
        lines.append(f"  batches: {'; '.join(self.variants)}")
        outs = ", ".join(f"{k} (batch dim {v})" for k, v in self.outputs.items())
        lines.append(f"  outputs, row by row: {outs}")
        lines += [f"Note: {n}" for n in self.notes]
        if self.differences and self.debuggable and not self.nondeterministic:
            lines.append("Next steps:")
            lines.append("  - find the op that depends on the batch: fwd9m debug --vary batch SCRIPT")
        return escape_control("\n".join(lines), keep="\n")

    def _headline(self) -> str:
        n = len({(d.sample, d.variant) for d in self.differences})
        if self.nondeterministic:
            return (
                f"NONDETERMINISTIC FROM RUN TO RUN: the same batch of {self.reference} gave different bits "
                f"twice ({n} sample(s) differ); batch invariance undecided"
            )
        if not self.differences:
            return (
                f"BATCH INVARIANT: {self.samples} sample(s) gave the same bits in {len(self.variants)} "
                f"batch(es) of sizes {', '.join(map(str, self.sizes))}"
            )
        sizes = ", ".join(map(str, self.varying_sizes()))
        ulp = max((d.max_ulp or 0) for d in self.differences)
        return (
            f"VARIES WITH THE BATCH: {n} sample/batch pair(s) differ from the reference batch of "
            f"{self.reference} (in batches of {sizes}; up to {ulp} ULP)"
        )

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["invariant"] = None if self.nondeterministic else self.invariant  # None: undecided
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BatchResult:
        keys = {f for f in cls.__dataclass_fields__ if f != "differences"}
        res = cls(**{k: d[k] for k in keys})
        res.differences = [RowDiff(**x) for x in d["differences"]]
        return res


def variants(n: int, sizes: Sequence[int], reference: int) -> list[Variant]:
    """The batches: the reference (samples in order, repeated up to ``reference`` rows),
    the reference again, each size's first rows, samples alone, the reference rotated by
    one row and the samples in reverse order."""
    base = tuple(i % n for i in range(reference))
    out = [Variant(f"reference, {reference} rows", base), Variant("the reference again", base)]
    out += [Variant(f"first {b} rows", base[:b]) for b in sizes if b < reference]
    out += [Variant(f"sample {s} alone", (s,)) for s in range(1 if 1 in sizes else 0, min(n, ALONE))]
    if reference > 1:
        out.append(Variant("every sample one row later", tuple((i - 1) % n for i in range(reference))))
    if n > 2:
        out.append(Variant("samples in reverse order", tuple(reversed(range(n)))))
    return out


def _sizes(n: int, sizes: Sequence[int] | None) -> list[int]:
    if sizes is None:
        sizes = [b for b in DEFAULT_SIZES if b <= max(n, 8)]
    sizes = sorted({int(b) for b in sizes} | {n})
    if sizes[0] < 1:
        raise ConfigurationError(f"batch sizes must be positive, got {sizes[0]}")
    return sizes


def _batched(samples: Any, batch_dim: int) -> tuple[list[Any], int]:
    """The inputs as a list and their number of samples (all must agree)."""
    items = list(samples) if isinstance(samples, (tuple, list)) else [samples]
    if not items:
        raise ConfigurationError("no inputs: pass an array of samples (or a tuple of them)")
    counts = {_frame.batch_size(x, batch_dim) for x in items}
    if None in counts or len(counts) != 1:
        shapes = ", ".join(str(tuple(getattr(x, "shape", ()))) for x in items)
        raise ConfigurationError(
            f"the inputs must be arrays with one size along dimension {batch_dim} (the batch); "
            f"got shapes {shapes}; name the batch dimension with batch_dim= (--batch-dim)"
        )
    return items, counts.pop()


def run_batch(fn: Callable, items: list[Any], order: Sequence[int], batch_dim: int, model: Any = None) -> dict:
    """``fn`` on the rows ``order`` of every input, in inference mode; its outputs
    flattened (``output``, or ``output.logits``...)."""
    from ..compare import flatten

    args = [_frame.take(x, list(order), batch_dim) for x in items]
    with _frame.inference(model if model is not None else fn, items):
        out = fn(*args)
    return {("output" if k == "<value>" else f"output.{k}"): v for k, v in flatten(out).items()}


def output_dims(flat: dict, rows: int, batch_dim: int) -> dict[str, int]:
    """Each array output's batch dimension: ``batch_dim`` when it has ``rows`` there,
    else the first dimension that does; outputs with none are left out."""
    from ..compare import Tensor

    dims = {}
    for path, leaf in flat.items():
        if not isinstance(leaf, Tensor):
            continue
        shape = leaf.array.shape
        cands = [d for d, s in enumerate(shape) if s == rows]
        if cands:
            dims[path] = batch_dim if batch_dim in cands else cands[0]
    return dims


def check_invariance(
    fn: Callable,
    samples: Any,
    sizes: Sequence[int] | None = None,
    batch_dim: int = 0,
    model: Any = None,
) -> BatchResult:
    """Run ``fn(*batch)`` on the samples of ``samples`` (one array, or a tuple of arrays
    split along ``batch_dim`` alike) in batches of several sizes and compositions, and
    compare each sample's output rows with its rows in the reference batch, bit for bit.

    The reference holds the samples in order, repeated up to the largest size. The
    model runs in inference mode (``model``, default ``fn``: a PyTorch module in eval
    mode, no gradients).

    Raises:
        ConfigurationError: the inputs have no common batch dimension, or a size is not positive.
    """
    items, n = _batched(samples, batch_dim)
    sizes = _sizes(n, sizes)
    reference = max(sizes)
    plan = variants(n, sizes, reference)
    ref = run_batch(fn, items, plan[0].order, batch_dim, model)
    dims = output_dims(ref, reference, batch_dim)
    result = BatchResult(
        _name(model if model is not None else fn), n, reference, batch_dim, sizes, [v.label for v in plan], dims
    )
    if not dims:
        raise ConfigurationError(
            f"no output of {result.model} has a dimension of {reference} rows (the batch): "
            f"nothing to compare row by row; return the per-sample outputs"
        )
    fw = _frame.framework_of(model if model is not None else fn) or _frame.framework_of(items[0])
    result.debuggable = fw is not None and hasattr(fw, "OpRecorder")
    if reference > n:
        result.notes.append(f"the reference batch repeats the {n} samples to fill {reference} rows")
    again = _compare(plan[1], run_batch(fn, items, plan[1].order, batch_dim, model), ref, dims)
    if again:
        _undecided(result, again)
        return result
    for variant in plan[2:]:
        flat = run_batch(fn, items, variant.order, batch_dim, model)
        result.differences += _compare(variant, flat, ref, dims)
    return result


def _undecided(result: BatchResult, again: list[RowDiff]) -> None:
    """The reference batch gave other bits the second time: no batch was compared."""
    result.nondeterministic, result.differences = True, again
    result.notes.append(
        "the reference batch, run twice, gave different bits: the outputs change from run to run "
        "(dropout or another random op in training mode, an unseeded generator, a "
        "nondeterministic kernel), so no other batch was compared; make the call deterministic "
        "(fwd9m.enable_determinism, a seeded generator, dropout off) and check again"
    )


def _compare(variant: Variant, flat: dict, ref: dict, dims: dict[str, int]) -> list[RowDiff]:
    """Each position of ``variant`` against the first row of its sample in the reference."""
    from ..compare import Tensor, compare_arrays

    out = []
    for path, dim in dims.items():
        leaf = flat.get(path)
        if not isinstance(leaf, Tensor) or len(leaf.array.shape) <= dim:
            continue
        for pos, sample in enumerate(variant.order):
            a = Tensor(leaf.array.take(pos, axis=dim), leaf.dtype)
            b = Tensor(ref[path].array.take(sample, axis=dim), leaf.dtype)
            d = compare_arrays(path, b, a)
            if d is not None:
                out.append(
                    RowDiff(
                        variant.label,
                        len(variant.order),
                        sample,
                        pos,
                        str(path),
                        d.n_diff or 0,
                        d.size or 0,
                        d.max_ulp,
                        d.max_abs,
                    )  # fmt: skip
                )
    return out


def _name(obj: Any) -> str:
    fw = _frame.framework_of(obj)
    if fw is not None and hasattr(fw, "model_name"):
        return fw.model_name(obj)
    return getattr(obj, "__qualname__", None) or type(obj).__qualname__
