"""Launching one run of a script: its working directory, environment, timeout and
process group, and what it left behind (output, files, captured state)."""

from __future__ import annotations

import itertools
import os
import shutil
import stat
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._runtime import capture as _capture
from .._runtime import isolation as isolation_
from .._runtime import workdir
from .._runtime.launch import ENV_RANK_DIR, ENV_SHARED_OUT
from .._runtime.process import KILL_GRACE_S, TAIL_BYTES, kill_group, kill_leftovers, tail  # noqa: F401
from .._runtime.workdir import (  # noqa: F401
    BACKUP_FILE_LIMIT,
    BACKUP_LIMIT,
    IGNORED_PARTS,
    SOURCE_SUFFIXES,
    TOOL_DIRS,
    WATCH_LIMIT,
    Guard,
    Watch,
    prepare_cwd,
    snapshot_tree,
)
from ..compare import TEXT_LIMIT, is_structured, is_text, orbax_roots
from ..errors import FileFormatError
from ._result import RunInfo

#: how the error of a run the early stop stopped begins (:mod:`fwd9m.check._lockstep`)
STOPPED = "stopped by the early stop"
#: runs started side by side start at least this long apart: a seed read from the clock
#: in seconds (``int(time.time())``) is then read in another second by each run more
#: often, as between runs one after the other (not a guarantee: a run can catch up; the
#: guarantee is the clock shift of each run, fwd9m._runtime.clock)
CLOCK_GAP_S = 1.05
#: the runs this process launched (each gets its own clock shift)
_RUNS = itertools.count()


def clock_gap(ended: float, seconds: float) -> float:
    """Seconds to wait before the next run starts, one after the other, after a run that
    ended at ``ended`` (``time.monotonic()``, at or after its end) and ran ``seconds``: so
    that a seed read from the clock in seconds is read in another second by each. Every
    read of the run was before its end: :data:`CLOCK_GAP_S` after it then parts them all;
    a run of ``2 x CLOCK_GAP_S`` or more needs no wait (a read at the same point of each
    run is then as far apart as the runs' starts)."""
    now = time.monotonic()
    return max(0.0, min(CLOCK_GAP_S - (now - ended), 2 * CLOCK_GAP_S - (now - ended + seconds)))


#: seconds between "still running" progress messages
HEARTBEAT_S = 30.0
IGNORED_PREFIXES: tuple[str, ...] = ()
#: files (bytes) written through a link that are copied after the run to be compared
COPY_LIMIT = 1 << 30


def _is_own_output(path: Path, own: set[tuple[int, int]]) -> bool:
    if not own:
        return False
    try:
        st = os.stat(path)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) in own


def _collect_files(cwd: Path) -> dict[str, Path]:
    """Regular files the run created under ``cwd`` (links into the user's directory
    are not followed), by relative path."""
    out: dict[str, Path] = {}
    for root, dirs, files in os.walk(cwd, followlinks=False):
        dirs[:] = [d for d in dirs if d not in IGNORED_PARTS and not os.path.islink(os.path.join(root, d))]
        for name in files:
            p = Path(root, name)
            if (
                p.is_symlink()
                or not p.is_file()
                or name.startswith(IGNORED_PREFIXES)
                or name.endswith((".pyc", ".tmp"))
            ):  # not a FIFO or socket: reading it blocks
                continue
            out[p.relative_to(cwd).as_posix()] = p
    return dict(sorted(out.items()))


