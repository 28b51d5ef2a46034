"""Is this reproducible? Run it several times and compare, bit for bit.

Two entry points:

- :func:`check` runs a Python function several times in this process, each time from
  the same seeded state, and compares what it returns (:mod:`fwd9m.compare`).
- :func:`check_script` runs a script, module or command several times, each in a fresh
  interpreter, and compares what it prints, the files it writes and the final state of
  its models and variables (captured by :mod:`fwd9m._capture`).

Both return a :class:`CheckResult`: truthy when every run agreed, with a ranked list of
:class:`Finding` s, a text report (:meth:`CheckResult.report`) and a JSON form
(:meth:`CheckResult.to_dict`).

Where a run works: by default each run's working directory is a fresh, empty temporary
directory holding one symbolic link per entry of the directory ``fwd9m check`` was
started from. Relative paths to data therefore resolve as they would for
``python script.py``, while files the script creates land in the run's own directory,
so runs cannot see each other's outputs (a checkpoint written by run 1 cannot be
resumed by run 2) and the user's directory is left alone. Files written *into* an
existing subdirectory (or over an existing file) go through the link to the real
directory, as ``python script.py`` would write them: fwd9m watches up to
:data:`WATCH_LIMIT` entries of that directory, copies what each run changed there
(files up to :data:`COPY_LIMIT` bytes, not source files) and compares the copies of
files that changed during both runs (a file changed during one run only was edited by
someone else), and the report notes it, since a later run could then see an earlier
run's files. ``cwd="empty"`` starts each run
in an empty directory instead.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from . import _capture
from ._log import logger
from .compare import (STRUCTURED_SUFFIXES, TEXT_LIMIT, TEXT_SUFFIXES, LeafDiff, Tensor, _Opaque, compare_flat,
                      compare_text, file_digest, flatten, read_structured)
from .errors import FileFormatError, NondeterminismError, RunError

__all__ = ["check", "assert_reproducible", "check_script", "CheckResult", "Finding", "RunInfo",
           "Variant", "parse_vary"]

SCHEMA = "fwd9m.check"
SCHEMA_VERSION = 1
#: bytes of each run's stderr kept for the report
TAIL_BYTES = 3000
#: seconds between "still running" progress messages
HEARTBEAT_S = 30.0
#: seconds between SIGTERM and SIGKILL when a run times out
KILL_GRACE_S = 5.0
#: files never compared: bytecode caches, and TensorBoard event files (named and
#: stamped with wall-clock time, host and pid)
IGNORED_PARTS = ("__pycache__", ".ipynb_checkpoints")
IGNORED_PREFIXES = ("events.out.tfevents.",)

# ranking of finding sources: a crash outranks a tensor, a tensor outranks a printed line
_SOURCE_ORDER = {"exit": 0, "timeout": 0, "value": 2, "state": 2, "file": 3,
                 "stdout": 4}


@dataclass
class Finding:
    """One difference between a run and the first run.

    ``source``: ``"exit"`` (exit status or exception), ``"timeout"``, ``"value"`` (what
    a checked function returned), ``"state"`` (captured final state), ``"file"``,
    or ``"stdout"``. ``run``: label of the run compared with run 1.
    ``diff``: the leaf-level difference where there is one.
    """

    source: str
    run: str
    summary: str
    diff: LeafDiff | None = None
    detail: str | None = None

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
        return {"source": self.source, "run": self.run, "summary": self.summary,
                "diff": self.diff.to_dict() if self.diff else None, "detail": self.detail}


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


@dataclass
class CheckResult:
    """The outcome of :func:`check` or :func:`check_script`. ``bool(result)`` is True
    when every run agreed bit for bit."""

    target: str
    runs: list[RunInfo]
    findings: list[Finding]
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

    @property
    def reproducible(self) -> bool:
        return not self.findings

    def __bool__(self) -> bool:
        return self.reproducible

    def ranked(self) -> list[Finding]:
        """Findings, most important first: crashes, then the hash seed, then tensors by
        largest absolute difference, then files, then printed lines."""
        return sorted(self.findings, key=lambda f: (_SOURCE_ORDER.get(f.source, 9), -f.magnitude))

    def verdict(self) -> str:
        n = len(self.runs)
        what = ", ".join(f"{v} {k[:-1] if v == 1 and k.endswith('s') else k}"
                         for k, v in self.compared.items() if v) or "nothing to compare"
        if self.reproducible:
            return f"REPRODUCIBLE: {n} runs of {self.target} agree bit for bit ({what})."
        runs = sorted({f.run for f in self.findings}, key=lambda r: [x.label for x in self.runs].index(r)
                      if r in [x.label for x in self.runs] else 99)
        varied = {r.label: r for r in self.runs if r.settings}
        if varied and all(r in varied for r in runs):
            broken = ", ".join(", ".join(f"{k}={v}" for k, v in varied[r].settings.items()) for r in runs)
            return (f"NOT REPRODUCIBLE ACROSS SETTINGS: runs of {self.target} under the same settings agree, "
                    f"but {broken} changes the result ({len(self.findings)} difference(s); compared {what}).")
        return (f"NOT REPRODUCIBLE: {len(self.findings)} difference(s) between runs of {self.target} "
                f"({', '.join(runs)} vs run 1; compared {what}).")

    def report(self, max_findings: int = 20) -> str:
        """The human report: verdict, ranked differences, runs, environment, next steps."""
        lines = [self.verdict()]
        ranked = self.ranked()
        if ranked:
            lines += ["", "What differs (most important first):"]
            for i, f in enumerate(ranked[:max_findings], 1):
                lines.append(f"{i:>3}. [{f.source}, {f.run}] {f.summary}")
                if f.detail:
                    lines += [f"       {line}" for line in f.detail.splitlines()]
            if len(ranked) > max_findings:
                lines.append(f"     ... and {len(ranked) - max_findings} more (--format json lists all)")
        if self.causes:
            lines += ["", "Possible causes:"]
            lines += [f"  - {c}" for c in self.causes]
        if self.runs:
            lines += ["", "Runs:"]
            for r in self.runs:
                status = ("timed out" if r.timed_out else f"exit {r.returncode}" if r.returncode is not None
                          else r.error or "not run")
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
            lines += [f"  {d['run']}: {d['key']}: {d['a']!r} -> {d['b']!r} ({d['reason']})"
                      for d in self.environment_diffs[:10]]
        if self.next_steps or self.catalog:
            lines += ["", "Next steps:"]
            lines += [f"  - {s}" for s in self.next_steps]
            for e in self.catalog:
                lines.append(f"  - catalog {e['id']}: {e['title']}")
                if e.get("fix"):
                    lines += [f"      {line}" for line in e["fix"].splitlines()[:3]]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, "target": self.target,
                "reproducible": self.reproducible, "verdict": self.verdict(),
                "findings": [f.to_dict() for f in self.ranked()], "compared": self.compared,
                "runs": [r.to_dict() for r in self.runs], "notes": self.notes,
                "environment": self.environment, "environment_diffs": self.environment_diffs,
                "causes": self.causes, "next_steps": self.next_steps, "catalog": self.catalog}

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, default=str)


def _environment_summary(fp: dict[str, Any]) -> list[str]:
    py = fp.get("python", {})
    cpu = fp.get("cpu", {})
    out = [f"python {py.get('version')} on {fp.get('os', {}).get('system')} "
           f"{fp.get('os', {}).get('release')}; cpu {cpu.get('model')} "
           f"({cpu.get('usable_cores')} cores usable)"]
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
    out.append("set: " + (" ".join(f"{k}={v}" for k, v in {**env, **thr}.items()) or "no determinism or "
                          "thread variables (PYTHONHASHSEED unset)"))
    return out


# --------------------------------------------------------------------------- seeding

def _seed_all(seed: int) -> None:
    """Seed every RNG this process uses: ``fwd9m.seed_everything`` where it exists,
    else Python, NumPy and each framework already imported."""
    try:
        from .seed import seed_everything
    except ImportError:
        seed_everything = None
    if seed_everything is not None:
        seed_everything(seed)
        return
    import random

    random.seed(seed)
    mods = sys.modules
    if "numpy" in mods:
        mods["numpy"].random.seed(seed)
    if "torch" in mods:
        mods["torch"].manual_seed(seed)
    if "tensorflow" in mods:
        mods["tensorflow"].random.set_seed(seed)
    if "keras" in mods and hasattr(mods["keras"], "utils"):
        mods["keras"].utils.set_random_seed(seed)


# --------------------------------------------------------------------------- in-process

def _snapshot(value: Any) -> dict[str, Any]:
    """Flatten and copy, so a later run that mutates shared tensors cannot change it."""
    flat = flatten(value)
    return {k: Tensor(v.array.copy(), v.dtype) if isinstance(v, Tensor) else v for k, v in flat.items()}


def check(fn: Callable[..., Any], *args: Any, runs: int = 2, seed: int | None = 0,
          **kwargs: Any) -> CheckResult:
    """Call ``fn(*args, **kwargs)`` ``runs`` times and compare the results bit for bit.

    Before each call every RNG is seeded with ``seed`` (``fwd9m.seed_everything`` when
    available; Python, NumPy, and the imported frameworks otherwise); ``seed=None``
    seeds nothing. The result may be any nesting of dicts, lists, tuples and
    dataclasses holding arrays, tensors, variables, Keras models (weights and optimizer
    state), torch modules and optimizers, JAX arrays and Python numbers
    (see :mod:`fwd9m.compare`).

    Returns:
        A :class:`CheckResult`, truthy when every call returned the same bits. A call
        that raises where the first did not is a finding.

    Raises:
        ValueError: ``runs < 2``.
        RunError: the first call raised (the function cannot be checked); the
            exception is chained.
    """
    if runs < 2:
        raise ValueError(f"runs must be at least 2, got {runs}")
    name = getattr(fn, "__qualname__", None) or repr(fn)
    infos: list[RunInfo] = []
    findings: list[Finding] = []
    first: dict[str, Any] | None = None
    for i in range(runs):
        label = f"run {i + 1}"
        info = RunInfo(label, [name])
        infos.append(info)
        if seed is not None:
            _seed_all(seed)
        t0 = time.perf_counter()
        try:
            value = fn(*args, **kwargs)
        except Exception as exc:
            info.seconds = time.perf_counter() - t0
            info.error = f"{type(exc).__name__}: {exc}"
            if first is None:
                raise RunError(f"{name} raised {info.error} in run 1, so its reproducibility "
                               f"cannot be checked; fix the error first") from exc
            findings.append(Finding("exit", label, f"raised {info.error}; run 1 returned normally"))
            continue
        info.seconds = time.perf_counter() - t0
        info.returncode = 0
        flat = _snapshot(value)
        if first is None:
            first = flat
            continue
        findings += [Finding("value", label, d.summary(), d) for d in compare_flat(first, flat)]
        del flat, value
    result = CheckResult(name, infos, findings, {"values": len(first or {})})
    opaque = [f"{k}: {v!r}" for k, v in (first or {}).items() if isinstance(v, _Opaque)]
    if opaque:  # an agreement on these says little
        result.notes.append(f"{len(opaque)} returned value(s) fwd9m cannot look into were compared by type "
                            f"only: {', '.join(opaque[:3])}{', ...' if len(opaque) > 3 else ''}; return "
                            f"arrays, tensors, numbers or models instead")
    elif first == {}:
        result.notes.append(f"{name} returned nothing fwd9m can compare (an empty container, or an "
                            f"object without data attributes such as a function); return what it computes")
    if findings:
        result.next_steps.append("localise the first op that differs: "
                                 "fwd9m.debug.localize(fn, *args) (see `fwd9m debug --help`)")
        result.catalog = _catalog_hints(None, device=None)
    return result


def assert_reproducible(fn: Callable[..., Any], *args: Any, runs: int = 2, seed: int | None = 0,
                        **kwargs: Any) -> CheckResult:
    """:func:`check`, raising when the runs differ.

    Raises:
        NondeterminismError: the runs differ; its message is the full report.
        RunError: the first call raised.
    """
    result = check(fn, *args, runs=runs, seed=seed, **kwargs)
    if not result:
        raise NondeterminismError(result.report())
    return result


# --------------------------------------------------------------------------- scripts

@dataclass(frozen=True)
class Variant:
    """One changed setting for a ``--vary`` run: an environment variable, the shorthand
    ``threads`` (``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``, ``OPENBLAS_NUM_THREADS`` and
    TensorFlow's ``TF_NUM_INTRAOP_THREADS``, read at start-up by
    tensorflow/core/common_runtime/process_util.cc,
    https://github.com/tensorflow/tensorflow/blob/master/tensorflow/core/common_runtime/process_util.cc;
    the name is present in the installed TF 2.21 ``libtensorflow_framework.so.2``), or a
    script argument (a name starting with ``-``)."""

    name: str
    value: str

    @property
    def label(self) -> str:
        return f"{self.name}={self.value}"

    def env(self) -> dict[str, str]:
        if self.name == "threads":
            return {k: self.value for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                            "TF_NUM_INTRAOP_THREADS")}
        if self.name.startswith("-"):
            return {}
        return {self.name: self.value}

    def argv(self, args: Sequence[str]) -> list[str]:
        """``args`` with this option set to this value (replaced, or appended)."""
        if not self.name.startswith("-"):
            return list(args)
        out, i, done = [], 0, False
        args = list(args)
        while i < len(args):
            a = args[i]
            if a == self.name and i + 1 < len(args):
                out += [a, self.value]
                i, done = i + 2, True
                continue
            if a.startswith(self.name + "="):
                out.append(f"{self.name}={self.value}")
                i, done = i + 1, True
                continue
            out.append(a)
            i += 1
        return out if done else out + [self.name, self.value]


def parse_vary(specs: Sequence[str]) -> list[Variant]:
    """``["OMP_NUM_THREADS=1,4", "--batch-size=32,64"]`` -> one :class:`Variant` per value.

    Raises:
        ConfigurationError: a spec without ``=`` or without values.
    """
    from .errors import ConfigurationError

    out = []
    for spec in specs:
        name, sep, values = spec.partition("=")
        vals = [v for v in values.split(",") if v != ""]
        if not sep or not name or not vals:
            raise ConfigurationError(f"--vary {spec!r}: expected NAME=V1,V2 (an environment variable, "
                                     f"'threads', or a script option such as --vary=--batch-size=32,64)")
        if name == "threads" and not all(v.isdigit() and int(v) > 0 for v in vals):
            raise ConfigurationError(f"--vary {spec!r}: thread counts must be positive integers, "
                                     f"for example --vary threads=1,4")
        out += [Variant(name, v) for v in vals]
    return out


def _tail(path: Path, n: int = TAIL_BYTES) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - n))
            data = f.read()
    except OSError:
        return ""
    text = data.decode("utf-8", "replace")
    if size > n:
        text = "..." + text.split("\n", 1)[-1]
    return text.strip()


def _kill_group(proc: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            proc.wait(timeout=wait)
            if sig == signal.SIGKILL:
                return
        except subprocess.TimeoutExpired:
            continue
        # the leader is gone; children may linger in the group
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        return


#: entries of the user's directory watched for writes through the run's links
WATCH_LIMIT = 5000
#: files (bytes) written through a link that are copied after the run to be compared
COPY_LIMIT = 1 << 30
#: changed files never taken for outputs (someone editing the project during the check)
SOURCE_SUFFIXES = (".py", ".pyi", ".ipynb", ".c", ".cc", ".cpp", ".h", ".toml", ".cfg", ".md", ".rst")


def _snapshot_tree(source: Path, limit: int = WATCH_LIMIT, own: Path | None = None) -> dict[str, tuple[int, int]]:
    """``{relative path: (size, mtime_ns)}`` of up to ``limit`` entries under ``source``
    (directories included: their mtime changes when a file is created in them; hidden
    entries, which tools such as git and editors rewrite on their own, excluded; so is
    ``own``, the check's own temporary directory when it lies under ``source``)."""
    out: dict[str, tuple[int, int]] = {}
    own_path = str(own) if own is not None else None
    for root, dirs, files in os.walk(source):  # hidden entries (.git, .venv, editor state) skipped
        dirs[:] = sorted(d for d in dirs if d not in IGNORED_PARTS and not d.startswith(".")
                         and os.path.join(root, d) != own_path)
        for name in [*dirs, *(f for f in files if not f.startswith("."))]:
            if len(out) >= limit:
                return out
            p = os.path.join(root, name)
            try:
                st = os.stat(p)
            except OSError:
                continue
            out[os.path.relpath(p, source)] = (st.st_size, st.st_mtime_ns)
    return out


def _prepare_cwd(cwd: Path, source: Path, mode: str) -> dict[str, tuple[int, int]]:
    """Create the run's working directory; with mode ``link``, one symlink per entry of
    ``source``. Returns a snapshot (:func:`_snapshot_tree`) of ``source`` to detect
    writes that went through the links."""
    cwd.mkdir(parents=True)
    if mode != "link":
        return {}
    try:
        entries = list(os.scandir(source))
    except OSError:
        return {}
    own = cwd.parent.parent  # the check's temporary root (under source when run from TMPDIR)
    for e in entries:
        if os.path.abspath(e.path) == str(own):
            continue
        try:
            os.symlink(e.path, cwd / e.name)
        except OSError:
            continue
    return _snapshot_tree(source, own=own)


def _collect_files(cwd: Path) -> dict[str, Path]:
    """Regular files the run created under ``cwd`` (links into the user's directory
    are not followed), by relative path."""
    out: dict[str, Path] = {}
    for root, dirs, files in os.walk(cwd, followlinks=False):
        dirs[:] = [d for d in dirs if d not in IGNORED_PARTS and not os.path.islink(os.path.join(root, d))]
        for name in files:
            p = Path(root, name)
            if p.is_symlink() or not p.is_file() or name.startswith(IGNORED_PREFIXES) \
                    or name.endswith((".pyc", ".tmp")):  # not a FIFO or socket: reading it blocks
                continue
            out[p.relative_to(cwd).as_posix()] = p
    return dict(sorted(out.items()))


def _group_files(files: dict[str, Path]) -> dict[str, tuple[str, Path]]:
    """``{logical name: (kind, path)}``: a TensorFlow checkpoint (``X.index`` and
    ``X.data-*``) becomes one entry of kind ``tf``, its ``checkpoint`` state file (which
    holds timestamps) is dropped; other files have kind ``structured``, ``text`` or
    ``bytes``."""
    out: dict[str, tuple[str, Path]] = {}
    prefixes = {rel[:-len(".index")] for rel in files if rel.endswith(".index")
                and any(o.startswith(rel[:-len(".index")] + ".data-") for o in files)}
    tf_dirs = {str(Path(p).parent) for p in prefixes}
    for rel, path in files.items():
        base = rel[:-len(".index")] if rel.endswith(".index") else rel.split(".data-")[0]
        if base in prefixes:
            if rel.endswith(".index"):
                out[base] = ("tf", path.with_name(Path(base).name))
            continue
        if Path(rel).name == "checkpoint" and str(Path(rel).parent) in tf_dirs:
            continue
        suffix = path.suffix.lower()
        if suffix in STRUCTURED_SUFFIXES or (path.name == "fingerprint.pb"
                                             and (path.parent / "saved_model.pb").exists()):
            out[rel] = ("structured", path)
        elif suffix in TEXT_SUFFIXES and path.stat().st_size <= TEXT_LIMIT:
            out[rel] = ("text", path)
        else:
            out[rel] = ("bytes", path)
    return out


@dataclass
class _Run:
    info: RunInfo
    root: Path
    cwd: Path
    stdout: Path
    captures: list[dict[str, Any]] = field(default_factory=list)
    files: dict[str, tuple[str, Path]] = field(default_factory=dict)
    touched: list[str] = field(default_factory=list)
    through: set[str] = field(default_factory=set)  #: files copied from the user's directory

    @property
    def replacements(self) -> tuple[tuple[str, str], ...]:
        return ((str(self.cwd), "<cwd>"), (os.path.realpath(self.cwd), "<cwd>"))


def _launch_command(target: str, args: Sequence[str], mode: str, seed: int, python: str) -> list[str]:
    if mode == "command":
        exe = shutil.which(target)
        if exe is None:
            raise RunError(f"command not found: {target}")
        return [target, *args]
    module = mode == "module"
    if mode.startswith("enable"):
        module = mode == "enable-module"
        return [python, "-m", "fwd9m", "run", "--seed", str(seed), *(["-m"] if module else []), target, *args]
    return [python, "-m", "fwd9m._capture", *(["-m"] if module else []), target, *args]


def check_script(target: str, args: Sequence[str] = (), *, module: bool = False, command: bool = False,
                 runs: int = 2, seed: int = 0, timeout: float | None = None,
                 env: dict[str, str] | None = None, enable: bool = False,
                 vary: Sequence[Variant] = (), cwd: str = "link", keep: bool = False,
                 progress: Callable[[str], None] | None = None,
                 python: str | None = None, hashseed_check: bool = True) -> CheckResult:
    """Run ``target`` ``runs`` times (plus once per ``vary`` setting), each in a fresh
    interpreter and its own working directory, and compare what the runs print, write
    and hold at exit.

    Args:
        target: a script path; a module name when ``module``; an executable when
            ``command`` (``args`` are its arguments: ``-- torchrun ... train.py``).
        runs: number of runs under the same settings (>= 2).
        seed: with ``enable``, passed to ``fwd9m run --seed``; otherwise unused (the
            script runs exactly as written).
        timeout: seconds per run; the whole process group is killed after it.
        env: extra environment variables for every run.
        enable: launch each run as ``python -m fwd9m run --seed SEED target args``.
        vary: one extra run per :class:`Variant`, compared with run 1.
        cwd: ``"link"`` (default; see the module docstring) or ``"empty"``.
        keep: keep the runs' directories (their path is in the notes).
        progress: called with one-line progress messages (which run, how long).
        python: interpreter for the runs (default: this one).
        hashseed_check: when the runs differ and so did their string-hash seed
            (PYTHONHASHSEED unset), run twice more with ``PYTHONHASHSEED=0`` to tell
            whether hash order is the cause, and report it as confirmed or ruled out.

    Returns:
        A :class:`CheckResult`. The runs' standard input is closed.

    Raises:
        RunError: the script or module does not exist, or every run failed the same
            way (crashed or timed out), so there is nothing to compare.
        ConfigurationError: ``runs < 2``.
    """
    from ._launch import resolve_target
    from .errors import ConfigurationError

    if runs < 2:
        raise ConfigurationError(f"--runs must be at least 2, got {runs}")
    say = progress or (lambda msg: logger.info(msg))
    python = python or sys.executable
    invocation = Path.cwd()
    display = " ".join([*(["-m"] if module else ["--"] if command else []), target, *args])
    source = None
    if command:
        mode = "command"
    elif module:  # found as `python -m` would: the working directory first on sys.path
        import importlib.util

        sys.path.insert(0, str(invocation))
        try:
            resolve_target(target, module=True)
            source = getattr(importlib.util.find_spec(target), "origin", None)
        except (ImportError, ValueError):
            source = None
        finally:
            sys.path.remove(str(invocation))
    else:
        target = source = str(Path(resolve_target(target)).resolve())
    if not command:
        mode = ("enable-module" if module else "enable-script") if enable else ("module" if module else "script")
    base_cmd = _launch_command(target, args, mode, seed, python)
    plan: list[tuple[str, list[str], dict[str, str], dict[str, str]]] = []
    for i in range(runs):
        plan.append((f"run {i + 1}", base_cmd, {}, {}))
    for v in vary:
        cmd = base_cmd[:len(base_cmd) - len(args)] + v.argv(args)
        plan.append((f"run with {v.label}", cmd, v.env(), {v.name: v.value}))

    root = Path(tempfile.mkdtemp(prefix="fwd9m-check-"))
    # a command (or `fwd9m run`) starts other interpreters: capture in each through the
    # start-up hook that fwd9m run uses too
    site = mode not in ("script", "module")
    done: list[_Run] = []
    try:
        for k, (label, cmd, extra_env, settings) in enumerate(plan):
            run = _Run(RunInfo(label, list(cmd), settings), root / f"run{k + 1}", root / f"run{k + 1}" / "cwd",
                       root / f"run{k + 1}" / "stdout")
            _execute(run, invocation, cwd, {**(env or {}), **extra_env}, site, timeout,
                     f"{k + 1}/{len(plan)}", say)
            done.append(run)
        if timeout is not None and all(r.info.timed_out for r in done):
            raise RunError(f"every run of {display} timed out (--timeout {timeout:g} s); raise --timeout "
                           f"or check the script for a hang (the whole process group was killed)")
        result = _compare_runs(display, done, source, command)
        result.notes[:0] = _run_notes(done)
        if hashseed_check and result.hash_seed_suspect:
            say("runs differ and so did their string-hash seed: two more runs with PYTHONHASHSEED=0 "
                "tell whether hash order is the cause")
            extra = []
            for k in range(2):
                d = root / f"hashseed{k + 1}"
                run = _Run(RunInfo(f"PYTHONHASHSEED=0 run {k + 1}", list(base_cmd), {"PYTHONHASHSEED": "0"}),
                           d, d / "cwd", d / "stdout")
                _execute(run, invocation, cwd, {**(env or {}), "PYTHONHASHSEED": "0"}, site, timeout,
                         f"{k + 1}/2", say)
                extra.append(run)
            try:
                agree = bool(_compare_runs(display, extra, source, command))
            except RunError:
                agree = None
            _settle_hash_seed(result, agree, source)
        if keep:
            result.notes.append(f"run directories kept in {root}")
        return result
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


def _execute(run: _Run, invocation: Path, cwd_mode: str, extra_env: dict[str, str], site: bool,
             timeout: float | None, which: str, say: Callable[[str], None]) -> None:
    info = run.info
    linked = _prepare_cwd(run.cwd, invocation, cwd_mode)
    capdir = run.root / "capture"
    capdir.mkdir()
    env = dict(os.environ)
    env.update(extra_env)
    env[_capture.ENV_DIR] = str(capdir)
    if site:
        from ._bootstrap import bootstrap_dir

        env[_capture.ENV_SITE] = "1"
        parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        env["PYTHONPATH"] = os.pathsep.join([bootstrap_dir(), *(p for p in parts if p != bootstrap_dir())])
    stderr_path = run.root / "stderr"
    say(f"{info.label} ({which}): starting: {' '.join(info.command)}")
    t0 = time.monotonic()
    with open(run.stdout, "wb") as out, open(stderr_path, "wb") as err:
        try:
            proc = subprocess.Popen(info.command, cwd=run.cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=err, start_new_session=True)
        except OSError as exc:
            info.error = f"could not start: {exc}"
            return
        try:
            while True:
                left = None if timeout is None else timeout - (time.monotonic() - t0)
                if left is not None and left <= 0:
                    info.timed_out = True
                    _kill_group(proc)
                    break
                try:
                    proc.wait(timeout=HEARTBEAT_S if left is None else min(left, HEARTBEAT_S))
                    break
                except subprocess.TimeoutExpired:
                    say(f"{info.label}: still running ({time.monotonic() - t0:.0f} s)")
        except BaseException:  # Ctrl-C: leave nothing running
            _kill_group(proc)
            raise
        try:  # children the script left behind
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    info.seconds = time.monotonic() - t0
    info.returncode = None if info.timed_out else proc.returncode
    info.stdout_bytes = run.stdout.stat().st_size
    info.stderr_tail = _tail(stderr_path)
    status = "timed out" if info.timed_out else f"exit {proc.returncode}"
    say(f"{info.label}: {status} after {info.seconds:.1f} s")
    try:
        run.captures = _capture.read(capdir)
    except FileFormatError as exc:
        info.error = str(exc)
    info.captured = sum(len(c["flat"]) for c in run.captures)
    after = _snapshot_tree(invocation, own=run.root.parent) if linked else {}
    changed = [rel for rel, sig in after.items() if linked.get(rel) != sig
               and (rel in linked or len(linked) < WATCH_LIMIT)]
    run.touched = sorted({rel.split(os.sep)[0] for rel in changed})
    files = _collect_files(run.cwd)
    for rel in changed:  # written through a link into the user's directory: keep a copy
        src = invocation / rel
        if src.suffix in SOURCE_SUFFIXES or not src.is_file() or src.is_symlink() \
                or src.stat().st_size > COPY_LIMIT:
            continue
        dst = run.root / "through" / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
        files.setdefault(Path(rel).as_posix(), dst)
        run.through.add(Path(rel).as_posix())
    run.files = _group_files(dict(sorted(files.items())))


def _run_notes(done: list[_Run]) -> list[str]:
    notes = []
    touched = sorted({t for r in done for t in r.touched})
    if touched:
        notes.append(f"these entries of your directory changed while the runs went on: {', '.join(touched[:5])}. "
                     f"A script that writes into an existing directory or file writes through the run's link "
                     f"into yours: each run's files there were copied and compared, but a later run could "
                     f"see an earlier run's files (a checkpoint to resume from); --cwd empty avoids this")
    errors = sorted({f"{r.info.label}: {c['error']}" for r in done for c in r.captures if c.get("error")}
                    | {f"{r.info.label}: {leaf['path']}: {leaf['error']}" for r in done for c in r.captures
                       for leaf in c.get("leaves", ()) if leaf.get("error")}
                    | {f"{r.info.label}: {r.info.error}" for r in done if r.info.error})
    if errors:
        notes.append("the final state was only partly captured: " + "; ".join(errors[:3]))
    if done and not any(r.captures for r in done):
        notes.append("no final state was captured (the process was killed, called os._exit, or is not "
                     "Python); only printed output and files were compared")
    return notes


# --------------------------------------------------------------------------- comparing runs

def _state_groups(run: _Run) -> dict[str, dict[str, Any]]:
    """Captures with state, keyed by process: rank, or argv when several processes."""
    groups: dict[str, dict[str, Any]] = {}
    counts: dict[str, int] = {}
    for cap in run.captures:
        if not cap["flat"]:
            continue
        key = f"rank {cap['rank']}" if cap.get("rank") not in (None, "") else " ".join(
            Path(a).name if i == 0 else a for i, a in enumerate(cap.get("argv") or []))
        counts[key] = counts.get(key, 0) + 1
        groups[key if counts[key] == 1 else f"{key} #{counts[key]}"] = cap
    return groups


def _hash_probe(run: _Run) -> Any:
    caps = [c for c in run.captures if c["flat"]] or run.captures
    return caps[-1].get("hash_probe") if caps else None


def _compare_files(a: _Run, b: _Run, label: str, findings: list[Finding]) -> None:
    for name in sorted(set(a.files) | set(b.files)):
        if (name in a.through) != (name in b.through) and (name not in a.files or name not in b.files):
            continue  # changed in the user's directory during one run only: not the script's output
        if name not in b.files:
            findings.append(Finding("file", label, f"{name}: written by run 1 only"))
            continue
        if name not in a.files:
            findings.append(Finding("file", label, f"{name}: not written by run 1"))
            continue
        (kind, pa), (_, pb) = a.files[name], b.files[name]
        tf = kind == "tf"  # pa, pb: a checkpoint prefix, no file of its own
        if kind == "text":
            d = compare_text(name, pa, pb, a.replacements, b.replacements)
            if d:
                findings.append(Finding("file", label, _text_summary(d), d))
            continue
        if kind in ("tf", "structured"):
            try:
                fa = read_structured(pa, tf_checkpoint=kind == "tf")
                fb = read_structured(pb, tf_checkpoint=kind == "tf")
            except FileFormatError as exc:
                kind = "bytes"
                detail = f"{exc}; compared by content hash"
            else:
                for d in compare_flat(fa, fb):
                    d = dataclasses.replace(d, path=f"{name}:{d.path}" if d.path else name)
                    findings.append(Finding("file", label, d.summary(), d))
                continue
        else:
            detail = None
        (ha, sa), (hb, sb) = _content_digest(pa, tf), _content_digest(pb, tf)
        if ha != hb:
            d = LeafDiff(name, "content", "bytes", None, a=f"sha256 {ha[:12]} ({sa} bytes)",
                         b=f"sha256 {hb[:12]} ({sb} bytes)")
            findings.append(Finding("file", label, f"{name}: content differs ({d.a} vs {d.b})", d, detail))


def _content_digest(path: Path, tf: bool = False) -> tuple[str, int]:
    """SHA-256 and size of a file, or, for a TensorFlow checkpoint prefix (which is no
    file itself), of its ``.index`` and ``.data-*`` files together."""
    if not tf:
        return file_digest(path), path.stat().st_size
    import hashlib

    parts = sorted(p for p in path.parent.iterdir()
                   if p.name == path.name + ".index" or p.name.startswith(path.name + ".data-"))
    h = hashlib.sha256()
    for p in parts:
        h.update(f"{p.name[len(path.name):]}\0{file_digest(p)}\0".encode())
    return h.hexdigest(), sum(p.stat().st_size for p in parts)


def _text_summary(d: LeafDiff) -> str:
    s = f"{d.path}: {d.n_diff} of {d.size} lines differ; first at line {d.first_index[0]}"
    if d.max_abs is not None:
        s += f"; numbers differ by up to {d.max_abs:.3g}"
    return s + f"\n  run 1: {d.a}\n  other: {d.b}"


def _compare_runs(display: str, done: list[_Run], source: str | None, command: bool = False) -> CheckResult:
    from . import environment

    first = done[0]
    infos = [r.info for r in done]
    # nothing to compare: every run failed the same way
    if all(r.info.timed_out for r in done):
        raise RunError(f"every run of {display} timed out after {done[0].info.seconds:.0f} s; raise --timeout "
                       f"or check the script for a hang (the whole process group was killed)")
    codes = {r.info.returncode for r in done}
    if len(codes) == 1 and 0 not in codes and not any(r.info.timed_out for r in done):
        hint = ""
        if "EOFError" in first.info.stderr_tail:
            hint = ("\nThe script reads standard input, which fwd9m check closes; pass the input as a file "
                    "or argument instead.")
        raise RunError(f"{display} failed in every run (exit {first.info.returncode}), so there is nothing "
                       f"to compare. End of its error output (run 1):\n{first.info.stderr_tail}{hint}")
    findings: list[Finding] = []
    compared = {"stdout lines": _count_lines(first.stdout), "files": len(first.files),
                "state tensors": sum(len(g["flat"]) for g in _state_groups(first).values())}
    probe_differs = []
    env_diffs: list[dict[str, Any]] = []
    base_env = next((c.get("environment") for c in first.captures if c.get("environment")), None)
    for other in done[1:]:
        label = other.info.label
        a, b = first.info, other.info
        if b.timed_out or a.timed_out:
            slow, fast = (b, a) if b.timed_out else (a, b)
            findings.append(Finding("timeout", label, f"{slow.label} did not finish within {slow.seconds:.0f} s; "
                                    f"{fast.label} took {fast.seconds:.1f} s (a hang in some runs only)"))
            continue
        if a.returncode != b.returncode:
            findings.append(Finding("exit", label, f"exit status {b.returncode}, run 1 exited {a.returncode}",
                                    detail=f"run 1 stderr (end):\n{_indent(a.stderr_tail)}\n"
                                           f"{label} stderr (end):\n{_indent(b.stderr_tail)}"))
        d = compare_text("stdout", first.stdout, other.stdout, first.replacements, other.replacements)
        if d:
            findings.append(Finding("stdout", label, _text_summary(d), d))
        _compare_files(first, other, label, findings)
        ga, gb = _state_groups(first), _state_groups(other)
        for key in sorted(set(ga) | set(gb)):
            if key not in ga or key not in gb:
                findings.append(Finding("state", label, f"final state of process '{key}' captured in "
                                        f"{'run 1' if key in ga else label} only"))
                continue
            prefix = f"{key}: " if len(ga) > 1 else ""
            for diff in compare_flat(ga[key]["flat"], gb[key]["flat"]):
                findings.append(Finding("state", label, prefix + diff.summary(), diff))
        pa, pb = _hash_probe(first), _hash_probe(other)
        if pa is not None and pb is not None and pa != pb:
            probe_differs.append(label)
        other_env = next((c.get("environment") for c in other.captures if c.get("environment")), None)
        if base_env and other_env:
            for e in environment.diff(base_env, other_env):
                env_diffs.append({"run": label, **e.to_dict()})
    result = CheckResult(display, infos, findings, compared, environment=base_env or environment.collect(),
                         environment_diffs=env_diffs)
    if not any(compared.values()) and not findings:
        result.notes.append("nothing was compared: the script printed nothing, wrote no file in its working "
                            "directory, and held no model, variable or array at exit; print or save the "
                            "result you care about, or return it from a function and use fwd9m.check(fn)")
    if probe_differs and findings:
        result.hash_seed_suspect = True
        result.causes.append("PYTHONHASHSEED differed between runs (it was unset or 'random'), so each "
                             "interpreter hashed strings differently: if the script iterates over a set of "
                             "strings (or a dict built from one), it saw a different order. Fix: run with "
                             "PYTHONHASHSEED=0 (or `fwd9m run`), or iterate in a fixed order (sorted(s)). "
                             "To tell whether this is the cause: fwd9m check --env PYTHONHASHSEED=0 ...")
    elif probe_differs:
        result.notes.append("PYTHONHASHSEED differed between runs (string hashing was randomised); "
                            "the outputs did not depend on it this time.")
    ranks = [k for k in _state_groups(first) if k.startswith("rank ")]  # a distributed launch
    if ranks:
        counts = [(k, sum(f.source == "state" and f.summary.startswith(k + ":") for f in findings))
                  for k in sorted(ranks, key=lambda k: (len(k), k))]
        result.notes.append("final state compared rank by rank (rank r of each run with rank r of run 1): "
                            + ", ".join(f"{k}: {n} difference(s)" for k, n in counts))
        shuffled = [r.info.label for r in done[1:] if len(ranks) > 1 and _same_bytes_reordered(first.stdout, r.stdout)]
        if shuffled:
            result.causes.append(f"{len(ranks)} ranks write to the same standard output: {', '.join(shuffled)} "
                                 f"printed the same characters as run 1 in another order, as lines (and parts of "
                                 f"lines) from different processes interleave. Fix: print on rank 0 only (if "
                                 f"fwd9m.distributed.rank_info().is_main: print(...)); the final state is "
                                 f"compared rank by rank anyway.")
    if findings:
        if ranks and command:
            result.next_steps.append(f"find the first op that differs, rank by rank: fwd9m run --record-ranks "
                                     f"runA {display} (and again into runB), then fwd9m debug diff runA runB")
        elif _debug_can_record(base_env):
            result.next_steps.append(f"find the first op that differs: fwd9m debug {_debug_args(display, command)}")
        else:
            result.next_steps.append("fwd9m debug records PyTorch and TensorFlow/Keras ops, not JAX yet: to "
                                     "localize, check smaller pieces in Python with fwd9m.check(fn, ...) "
                                     "(e.g. one training step from a fixed state)")
        if probe_differs:
            result.next_steps.append(_HASH_SEED_STEP)
        device = "gpu" if (base_env or {}).get("gpus") else "cpu"
        result.catalog = _catalog_hints(base_env, device, python=bool(probe_differs), source=source)
    return result


_HASH_SEED_STEP = "fix the hash seed: PYTHONHASHSEED=0 python ..., or fwd9m run --seed 0 ..."


def _settle_hash_seed(result: CheckResult, agree: bool | None, source: str | None) -> None:
    """Turn the hash-seed suspicion into a finding after two more runs with
    ``PYTHONHASHSEED=0``: ``agree`` True (they matched: confirmed), False (they still
    differed: ruled out as the only cause) or None (they did not run to the end)."""
    result.causes = [c for c in result.causes if not c.startswith("PYTHONHASHSEED differed")]
    if agree:
        result.causes.insert(0, "PYTHONHASHSEED (confirmed): two more runs with PYTHONHASHSEED=0 agreed bit "
                                "for bit, so the differences come from string hashing: iteration over a set "
                                "of strings (or a dict built from one), or hash() of strings. Fix: iterate in "
                                "a fixed order (sorted(s)), or run with PYTHONHASHSEED=0 (fwd9m run does).")
        return
    if agree is False:
        result.next_steps = [s for s in result.next_steps if s != _HASH_SEED_STEP]
        result.notes.append("the string-hash seed differed too, but two more runs with PYTHONHASHSEED=0 still "
                            "differed: hash order is not the cause (or not the only one)")
        device = "gpu" if (result.environment or {}).get("gpus") else "cpu"
        result.catalog = _catalog_hints(result.environment, device, python=False, source=source)
    else:
        result.notes.append("the string-hash seed differed; the PYTHONHASHSEED=0 runs meant to test it did not "
                            "complete, so it remains a possible cause")


def _debug_can_record(fp: dict[str, Any] | None) -> bool:
    """False when the runs used JAX and neither framework ``fwd9m debug`` records."""
    names = set(((fp or {}).get("frameworks") or {}))
    return not ("jax" in names and not names & {"torch", "tensorflow", "keras"})


def _debug_args(display: str, command: bool) -> str:
    """``fwd9m debug`` arguments for what was checked: a command ``python X.py ARGS``
    becomes ``X.py ARGS``; other commands are named as the script they run."""
    if not command:
        return display
    parts = display.split()[1:]  # drop "--"
    if parts and Path(parts[0]).name.startswith("python") and len(parts) > 1:
        return " ".join(parts[1:])
    return "SCRIPT.py [ARGS] (the Python script this command runs)"


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


def _source_words(path: str | None) -> set[str]:
    """Identifiers in a script's source (empty when unreadable)."""
    import re

    if not path:
        return set()
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))


