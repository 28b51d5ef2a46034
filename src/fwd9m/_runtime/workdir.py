"""The working directory of a run and the user's directory around it: with ``--cwd
link`` a run works in a folder of its own holding one symbolic link per entry of the
user's directory; :func:`snapshot_tree` watches the user's directory for writes that
went through those links and :class:`Guard` puts back what a run changed there."""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import stat
import time
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
    "kept_note",
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


def own_outputs() -> set[tuple[int, int]]:
    """``(st_dev, st_ino)`` of the regular files this process's stdout and stderr (file
    descriptors 1 and 2) write to: ``fwd9m check x.py > out.txt 2>&1`` in the directory
    the runs link to makes fwd9m's own progress lines grow ``out.txt`` while they run,
    which is no output of the script's, and never a file to put back."""
    out = set()
    for fd in (1, 2):
        try:
            st = os.fstat(fd)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            out.add((st.st_dev, st.st_ino))
    return out


#: levels of symbolic links to folders outside the user's directory that the watch follows
LINK_HOPS = 4


def snapshot_tree(
    source: Path,
    limit: int | None = None,
    own: Path | None = None,
    skip: tuple[str, ...] = (),
    inodes: frozenset[tuple[int, int]] = frozenset(),
) -> Watch:
    """Every entry under ``source`` up to ``limit`` (directories included: their mtime
    changes when a file is created in them; hidden ones too, as a script may write into
    ``.results/``), except :data:`TOOL_DIRS` and ``own``, the check's own temporary
    directory when it lies under ``source``. A symbolic link to a folder outside
    ``source`` (``outputs -> /scratch/outputs``) is followed, :data:`LINK_HOPS` levels at
    most and each folder once: its entries are named through the link
    (``outputs/result.txt``), so that what a run writes there is seen and put back."""
    limit = WATCH_LIMIT if limit is None else limit
    watch = Watch()
    mine = own_outputs() | inodes
    own_path = str(own) if own is not None else None
    skipped = {own_path, *skip}
    top = os.path.realpath(source)
    seen = {top}
    stack: list[tuple[str, str, int]] = [(str(source), "", 0)]  # (folder, its name through links, hops)
    while stack:
        root, prefix, hops = stack.pop()
        try:
            with os.scandir(root) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        if root != str(source) and any(e.name == "pyvenv.cfg" for e in entries):
            continue  # a virtual environment (its own entry was recorded by its parent)
        subdirs = []
        for e in entries:
            if e.name in TOOL_DIRS or e.path in skipped:
                continue
            if len(watch.entries) >= limit:
                watch.complete = False
                return watch
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if (st.st_dev, st.st_ino) in mine:
                continue  # fwd9m's own report (fwd9m debug x.py > log.txt), not the runs'
            rel = prefix + e.name
            watch.entries[rel] = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
            if stat.S_ISDIR(st.st_mode):
                subdirs.append((e.path, rel + os.sep, hops))
            elif stat.S_ISLNK(st.st_mode) and hops < LINK_HOPS:
                target = os.path.realpath(e.path)
                outside = not (target == top or target.startswith(top + os.sep))
                if outside and target not in seen and os.path.isdir(target) and not _holds(target, own_path):
                    seen.add(target)
                    subdirs.append((target, rel + os.sep, hops + 1))
        stack.extend(reversed(subdirs))
    return watch


def _holds(folder: str, own: str | None) -> bool:
    """``own`` (fwd9m's folder) is ``folder`` or lies under it."""
    return own is not None and (own == folder or own.startswith(folder.rstrip(os.sep) + os.sep))


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
#: BACKUP_LIMIT bytes in all (larger ones, datasets mostly, are only watched; the report
#: names any such file a run changed)
BACKUP_FILE_LIMIT = 64 << 20
BACKUP_LIMIT = 512 << 20
#: the guard's journal, beside its copies: what the directory held and which copies
#: exist, written before any run starts, so that a later fwd9m command can put the
#: files back after fwd9m itself was killed (:func:`recover_journal`)
JOURNAL = "journal.json"
#: source files: one a run changed may be an edit the user made while it ran, so before it
#: is put back its changed text is kept in the user's cache folder (:meth:`Guard._keep_changed`)
#: and the report says where
SOURCE_SUFFIXES = (".py", ".pyi", ".ipynb", ".c", ".cc", ".cpp", ".h", ".toml", ".cfg", ".md", ".rst")