def _group_files(files: dict[str, Path]) -> dict[str, tuple[str, Path]]:
    """``{logical name: (kind, path)}``: a TensorFlow checkpoint (``X.index`` and
    ``X.data-*``) becomes one entry of kind ``tf``, its ``checkpoint`` state file (which
    holds timestamps) is dropped; an Orbax checkpoint folder (files with random names
    inside) becomes one entry of kind ``structured`` whose path is the folder; other
    files have kind ``structured``, ``text`` or ``bytes``."""
    out: dict[str, tuple[str, Path]] = {}
    roots = [r for r in orbax_roots(files) if r]
    files = dict(files)
    for rel, path in list(files.items()):
        root = next((r for r in roots if rel.startswith(r + "/")), None)
        if root is not None:
            out.setdefault(root, ("structured", Path(str(path)[: len(str(path)) - len(rel)]) / root))
            del files[rel]
    prefixes = {
        rel[: -len(".index")]
        for rel in files
        if rel.endswith(".index") and any(o.startswith(rel[: -len(".index")] + ".data-") for o in files)
    }
    tf_dirs = {str(Path(p).parent) for p in prefixes}
    for rel, path in files.items():
        base = rel[: -len(".index")] if rel.endswith(".index") else rel.split(".data-")[0]
        if base in prefixes:
            if rel.endswith(".index"):
                out[base] = ("tf", path.with_name(Path(base).name))
            continue
        if Path(rel).name == "checkpoint" and str(Path(rel).parent) in tf_dirs:
            continue
        if is_structured(rel) or (path.name == "fingerprint.pb" and (path.parent / "saved_model.pb").exists()):
            out[rel] = ("structured", path)
        elif is_text(rel) and path.stat().st_size <= TEXT_LIMIT:
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
    #: each launcher rank's own output: ``{"rank 0": {"stdout": path, "stderr": path}}``
    ranks: dict[str, dict[str, Path]] = field(default_factory=dict)
    seen_ranks: set[int] = field(default_factory=set)  #: ranks of any launcher that ran (fwd9m._runtime.launch)
    watched: bool = False  #: the user's directory was watched (``--cwd link``)
    watch_complete: bool = True  #: False when the watch of the user's directory stopped at WATCH_LIMIT
    #: its stderr as compared, and the framework lines left out (``check._runs._stderr``)
    stderr_compared: tuple[Path, dict[str, tuple[int, str]]] | None = None

    @property
    def replacements(self) -> tuple[tuple[str, str], ...]:
        # the run's folder last (its cwd lies in it): fwd9m's own variables name it
        # (FWD9M_CHECK_CAPTURE=.../run1/capture), and a script may save os.environ
        return (
            (str(self.cwd), "<cwd>"),
            (os.path.realpath(self.cwd), "<cwd>"),
            (str(self.root), "<run folder>"),
            (os.path.realpath(self.root), "<run folder>"),
        )


def _run_env(run: _Run, extra_env: dict[str, str], site: bool, capdir: Path) -> dict[str, str]:
    """The run's environment: the user's, ``extra_env``, where the final state is
    captured, the clock shift of this run (:mod:`fwd9m._runtime.clock`: the clock the
    script reads is moved forward by another amount in each run, so that two runs never
    read the same clock seed, side by side or one after the other), and with ``site`` the
    start-up hook first on PYTHONPATH."""
    from .._runtime import clock

    env = dict(os.environ)
    env.update(extra_env)
    env[_capture.ENV_DIR] = str(capdir)
    env[clock.ENV_SHIFT] = clock.shift_for(next(_RUNS))  # a clock seed differs in each run
    if site:
        from .._runtime.bootstrap import bootstrap_dir

        env[_capture.ENV_SITE] = "1"
        parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        env["PYTHONPATH"] = os.pathsep.join([bootstrap_dir(), *(p for p in parts if p != bootstrap_dir())])
    return env


#: seconds between calls of an :func:`_execute` ``control`` callback
CONTROL_POLL_S = 0.02


def _wait(
    proc: subprocess.Popen,
    info: RunInfo,
    timeout: float | None,
    t0: float,
    say: Callable[[str], None],
    control: Callable[[subprocess.Popen], None] | None = None,
) -> None:
    """Wait for the run, saying it still runs every HEARTBEAT_S; past ``timeout`` kill
    its process group. ``control``, when given, is called with the process every
    :data:`CONTROL_POLL_S` seconds while it runs (``check --resume`` interrupts it).
    Ctrl-C kills it too, and leaves nothing running."""
    try:
        beat = t0 + HEARTBEAT_S
        while True:
            left = None if timeout is None else timeout - (time.monotonic() - t0)
            if left is not None and left <= 0:
                info.timed_out = True
                kill_group(proc)
                break
            wait = min(x for x in (beat - time.monotonic(), left, CONTROL_POLL_S if control else None) if x is not None)
            try:
                proc.wait(timeout=max(wait, 0.0))
                break
            except subprocess.TimeoutExpired:
                if control is not None:
                    control(proc)
                if time.monotonic() >= beat:
                    beat += HEARTBEAT_S
                    say(f"{info.label}: still running ({time.monotonic() - t0:.0f} s)")
    except BaseException:
        kill_group(proc)
        raise
    kill_leftovers(proc)


