"""What a check found: :class:`Difference` s, :class:`RunInfo` s and the :class:`CheckResult`
that ranks them and renders the text report and the JSON form.

A :class:`CheckResult` is frozen: the steps of a check put it together in a
:class:`Draft` (each adds its notes, causes and next steps) and the check returns
``draft.freeze()``, built once."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ..compare import LeafDiff, escape_control

SCHEMA = "fwd9m.check"
SCHEMA_VERSION = 1

# ranking of finding sources: a crash outranks a tensor, a tensor outranks a printed line
_SOURCE_ORDER = {"exit": 0, "timeout": 0, "step": 1, "value": 2, "state": 2, "file": 3, "stdout": 4, "stderr": 5}


@dataclass
class Difference:
    """One difference between a run and the first run.

    ``source``: ``"exit"`` (exit status or exception), ``"timeout"``, ``"step"`` (a
    training step's digests, where the early stop stopped both runs), ``"value"`` (what
    a checked function returned), ``"state"`` (captured final state), ``"file"``,
    or ``"stdout"``. ``run``: label of the run compared with run 1.
    ``diff``: the leaf-level difference where there is one.
    """

    source: str
    run: str
    summary: str
    diff: LeafDiff | None = None
    detail: str | None = None
    #: the pair of elements at the largest ULP distance has different signs (the
    #: distance then counts every float between them, across zero: the summary says
    #: "signs differ" instead; ``diff.max_ulp`` keeps the number)
    signs_differ: bool = False

    @property
    def integer(self) -> bool:
        """An integer or bool leaf (indices, a permutation, a mask, a count) that differs
        in value: usually a cause upstream of the float leaves that differ."""
        d = self.diff
        return d is not None and d.kind == "values" and (d.dtype or "").startswith(("int", "uint", "bool"))

    @property
    def magnitude(self) -> float:
        """Ranking key within a source: the largest distance in ULPs (a relative
        measure, so a large-valued metric does not outrank a weight), else the largest
        absolute difference; structural differences (shape, dtype, missing) rank
        first, opaque ones (hashes) last."""
        d = self.diff
        if d is None or d.kind in ("shape", "dtype", "type", "only_a", "only_b"):
            return float("inf")
        if d.max_ulp is not None:
            return float(d.max_ulp)
        return d.max_abs if d.max_abs is not None else -1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "run": self.run,
            "summary": self.summary,
            "diff": self.diff.to_dict() if self.diff else None,
            "detail": self.detail,
            "signs_differ": self.signs_differ,
        }


#: the name it had before (``fwd9m.lint`` findings are another thing)
Finding = Difference


def leaf_finding(
    source: str, run: str, d: LeafDiff, fa: Any, fb: Any, prefix: str = "", path: str | None = None
) -> Difference:
    """The :class:`Difference` for a differing leaf ``d`` of the flattened values ``fa`` and
    ``fb`` (``{path: Tensor | number}``), saying "signs differ" instead of "max N ULP"
    when the pair at the largest ULP distance lies on both sides of zero (a distance
    such as 2077627293 ULP in float32 then only says the values cross zero). ``path``:
    the leaf's name in the report, when not ``d.path`` (a tensor in a file: ``file:key``)."""
    signs = d.max_ulp is not None and _max_ulp_signs_differ(fa.get(d.path), fb.get(d.path))
    if path is not None:
        d = dataclasses.replace(d, path=path)
    summary = d.summary()
    if signs:
        summary = summary.replace(f"; max {d.max_ulp} ULP", "; max ULP across zero: signs differ")
    return Difference(source, run, prefix + summary, d, signs_differ=signs)


def _max_ulp_signs_differ(a: Any, b: Any) -> bool:
    """Whether the elements of ``a`` and ``b`` (two :class:`~fwd9m.compare.Tensor` s of one
    float dtype and shape, or two floats) that lie furthest apart in ULPs have different
    signs. NaN pairs are left out, as in the ULP distance itself; False when unknown."""
    import math

    from ..compare import Tensor
    from ..compare._bits import _bits_dtype, _ordered

    if isinstance(a, float) and isinstance(b, float):
        return math.copysign(1, a) != math.copysign(1, b)
    if not (isinstance(a, Tensor) and isinstance(b, Tensor)):
        return False
    import numpy as np

    xa, xb = np.asarray(a.array), np.asarray(b.array)
    bits = _bits_dtype(np, xa.dtype)
    if bits is None or xa.shape != xb.shape or xa.dtype != xb.dtype or xa.dtype.kind in "iubc":
        return False
    ba, bb = np.ascontiguousarray(xa).reshape(-1).view(bits), np.ascontiguousarray(xb).reshape(-1).view(bits)
    ne = ba != bb
    try:
        with np.errstate(all="ignore"):
            ne &= ~(np.isnan(xa.reshape(-1)) | np.isnan(xb.reshape(-1)))
    except TypeError:  # a dtype NumPy cannot test for NaN
        return False
    da, db = ba[ne], bb[ne]
    if not da.size:
        return False
    oa, ob = _ordered(np, da, bits.itemsize), _ordered(np, db, bits.itemsize)
    if bits.itemsize == 8:  # the distance fits in uint64, not in int64
        hi = np.maximum(oa, ob).view(np.uint64) - np.minimum(oa, ob).view(np.uint64)
    else:
        hi = np.abs(oa.astype(np.int64) - ob.astype(np.int64))
    i = int(np.argmax(hi))
    return bool((oa[i] < 0) != (ob[i] < 0))  # ordered values below zero are the negative floats


