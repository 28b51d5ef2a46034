"""Align two traces op by op, find the first divergence, classify it, measure the spread.

Both traces are streamed side by side (memory: a few ops of context, a bounded set of
digests for provenance, and a bounded series for the plot), so traces of any length
compare in constant memory.

Classification of the first op whose digests differ:

* **culprit**: every input digest equal, an output differs, and the op does not draw
  from a random generator: the op itself is nondeterministic.
* **external**: an input differs although every earlier op agreed, so the value came
  from outside any recorded op; or a random op's generator state differs. The kind:
  ``rng`` (a framework RNG not seeded the same), ``initializer`` (a parameter differs
  before its first use), ``data`` (the batch fed to the model, or a value made in the
  data phase), ``python`` (a value built from Python/NumPy: their RNGs, set/dict order
  under ``PYTHONHASHSEED``, a file read), ``seed`` (the seed input of a stateless random
  op differs).
* **structural**: the two runs execute different ops (or shapes/dtypes/modules) at
  the same position: both sides are shown.
* **environment**: the traces' environment fingerprints differ (listed first; the
  divergence is still located and classified in ``first``).
"""

from __future__ import annotations

import collections
import itertools
import math
import os
import struct
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from .._recording._store import ARGS_DTYPE, IS_MODEL_INPUT, IS_PARAM, SEP, Op, TraceReader

__all__ = ["DebugReport", "Report", "Divergence", "compare", "sample_difference"]

_MAX_SERIES = 400
_MAX_PROVENANCE = 1 << 20
_FLOAT_FORMATS = {"float32": ("f", "i", 4), "float64": ("d", "q", 8), "float16": ("e", "h", 2)}


@dataclass(frozen=True)
class Divergence:
    """The first op where the two runs differ (built once: :func:`dataclasses.replace`
    makes a changed copy)."""

    kind: str  #: "culprit" | "external" | "structural"
    seq: int
    step: int
    op: str
    module: str
    phase: str
    location: str
    node: str
    device: str
    source: str | None = None  #: external kind: rng / initializer / data / python / seed
    inputs_differ: list[int] = field(default_factory=list)
    outputs_differ: list[int] = field(default_factory=list)
    detail: str = ""
    a_context: list[str] = field(default_factory=list)  #: structural: ops around it, run A
    b_context: list[str] = field(default_factory=list)
    explanation: dict[str, Any] = field(default_factory=dict)  #: from _explain
    magnitude: dict[str, Any] = field(default_factory=dict)
    values: list[dict[str, Any]] = field(default_factory=list)  #: from _values.side_by_side


@dataclass(frozen=True)
class DebugReport:
    """The result of comparing two traces. ``reproducible`` is True when every aligned
    op agrees and both traces have the same length. Built once (:func:`compare`);
    :func:`dataclasses.replace` makes a changed copy."""

    a: str
    b: str
    framework: str
    reproducible: bool
    kind: str  #: "reproducible" | "culprit" | "external" | "structural" | "environment"
    ops_a: int
    ops_b: int
    first: Divergence | None = None
    environment: list[dict[str, Any]] = field(default_factory=list)
    spread: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    programs: tuple[Any, Any] = (None, None)
    #: earlier divergences whose values reach no result (:mod:`fwd9m.debug._flow`), first first
    harmless: list[dict[str, Any]] = field(default_factory=list)
    #: random draws of a data pipeline's parallel stage, not recorded op by op (trace end)
    pipeline: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def render(self, fmt: str = "text") -> str:
        from . import _report

        return _report.render(self, fmt)


#: the name it had before (``fwd9m.lint.Report`` is lint's report, another thing)
Report = DebugReport


def _ordered(bits: int, nbits: int) -> int:
    """Map a float's bit pattern to an integer whose order follows the float order."""
    sign = 1 << (nbits - 1)
    return (sign - 1 - (bits ^ sign)) - sign + 1 if bits & sign else bits