@dataclass
class Guard:
    """The user's directory as it was before the runs (``--cwd link``, where runs
    cannot be isolated): copies of its files (:data:`BACKUP_FILE_LIMIT`,
    :data:`BACKUP_LIMIT`), the signature of every entry, and a journal of both on disk
    (:data:`JOURNAL`). After each run, :meth:`restore` puts back every file the run
    wrote into, removes the files and folders it created there and brings back what it
    deleted, so that the user's files are left as they were and each run starts from the
    same files (run 2 does not resume from run 1's checkpoint). :meth:`restore_all`
    does the same for whatever differs now (Ctrl-C, SIGTERM, a crash of fwd9m)."""

    source: Path
    folder: Path  #: where the copies are; the journal is in its parent
    #: folders of fwd9m's own in the directory, never watched nor put back (``debug --keep DIR``)
    skip: tuple[str, ...] = ()
    saved: dict[str, Path] = field(default_factory=dict)
    existed: set[str] = field(default_factory=set)
    before: dict[str, tuple[int, int, int, int]] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=set)  #: the folders among ``existed``
    links: dict[str, str] = field(default_factory=dict)  #: the symbolic links among them, and their targets
    restored: set[str] = field(default_factory=set)
    removed: set[str] = field(default_factory=set)
    #: files a run changed that could not be put back (too large to copy beforehand,
    #: or unwritable), and source files left as they are (an edit of the user's)
    unprotected: set[str] = field(default_factory=set)
    rounds: int = 0
    #: (st_dev, st_ino) of fwd9m's own report files (its stdout and stderr when they are
    #: files), never put back: also by a later command that recovers from the journal
    inodes: frozenset[tuple[int, int]] = frozenset()
    #: source files (:data:`SOURCE_SUFFIXES`) changed while the runs ran, put back: their
    #: changed text is kept here (``$XDG_CACHE_HOME/fwd9m/changed/<time>-<pid>/``), in case
    #: the change was an edit of yours
    kept: dict[str, Path] = field(default_factory=dict)
    kept_dir: Path | None = None
    #: the files not copied beforehand: where their copy goes when a run first opens one
    #: for writing (:mod:`fwd9m._runtime.lazy_backup`, in the run's process)
    lazy: dict[str, Path] = field(default_factory=dict)

    @classmethod
    def make(cls, source: Path, folder: Path, skip: tuple[str, ...] = ()) -> Guard:
        skip = tuple(os.path.abspath(p) for p in skip)
        watch = snapshot_tree(source, own=folder.parent, skip=skip)
        guard = cls(
            source,
            folder,
            skip,
            existed=set(watch.entries),
            before=dict(watch.entries),
            inodes=frozenset(own_outputs()),
        )
        files = []
        for rel, (size, *_rest) in watch.entries.items():
            p = source / rel
            if p.is_symlink():
                try:
                    guard.links[rel] = os.readlink(p)
                except OSError:
                    pass
            elif p.is_dir():
                guard.dirs.add(rel)
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
        guard._copy_on_write()
        guard._write_journal()
        return guard

    def _copy_on_write(self) -> None:
        """The regular files not copied (over the limits) are copied by the run that
        first opens one for writing: their list for :mod:`fwd9m._runtime.lazy_backup`,
        named in this process's environment, which the runs inherit."""
        from . import lazy_backup

        for rel in self.existed - self.saved.keys() - self.dirs - self.links.keys():
            p = self.source / rel
            if p.is_file() and not p.is_symlink():
                self.lazy[rel] = self.folder / rel
        if not self.lazy:
            return
        listing = self.folder.parent / lazy_backup.LIST
        try:
            for dst in self.lazy.values():
                dst.parent.mkdir(parents=True, exist_ok=True)
            files = {os.path.realpath(self.source / rel): str(dst) for rel, dst in self.lazy.items()}
            listing.write_text(json.dumps({"files": files}), encoding="utf-8")
        except OSError:
            self.lazy.clear()
            return
        os.environ[lazy_backup.ENV] = str(listing)

    def _take_lazy_copies(self) -> None:
        """The copies runs made on first write become copies like the others."""
        for rel, dst in list(self.lazy.items()):
            if rel not in self.saved and dst.is_file():
                self.saved[rel] = dst

    def _write_journal(self) -> None:
        data = {
            "source": str(self.source),
            "before": self.before,
            "dirs": sorted(self.dirs),
            "links": self.links,
            "folder": self.folder.name,
            "skip": list(self.skip),
            "inodes": sorted(self.inodes),
            "saved": {rel: str(p.relative_to(self.folder)) for rel, p in self.saved.items()},
            "lazy": {rel: str(p.relative_to(self.folder)) for rel, p in self.lazy.items()},
        }
        tmp = self.folder.parent / (JOURNAL + ".tmp")
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, self.folder.parent / JOURNAL)

    def changes(self, until: float | None = None) -> list[str]:
        """The entries that differ from before the runs: changed, created or deleted; with
        ``until`` (a time), only those changed by then (a later change, of the user's
        after fwd9m was killed, goes to :attr:`unprotected`, left as it is)."""
        after = snapshot_tree(self.source, own=self.folder.parent, skip=self.skip, inodes=self.inodes)
        changed = [rel for rel, sig in after.entries.items() if self.before.get(rel) != sig]
        gone = [rel for rel in self.before if rel not in after.entries and after.complete]
        if until is None:
            return changed + gone
        late = {rel for rel in changed if after.entries[rel][1] / 1e9 > until}
        late |= {rel for rel in gone if self._mtime(os.path.dirname(rel)) > until}
        self.unprotected |= late
        return [rel for rel in changed + gone if rel not in late]

    def _mtime(self, rel: str) -> float:
        try:
            return os.stat(self.source / rel).st_mtime
        except OSError:
            return 0.0

    def restore_all(self, until: float | None = None) -> list[str]:
        """Put back whatever differs now (:meth:`changes`); returns what could not be."""
        self.restore(self.changes(until))
        return sorted(self.unprotected)

    def restore(self, changed: list[str]) -> None:
        """Undo what a run did to ``changed`` (paths relative to the user's directory):
        copies put back, files and folders the run created removed (their content was
        compared from the run's own copy), folders it deleted made again. A changed file
        without a copy is left in place and named in ``unprotected``."""
        self.rounds += 1
        self._take_lazy_copies()
        changed = sorted(set(changed), key=lambda r: (r.count(os.sep), r))
        for rel in changed:  # folders it deleted, outer first
            if rel in self.dirs and not os.path.lexists(self.source / rel):
                (self.source / rel).mkdir(parents=True, exist_ok=True)
        for rel in reversed(changed):  # deepest first
            try:
                self._restore_one(rel)
            except OSError:
                self.unprotected.add(rel)

    def _restore_one(self, rel: str) -> None:
        p = self.source / rel
        if p.is_dir() and not p.is_symlink():
            if rel not in self.existed and not any(p.iterdir()):
                p.rmdir()
                self.removed.add(rel)
            return
        present = p.is_file() or p.is_symlink()
        if rel in self.links:
            if not p.is_symlink() or os.readlink(p) != self.links[rel]:
                if present:
                    p.unlink()
                os.symlink(self.links[rel], p)
                self.restored.add(rel)
            return
        if rel in self.saved:
            if present and p.suffix in SOURCE_SUFFIXES and not p.is_symlink() and not self._keep_changed(rel, p):
                self.unprotected.add(rel)  # a source file whose new text could not be kept: left as it is
                return
            if p.is_file() and not p.is_symlink():  # in place: its inode, owner and hard links stay
                shutil.copyfile(self.saved[rel], p)
                shutil.copystat(self.saved[rel], p)
            else:
                tmp = p.with_name(f".{p.name}.fwd9m-restore-{os.getpid()}")
                shutil.copy2(self.saved[rel], tmp)
                os.replace(tmp, p)
            self.restored.add(rel)
        elif rel not in self.existed:
            if present:
                p.unlink()
                self.removed.add(rel)
        elif present or not p.exists():
            self.unprotected.add(rel)

    def _keep_changed(self, rel: str, p: Path) -> bool:
        """Keep a copy of source file ``p``'s new text in :attr:`kept_dir` before it is
        put back: a run wrote it, or you edited it while the runs ran (fwd9m cannot tell
        which), so neither your file nor your edit is lost. False when no copy could be made."""
        try:
            if filecmp.cmp(p, self.saved[rel], shallow=False):
                return True  # the same text as before the runs (put back already): nothing new to keep
        except OSError:
            pass
        if self.kept_dir is None:
            base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
            self.kept_dir = Path(base, "fwd9m", "changed", f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
        dst = self.kept_dir / rel
        try:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(p, dst)
        except OSError:
            return False
        self.kept[rel] = dst
        return True


def kept_note(guard: Guard) -> str:
    """What the report says about the source files a run changed and fwd9m put back
    (:attr:`Guard.kept`): where their changed text is."""
    names = sorted(guard.kept)
    shown_names = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return (
        f"the source file(s) {shown_names} in your directory changed while the runs ran; fwd9m put back "
        f"your version and kept the changed text in {guard.kept_dir} (if it was an edit of yours, copy it "
        f"back from there)"
    )


def recover_journal(root: Path, until: float | None = None) -> tuple[list[str], list[str]]:
    """Put back the files of the guard whose journal is in ``root`` (left by a fwd9m
    that was killed): (restored or removed, left as they are). ``until``: the last time
    that fwd9m (and so its runs) lived; what changed later is the user's, left as it is.
    The journal is data fwd9m wrote, read as JSON and checked: paths stay inside its
    source and its backup folder (the caller checks that the folder is this user's)."""
    try:
        data = json.loads((root / JOURNAL).read_text(encoding="utf-8"))
        source = Path(data["source"])
        before = {str(k): tuple(int(x) for x in v) for k, v in data["before"].items()}
        folder = root / str(data["folder"])
        saved = {str(k): folder / str(v) for k, v in data["saved"].items()}
        lazy = {str(k): folder / str(v) for k, v in data.get("lazy", {}).items()}
        saved.update((k, v) for k, v in lazy.items() if k not in saved and v.is_file())
        dirs = {str(d) for d in data["dirs"]}
        links = {str(k): str(v) for k, v in data["links"].items()}
        skip = tuple(str(p) for p in data["skip"])
        inodes = frozenset((int(d), int(i)) for d, i in data["inodes"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return [], []
    safe = (
        all(_inside(source / k, source) for k in before)
        and all(_inside(v, folder) and _inside(source / k, source) for k, v in saved.items())
        and _inside(folder, root)
    )
    if not safe or not source.is_dir():
        return [], []
    if not all(_inside(source / k, source) for k in (*dirs, *links)):
        return [], []
    guard = Guard(source, folder, skip, saved, set(before), before, dirs, links, inodes=inodes)  # type: ignore[arg-type]
    left = guard.restore_all(until)
    return sorted(guard.restored | guard.removed), left


def _inside(path: Path, root: Path) -> bool:
    rel = os.path.normpath(os.path.relpath(path, root))
    return not (rel == ".." or rel.startswith(".." + os.sep) or os.path.isabs(rel))