def _ended(
    run: _Run,
    proc: subprocess.Popen,
    stderr_path: Path,
    rankdir: Path,
    t0: float,
    iso: isolation_.Isolation | None = None,
) -> list[str]:
    """Record how the run ended (time, status, output sizes, the end of stderr and of
    each rank's); returns the directories of a launcher's own logs."""
    info = run.info
    info.seconds = time.monotonic() - t0
    info.returncode = None if info.timed_out else proc.returncode
    info.stdout_bytes = run.stdout.stat().st_size
    to_host = (lambda p: Path(isolation_.host_path(iso, run.cwd, str(p)))) if iso else (lambda p: p)
    run.ranks, run.seen_ranks, logs = _rank_outputs(rankdir, to_host)
    info.stderr_tail = tail(stderr_path)
    if proc.returncode and run.ranks:  # the workers' errors are in their own files now
        info.stderr_tail += "".join(
            f"\n[{key} stderr]\n{tail(out['stderr'], TAIL_BYTES // 2)}"
            for key, out in run.ranks.items()
            if "stderr" in out and tail(out["stderr"])
        )
        info.stderr_tail = info.stderr_tail.strip()
    return logs


def _read_captures(run: _Run, capdir: Path) -> None:
    try:
        run.captures = _capture.read(capdir)
    except FileFormatError as exc:
        run.info.error = str(exc)
    run.info.captured = sum(len(c["flat"]) for c in run.captures)


def _changed_through_links(
    run: _Run, invocation: Path, linked: Watch | None, logs: list[str], say: Callable[[str], None]
) -> list[str]:
    """The entries of the user's directory the run changed (through its links), but
    fwd9m's own output files and a launcher's logs."""
    after = snapshot_tree(invocation, own=run.root.parent) if linked is not None else Watch()
    run.watched = linked is not None
    run.watch_complete = linked is None or (linked.complete and after.complete)
    if not run.watch_complete:
        say(
            f"{run.info.label}: WARNING: your directory has more than {workdir.WATCH_LIMIT:,} entries; writes "
            f"beyond them are not seen (fwd9m check --cwd empty avoids the watch)"
        )
    own = workdir.own_outputs() if linked is not None else set()
    before = linked.entries if linked is not None else {}
    changed = [
        rel
        for rel, sig in after.entries.items()
        if before.get(rel) != sig and not _is_own_output(invocation / rel, own) and not _under(invocation / rel, logs)
    ]
    # what the run deleted or renamed away (through a link to a folder of yours): put back
    # before the next run starts, which must find the same files as this one did
    gone = [rel for rel in before if rel not in after.entries] if run.watch_complete else []
    return changed + gone


def _collect_outputs(
    run: _Run,
    invocation: Path,
    changed: list[str],
    logs: list[str],
    guard: Guard | None,
    isolation: isolation_.Isolation | None = None,
) -> None:
    """The files the run wrote, in its folder (with ``isolation``: its copy-on-write
    layers) and (copied) through its links, grouped for comparison; then the user's
    files are put back (``guard``)."""
    run.touched = sorted({rel.split(os.sep)[0] for rel in changed})
    files = {rel: p for rel, p in _collect_files(run.cwd).items() if not _under(p, logs)}
    if isolation is not None:
        files.update(isolation_.written(isolation, run.cwd))
    for rel in changed:  # written through a link into the user's directory: keep a copy
        src = invocation / rel
        if src.suffix in SOURCE_SUFFIXES or not src.is_file() or src.is_symlink() or src.stat().st_size > COPY_LIMIT:
            continue
        dst = run.root / "through" / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
        files.setdefault(Path(rel).as_posix(), dst)
        run.through.add(Path(rel).as_posix())
    if guard is not None:  # the copies to compare are made: put the user's files back
        guard.restore(changed)
    run.files = _group_files(dict(sorted(files.items())))


@dataclass
class _Launched:
    """A run's process while it runs, and what :func:`_collect_run` needs after it."""

    proc: subprocess.Popen
    linked: Watch | None
    capdir: Path
    rankdir: Path
    t0: float
    isolation: isolation_.Isolation | None = None

    @property
    def stderr_path(self) -> Path:
        return self.capdir.parent / "stderr"


def _execute(
    run: _Run,
    invocation: Path,
    cwd_mode: str | isolation_.Isolation,
    extra_env: dict[str, str],
    site: bool,
    timeout: float | None,
    which: str,
    say: Callable[[str], None],
    guard: Guard | None = None,
    control: Callable[[subprocess.Popen], None] | None = None,
) -> None:
    """Run one run of the script in its own folder and session (process group), and
    collect what it left: its output, files and captured final state. ``control``: see
    :func:`_wait`."""
    launched = _launch(run, invocation, cwd_mode, extra_env, site, which, say)
    if launched is None:
        return
    _wait(launched.proc, run.info, timeout, launched.t0, say, control)
    _collect_run(run, launched, invocation, say, guard)