def sample_difference(meta: str, a: bytes, b: bytes) -> tuple[float, int] | None:
    """(max abs difference, max ULP distance) over sampled or captured float values of
    dtype ``meta`` (``"float32[...]"``); None for other dtypes or unequal lengths."""
    dtype = meta.split("[", 1)[0]
    fmt = _FLOAT_FORMATS.get(dtype)
    if len(a) % (fmt[2] if fmt else 2):  # not whole values (TraceReader refuses such traces)
        return None
    if fmt is None or not a or len(a) != len(b):
        if dtype == "bfloat16" and a and len(a) == len(b):
            n = len(a) // 2
            ua, ub = struct.unpack(f"<{n}H", a), struct.unpack(f"<{n}H", b)
            fa = tuple(struct.unpack("<f", struct.pack("<I", x << 16))[0] for x in ua)
            fb = tuple(struct.unpack("<f", struct.pack("<I", x << 16))[0] for x in ub)
            ia, ib = ua, ub
            nbits = 16
        else:
            return None
    else:
        f, i, size = fmt
        n = len(a) // size
        fa, fb = struct.unpack(f"<{n}{f}", a), struct.unpack(f"<{n}{f}", b)
        ia = struct.unpack(f"<{n}{i.upper()}", a)
        ib = struct.unpack(f"<{n}{i.upper()}", b)
        nbits = size * 8
    max_abs, max_ulp = 0.0, 0
    for x, y, bx, by in zip(fa, fb, ia, ib):
        if math.isnan(x) or math.isnan(y):
            if math.isnan(x) != math.isnan(y):
                max_abs = math.inf
            continue
        d = abs(x - y)
        max_abs = max(max_abs, d)
        max_ulp = max(max_ulp, abs(_ordered(bx, nbits) - _ordered(by, nbits)))
    return max_abs, max_ulp


def _op_magnitude(a: Op, b: Op, outs: list[int]) -> tuple[float, int, bool] | None:
    """Largest (abs, ULP) difference over the differing outputs, from full captures
    when present (exact) else from the sampled values (a lower bound)."""
    best: tuple[float, int] | None = None
    exact = False
    for i in outs:
        ca, cb = a.captures.get((1, i)), b.captures.get((1, i))
        if ca and cb:
            d = sample_difference(ca[0], ca[1], cb[1])
            exact = exact or d is not None
        else:
            ta, tb = a.outputs[i], b.outputs[i]
            d = sample_difference(ta.meta, ta.sample or b"", tb.sample or b"") if ta.sample and tb.sample else None
        if d is not None:
            best = d if best is None else (max(best[0], d[0]), max(best[1], d[1]))
    return None if best is None else (best[0], best[1], exact)


class _Series:
    """Bounded per-op series for the plot: merges neighbours when it grows too long."""

    def __init__(self):
        self.width = 1
        self.points: list[list] = []  # [first seq, ops differing, max abs, max ulp, step]

    def add(self, seq: int, differs: bool, mag: tuple | None, step: int) -> None:
        bucket = seq // self.width
        if self.points and self.points[-1][0] // self.width == bucket:
            p = self.points[-1]
            p[1] += int(differs)
            if mag:
                p[2] = max(p[2], mag[0])
                p[3] = max(p[3], mag[1])
            return
        self.points.append([seq, int(differs), mag[0] if mag else 0.0, mag[1] if mag else 0, step])
        if len(self.points) > _MAX_SERIES:
            self.width *= 2
            merged: list[list] = []
            for p in self.points:
                if merged and merged[-1][0] // self.width == p[0] // self.width:
                    m = merged[-1]
                    m[1] += p[1]
                    m[2] = max(m[2], p[2])
                    m[3] = max(m[3], p[3])
                else:
                    merged.append(list(p))
            self.points = merged


def _diff_indices(xs, ys) -> list[int]:
    return [
        i
        for i, (x, y) in enumerate(zip(xs, ys))
        if x.digest is not None and y.digest is not None and x.digest != y.digest
    ]


def _external_kind(op: Op, t_flags: int, framework: str) -> str:
    if t_flags & IS_PARAM:
        return "initializer"
    if op.phase == "data" or t_flags & IS_MODEL_INPUT:
        return "data"
    return "python"


def _same_program(ha: dict, hb: dict) -> bool:
    pa, pb = ha.get("program") or {}, hb.get("program") or {}
    sa, sb = pa.get("script"), pb.get("script")
    # by file name: the same script may be named by different paths on two machines
    return not (sa and sb and os.path.basename(str(sa)) != os.path.basename(str(sb)))


