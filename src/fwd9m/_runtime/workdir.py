"""The working directory of a run and the user's directory around it: with ``--cwd
link`` a run works in a folder of its own holding one symbolic link per entry of the
user's directory; :func:`snapshot_tree` watches the user's directory for writes that
went through those links and :class:`Guard` puts back what a run changed there."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "IGNORED_PARTS",
    "WATCH_LIMIT",
    "TOOL_DIRS",
    "BACKUP_FILE_LIMIT",
    "BACKUP_LIMIT",
    "Watch",
    "snapshot_tree",
    "prepare_cwd",
    "Guard",
]

#: files never compared: bytecode caches (TensorBoard event files, named with the
#: wall-clock time, host and pid, are compared value by value: compare.pair_names)
IGNORED_PARTS = ("__pycache__", ".ipynb_checkpoints")
#: entries of the user's directory watched for writes through the run's links; past it
#: the watch is incomplete and the report says so (each run scans the directory twice;
#: a scan took about 3 s per 100,000 entries, measured on a loaded 2-core machine)
WATCH_LIMIT = 200_000

#: folders of tools, not of the script, never watched (wherever they are): version
#: control, virtual environments (also any folder holding a ``pyvenv.cfg``), caches of
#: Python tools and editors
TOOL_DIRS = frozenset(
    (
        ".git",
        ".hg",
        ".svn",
        ".venv",
        ".tox",
        ".nox",
        ".eggs",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".hypothesis",
        ".idea",
        ".vscode",
        "node_modules",
        *IGNORED_PARTS,
    )
)


@dataclass
class Watch:
    """What :func:`snapshot_tree` saw: ``{relative path: signature}`` (size, mtime,
    ctime and inode: a rewrite in place changes the times, a replace the inode), and
    whether it saw every entry (False when it stopped at ``limit``)."""

    entries: dict[str, tuple[int, int, int, int]] = field(default_factory=dict)
    complete: bool = True


def snapshot_tree(source: Path, limit: int | None = None, own: Path | None = None) -> Watch:
    """Every entry under ``source`` up to ``limit`` (directories included: their mtime
    changes when a file is created in them; hidden ones too, as a script may write into
    ``.results/``), except :data:`TOOL_DIRS` and ``own``, the check's own temporary
    directory when it lies under ``source``. Symbolic links are not followed."""
    limit = WATCH_LIMIT if limit is None else limit
    watch = Watch()
    own_path = str(own) if own is not None else None
    stack = [str(source)]
    cut = len(os.path.join(str(source), ""))  # the relative path follows "source/"
    while stack:
        root = stack.pop()
        try:
            with os.scandir(root) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        if root != str(source) and any(e.name == "pyvenv.cfg" for e in entries):
            continue  # a virtual environment (its own entry was recorded by its parent)
        subdirs = []
        for e in entries:
            if e.name in TOOL_DIRS or e.path == own_path:
                continue
            if len(watch.entries) >= limit:
                watch.complete = False
                return watch
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            watch.entries[e.path[cut:]] = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
            if stat.S_ISDIR(st.st_mode):
                subdirs.append(e.path)
        stack.extend(reversed(subdirs))
    return watch


def prepare_cwd(cwd: Path, source: Path, mode: str, own: Path | None = None) -> Watch | None:
    """Create the run's working directory; with mode ``link``, one symlink per entry of
    ``source`` but ``own`` (the folder of fwd9m's own files, when it lies in ``source``;
    by default ``cwd.parent.parent``, the check's temporary root). Returns a snapshot
    (:func:`snapshot_tree`) of ``source`` to detect writes that went through the links."""
    cwd.mkdir(parents=True, exist_ok=True)  # exists for a resumed run (check --resume: B's folder)
    if mode != "link":
        return None
    try:
        entries = list(os.scandir(source))
    except OSError:
        return None
    own = cwd.parent.parent if own is None else own  # under source when run from TMPDIR
    for e in entries:
        if os.path.abspath(e.path) == str(own):
            continue
        try:
            os.symlink(e.path, cwd / e.name)
        except OSError:
            continue
    return snapshot_tree(source, own=own)


#: files of the user's directory copied before the runs, so that what a run writes into
#: one through its link can be put back: each at most BACKUP_FILE_LIMIT bytes and
#: BACKUP_LIMIT bytes in all (larger ones, datasets mostly, are only watched)
BACKUP_FILE_LIMIT = 64 << 20
BACKUP_LIMIT = 512 << 20


@dataclass
class Guard:
    """The user's directory as it was before the runs (``--cwd link``): copies of its
    files (:data:`BACKUP_FILE_LIMIT`, :data:`BACKUP_LIMIT`) and the entries that existed.
    After each run, :meth:`restore` puts back every file the run wrote into through a
    link and removes the files and folders it created there (the check keeps its own
    copies to compare), so that the user's files are left as they were and each run
    starts from the same files (run 2 does not resume from run 1's checkpoint)."""

    source: Path
    folder: Path  #: where the copies are
    saved: dict[str, Path] = field(default_factory=dict)
    existed: set[str] = field(default_factory=set)
    restored: set[str] = field(default_factory=set)
    removed: set[str] = field(default_factory=set)
    unprotected: set[str] = field(default_factory=set)
    #: where the versions :meth:`restore` replaced or removed are kept (made on first
    #: use, never deleted by fwd9m): a file edited or created in the directory while a
    #: run ran, by the user or by the run, is not lost when the user's copy comes back
    displaced: Path | None = None
    displaced_bytes: int = 0
    rounds: int = 0

    @classmethod
    def make(cls, source: Path, folder: Path) -> Guard:
        watch = snapshot_tree(source, own=folder.parent)
        guard = cls(source, folder, existed=set(watch.entries))
        files = []
        for rel, (size, *_rest) in watch.entries.items():
            p = source / rel
            if size <= BACKUP_FILE_LIMIT and p.is_file() and not p.is_symlink():
                files.append((size, rel))
        total = 0
        for size, rel in sorted(files):  # the small ones first: most files within the budget
            if total + size > BACKUP_LIMIT:
                break
            dst = folder / rel
            try:
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source / rel, dst)
            except OSError:
                continue
            guard.saved[rel] = dst
            total += size
        return guard

    def restore(self, changed: list[str]) -> None:
        """Undo what a run did to ``changed`` (paths relative to the user's directory).
        The version found there is first moved to :attr:`displaced`; one that cannot be
        kept (over the size limits, or unreadable) is left in place (``unprotected``)."""
        self.rounds += 1
        for rel in sorted(changed, key=lambda r: -r.count(os.sep)):  # deepest first
            p = self.source / rel
            try:
                if p.is_dir() and not p.is_symlink():
                    if rel not in self.existed and not any(p.iterdir()):
                        p.rmdir()
                        self.removed.add(rel)
                    continue
                present = p.is_file() or p.is_symlink()
                if rel in self.saved or rel not in self.existed:
                    if present and not self._displace(p, rel):
                        self.unprotected.add(rel)
                        continue
                    if rel in self.saved:
                        shutil.copy2(self.saved[rel], p)
                        self.restored.add(rel)
                    elif present:
                        self.removed.add(rel)
                elif rel in self.existed:
                    self.unprotected.add(rel)
            except OSError:
                self.unprotected.add(rel)

    def _displace(self, p: Path, rel: str) -> bool:
        """Move the file at ``p`` to :attr:`displaced` (run by run); False when it does
        not fit the limits (:data:`BACKUP_FILE_LIMIT`, :data:`BACKUP_LIMIT`) or cannot be moved."""
        size = 0 if p.is_symlink() else p.stat().st_size
        if size > BACKUP_FILE_LIMIT or self.displaced_bytes + size > BACKUP_LIMIT:
            return False
        if self.displaced is None:
            self.displaced = Path(tempfile.mkdtemp(prefix="fwd9m-displaced-"))
        dst = self.displaced / f"after-run-{self.rounds}" / rel
        try:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(p), str(dst))
        except OSError:
            return False
        self.displaced_bytes += size
        return True

    def displaced_note(self) -> str | None:
        """Where the replaced versions are, for the report (None when there are none)."""
        if self.displaced is None:
            return None
        return (
            f"the versions found in your directory before fwd9m put your files back are kept in "
            f"{self.displaced} (after-run-N: after run N), in case one was yours; delete it when done"
        )