@dataclass
class RunInfo:
    """What one run did: ``seconds`` of wall-clock time, ``returncode`` (None when it
    timed out), the end of its stderr, and the settings that made it differ."""

    label: str
    command: list[str]
    settings: dict[str, str] = field(default_factory=dict)
    returncode: int | None = None
    timed_out: bool = False
    seconds: float = 0.0
    stdout_bytes: int = 0
    stderr_tail: str = ""
    error: str | None = None
    captured: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class CheckResult:
    """The outcome of :func:`check` or :func:`check_script`. ``bool(result)`` is True
    when every run agreed bit for bit. Frozen: its fields cannot be set again (its
    lists are its own copies, made once by :meth:`Draft.freeze`)."""

    target: str
    runs: list[RunInfo]
    findings: list[Difference]
    compared: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    environment: dict[str, Any] | None = None
    environment_diffs: list[dict[str, Any]] = field(default_factory=list)
    next_steps: list[str] = field(default_factory=list)
    catalog: list[dict[str, Any]] = field(default_factory=list)
    #: possible causes seen while running (the string-hash seed differed)
    causes: list[str] = field(default_factory=list)
    #: the string-hash seed differed between runs that differ (a suspect until confirmed)
    hash_seed_suspect: bool = False
    #: values masked in printed output and text files, not compared (timings, rates,
    #: timestamps, addresses, temporary names): dicts with ``source``, ``kind``,
    #: ``name``, ``where`` (first example), ``a``/``b`` (its value in each run),
    #: ``count`` and ``differed``; empty with ``strict``
    ignored: list[dict[str, Any]] = field(default_factory=list)
    #: what the verdict rests on, a line per source (stdout, stderr, files, final state),
    #: then what was seen but not compared (``check._coverage``)
    coverage: list[str] = field(default_factory=list)
    #: the first next step when the target is a script: the command that finds and
    #: verifies a patch (``fwd9m fix``)
    verify: str = ""

    @property
    def reproducible(self) -> bool:
        return not self.findings

    def __bool__(self) -> bool:
        return self.reproducible

    def ranked(self) -> list[Difference]:
        """Findings, most important first: crashes, then returned values and final state,
        then files, then printed lines; within each, structural differences (shape,
        dtype, a missing leaf), then integer and bool leaves (indices, permutations,
        masks, counts: usually the cause of the float differences that follow), then
        float leaves by largest distance in ULPs."""

        def key(f: Difference) -> tuple[int, int, float]:
            structural = f.magnitude == float("inf") and (f.diff is None or f.diff.kind != "values")
            return _SOURCE_ORDER.get(f.source, 9), 0 if structural else 1 if f.integer else 2, -f.magnitude

        return sorted(self.findings, key=key)

    def verdict(self) -> str:
        n = len(self.runs)
        what = (
            ", ".join(f"{v} {k[:-1] if v == 1 and k.endswith('s') else k}" for k, v in self.compared.items() if v)
            or "no values"
        )
        if self.ignored:
            masked = sum(e["count"] for e in self.ignored)
            what += f"; {masked} masked value{'s' * (masked != 1)} not compared, listed below"
        if self.reproducible and not self.compared.get("state tensors") and not self.compared.get("files"):
            return (
                f"REPRODUCIBLE: {n} runs of {self.target} agree bit for bit ({what}), but the verdict rests on "
                f"printed text only: no model, array or file was found to compare (listed under Compared: "
                f"save the result, or keep it in a global or in the script's entry function)."
            )
        if self.reproducible:
            return f"REPRODUCIBLE: {n} runs of {self.target} agree bit for bit ({what})."
        runs = sorted(
            {f.run for f in self.findings},
            key=lambda r: [x.label for x in self.runs].index(r) if r in [x.label for x in self.runs] else 99,
        )
        varied = {r.label: r for r in self.runs if r.settings}
        if varied and all(r in varied for r in runs):
            broken = ", ".join(", ".join(f"{k}={v}" for k, v in varied[r].settings.items()) for r in runs)
            return (
                f"NOT REPRODUCIBLE ACROSS SETTINGS: runs of {self.target} under the same settings agree, "
                f"but {broken} changes the result ({len(self.findings)} difference(s); compared {what})."
            )
        return (
            f"NOT REPRODUCIBLE: {len(self.findings)} difference(s) between runs of {self.target} "
            f"({', '.join(runs)} vs run 1; compared {what})."
        )

    def report(self, max_findings: int | None = 5) -> str:
        """The human report: verdict, ranked differences (the first ``max_findings``;
        None for all), runs, environment, next steps (the script's own lines that fwd9m
        lint flags first, then commands to run, then catalog entries)."""
        lines = [self.verdict()]
        ranked = self.ranked()
        if ranked:
            order = "most important first" + (
                "; integer values first: they are usually causes" if any(f.integer for f in ranked) else ""
            )
            lines += ["", f"What differs ({order}):"]
            shown = ranked if max_findings is None else _shown_findings(ranked, max_findings)
            for i, f in enumerate(shown, 1):
                lines.append(f"{i:>3}. [{f.source}, {f.run}] {f.summary}")
                if f.detail:
                    lines += [f"       {line}" for line in f.detail.splitlines()]
            if len(ranked) > len(shown):
                lines.append(
                    f"     ... and {len(ranked) - len(shown)} more (fwd9m -v check lists all; so does --format json)"
                )
        if self.coverage:
            lines += ["", "Compared (each run with run 1):", *(f"  {c}" for c in self.coverage)]
        if self.ignored:
            lines += ["", "Ignored (masked before comparing; fwd9m check --strict compares them):"]
            lines += ignored_lines(self.ignored)
        if self.causes:
            lines += ["", "Possible causes:"]
            lines += [f"  - {c}" for c in self.causes]
        if self.runs:
            lines += ["", "Runs:"]
            for r in self.runs:
                status = (
                    "timed out"
                    if r.timed_out
                    else f"exit {r.returncode}"
                    if r.returncode is not None
                    else r.error or "not run"
                )
                same = ""
                if r.label != "run 1" and not r.timed_out and r.returncode is not None:
                    n = sum(f.run == r.label for f in self.findings)
                    same = f"; {n} difference(s) from run 1" if n else "; same as run 1"
                lines.append(f"  {r.label}: {status}, {r.seconds:.1f} s{same}")
        for note in self.notes:
            lines.append(f"Note: {note}")
        if self.environment:
            lines += ["", "Environment:", *("  " + s for s in _environment_summary(self.environment))]
        if self.environment_diffs:
            lines.append("Environment differences between runs:")
            lines += [
                f"  {d['run']}: {d['key']}: {d['a']!r} -> {d['b']!r} ({d['reason']})"
                for d in self.environment_diffs[:10]
            ]
        lines += self._next_step_lines()
        # one fact a line: a file name, note or hint holding a newline or an escape
        # sequence (from the script, its files or its environment) is shown escaped, so
        # it can neither forge a line of the report nor act on the terminal
        return "\n".join(escape_control(line) for line in lines)

    def _next_step_lines(self) -> list[str]:
        """The fix to verify first, the script's own lines that fwd9m lint flags, the
        commands to run, then the catalog entries."""
        if not (self.next_steps or self.catalog):
            return []
        lines = ["", "Next steps:"]
        if self.verify and not self.reproducible:
            lines.append(f"  - {self.verify}")
        lines += _hint_lines([e for e in self.catalog if e.get("kind") == "lint"])
        lines += [f"  - {s}" for s in self.next_steps]
        return lines + _hint_lines([e for e in self.catalog if e.get("kind") != "lint"])

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "schema_version": SCHEMA_VERSION,
            "target": self.target,
            "reproducible": self.reproducible,
            "verdict": self.verdict(),
            "findings": [f.to_dict() for f in self.ranked()],
            "compared": self.compared,
            "runs": [r.to_dict() for r in self.runs],
            "notes": self.notes,
            "environment": self.environment,
            "environment_diffs": self.environment_diffs,
            "causes": self.causes,
            "next_steps": self.next_steps,
            "catalog": self.catalog,
            "ignored": self.ignored,
            "coverage": self.coverage,
            "verify": self.verify,
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, default=str)