class _Walk:
    """The side-by-side walk over two traces: the ops before the first divergence (a
    few for context, the digests they produced for provenance), the first divergence,
    and after it the spread (ops and steps that differ, the peak, the plot series)."""

    def __init__(self, framework: str, context: int):
        self.framework = framework
        self.context = context
        self.hist_a: collections.deque = collections.deque(maxlen=context)
        self.hist_b: collections.deque = collections.deque(maxlen=context)
        self.produced: set[int] = set()
        from . import _timeline

        self.series = _Series()
        self.timeline = _timeline.Timeline()  #: module by step, for the HTML heat map
        self.first: Divergence | None = None
        self.differing = 0
        self.per_step: dict[int, int] = {}
        self.peak: list = [0.0, 0, None]
        self.n = 0  #: ops compared
        self.structural_later: int | None = None
        self.entering: set = set()  #: digests of a Python value that entered at the first divergence
        from ._flow import Flow

        self.flow = Flow()  #: each differing value followed forward: the divergence that matters

    def run(self, it_a: Iterator[Op], it_b: Iterator[Op]) -> tuple[int, int]:
        """Walk both traces to the end of the shorter one, or to the first structural
        change; returns how many ops are left in A and in B."""
        extra_a = extra_b = 0
        # zip_longest, not zip: zip drops the op it took from A when B has just ended
        for opa, opb in itertools.zip_longest(it_a, it_b):
            if opa is None or opb is None:
                extra_a, extra_b = int(opa is not None), int(opb is not None)
                break
            self.n += 1
            if opa.signature() != opb.signature():
                self._structural(opa, opb, it_a, it_b)
                break
            ins, outs = _diff_indices(opa.inputs, opb.inputs), _diff_indices(opa.outputs, opb.outputs)
            if self.first is None:
                self._before(opa, opb, ins, outs)
            else:
                self._after(opa, opb, ins, outs)
        return extra_a + sum(1 for _ in it_a), extra_b + sum(1 for _ in it_b)

    def _structural(self, opa: Op, opb: Op, it_a: Iterator[Op], it_b: Iterator[Op]) -> None:
        if self.first is not None:
            self.structural_later = opa.seq
            return
        c = self.context
        self.first = _divergence_at(
            opa,
            kind="structural",
            detail=f"run A executes {opa.name}{_shapes(opa)} where run B executes {opb.name}{_shapes(opb)}",
            a_context=[o.describe() for o in self.hist_a]
            + ["> " + opa.describe()]
            + [o.describe() for o in itertools.islice(it_a, c)],
            b_context=[o.describe() for o in self.hist_b]
            + ["> " + opb.describe()]
            + [o.describe() for o in itertools.islice(it_b, c)],
        )

    def _before(self, opa: Op, opb: Op, ins: list[int], outs: list[int]) -> None:
        """An op before any divergence: it agrees (remember it), or it is the first."""
        if not (ins or outs):
            if len(self.produced) > _MAX_PROVENANCE:
                self.produced.clear()
            self.produced.update(t.digest for t in opa.outputs if t.digest is not None)
            self.hist_a.append(opa)
            self.hist_b.append(opb)
            self.series.add(opa.seq, False, None, opa.step)
            self.timeline.add(opa.module, opa.phase, opa.step, False, None)
            return
        first, mag = self._found(opa, opb, ins, outs)
        if mag:
            self.peak = [mag[0], mag[1], opa.seq]
        if first.source == "python":
            self.entering = {t.digest for t in (*opa.outputs, *(opa.inputs[i] for i in ins))}
        self.first = first
        self.flow.add(first, opa, opb, ins, outs)
        self.series.add(opa.seq, True, mag, opa.step)
        self.timeline.add(opa.module, opa.phase, opa.step, True, mag)
        self.differing = 1
        self.per_step[opa.step] = 1

    def _found(self, opa: Op, opb: Op, ins: list[int], outs: list[int]) -> tuple[Divergence, Any]:
        """A divergence at ``opa``/``opb`` (inputs ``ins`` and outputs ``outs`` differ),
        classified, with its size and values side by side; and the size."""
        from . import _values

        found = _classify(opa, opb, ins, outs, self.produced, self.framework)
        mag = _op_magnitude(opa, opb, outs)
        if mag:
            found = replace(found, magnitude={"max_abs": mag[0], "max_ulp": mag[1], "exact": mag[2]})
        return replace(found, values=_values.side_by_side(opa, opb, ins, outs)), mag

    def _follow(self, opa: Op, opb: Op, ins: list[int], outs: list[int]) -> None:
        """An op after the first divergence, in the data flow (:mod:`fwd9m.debug._flow`):
        differing values that an earlier divergence made carry its taint on; one that
        none made, or outputs that differ from identical inputs, are a new source."""
        flow = self.flow
        if not (ins or outs):
            flow.agreeing(opa)
            return
        mask, new = flow.untainted(opa, opb, ins)
        if not ins:
            mask = flow.state_read(opa) or flow.python_read(opa)
        if mask:
            flow.carry(opa, opb, outs, mask)
        if new or not (ins or mask):
            flow.add(self._found(opa, opb, new, outs)[0], opa, opb, new, outs)

    def _after(self, opa: Op, opb: Op, ins: list[int], outs: list[int]) -> None:
        """An op after the first divergence: follow the value that entered, count the spread."""
        if self.entering:
            self._follow_entering(opa, ins)
            if self.flow.sources and self.first is not None:  # refined: seed, data
                self.flow.sources[0].divergence = self.first
        self._follow(opa, opb, ins, outs)
        mag = _op_magnitude(opa, opb, outs) if outs else None
        if outs:
            self.differing += 1
            self.per_step[opa.step] = self.per_step.get(opa.step, 0) + 1
            if mag and mag[0] >= self.peak[0]:
                self.peak = [mag[0], mag[1], opa.seq]
        self.series.add(opa.seq, bool(outs), mag, opa.step)
        self.timeline.add(opa.module, opa.phase, opa.step, bool(outs), mag)

    def _follow_entering(self, opa: Op, ins: list[int]) -> None:
        """A Python value entered at the first divergence: it is a ``seed`` when it
        becomes the seed of a random op soon after (an initializer), ``data`` when it is
        fed to the model as its input batch in the same step."""
        first = self.first
        if first is None or first.source != "python":
            return
        if opa.seq - first.seq <= 64 and ins and (opa.node == "random" or _is_tf_random(opa.name)):
            self.first = replace(
                first,
                source="seed",
                detail=first.detail
                + (
                    f"; it becomes the seed of the random op {opa.name} at op "
                    f"#{opa.seq}{' in ' + opa.module if opa.module else ''}"
                    f"{' (a PRNG key)' if self.framework == 'jax' else ' (an initializer)'}"
                ),
            )
            self.entering = set()
        elif opa.step == first.step and any(t.flags & IS_MODEL_INPUT and t.digest in self.entering for t in opa.inputs):
            self.first = replace(
                first,
                source="data",
                detail=first.detail
                + (f"; it is fed to the model as its input batch at op #{opa.seq} ({opa.name} in {opa.module or '?'})"),
            )
            self.entering = set()

    def spread(self) -> dict[str, Any]:
        first = self.first
        return {
            "ops_compared": self.n,
            "ops_differing": self.differing,
            "first_seq": first.seq if first else None,
            "steps_differing": {str(k): v for k, v in sorted(self.per_step.items())},
            "peak": {"max_abs": self.peak[0], "max_ulp": self.peak[1], "seq": self.peak[2]},
            "series_bucket_ops": self.series.width,
            "series": self.series.points,
            "timeline": self.timeline.to_dict(),
            "magnitude_source": "4 sampled values per float output (a lower bound), or full tensors where captured",
        }


