"""Comparing finished runs of a script: output, files and final state, the hash-seed
suspicion, and notes on distributed launches."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .._hashseed import INCOMPLETE, RULED_OUT, Outcome
from .._runtime import workdir
from ..compare import (
    LeafDiff,
    compare_flat,
    compare_text,
    escape_control,
    file_digest,
    ignored,
    mask_timing_tags,
    normalize_line,
    pair_names,
    printable,
    read_structured,
    replace_in_leaves,
)
from ..compare._sqlite import SUFFIXES as SQLITE_SUFFIXES
from ..compare._sqlite import database_of
from ..compare._text import IgnoredValues
from ..errors import FileFormatError, RunError
from ._hints import _catalog_hints, _debug_args, _debug_can_record, fix_step
from ._process import _Run
from ._result import CheckResult, Difference, Draft, RunInfo, leaf_finding


def _state_groups(run: _Run) -> dict[str, dict[str, Any]]:
    """Captures with state, keyed by process: rank, or argv when several processes."""
    groups: dict[str, dict[str, Any]] = {}
    counts: dict[str, int] = {}
    for cap in run.captures:
        if not cap["flat"]:
            continue
        key = (
            f"rank {cap['rank']}"
            if cap.get("rank") not in (None, "")
            else " ".join(Path(a).name if i == 0 else a for i, a in enumerate(cap.get("argv") or []))
        )
        counts[key] = counts.get(key, 0) + 1
        groups[key if counts[key] == 1 else f"{key} #{counts[key]}"] = cap
    return groups


def _hash_probe(run: _Run) -> Any:
    caps = [c for c in run.captures if c["flat"]] or run.captures
    return caps[-1].get("hash_probe") if caps else None


#: why a generator's state in fwd9m's RNG state blob is not compared (``--resume``)
UNSEEDED_WHY = "an RNG state that differs between runs A and B before the interruption already: unseeded"


def _compare_files(
    a: _Run,
    b: _Run,
    label: str,
    findings: list[Difference],
    skipped: dict[str, str] | None = None,
    strict: bool = False,
    masked: IgnoredValues | None = None,
    unseeded: frozenset[str] = frozenset(),
) -> None:
    """Findings for the files of run ``b`` that differ from run ``a``'s; ``skipped`` gets
    ``{file:leaf path: reason}`` of what was not compared (a save time stamp), ``masked``
    the timing values masked in text files and TensorBoard tags (none with ``strict``). Files
    named by the time and process that wrote them (TensorBoard's) pair up by
    :func:`~fwd9m.compare.pair_names`. fwd9m's own RNG state in a checkpoint is compared
    generator by generator, less those of ``unseeded`` (:mod:`fwd9m.check._rng_blobs`)."""
    from ..compare._files import renamed_folders

    names_a, names_b = pair_names(a.files, strict), pair_names(b.files, strict)
    if masked is not None and not strict:
        _list_timed_names(names_a, names_b, masked)
    # a file that names its own run folder (outputs/<date>/<time>/) reads the same in each run
    ra, rb = (*renamed_folders(names_a), *a.replacements), (*renamed_folders(names_b), *b.replacements)
    files_a = {names_a[k]: v for k, v in a.files.items()}
    files_b = {names_b[k]: v for k, v in b.files.items()}
    through_a = {names_a.get(k, k) for k in a.through}
    through_b = {names_b.get(k, k) for k in b.through}
    read_as_rows: set[str] = set()  # SQLite databases compared by their rows, sorted before their sidecars
    for name in sorted(set(files_a) | set(files_b)):
        if _sqlite_sidecar(name, read_as_rows, skipped, strict):
            continue
        if _unpaired(name, files_a, files_b, through_a, through_b, label, findings, skipped, strict):
            continue
        (kind, pa), (_, pb) = files_a[name], files_b[name]
        tf = kind == "tf"  # pa, pb: a checkpoint prefix, no file of its own
        if kind == "text":
            d = compare_text(name, pa, pb, ra, rb, strict=strict, ignored=masked)
            if d:
                findings.append(_text_finding("file", label, d, a.info.label))
            continue
        if kind in ("tf", "structured"):
            try:
                fa, fb = _read_flat(pa, kind, ra, unseeded), _read_flat(pb, kind, rb, unseeded)
            except FileFormatError as exc:
                kind = "bytes"
                detail = f"{exc}; compared by content hash"
            else:
                if not strict:
                    fa, fb = mask_timing_tags(name, fa, fb, masked)
                if skipped is not None:
                    skipped.update((f"{name}:{path}", why) for path, why in ignored(fa, fb))
                if name.endswith(SQLITE_SUFFIXES):
                    read_as_rows.add(name)
                for d in compare_flat(fa, fb):
                    findings.append(leaf_finding("file", label, d, fa, fb, path=f"{name}:{d.path}" if d.path else name))
                continue
        else:
            detail = None
        (ha, sa), (hb, sb) = _content_digest(pa, tf, ra), _content_digest(pb, tf, rb)
        if ha != hb:
            d = LeafDiff(
                name, "content", "bytes", None, a=f"sha256 {ha[:12]} ({sa} bytes)", b=f"sha256 {hb[:12]} ({sb} bytes)"
            )
            findings.append(Difference("file", label, f"{name}: content differs ({d.a} vs {d.b})", d, detail))


def _read_flat(path, kind: str, renames: tuple, unseeded: frozenset[str]):
    """A structured file's leaves, its run's folder names replaced, fwd9m's RNG state
    blobs expanded (:mod:`fwd9m.check._rng_blobs`)."""
    from ._rng_blobs import expand

    flat = replace_in_leaves(read_structured(path, tf_checkpoint=kind == "tf"), renames)
    return expand(flat, unseeded, UNSEEDED_WHY)


def _sqlite_sidecar(name: str, read_as_rows: set[str], skipped: dict[str, str] | None, strict: bool) -> bool:
    """True when file ``name`` is SQLite's write-ahead log, its index or its rollback
    journal beside a database both runs' rows were compared for (its bytes differ
    between runs that wrote the same rows; the rows it holds were read with the database)."""
    db = database_of(name)
    if strict or db is None or db not in read_as_rows:
        return False
    if skipped is not None:
        skipped[name] = f"SQLite's file beside {db}: the rows it holds were compared as {db}'s"
    return True


def _unpaired(name, files_a, files_b, through_a, through_b, label, findings, skipped, strict) -> bool:
    """True when file ``name`` is not compared content to content: a tracker's own
    bookkeeping (listed in ``skipped``), a file changed in the user's directory during
    one run only, or one that only one run wrote (a finding)."""
    from ..compare._files import TRACKER_BOOKKEEPING

    if TRACKER_BOOKKEEPING.search(name) and not strict:
        if skipped is not None:
            skipped[name] = "a tracker's own bookkeeping: clock, host and process ids"
        return True
    if (name in through_a) != (name in through_b) and (name not in files_a or name not in files_b):
        return True  # changed in the user's directory during one run only: not the script's output
    if name not in files_b or name not in files_a:
        said = "written by run 1 only" if name not in files_b else "not written by run 1"
        findings.append(Difference("file", label, f"{name}: {said}"))
        return True
    return False


def _content_digest(path: Path, tf: bool = False, replacements: tuple[tuple[str, str], ...] = ()) -> tuple[str, int]:
    """SHA-256 (of the bytes with the run's folder masked: ``replacements``) and size of
    a file, or, for a TensorFlow checkpoint prefix (which is no file itself), of its
    ``.index`` and ``.data-*`` files together, or of the files in an Orbax checkpoint
    folder."""
    if not tf and not path.is_dir():
        return file_digest(path, replacements), path.stat().st_size
    import hashlib

    if path.is_dir():  # an Orbax checkpoint folder: every file by its name under it
        parts = sorted(p for p in path.rglob("*") if p.is_file() and not p.is_symlink())
        names = [p.relative_to(path).as_posix() for p in parts]
    else:
        parts = sorted(
            p
            for p in path.parent.iterdir()
            if p.name == path.name + ".index" or p.name.startswith(path.name + ".data-")
        )
        names = [p.name[len(path.name) :] for p in parts]
    h = hashlib.sha256()
    for name, p in zip(names, parts):
        h.update(f"{name}\0{file_digest(p, replacements)}\0".encode())
    return h.hexdigest(), sum(p.stat().st_size for p in parts)


def _list_timed_names(names_a: dict[str, str], names_b: dict[str, str], masked: IgnoredValues) -> None:
    """Count in ``masked`` each file whose name held a time stamp that
    :func:`~fwd9m.compare.pair_names` set aside (``<time>``), as the report lists every
    masked value; TensorBoard's event files, named by the clock by design, are not."""
    run_b = {paired: name for name, paired in names_b.items()}
    for name, paired in names_a.items():
        if "<time>" in paired and name != paired and ".tfevents" not in paired and paired in run_b:
            masked.add(paired, "timestamp", "file name", "name", name, run_b[paired])


def _ignored_summary(skipped: dict[str, str]) -> str:
    """``file:path (reason)`` per file and reason, with how many more leaves of that file
    the reason covers."""
    groups: dict[tuple[str, str], list[str]] = {}
    for path, why in skipped.items():
        groups.setdefault((path.split(":", 1)[0], why), []).append(path)
    return "; ".join(
        escape_control(paths[0]) + (f" and {len(paths) - 1} more" if len(paths) > 1 else "") + f" ({why})"
        for (_, why), paths in groups.items()
    )


def _text_finding(source: str, label: str, d: LeafDiff, label_a: str) -> Difference:
    """The finding for differing printed lines: the summary, and as its detail the first
    differing line of each run labelled by the run's name (``run 1:``, ``run 2:``; their
    text is escaped already, so the report's lines stay one fact each)."""
    summary, detail = _text_summary(d, label_a, label)
    return Difference(source, label, summary, d, detail)


def _text_summary(d: LeafDiff, label_a: str, label_b: str) -> tuple[str, str]:
    """The summary of differing printed lines, and the first differing line of each
    run labelled by the run's name (``run 1:``, ``run 2:``)."""
    s = f"{d.path}: {d.n_diff} of {d.size} lines differ; first at line {d.first_index[0]}"
    if d.max_abs == 0:
        s += "; numbers differ only in sign (0.0 vs -0.0)"
    elif d.max_abs is not None:
        s += f"; numbers differ by up to {d.max_abs:.3g}"
    width = max(len(label_a), len(label_b)) + 1
    return s, f"{label_a + ':':<{width}} {d.a}\n{label_b + ':':<{width}} {d.b}"


def _no_verdict(display: str, done: list[_Run]) -> None:
    """Raise when every run failed the same way (timed out, could not start, exited with
    the same error): there is nothing to compare."""
    first = done[0]
    if all(r.info.timed_out for r in done):
        raise RunError(
            f"every run of {display} timed out after {done[0].info.seconds:.0f} s; raise --timeout "
            f"or check the script for a hang (the whole process group was killed)"
        )
    codes = {r.info.returncode for r in done}
    if first.info.returncode is None and first.info.error and all(r.info.error for r in done):
        raise RunError(f"{display} could not be started in any run: {first.info.error}")
    if len(codes) == 1 and 0 not in codes and not any(r.info.timed_out for r in done):
        hint = ""
        if "EOFError" in first.info.stderr_tail:
            hint = (
                "\nThe script reads standard input, which fwd9m check closes; pass the input as a file "
                "or argument instead."
            )
        raise RunError(
            f"{display} failed in every run (exit {first.info.returncode}), so there is nothing "
            f"to compare. End of its error output (run 1):\n{printable(first.info.stderr_tail)}{hint}"
        )


def _exit_findings(a: RunInfo, b: RunInfo, label: str) -> list[Difference]:
    """A run that timed out while the other did not, or a different exit status."""
    if b.timed_out or a.timed_out:
        slow, fast = (b, a) if b.timed_out else (a, b)
        return [
            Difference(
                "timeout",
                label,
                f"{slow.label} did not finish within {slow.seconds:.0f} s; "
                f"{fast.label} took {fast.seconds:.1f} s (a hang in some runs only)",
            )
        ]
    if a.returncode != b.returncode:
        return [
            Difference(
                "exit",
                label,
                f"exit status {b.returncode}, run 1 exited {a.returncode}",
                detail=f"run 1 stderr (end):\n{_indent(a.stderr_tail)}\n"
                f"{label} stderr (end):\n{_indent(b.stderr_tail)}",
            )
        ]
    return []


def _state_findings(
    first: _Run, other: _Run, label: str, notes: list[str] | None = None, unseeded: frozenset[str] = frozenset()
) -> list[Difference]:
    """The final states (by process) that differ, leaf by leaf; fwd9m's RNG state blobs
    generator by generator, less those of ``unseeded`` (said in ``notes``)."""
    from ._rng_blobs import expand

    out = []
    ga, gb = _state_groups(first), _state_groups(other)
    for key in sorted(set(ga) | set(gb)):
        if key not in ga or key not in gb:
            out.append(
                Difference(
                    "state", label, f"final state of process '{key}' captured in {'run 1' if key in ga else label} only"
                )
            )
            continue
        prefix = f"{key}: " if len(ga) > 1 else ""
        sa = replace_in_leaves(ga[key]["flat"], first.replacements)
        sb = replace_in_leaves(gb[key]["flat"], other.replacements)
        sa, sb = expand(sa, unseeded, UNSEEDED_WHY), expand(sb, unseeded, UNSEEDED_WHY)
        left_out = sorted(k for k, why in {**sa.ignored, **sb.ignored}.items() if why == UNSEEDED_WHY)
        if left_out and notes is not None:
            more = f" and {len(left_out) - 1} more" if len(left_out) > 1 else ""
            notes.append(f"not compared: {prefix}{escape_control(left_out[0])}{more} ({UNSEEDED_WHY})")
        diffs = compare_flat(sa, sb)
        unseen = _seen_in_one_run(diffs)
        if unseen and notes is not None:
            notes.append(
                f"not compared: the locals of {', '.join(unseen)}, captured in one run only (fwd9m looks "
                f"at the stack every 0.2 s: a function that returned between two looks is not seen)"
            )
        out.extend(
            leaf_finding("state", label, diff, sa, sb, prefix) for diff in diffs if _function_of(diff) not in unseen
        )
    return out


def _function_of(diff: LeafDiff) -> str | None:
    """``main()`` for a leaf of the entry function's locals (``locals.main().w``), else None."""
    head, _, rest = diff.path.partition(".")
    return rest.partition("().")[0] + "()" if head == "locals" and "()." in rest else None


def _seen_in_one_run(diffs: list[LeafDiff]) -> list[str]:
    """The functions whose locals only one run captured (every leaf of theirs is only in
    one run): the watcher's timing, not the program's."""
    by: dict[str, set[str]] = {}
    for d in diffs:
        f = _function_of(d)
        if f is not None:
            by.setdefault(f, set()).add(d.kind)
    return sorted(f for f, kinds in by.items() if kinds <= {"only_a", "only_b"} and len(kinds) == 1)


def _stderr(run: _Run) -> tuple[Path, dict[str, tuple[int, str]]]:
    """The run's standard error as it is compared (:func:`fwd9m.compare._stderr.for_comparison`),
    made once per run."""
    from ..compare._stderr import for_comparison

    out = run.root / "stderr.compared"
    if run.stderr_compared is None:
        run.stderr_compared = for_comparison(run.root / "stderr", out)
    return run.stderr_compared


def _renames(run: _Run, strict: bool) -> tuple[tuple[str, str], ...]:
    """What printed output is read with: the run's own folder, and the folders named by
    the clock or a tracker's run id that the run wrote (``wandb: Run data is saved
    locally in .../offline-run-<time>-<run id>``), as their files are paired."""
    from ..compare._files import renamed_folders

    return run.replacements if strict else (*renamed_folders(pair_names(run.files)), *run.replacements)


class _Pairs:
    """What comparing each run with the first found: differences, and what the notes say
    (runs whose shared stdout only interleaved ranks differently, runs whose hash-seed
    probe differed, environment differences, files not compared, values masked)."""

    def __init__(self, first: _Run, strict: bool, stderr: bool = True, unseeded: frozenset[str] = frozenset()):
        self.first, self.strict, self.with_stderr = first, strict, stderr
        self.unseeded = unseeded  # generators left out of fwd9m's RNG state blobs
        self.findings: list[Difference] = []
        self.interleaved: dict[str, list[str]] = {}  # how they were compared -> run labels
        self.probe_differs: list[str] = []
        self.env_diffs: list[dict[str, Any]] = []
        self.skipped: dict[str, str] = {}
        self.notes: list[str] = []
        self.ignored = IgnoredValues()
        self.base_env = next((c.get("environment") for c in first.captures if c.get("environment")), None)

    def _stderr(self, other: _Run, pair: IgnoredValues) -> None:
        """Standard error compared as stdout is; the framework lines left out counted."""
        (pa, left_a), (pb, left_b) = _stderr(self.first), _stderr(other)
        if self.strict:  # everything, the frameworks' own lines too
            pa, pb, left_a, left_b = self.first.root / "stderr", other.root / "stderr", {}, {}
        ra, rb = _renames(self.first, self.strict), _renames(other, self.strict)
        d = compare_text("stderr", pa, pb, ra, rb, strict=self.strict, ignored=pair)
        if d:
            self.findings.append(_text_finding("stderr", other.info.label, d, self.first.info.label))
        from ..compare._stderr import LEFT_OUT

        for kind, name in LEFT_OUT.items():
            (na, a), (nb, b) = left_a.get(kind, (0, "")), left_b.get(kind, (0, ""))
            for _ in range(max(na, nb)):  # whole lines, counted: the first of each run shown
                pair.add("stderr", "framework log", name, "(whole lines)", printable(a), printable(b))

    def add(self, other: _Run) -> None:
        from .. import environment

        first, label = self.first, other.info.label
        exits = _exit_findings(first.info, other.info, label)
        self.findings += exits
        if exits and exits[0].source == "timeout":
            return
        pair = IgnoredValues()  # counted per pair of runs, merged as the largest count
        d = compare_text(
            "stdout",
            first.stdout,
            other.stdout,
            _renames(first, self.strict),
            _renames(other, self.strict),
            strict=self.strict,
            ignored=pair,
        )
        how = _interleaved_only(first, other, launched=_multi_rank(first, other), strict=self.strict) if d else None
        if how:
            self.interleaved.setdefault(how, []).append(label)
        elif d:
            self.findings.append(_text_finding("stdout", label, d, first.info.label))
        if self.with_stderr:
            self._stderr(other, pair)
        _compare_rank_outputs(first, other, label, self.findings, self.strict, pair)
        _compare_files(first, other, label, self.findings, self.skipped, self.strict, pair, self.unseeded)
        self.ignored.merge(pair)
        self.findings += _state_findings(first, other, label, self.notes, self.unseeded)
        pa, pb = _hash_probe(first), _hash_probe(other)
        if pa is not None and pb is not None and pa != pb:
            self.probe_differs.append(label)
        other_env = next((c.get("environment") for c in other.captures if c.get("environment")), None)
        if self.base_env and other_env:
            self.env_diffs += [{"run": label, **e.to_dict()} for e in environment.diff(self.base_env, other_env)]


def _launch_notes(result: Draft[CheckResult], first: _Run, pairs: _Pairs) -> None:
    result.notes.extend(dict.fromkeys(pairs.notes))
    if pairs.skipped:  # leaves a reader marked (time stamps: compare.ignored), files left out; each says why
        result.notes.append("not compared: " + _ignored_summary(pairs.skipped))
    if first.ranks:
        result.notes.append(
            f"each rank's output was captured separately ({len(first.ranks)} rank(s) of the "
            f"launcher) and compared rank by rank (rank r of each run with rank r of run 1)"
        )
    if pairs.interleaved:
        where = "; ".join(f"{_and_list(labels)} ({how})" for how, labels in pairs.interleaved.items())
        result.notes.append(
            "the shared standard output differs only in how the ranks' lines "
            f"interleave in {where}: several processes write to it, "
            "so their lines come in a random order; that is not a difference of the training"
        )


def _and_list(labels: list[str]) -> str:
    """``run 2``, ``runs 2 and 3``, ``runs 2, 3 and 4``."""
    if len(labels) == 1:
        return labels[0]
    nums = [label.removeprefix("run ") for label in labels]
    if not all(n.isdigit() for n in nums):  # ``PYTHONHASHSEED=0 run 1``, a --vary setting
        return ", ".join(labels[:-1]) + " and " + labels[-1]
    return "runs " + ", ".join(nums[:-1]) + " and " + nums[-1]


def _hash_seed_notes(result: Draft[CheckResult], pairs: _Pairs) -> None:
    if pairs.probe_differs and pairs.findings:
        result.hash_seed_suspect = True
        result.causes.append(
            "PYTHONHASHSEED differed between runs (it was unset or 'random'), so each "
            "interpreter hashed strings differently: if the script iterates over a set of "
            "strings (or a dict built from one), it saw a different order. Fix: run with "
            "PYTHONHASHSEED=0 (or `fwd9m run`), or iterate in a fixed order (sorted(s)). "
            "To tell whether this is the cause: fwd9m check --env PYTHONHASHSEED=0 ..."
        )
    elif pairs.probe_differs:
        result.notes.append(
            "PYTHONHASHSEED differed between runs (string hashing was randomised); "
            "the outputs did not depend on it this time."
        )


def _rank_notes(result: Draft[CheckResult], done: list[_Run], ranks: list[str]) -> None:
    """A distributed launch: differences counted per rank, and ranks sharing stdout."""
    findings, first = result.findings, done[0]
    counts = [
        (k, sum(f.source == "state" and f.summary.startswith(k + ":") for f in findings))
        for k in sorted(ranks, key=lambda k: (len(k), k))
    ]
    result.notes.append(
        "final state compared rank by rank (rank r of each run with rank r of run 1): "
        + ", ".join(f"{k}: {n} difference(s)" for k, n in counts)
    )
    differs = {f.run for f in findings if f.source == "stdout" and f.diff is not None and f.diff.path == "stdout"}
    shuffled = [
        r.info.label
        for r in done[1:]
        if len(ranks) > 1 and r.info.label in differs and _same_bytes_reordered(first.stdout, r.stdout)
    ]
    if shuffled:
        result.causes.append(
            f"{len(ranks)} ranks write to the same standard output: {', '.join(shuffled)} "
            f"printed the same characters as run 1 in another order, as lines (and parts of "
            f"lines) from different processes interleave. Fix: print on rank 0 only (if "
            f"fwd9m.distributed.rank_info().is_main: print(...)); the final state is "
            f"compared rank by rank anyway."
        )


def _next_steps(
    result: Draft[CheckResult],
    display: str,
    pairs: _Pairs,
    ranks: list[str],
    command: bool,
    source: str | None,
    argv: list[str] | None,
    env: dict[str, str] | None,
) -> None:
    """What to do about the differences: where fwd9m debug goes next, and the catalog."""
    base_env = pairs.base_env
    if not ranks:
        result.verify = fix_step(display, command)
    if ranks and command:
        result.next_steps.append(
            f"find the first op that differs, rank by rank: fwd9m run --record-ranks "
            f"runA {display} (and again into runB), then fwd9m debug diff runA runB"
        )
    elif _debug_can_record(base_env):
        result.next_steps.append(f"find the first op that differs: fwd9m debug {_debug_args(display, command)}")
    else:
        result.next_steps.append(
            "the runs imported no framework that fwd9m debug records (PyTorch, "
            "TensorFlow/Keras, JAX): to localize, check smaller pieces in Python "
            "with fwd9m.check(fn, ...)"
        )
    if pairs.probe_differs:
        result.next_steps.append(_HASH_SEED_STEP)
    device = "gpu" if (base_env or {}).get("gpus") else "cpu"
    result.catalog = _catalog_hints(
        base_env,
        device,
        python=bool(pairs.probe_differs),
        source=source,
        threads_differ=_threads_differ(result),
        argv=argv,
        env=env,
    )


def _compare_runs(
    display: str,
    done: list[_Run],
    source: str | None,
    command: bool = False,
    strict: bool = False,
    argv: list[str] | None = None,
    env: dict[str, str] | None = None,
    stderr: bool = True,
    unseeded: frozenset[str] = frozenset(),
) -> Draft[CheckResult]:
    """Compare each run with the first. Printed output and text files are compared with
    timing values masked (each one listed in ``result.ignored``), unless ``strict``;
    standard error too, unless not ``stderr`` (a resumed run warns of the checkpoint it loads).
    ``argv``, ``env``: the runs' ``sys.argv`` and environment when every run had the same
    (None: unknown), for the lint hints. ``unseeded``: generators whose state in fwd9m's
    RNG state blobs is not compared (``--resume``: they differ between runs A and B)."""
    from .. import environment

    _no_verdict(display, done)
    first = done[0]
    rank_lines = sum(_count_lines(o["stdout"]) for o in first.ranks.values() if "stdout" in o)
    compared = {
        "stdout lines": _count_lines(first.stdout) + rank_lines,
        "stderr lines": _count_lines(_stderr(first)[0]) if stderr else 0,
        "files": len(first.files),
        "state tensors": sum(len(g["flat"]) for g in _state_groups(first).values()),
    }
    pairs = _Pairs(first, strict, stderr, unseeded)
    for other in done[1:]:
        pairs.add(other)
    result = Draft(
        CheckResult,
        display,
        [r.info for r in done],
        pairs.findings,
        compared,
        environment=pairs.base_env or environment.collect(),
        environment_diffs=pairs.env_diffs,
        ignored=pairs.ignored.to_list(),
        coverage=_coverage(first, compared, stderr),
    )
    if not any(compared.values()) and not pairs.findings:
        raise RunError(_nothing_compared(display, done))
    _launch_notes(result, first, pairs)
    _hash_seed_notes(result, pairs)
    ranks = [k for k in _state_groups(first) if k.startswith("rank ")]  # a distributed launch
    if ranks:
        _rank_notes(result, done, ranks)
    if pairs.findings:
        _next_steps(result, display, pairs, ranks, command, source, argv, env)
    return result


def _coverage(first: _Run, compared: dict[str, int], stderr: bool) -> list[str]:
    from . import _coverage

    left = sum(n for n, _ in _stderr(first)[1].values()) if stderr else 0
    return _coverage.lines(first, compared["stdout lines"], (compared["stderr lines"], left) if stderr else None)


def _threads_differ(result: Draft[CheckResult]) -> bool:
    """Whether the runs' thread settings differed (an environment difference about
    threads, or a run under --vary threads=...)."""
    return any("thread" in str(d.get("key", "")).lower() for d in result.environment_diffs) or any(
        "thread" in k.lower() for r in result.runs for k in r.settings
    )


_HASH_SEED_STEP = "fix the hash seed: PYTHONHASHSEED=0 python ..., or fwd9m run --seed 0 ..."


def _finding_key(f: Difference) -> str:
    """Where a finding is (``state:globals.perm``, ``stdout:stdout``), whatever its size."""
    return f"{f.source}:{f.diff.path if f.diff else f.summary.split(':', 1)[0]}"


def _settle_hash_seed(
    result: Draft[CheckResult],
    outcome: Outcome,
    moved: set[str],
    source: str | None,
    argv: list[str] | None = None,
    env: dict[str, str] | None = None,
) -> None:
    """Turn the hash-seed suspicion into the conclusion of the controlled experiment
    (:func:`fwd9m._hashseed.experiment`, the policy ``fwd9m debug`` uses too). ``moved``:
    where (:func:`_finding_key`) the first run with the seed that differed differs from
    the first run with seed 0."""
    result.causes = [c for c in result.causes if not c.startswith("PYTHONHASHSEED differed")]
    if outcome.verdict == INCOMPLETE:
        result.notes.append(outcome.message())
        return
    device = "gpu" if (result.environment or {}).get("gpus") else "cpu"
    if outcome.hash_order:
        found = {_finding_key(f) for f in result.findings}
        where = (
            "in the same places as the first runs"
            if moved & found
            else "though in other places than those found first (hash order moves values around)"
        )
        result.causes.insert(0, f"{outcome.message()} The seeds' results differ {where}.")
        # the hash seed explains it: not "different hardware or software between runs"
        result.catalog = [h for h in result.catalog if h.get("id") != "python.environment-differences"]
        return
    result.next_steps = [s for s in result.next_steps if s != _HASH_SEED_STEP]
    result.catalog = _catalog_hints(
        result.environment,
        device,
        python=False,
        source=source,
        threads_differ=_threads_differ(result),
        argv=argv,
        env=env,
    )
    if outcome.verdict == RULED_OUT:
        result.notes.append(outcome.message())
        return
    result.causes.insert(0, outcome.message())
    runs = len([r for r in result.runs if not r.settings])
    result.next_steps.insert(0, f"see how often it differs: fwd9m check --runs {max(4, 2 * runs)} {result.target}")


def _same_bytes_reordered(a: Path, b: Path, limit: int = 1 << 24) -> bool:
    """True when two files hold the same bytes in a different order (concurrent writers)."""
    import collections

    try:
        if a.stat().st_size != b.stat().st_size or a.stat().st_size > limit:
            return False
        da, db = a.read_bytes(), b.read_bytes()
    except OSError:
        return False
    return da != db and collections.Counter(da) == collections.Counter(db)


def _multi_rank(*runs: _Run) -> bool:
    """Whether several ranks of a launcher ran (so several processes shared stdout)."""
    return any(len(r.seen_ranks | {int(k.split()[1]) for k in r.ranks}) > 1 for r in runs)


#: a rank prefix at the start of a line: torchrun's ``--tee`` (``[default0]:``), Open
#: MPI's ``--tag-output`` (``[1,0]<stdout>:``), horovodrun (``[0]<stdout>:``), and the
#: usual ``[rank 0]`` / ``rank 0:`` of scripts
_RANK_PREFIX = re.compile(r"^\s*(\[[A-Za-z_ ]*\d+(?:,\d+)*\]|rank\s*\d+\b)", re.IGNORECASE)
#: without a launcher, only a prefix that names a rank (``[rank 0]``, ``rank 0:``): a
#: script's own ``[epoch 3]`` or ``[batch 17]`` names no process, and its lines' order
#: (the data order a shuffle chose) is no scheduler's choice
_SPAWN_RANK_PREFIX = re.compile(r"^\s*(\[\s*rank\s*\d+\s*\]|rank\s*\d+\b)", re.IGNORECASE)


def _interleaved_only(
    a: _Run, b: _Run, limit: int = 1 << 24, launched: bool = True, strict: bool = False
) -> str | None:
    """How two runs' shared stdout agree once the ranks' interleaving is set aside, or
    None when they do not. When each rank's output was captured on its own (and is
    compared on its own), lines with a rank prefix in the shared stream are torchrun's
    ``--tee`` copies of it and are set aside; the other lines are compared as a multiset.
    Otherwise: rank by rank in order when the lines carry a rank prefix, else as a
    multiset of lines (an order change within one rank is then not seen, as the lines
    cannot be told apart by rank).

    Without a launcher (``launched`` False: ranks the script starts itself, with
    ``torch.multiprocessing.spawn``, whose rank only ``init_process_group`` learns):
    only rank by rank, when lines of two ranks or more carry a rank prefix, and the
    lines without one in order. Safe: every line is compared, in order within its rank;
    only the order between processes writing to one pipe, which the scheduler decides,
    is set aside. With ``strict``, lines are compared with nothing masked, as
    :func:`~fwd9m.compare.compare_text` compared them."""
    try:
        if max(a.stdout.stat().st_size, b.stdout.stat().st_size) > limit:
            return None
        ra, rb = _raw_lines(a.stdout), _raw_lines(b.stdout)
    except OSError:
        return None
    prefix = _RANK_PREFIX if launched else _SPAWN_RANK_PREFIX

    def normalized(run: _Run, lines: list[str]) -> list[str]:
        return [normalize_line(line, run.replacements, strict) for line in lines]

    how = _interleaved_lines(a, b, normalized(a, ra), normalized(b, rb), launched, prefix, "")
    if how is not None:
        return how
    sa, sb = _split_merged(ra, prefix), _split_merged(rb, prefix)
    if sa is None and sb is None:
        return None
    # blank lines left out of both runs: a merge leaves one where the cut line's newline went
    sa, sb = [x for x in sa or ra if x.strip()], [x for x in sb or rb if x.strip()]
    return _interleaved_lines(
        a,
        b,
        normalized(a, sa),
        normalized(b, sb),
        launched,
        prefix,
        "; lines that two ranks wrote into one, as unbuffered output does, split at each prefix, "
        "and blank lines set aside",
    )


def _interleaved_lines(
    a: _Run, b: _Run, la: list[str], lb: list[str], launched: bool, prefix: re.Pattern[str], also: str
) -> str | None:
    """:func:`_interleaved_only` on the runs' normalised lines; ``also`` ends the note."""
    import collections

    by_rank = "compared rank by rank, by the rank prefix of each line" + also
    ga, gb = _by_rank_prefix(la, prefix), _by_rank_prefix(lb, prefix)
    if not launched:
        return by_rank if len(ga.keys() - {""}) > 1 and ga == gb else None
    if a.ranks and b.ranks:
        if collections.Counter(ga.pop("", [])) != collections.Counter(gb.pop("", [])):
            return None
        return (
            "its lines with a rank prefix are copies of each rank's own output, compared on their own; "
            "the others compared as a multiset of lines" + also
        )
    if collections.Counter(la) != collections.Counter(lb):
        return None
    if len(ga) > 1:
        return by_rank if ga == gb else None
    return "compared as a multiset of lines, as they carry no rank prefix" + also


def _split_merged(lines: list[str], prefix: re.Pattern[str]) -> list[str] | None:
    """One run's raw lines with those two ranks wrote into one split again, or None when
    it shows no such merge. Unbuffered ``print`` writes its text and its newline in two
    writes, so two ranks' lines can land as ``rank 0 ...rank 1 ...`` followed by a blank
    line. A line is cut where a later prefix of the same form as its own start begins
    (``rank 1`` after ``rank 0``; never ``[3]`` after ``[default0]:``), and only when the
    run holds at least as many blank lines as cuts: every merge leaves one, so a run whose
    lines only mention another rank (``rank 0 waits for rank 1``) is left as it is."""
    anywhere = re.compile(prefix.pattern.removeprefix("^\\s*"), prefix.flags)

    def cuts(line: str) -> list[int]:
        m = prefix.match(line)
        if not m:
            return []
        form = re.sub(r"\d+", "#", m.group(1))
        return [h.start() for h in anywhere.finditer(line, m.end()) if re.sub(r"\d+", "#", h.group(1)) == form]

    where = [cuts(line) for line in lines]
    n = sum(map(len, where))
    if not n or n > sum(not line.strip() for line in lines):
        return None
    out: list[str] = []
    for line, at in zip(lines, where):
        starts = [0, *at]
        out += [line[i:j] for i, j in zip(starts, [*starts[1:], len(line)])]
    return out


def _raw_lines(path: Path) -> list[str]:
    with open(path, encoding="utf-8", errors="replace", newline="\n") as f:
        return list(f)


def _by_rank_prefix(lines: list[str], prefix: re.Pattern[str] = _RANK_PREFIX) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in lines:
        m = prefix.match(line)
        out.setdefault(re.sub(r"\s+", "", m.group(1)).lower() if m else "", []).append(line)
    return out


def _compare_rank_outputs(
    a: _Run, b: _Run, label: str, findings: list[Difference], strict: bool = False, masked: IgnoredValues | None = None
) -> None:
    """Rank r's own stdout in run ``b`` against rank r's in run ``a`` (timing values masked
    into ``masked`` unless ``strict``)."""
    for key in sorted(set(a.ranks) | set(b.ranks), key=lambda k: int(k.split()[1])):
        pa, pb = a.ranks.get(key, {}).get("stdout"), b.ranks.get(key, {}).get("stdout")
        if pa is None or pb is None:
            findings.append(
                Difference("stdout", label, f"{key} stdout: captured in {a.info.label if pb is None else label} only")
            )
            continue
        d = compare_text(f"{key} stdout", pa, pb, a.replacements, b.replacements, strict=strict, ignored=masked)
        if d:
            findings.append(_text_finding("stdout", label, d, a.info.label))


def _nothing_compared(display: str, done: list[_Run]) -> str:
    """Why there is no verdict: what was looked at, and how to give the check something."""
    first = done[0]
    watched = (
        "the run's own (empty) directory"
        if not first.watched
        else "your directory (through the run's links) and the run's own directory"
        if first.watch_complete
        else f"the run's own directory and the first {workdir.WATCH_LIMIT:,} entries of your directory "
        f"(the watch stopped there, so files written beyond them were not seen)"
    )
    return (
        f"nothing to compare, so there is no verdict: in {len(done)} runs of {display}, standard output "
        f"was empty, no file was written in {watched}, and no model, variable or array was held at exit "
        f"({len(first.captures)} Python process(es) captured). Make the script print or save the result "
        f"you care about (print(loss), torch.save(model.state_dict(), 'model.pt'), np.save('preds.npy', "
        f"preds)), or return it from a function and use fwd9m.check(fn)"
    )


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in (text or "<empty>").splitlines()[-15:])


def _count_lines(path: Path) -> int:
    """Lines, the last one counted also without its newline (output that ends without
    one was printed all the same)."""
    n, last = 0, b"\n"
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            n += block.count(b"\n")
            last = block[-1:]
    return n + (last != b"\n")