R = TypeVar("R", bound=CheckResult)


class Draft(Generic[R]):
    """A check result being put together: the fields of the frozen result class
    ``cls``, which the steps of a check set and extend (``draft.notes.append(...)``),
    then :meth:`freeze` builds the result, once. What the result computes
    (``reproducible``, ``verdict()``, ``bool()``) is read from a frozen copy."""

    def __init__(self, cls: type[R], *args: Any, **kwargs: Any) -> None:
        start = cls(*args, **kwargs)  # the class's own defaults and checks
        object.__setattr__(self, "_cls", cls)
        object.__setattr__(self, "_fields", {f.name: getattr(start, f.name) for f in dataclasses.fields(cls)})

    def __getattr__(self, name: str) -> Any:
        fields = self.__dict__["_fields"]
        return fields[name] if name in fields else getattr(self.freeze(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in self._fields:
            raise AttributeError(f"{self._cls.__name__} has no field {name!r}")
        self._fields[name] = value

    def __bool__(self) -> bool:
        return bool(self.freeze())

    def freeze(self) -> R:
        """The result: the fields as they are now, each list and dict copied."""
        return self._cls(**{k: _copy(v) for k, v in self._fields.items()})


def _copy(value: Any) -> Any:
    return list(value) if isinstance(value, list) else dict(value) if isinstance(value, dict) else value


def _shown_findings(ranked: list[Difference], limit: int) -> list[Difference]:
    """The first ``limit`` of ``ranked``, but with the first finding of each source
    (state, file, stdout, ...) among them, so that a short report still says that the
    printed output (or a file) differs too; in ranked order."""
    firsts = list({f.source: f for f in reversed(ranked)}.values())[::-1]
    keep = set(map(id, firsts[:limit]))
    for f in ranked:
        if len(keep) >= limit:
            break
        keep.add(id(f))
    return [f for f in ranked if id(f) in keep]


def _hint_lines(entries: list[dict[str, Any]]) -> list[str]:
    """Next-step lines for lint findings (``fwd9m lint FWD102: in your code: ...``) and
    catalog entries, each with up to 3 lines of its fix."""
    lines = []
    for e in entries:
        label = "fwd9m lint" if e.get("kind") == "lint" else "catalog"
        lines.append(f"  - {label} {e['id']}: {e['title']}")
        if e.get("fix"):
            lines += [f"      {line}" for line in e["fix"].splitlines()[:3]]
    return lines


def ignored_lines(ignored: list[dict[str, Any]], limit: int = 12) -> list[str]:
    """One line per masked name and kind (over every output it was masked in): how many
    values, how many differed between runs, and an example, those that differed first."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for e in ignored:
        groups.setdefault((e["kind"], e["name"]), []).append(e)
    rows = []
    for (kind, name), es in groups.items():
        count, differed = sum(e["count"] for e in es), sum(e["differed"] for e in es)
        ex = next((e for e in es if e["differed"]), es[0])
        sources = _outputs(list(dict.fromkeys(e["source"] for e in es)))
        example = f"{ex['where']}: {ex['a']} vs {ex['b']}" if ex["differed"] else f"{ex['where']}: {ex['a']}"
        rows.append(
            (
                not differed,
                f"  - {name} ({kind}): {count} value{'s' * (count != 1)} in {sources}, "
                f"{differed or 'none'} differed; e.g. {example}",
            )
        )
    rows.sort(key=lambda r: r[0])
    out = [r for _, r in rows[:limit]]
    if len(rows) > limit:
        out.append(f"  ... and {len(rows) - limit} more names (--format json lists all)")
    return out


def _outputs(sources: list[str]) -> str:
    """``stdout``, ``metrics.json``, ``stdout and 2 files`` (the JSON form names them all)."""
    files = [s for s in sources if s != "stdout"]
    if len(files) <= 1:
        return " and ".join(sources)
    return f"{'stdout and ' if 'stdout' in sources else ''}{len(files)} files"


def _environment_summary(fp: dict[str, Any]) -> list[str]:
    py = fp.get("python", {})
    cpu = fp.get("cpu", {})
    out = [
        f"python {py.get('version')} on {fp.get('os', {}).get('system')} "
        f"{fp.get('os', {}).get('release')}; cpu {cpu.get('model')} "
        f"({cpu.get('usable_cores')} cores usable)"
    ]
    gpus = fp.get("gpus") or []
    out.append("gpus: " + (", ".join(g.get("name", "?") for g in gpus) if gpus else "none"))
    for name, info in sorted((fp.get("frameworks") or {}).items()):
        detail = ", ".join(f"{k}={v}" for k, v in info.items() if k != "version")
        out.append(f"{name} {info.get('version', '')}: {detail}")
    if not fp.get("frameworks"):
        pk = fp.get("packages", {})
        out.append("packages: " + ", ".join(f"{k}=={v}" for k, v in sorted(pk.items())))
    env = {k: v for k, v in (fp.get("env") or {}).items() if v is not None}
    thr = {k: v for k, v in (fp.get("threads") or {}).items() if v is not None}
    out.append(
        "set: "
        + (
            " ".join(f"{k}={v}" for k, v in {**env, **thr}.items())
            or "no determinism or thread variables (PYTHONHASHSEED unset)"
        )
    )
    return out