def _header_notes(ha: dict, hb: dict) -> list[str]:
    notes = []
    if ha.get("level") == "sequence" or hb.get("level") == "sequence":
        notes.append("a trace was recorded at level 'sequence': only the op sequence is compared (no digests)")
    if not _same_program(ha, hb):
        notes.append(
            f"the traces come from different programs: "
            f"{(ha.get('program') or {}).get('script')} vs "
            f"{(hb.get('program') or {}).get('script')}"
        )
    return notes


def _reader_notes(name: str, r: TraceReader) -> list[str]:
    """What a trace says about its own end: cut off, ops not recorded, an exception."""
    notes = []
    if r.truncated:
        notes.append(
            f"trace {name} ({r.path}) {r.truncated}; compared up to its last complete record ({r.ops_read} ops)"
        )
    if r.end and isinstance(r.end.get("not_recorded"), dict) and r.end["not_recorded"]:
        missed = r.end["not_recorded"]
        total = sum(v for v in missed.values() if isinstance(v, int))
        kinds = ", ".join(f"{k} x{v}" for k, v in list(missed.items())[:8])
        notes.append(
            f"run {name}: {total} ops could not be recorded ({kinds}); the "
            f"program ran on, but their values are not compared (a "
            f"recorder error: please report it)"
        )
    if not r.truncated and r.end and r.end.get("completed") is False:
        notes.append(f"run {name} raised an exception inside the recorded block (trace ends after {r.ops_read} ops)")
    return notes


