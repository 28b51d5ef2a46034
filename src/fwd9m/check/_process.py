"""Launching one run of a script: its working directory, environment, timeout and
process group, and what it left behind (output, files, captured state)."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .. import _capture
from ..compare import TEXT_LIMIT, TEXT_SUFFIXES, is_structured, orbax_roots
from ..errors import FileFormatError
from ._result import RunInfo

#: bytes of each run's stderr kept for the report
TAIL_BYTES = 3000
#: seconds between "still running" progress messages
HEARTBEAT_S = 30.0
#: seconds between SIGTERM and SIGKILL when a run times out
KILL_GRACE_S = 5.0
#: files never compared: bytecode caches (TensorBoard event files, named with the
#: wall-clock time, host and pid, are compared value by value: compare.pair_names)
IGNORED_PARTS = ("__pycache__", ".ipynb_checkpoints")
IGNORED_PREFIXES: tuple[str, ...] = ()


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


def _kill_leftovers(proc: subprocess.Popen) -> None:
    """Kill what is left in the process group of a run that has ended (children the
    script started and did not wait for)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


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


def _own_outputs() -> set[tuple[int, int]]:
    """``(st_dev, st_ino)`` of the regular files this process's stdout and stderr (file
    descriptors 1 and 2) write to: ``fwd9m check x.py > out.txt 2>&1`` in the directory
    the runs link to makes fwd9m's own progress lines grow ``out.txt`` while they run,
    which is no output of the script's."""
    out = set()
    for fd in (1, 2):
        try:
            st = os.fstat(fd)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            out.add((st.st_dev, st.st_ino))
    return out


def _is_own_output(path: Path, own: set[tuple[int, int]]) -> bool:
    if not own:
        return False
    try:
        st = os.stat(path)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) in own


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
    holds timestamps) is dropped; an Orbax checkpoint folder (files with random names
    inside) becomes one entry of kind ``structured`` whose path is the folder; other
    files have kind ``structured``, ``text`` or ``bytes``."""
    out: dict[str, tuple[str, Path]] = {}
    roots = [r for r in orbax_roots(files) if r]
    files = dict(files)
    for rel, path in list(files.items()):
        root = next((r for r in roots if rel.startswith(r + "/")), None)
        if root is not None:
            out.setdefault(root, ("structured", Path(str(path)[:len(str(path)) - len(rel)]) / root))
            del files[rel]
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
        if is_structured(rel) or (path.name == "fingerprint.pb" and (path.parent / "saved_model.pb").exists()):
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
        from .._bootstrap import bootstrap_dir

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
        _kill_leftovers(proc)
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
    own = _own_outputs() if linked else set()
    changed = [rel for rel, sig in after.items() if linked.get(rel) != sig
               and (rel in linked or len(linked) < WATCH_LIMIT) and not _is_own_output(invocation / rel, own)]
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


def _run_notes(done: list[_Run], display: str = "SCRIPT.py") -> list[str]:
    notes = []
    # the files copied from the user's directory, else the top-level entries that changed
    touched = sorted({t for r in done for t in r.through}) or sorted({t for r in done for t in r.touched})
    if touched:
        names = ", ".join(touched[:5]) + (f" and {len(touched) - 5} more" if len(touched) > 5 else "")
        notes.append(f"the runs changed {names} in your directory (a run's directory links to your files, so "
                     f"writing into an existing file or folder writes into yours). A later run may have read what "
                     f"an earlier one left there, such as a checkpoint to resume from. To keep the runs apart: "
                     f"fwd9m check --cwd empty {display}")
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