def _execute_together(
    items: list[tuple[_Run, dict[str, str], str]],
    invocation: Path,
    cwd_mode: str | isolation_.Isolation,
    site: bool,
    timeout: float | None,
    say: Callable[[str], None],
    guard: Guard | None = None,
) -> None:
    """:func:`_execute` of several runs (``(run, extra environment, which)``) side by
    side: all start, :data:`CLOCK_GAP_S` apart, then each is waited for and collected in
    turn (each run's timeout counts from its own start). Any failure here stops them all."""
    launched: list[tuple[_Run, _Launched]] = []
    try:
        for i, (run, env, which) in enumerate(items):
            time.sleep(CLOCK_GAP_S if i else 0)  # a seed read from the clock in seconds differs
            x = _launch(run, invocation, cwd_mode, env, site, which, say)
            if x is not None:
                launched.append((run, x))
        for run, x in launched:
            _wait(x.proc, run.info, timeout, x.t0, say)
            _collect_run(run, x, invocation, say, guard)
    except BaseException:
        for _, x in launched:
            kill_group(x.proc)
        raise


def _launch(
    run: _Run,
    invocation: Path,
    cwd_mode: str | isolation_.Isolation,
    extra_env: dict[str, str],
    site: bool,
    which: str,
    say: Callable[[str], None],
) -> _Launched | None:
    """Start one run in its own folder and session (process group); None when it could
    not start (``run.info.error`` says why). With an :class:`~fwd9m._runtime.isolation.Isolation`
    the run starts in ``invocation`` seen copy-on-write, its writes landing in ``run.cwd``."""
    info = run.info
    iso = cwd_mode if isinstance(cwd_mode, isolation_.Isolation) else None
    linked = prepare_cwd(run.cwd, invocation, "isolate" if iso else cwd_mode)
    command = isolation_.wrap(info.command, iso, run.cwd) if iso else isolation_.wrap_plain(info.command, run.root)
    capdir = run.root / "capture"
    capdir.mkdir()
    env = _run_env(run, extra_env, site, capdir)
    stderr_path = run.root / "stderr"
    rankdir = run.root / "ranks"
    say(f"{info.label} ({which}): starting: {' '.join(info.command)}")
    t0 = time.monotonic()
    with open(run.stdout, "wb") as out, open(stderr_path, "wb") as err:  # the child keeps its own copies
        if site:  # a launcher's workers write their output to a file per rank (fwd9m._runtime.launch)
            rankdir.mkdir()
            env[ENV_RANK_DIR] = str(rankdir)
            env[ENV_SHARED_OUT] = " ".join(
                f"{st.st_dev}:{st.st_ino}" for st in map(os.fstat, (out.fileno(), err.fileno()))
            )
        try:
            proc = subprocess.Popen(
                command,
                cwd=run.cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
        except OSError as exc:
            info.error = f"could not start: {exc}"
            return None
    return _Launched(proc, linked, capdir, rankdir, t0, iso)


def _collect_run(
    run: _Run,
    launched: _Launched,
    invocation: Path,
    say: Callable[[str], None],
    guard: Guard | None = None,
    stopped: str | None = None,
) -> None:
    """After the run ended: its status, output, files and captured final state.
    ``stopped``: why fwd9m stopped it (said instead of its exit status)."""
    proc, info = launched.proc, run.info
    logs = _ended(run, proc, launched.stderr_path, launched.rankdir, launched.t0, launched.isolation)
    ended = "timed out" if info.timed_out else stopped or f"exit {proc.returncode}"
    say(f"{info.label}: {ended} after {info.seconds:.1f} s")
    _read_captures(run, launched.capdir)
    changed = _changed_through_links(run, invocation, launched.linked, logs, say)
    _collect_outputs(run, invocation, changed, logs, guard, launched.isolation)


def _rank_outputs(
    rankdir: Path, to_host: Callable[[Path], Path] = lambda p: p
) -> tuple[dict[str, dict[str, Path]], set[int], list[str]]:
    """The per-rank output files that :func:`fwd9m._runtime.launch.split_rank_output` left in
    ``rankdir`` (``rank<R>.stdout``, or ``rank<R>.stdout.path`` naming the file torchrun
    itself sends that rank's output to), by ``"rank R"``, ranks in order; the ranks of any
    launcher that ran (``rank<R>.seen``); and the
    directories of torchrun's own logs among them, whose names are random
    (``<run_id>_<random>/attempt_<n>/<local_rank>/stdout.log``), so that they are not
    compared as the script's files."""
    out: dict[str, dict[str, Path]] = {}
    seen: set[int] = set()
    logs: list[str] = []
    try:
        names = sorted(os.listdir(rankdir))
    except OSError:
        return out, seen, logs
    for name in names:
        rank, _, rest = name[len("rank") :].partition(".")
        stream = rest.removesuffix(".path")
        if not name.startswith("rank") or not rank.isdigit():
            continue
        seen.add(int(rank))
        if stream not in ("stdout", "stderr"):
            continue
        path = rankdir / name
        if rest.endswith(".path"):
            try:
                path = to_host(Path(path.read_text(encoding="utf-8", errors="replace")[:4096]))
                if not stat.S_ISREG(os.stat(path).st_mode):  # a pipe would block the read
                    continue
            except (OSError, ValueError):
                continue
            if path.name != f"{stream}.log" or not path.parent.parent.name.startswith("attempt_"):
                continue  # not torchrun's own per-rank log (a file the ranks may share): compared as a file
            logs.append(os.path.realpath(path.parents[2]))
        out.setdefault(f"rank {int(rank)}", {})[stream] = path
    return dict(sorted(out.items(), key=lambda kv: int(kv[0].split()[1]))), seen, logs


def _under(path: Path, dirs: list[str]) -> bool:
    if not dirs:
        return False
    real = os.path.realpath(path)
    return any(real == d or real.startswith(d + os.sep) for d in dirs)


def _run_notes(done: list[_Run], display: str = "SCRIPT.py", guard: Guard | None = None) -> list[str]:
    notes = []
    blind = [r.info.label for r in done if not r.watch_complete]
    if blind:
        notes.append(
            f"WARNING: the watch of your directory stopped at {workdir.WATCH_LIMIT:,} entries in "
            f"{', '.join(blind)}, so files the script wrote into existing folders there may not have "
            f"been seen or compared. Use fwd9m check --cwd empty {display} (outputs then land in the "
            f"run's own directory), or move large data out of this directory"
        )
    # the files copied from the user's directory, else the top-level entries that changed
    touched = sorted({t for r in done for t in r.through}) or sorted({t for r in done for t in r.touched})
    if guard is not None and touched:
        put_back = sorted(guard.restored | guard.removed)
        if put_back and not guard.unprotected:
            names = ", ".join(put_back[:5]) + (f" and {len(put_back) - 5} more" if len(put_back) > 5 else "")
            notes.append(
                f"the runs wrote into {names} in your directory, through the links of their working "
                f"folders; fwd9m put back your files as they were after each run (and removed the "
                f"ones the runs created there), so each run started from the same files. The runs' "
                f"own versions were compared. fwd9m check --cwd empty {display} keeps them apart "
                f"from the start"
            )
            touched = []
        elif guard.unprotected:
            touched = sorted(guard.unprotected)
    if guard is not None and guard.kept:
        notes.append(workdir.kept_note(guard))
    if touched:
        names = ", ".join(touched[:5]) + (f" and {len(touched) - 5} more" if len(touched) > 5 else "")
        notes.append(
            f"the runs changed {names} in your directory (a run's directory links to your files, so "
            f"writing into an existing file or folder writes into yours). A later run may have read what "
            f"an earlier one left there, such as a checkpoint to resume from. To keep the runs apart: "
            f"fwd9m check --cwd empty {display}"
        )
    errors = sorted(
        {f"{r.info.label}: {c['error']}" for r in done for c in r.captures if c.get("error")}
        | {
            f"{r.info.label}: {leaf['path']}: {leaf['error']}"
            for r in done
            for c in r.captures
            for leaf in c.get("leaves", ())
            if leaf.get("error")
        }
        | {f"{r.info.label}: {r.info.error}" for r in done if r.info.error and not r.info.error.startswith(STOPPED)}
    )
    if errors:
        notes.append("the final state was only partly captured: " + "; ".join(errors[:3]))
    stopped = any((r.info.error or "").startswith(STOPPED) for r in done)
    if done and not any(r.captures for r in done) and not stopped:  # the early stop says what was compared
        notes.append(
            "no final state was captured (the process was killed, called os._exit, or is not "
            "Python); only printed output and files were compared"
        )
    return notes