def _recorder_notes(ra: TraceReader, rb: TraceReader) -> list[str]:
    """The recorders' own notes (end record ``notes``: what they could not see, such as
    compiled code), once when both runs have them, else with the run's name."""

    def of(r: TraceReader) -> list[str]:
        got = (r.end or {}).get("notes")
        return [n[:500] for n in got[:10] if isinstance(n, str)] if isinstance(got, list) else []

    a, b = of(ra), of(rb)
    return (
        [n for n in a if n in b] + [f"run A: {n}" for n in a if n not in b] + [f"run B: {n}" for n in b if n not in a]
    )


def _framework_of(op: str, frameworks: list[str], default: str) -> str:
    """The recorded framework an op comes from, in a trace of several (a process that
    imported torch and TensorFlow records both): torch's ops are ``aten::NAME``,
    TensorFlow's op types are CamelCase, JAX's primitives lower case. ``default`` (the
    header's first) when there is one framework or the name does not tell."""
    if len(frameworks) <= 1:
        return default
    if "::" in op and "torch" in frameworks:
        return "torch"
    if op[:1].isupper() and "tensorflow" in frameworks:
        return "tensorflow"
    if op[:1].islower() and ":" not in op and "jax" in frameworks:
        return "jax"
    return default


def _explained(first: Divergence, framework: str, ha: dict, hb: dict, pipeline: list) -> Divergence:
    from . import _explain

    explanation = _explain.explain(first, framework, ha, hb, pipeline=pipeline)
    detail = first.detail
    if first.kind == "structural" and first.seq == 0 and not _same_program(ha, hb):
        detail = "the traces come from different programs; " + detail
    return replace(first, explanation=explanation, detail=detail)


def compare(a: str, b: str, *, context: int = 3) -> DebugReport:
    """Compare trace files ``a`` and ``b``.

    Raises:
        FileFormatError: a file is not a trace / unknown version / damaged header.
    """
    from .. import environment

    ra, rb = TraceReader(a), TraceReader(b)
    ha, hb = ra.header, rb.header
    framework = (ha.get("frameworks") or ["?"])[0]
    env = [d.to_dict() for d in environment.diff(ha.get("environment") or {}, hb.get("environment") or {})]
    notes = _header_notes(ha, hb)
    walk = _Walk(framework, context)
    rest_a, rest_b = walk.run(iter(ra), iter(rb))
    notes += _reader_notes("A", ra) + _reader_notes("B", rb) + _recorder_notes(ra, rb)
    first = walk.first
    if first is None and (rest_a or rest_b) and not (ra.truncated or rb.truncated):
        longer = "A" if rest_a else "B"
        first = Divergence(
            kind="structural",
            seq=walk.n,
            step=-1,
            op="(end of run)",
            module="",
            phase="",
            location="",
            node="",
            device="",
            detail=f"run {longer} executes {rest_a or rest_b} more ops after op #{walk.n - 1}",
        )
    if walk.structural_later is not None:
        notes.append(
            f"the op sequences diverge later, at op #{walk.structural_later} "
            f"(control flow or shapes changed); the spread stops there"
        )
    harmless: list[dict[str, Any]] = []
    # module-level traces hold no data flow from a module's outputs to the gradients and
    # parameters (their records have no inputs): the first divergence stands there
    if first is not None and first.kind != "structural" and "modules" not in (ha.get("level"), hb.get("level")):
        first, harmless = _consequential(walk, first)
    pipeline = _pipeline(ra, rb)
    if first is not None:
        framework = _framework_of(first.op, ha.get("frameworks") or [], framework)
        first = _explained(first, framework, ha, hb, pipeline)
    walk.first = first
    kind = "reproducible" if first is None else "environment" if env else first.kind
    return DebugReport(
        a=a,
        b=b,
        framework=framework,
        reproducible=first is None,
        kind=kind,
        ops_a=ra.ops_read,
        ops_b=rb.ops_read,
        first=first,
        environment=env,
        spread=walk.spread(),
        notes=notes,
        programs=(ha.get("program"), hb.get("program")),
        harmless=harmless,
        pipeline=pipeline,
    )