def _catalog_hints(fp: dict[str, Any] | None, device: str | None, python: bool = False,
                   source: str | None = None, limit: int = 5) -> list[dict[str, Any]]:
    """Catalog entries that may explain the differences, likeliest first: entries for
    the frameworks the runs imported (at their versions and device), ranked up when
    the script's source names one of their symbols, and Python's hash-seed entries
    when the hash seed differed. [] when the catalog is unavailable."""
    try:
        from . import catalog
    except ImportError:
        return []
    if fp and fp.get("frameworks"):
        frameworks = {n: i.get("version") for n, i in fp["frameworks"].items()}
    else:
        from . import _frameworks

        frameworks = {n: _frameworks.installed_version(n) for n in _frameworks.imported()}
    frameworks["python"] = None
    words = _source_words(source)
    # a script that seeds nothing at all: the global-seed entries come first
    unseeded = bool(words) and not any("seed" in w.lower() or w == "enable_determinism" for w in words)
    scored: list[tuple[int, str, Any]] = []
    try:
        for name, version in frameworks.items():
            for e in catalog.query(framework=name, version=version, device=device):
                if e.behaviour == "not-applicable":
                    continue
                short = {sym.rsplit(".", 1)[-1] for sym in e.symbols}
                named = any(w in words for w in short if not w.startswith("__") and (len(w) > 5 or "_" in w))
                score = (4 + 2 * (e.kind == "op")) * named + 3 * (python and "PYTHONHASHSEED" in e.env) \
                    + 6 * (unseeded and e.kind == "seed" and name != "python")
                if name == "python" and not score:
                    continue
                score += {"op": 0, "setting": 1, "seed": 1}.get(e.kind, 0)
                scored.append((score, e.id, e))
    except Exception as exc:  # a catalog still being built must not break a check
        logger.debug("catalog query failed: %s", exc)
    scored.sort(key=lambda t: (-t[0], t[1]))
    return [{"id": e.id, "title": e.title, "kind": e.kind, "fix": e.fix, "references": list(e.references)}
            for score, _, e in scored[:limit] if score > 0]


class _CallableModule(types.ModuleType):
    """``fwd9m.check`` is both this module and the function :func:`check`: importing
    the submodule binds the name ``check`` on the package to the module, so the module
    itself is made callable and ``fwd9m.check(fn, ...)`` always works."""

    def __call__(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> CheckResult:
        return check(fn, *args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