def _pipeline(ra: TraceReader, rb: TraceReader) -> list[dict[str, Any]]:
    """The trace ends' ``pipeline`` records (random draws of a data pipeline's parallel
    stage that the recorder saw but did not record op by op), of either run."""
    out: list[dict[str, Any]] = []
    for r in (ra, rb):
        got = (r.end or {}).get("pipeline")
        for p in got if isinstance(got, list) else []:
            if isinstance(p, dict) and isinstance(p.get("op"), str) and p not in out:
                out.append({k: str(v) for k, v in p.items()})
    return out[:10]


def _consequential(walk: _Walk, first: Divergence) -> tuple[Divergence, list[dict[str, Any]]]:
    """The first divergence whose values reach the results, and the harmless ones before
    it (:meth:`fwd9m.debug._flow.Flow.consequential`); ``first`` when it is that one."""
    k, harmless = walk.flow.consequential(walk.n)
    if k == 0:
        return first, []
    found = walk.flow.sources[k].divergence
    if found.source == "data":  # a seed the DataLoader drew and read: its shuffle's, its workers'
        seeds = [h for h in harmless if h["phase"] == "data" and h["to_python"] and h["source"] in ("data", "rng")]
        harmless = [h for h in harmless if h not in seeds]
        for h in seeds[:1]:
            found = replace(
                found,
                detail=found.detail
                + f"; before it, the data pipeline drew a seed that differs too, op #{h['seq']} ({h['op']} at "
                f"{h['location'] or '?'}), and read it into Python: the DataLoader's seed for its shuffle "
                f"and its worker processes (each worker seeds Python's random, NumPy and torch from it)",
            )
    return found, harmless


def _shapes(op: Op) -> str:
    return "(" + ", ".join(t.meta for t in op.inputs) + ") -> (" + ", ".join(t.meta for t in op.outputs) + ")"


#: ops that run the program's own Python function (``tf.py_function``,
#: ``tf.numpy_function``; ``jax.pure_callback`` / ``io_callback`` run eagerly): what they
#: return is made by Python code no recorder sees, so from identical inputs it is a value
#: entering from outside (Python's ``random``, NumPy's global RNG, the clock), never a kernel
PYTHON_OPS = {
    "EagerPyFunc": "tf.py_function",
    "PyFunc": "tf.numpy_function",
    "PyFuncStateless": "tf.numpy_function",
    "pure_callback": "jax.pure_callback",
    "io_callback": "jax.experimental.io_callback",
}


def _same_inputs(a: Op, outs: list[int]) -> tuple[str, str | None, str]:
    """(kind, source, detail) of a first divergence whose inputs all agree: a random op
    (its generator state differs), an op running the program's Python (:data:`PYTHON_OPS`),
    an op reading a variable or resource set outside the recorded ops, or else a
    nondeterministic op (a culprit)."""
    if a.name in PYTHON_OPS:
        return (
            "external",
            "data" if a.phase == "data" else "python",
            (
                f"{a.name} runs a Python function of the program ({PYTHON_OPS[a.name]}); its "
                f"inputs are identical in both runs but output(s) {outs} differ: the Python code "
                f"inside it drew values from outside the recorded ops (Python's random, NumPy's "
                f"global RNG, the clock, a file)"
            ),
        )
    if a.node == "random" or _is_tf_random(a.name):
        detail = (
            f"{a.name} draws from a random generator whose state differs between the runs (its inputs are identical)"
        )
        if a.phase == "data":  # e.g. DataLoader(shuffle=True) drawing its sampler seed
            return "external", "data", detail + "; it runs in the data pipeline, so the data order changes"
        return "external", "rng", detail
    if any(t.meta.startswith(("resource", "variant")) for t in a.inputs):
        if "Iterator" in a.name or a.phase == "data":
            return (
                "external",
                "data",
                (
                    f"{a.name} yields a batch that differs between the runs: the input "
                    f"pipeline (tf.data, not recorded op by op) produced it"
                ),
            )
        return (
            "external",
            "python",
            (
                f"{a.name} reads state held in a variable/resource (not digested) whose "
                f"content differs between the runs although every recorded op before "
                f"agreed: it was set outside the recorded ops"
            ),
        )
    return (
        "culprit",
        None,
        (
            f"all {len(a.inputs)} inputs of {a.name} are bit-identical in both runs "
            f"but output(s) {outs} differ: the op is nondeterministic"
        ),
    )


def _argument_differs(a: Op, b: Op, i: int) -> tuple[str, str]:
    """(source, detail) when the first differing input is the op's non-tensor arguments."""
    changed = _args_difference(a.inputs[i].sample or b"", b.inputs[i].sample or b"")
    what = (
        "; ".join(f"argument {n!r} of {a.name}: {x} vs {y}" for n, x, y in changed[:3])
        or f"a non-tensor argument of {a.name}"
    )
    seeds = [n for n, _, _ in changed if "seed" in n.lower()]
    random = _is_tf_random(a.name) or a.node == "random"
    return (
        "seed" if random and seeds else "python",
        f"{what} (run A vs run B): a Python value passed to the op differs between "
        f"the runs; no recorded op produced it, so it came from outside them "
        f"(an unseeded Python/NumPy RNG, the clock, a file or stdin)",
    )


def _input_differs(a: Op, i: int, produced: set[int], framework: str) -> tuple[str, str]:
    """(source, detail) when tensor input ``i`` is the first to differ: it entered from
    outside the recorded ops (a seed, a parameter, the batch, a Python value)."""
    if _is_tf_random(a.name) or a.node == "random":
        return "seed", (
            f"the seed/state input {i} of the random op {a.name} differs; it was not produced by any recorded op"
        )
    t = a.inputs[i]
    source = _external_kind(a, t.flags, framework)
    known = (
        ""
        if t.digest not in produced
        else " (its value matches an earlier op's output in run A, so the data flow differs)"
    )
    what = {"initializer": "a parameter", "data": "the model's input batch", "python": "a value"}.get(source, "a value")
    return source, (
        f"input {i} of {a.name} ({t.meta}) is {what} that differs between the "
        f"runs and was not produced by any recorded op{known}: it entered from "
        f"outside the recorded ops"
    )


def _classify(a: Op, b: Op, ins: list[int], outs: list[int], produced: set[int], framework: str) -> Divergence:
    """The first divergence, at ops ``a`` and ``b``: inputs ``ins`` and outputs ``outs`` differ."""
    source: str | None
    if not ins:
        kind, source, detail = _same_inputs(a, outs)
    elif a.inputs[ins[0]].dtype == ARGS_DTYPE:
        kind, (source, detail) = "external", _argument_differs(a, b, ins[0])
    else:
        kind, (source, detail) = "external", _input_differs(a, ins[0], produced, framework)
    return _divergence_at(
        a,
        kind=kind,
        source=source,
        inputs_differ=ins,
        outputs_differ=outs,
        detail=detail,
    )


def _divergence_at(op: Op, **fields: Any) -> Divergence:
    """A divergence at ``op``: where it is (seq, step, name, module, phase, location,
    node, device) from the op, the rest from ``fields``."""
    return Divergence(
        seq=op.seq,
        step=op.step,
        op=op.name,
        module=op.module,
        phase=op.phase,
        location=op.location,
        node=op.node,
        device=op.device,
        **fields,
    )


def _short_value(v: str, limit: int = 40) -> str:
    """A recorded argument value for a report line (floats to 3 significant digits)."""
    try:
        f = float(v)
    except ValueError:
        return v if len(v) <= limit else v[: limit - 3] + "..."
    return v if v in ("True", "False") or v.lstrip("-").isdigit() else f"{f:.3g}"


def _args_difference(a: bytes, b: bytes) -> list[tuple[str, str, str]]:
    """(name, value A, value B) of the non-tensor arguments that differ, from two
    ``args`` records' texts (``name=value`` joined by the separator; a text cut at 255
    bytes may end mid-value)."""

    def items(data: bytes) -> dict[str, str]:
        out = {}
        for part in data.decode("utf-8", "replace").split(SEP):
            name, _, value = part.partition("=")
            out[name] = value
        return out

    ia, ib = items(a), items(b)
    return [(n, _short_value(v), _short_value(ib.get(n, "?"))) for n, v in ia.items() if ib.get(n) != v]


def _is_tf_random(name: str) -> bool:
    return name.startswith(
        (
            "Random",
            "StatelessRandom",
            "Rng",
            "StatefulUniform",
            "StatefulStandardNormal",
            "StatefulTruncatedNormal",
            "StatefulRandom",
            "StatelessTruncated",
            "TruncatedNormal",
            "StatelessMultinomial",
            "Multinomial",
            "RandomShuffle",
            "StatelessShuffle",
        )
    )
