"""Runs that cannot change the user's files: each run sees the user's directory (and the
script's folder, and the folders that symbolic links there point to) through an overlay
mount of its own, in a mount namespace of its own, so that everything it writes there
lands in a folder of the run's (the layer's ``upper``) and the user's files are never
written (:mod:`fwd9m._runtime._isolate_exec` sets it up in the run's process).

:func:`plan` decides which directories to cover, :func:`probe` tries it once on this
machine (containers often forbid the namespaces), :func:`wrap` makes a run's command
line, :func:`written` lists what a run wrote, by the name the user knows it by."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Layer", "Isolation", "plan", "probe", "wrap", "written", "MODE_NOTE"]

#: symbolic links followed from the user's directory: at most this many levels of a
#: link inside a folder a link points to, and this many directories in all
LINK_DEPTH = 4
MAX_LAYERS = 32
#: entries looked at when searching for symbolic links (a link under a bigger tree is
#: not followed; the report says the search stopped)
SCAN_LIMIT = 200_000
#: file systems a mount under a covered directory may not be (not a lower layer of an
#: overlay, or not worth covering: they hold no user files)
_SPECIAL_FS = frozenset(
    ("proc", "sysfs", "devtmpfs", "devpts", "cgroup", "cgroup2", "mqueue", "securityfs", "debugfs",
     "tracefs", "pstore", "bpf", "autofs", "binfmt_misc", "configfs", "fusectl", "hugetlbfs", "efivarfs")
)  # fmt: skip
_EXEC = str(Path(__file__).with_name("_isolate_exec.py"))
MODE_NOTE = (
    "the runs ran in your directory seen through a copy-on-write layer of their own (an overlay "
    "mount in a private mount namespace): what they wrote there was compared from that layer "
    "and thrown away, and your files were never written"
)


@dataclass(frozen=True)
class Layer:
    """A directory a run sees copy-on-write. ``name``: how the report names what the run
    wrote there (``""``: your directory; ``"outputs"``: through the link ``outputs``);
    ``only``: for a link to a file, that file's name in ``lower`` (the only file of the
    layer reported, under ``name``)."""

    lower: str
    name: str
    only: str | None = None


@dataclass
class Isolation:
    """The layers of every run of one check, outer directories first; ``cwd``: where the
    runs start (the user's directory); ``skipped``: links that could not be covered, and why."""

    cwd: str
    layers: list[Layer] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _mounts() -> list[tuple[str, str]]:
    """(mount point, file system type) of this process's mounts (/proc/self/mountinfo)."""
    out = []
    octal = re.compile(rb"\\([0-7]{3})")  # the kernel writes a space as \040, a newline as \012
    try:
        with open("/proc/self/mountinfo", "rb") as f:
            for line in f:
                left, _, right = line.partition(b" - ")
                parts, fstype = left.split(), right.split()[:1]
                if len(parts) >= 5 and fstype:
                    raw = octal.sub(lambda m: bytes([int(m.group(1), 8)]), parts[4])
                    out.append((os.fsdecode(raw), os.fsdecode(fstype[0])))
    except OSError:
        pass
    return out


def _links(root: str, budget: list[int]) -> list[tuple[str, str]]:
    """(path relative to ``root``, real target) of the symbolic links under ``root``
    whose target is outside it; ``budget[0]``: entries left to look at."""
    from .workdir import TOOL_DIRS

    out, stack = [], [root]
    while stack:
        d = stack.pop()
        try:
            with os.scandir(d) as it:
                entries = list(it)
        except OSError:
            continue
        for e in entries:
            budget[0] -= 1
            if budget[0] < 0:
                return out
            if e.name in TOOL_DIRS:
                continue
            try:
                if e.is_symlink():
                    target = os.path.realpath(e.path)
                    if not _under(target, root):
                        out.append((os.path.relpath(e.path, root), target))
                elif e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
            except OSError:
                continue
    return out


def plan(source: Path, script_dir: str | None, own: str) -> tuple[Isolation | None, str]:
    """The directories each run sees copy-on-write: ``source`` (the user's directory),
    the script's folder when it is elsewhere, the targets of the symbolic links found
    there (followed :data:`LINK_DEPTH` levels) and the mounts under them. ``own``: fwd9m's
    temporary folder, which must lie outside all of them. Returns (None, why) when the
    user's directory itself cannot be covered."""
    top = os.path.realpath(source)
    if top == os.sep:
        return None, "your directory is the root of the file system"
    if _under(own, top) or _under(top, own):
        return None, f"fwd9m's own folder {own} lies in your directory (TMPDIR, or --keep DIR there)"
    iso = Isolation(str(source), [Layer(top, "")])
    budget = [SCAN_LIMIT]
    queue = [(top, "", 0)]
    if script_dir and not _under(os.path.realpath(script_dir), top):
        queue.append((os.path.realpath(script_dir), os.path.relpath(os.path.realpath(script_dir), top), 0))
    while queue:
        lower, name, depth = queue.pop(0)
        if lower != top:
            if any(_under(lower, layer.lower) and layer.only is None for layer in iso.layers):
                continue  # already seen copy-on-write (and reported)
            if _under(own, lower) or _under(lower, own) or lower == os.sep:
                iso.skipped.append(f"{name or lower} -> {lower} (it holds fwd9m's temporary folder)")
                continue
            iso.layers.append(Layer(lower, name))
        links = _links(lower, budget)
        if depth >= LINK_DEPTH:
            iso.skipped += [f"{os.path.join(name, rel)} -> {t} (more than {LINK_DEPTH} links deep)" for rel, t in links]
            continue
        for rel, target in links:
            label = os.path.join(name, rel) if name else rel
            if os.path.isdir(target):
                queue.append((target, label, depth + 1))
            elif os.path.isfile(target):
                parent = os.path.dirname(target)
                if any(_under(target, layer.lower) and layer.only is None for layer in iso.layers):
                    continue
                if any(layer.lower == parent for layer in iso.layers):
                    iso.skipped.append(f"{label} -> {target} (its folder is covered for another link's file)")
                    continue
                if _under(own, parent) or parent == os.sep:
                    iso.skipped.append(f"{label} -> {target} (its folder holds fwd9m's temporary folder)")
                    continue
                iso.layers.append(Layer(parent, label, only=os.path.basename(target)))
    if budget[0] < 0:
        iso.skipped.append(f"links beyond the first {SCAN_LIMIT:,} entries of your directory were not searched")
    why = _add_mounts(iso, own)
    if why:
        return None, why
    if len(iso.layers) > MAX_LAYERS:
        return None, f"more than {MAX_LAYERS} folders to cover (links and mounts)"
    iso.layers.sort(key=lambda layer: layer.lower.count(os.sep))  # outer first
    return iso, ""


def _add_mounts(iso: Isolation, own: str) -> str:
    """A layer for each mount under a covered directory (an overlay does not show what
    is mounted under its lower directory); a reason when one cannot be covered."""
    for point, fstype in _mounts():
        for layer in list(iso.layers):
            if point != layer.lower and _under(point, layer.lower):
                if fstype in _SPECIAL_FS or _under(own, point):
                    return f"{point} ({fstype}) is mounted under {layer.lower}"
                if not any(x.lower == point for x in iso.layers):
                    rel = os.path.relpath(point, layer.lower)
                    name = os.path.join(layer.name, rel) if layer.name else rel
                    iso.layers.append(Layer(point, name, layer.only))
                break
    return ""


def wrap(command: list[str], iso: Isolation, upper: Path) -> list[str]:
    """``command`` run with ``iso``'s layers; the root layer's writes land in ``upper``,
    the others' in ``upper.parent/layers/<i>/upper`` (kept beside it, so that a resumed
    run given the same ``upper`` sees what the interrupted one wrote)."""
    base = upper.parent / "layers"
    spec_layers = []
    for i, layer in enumerate(iso.layers):
        up = upper if layer.name == "" else _upper(upper, i)
        work = base / str(i) / "work"
        up.mkdir(parents=True, exist_ok=True)
        work.mkdir(parents=True, exist_ok=True)
        spec_layers.append({"lower": layer.lower, "upper": str(up), "work": str(work)})
    spec = base / "spec.json"
    spec.write_text(json.dumps({"cwd": iso.cwd, "writes": str(upper), "layers": spec_layers}), encoding="utf-8")
    return [sys.executable, "-I", _EXEC, str(spec), "--", *command]


def wrap_plain(command: list[str], folder: Path) -> list[str]:
    """``command`` that dies with fwd9m (SIGKILL included), without isolation: for the
    runs of ``--cwd link`` and ``--cwd empty`` (``folder``: where the spec goes)."""
    folder.mkdir(parents=True, exist_ok=True)
    spec = folder / "exec.json"
    spec.write_text(json.dumps({"cwd": "", "writes": "", "layers": []}), encoding="utf-8")
    return [sys.executable, "-I", _EXEC, str(spec), "--", *command]


def _upper(root_upper: Path, i: int) -> Path:
    return root_upper.parent / "layers" / str(i) / "upper"


def written(iso: Isolation, upper: Path) -> dict[str, Path]:
    """The regular files a run wrote in the layers that are not the root one (that one's
    are in ``upper`` itself), by the name the user knows them by (``outputs/result.txt``)."""
    out: dict[str, Path] = {}
    for i, layer in enumerate(iso.layers):
        if layer.name == "":
            continue
        up = _upper(upper, i)
        if layer.only is not None:
            p = up / layer.only
            if p.is_file() and not p.is_symlink():
                out[layer.name] = p
            continue
        for root, _dirs, files in os.walk(up):
            for f in files:
                p = Path(root, f)
                if stat.S_ISREG(os.lstat(p).st_mode):
                    out[os.path.join(layer.name, os.path.relpath(p, up))] = p
    return out


def host_path(iso: Isolation, upper: Path, path: str) -> str:
    """Where a file a run named (as it saw it, under a covered directory) is for fwd9m:
    in the run's layer when the run wrote it, else where it always was."""
    real = os.path.abspath(path)
    for i, layer in reversed(list(enumerate(iso.layers))):  # the innermost layer holding it
        if _under(real, layer.lower):
            rel = os.path.relpath(real, layer.lower)
            mine = (upper if layer.name == "" else _upper(upper, i)) / rel
            return str(mine) if os.path.lexists(mine) else real
    return real


_PROBED: dict[tuple, str] = {}


def probe(iso: Isolation, scratch: Path) -> str:
    """Try ``iso`` once (a command that does nothing, in layers under ``scratch``, a new
    folder in fwd9m's own, deleted after): "" when this machine allows it, else what
    failed. Cached per set of layers."""
    key = tuple(iso.layers)
    if key in _PROBED:
        return _PROBED[key]
    try:
        cmd = wrap(["true"], iso, scratch / "cwd")
        done = subprocess.run(cmd, capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
        why = ""
        if done.returncode != 0:
            why = done.stderr.decode(errors="replace").strip()[-300:] or f"exit status {done.returncode}"
    except (OSError, subprocess.TimeoutExpired) as exc:
        why = str(exc)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    _PROBED[key] = why.removeprefix("fwd9m isolation failed: ")
    return _PROBED[key]


def choose(mode: str | Isolation, source: Path, script: str | None, own: str, say) -> str | Isolation:
    """The working-directory mode the runs get: for ``"isolate"`` an :class:`Isolation`
    when this machine allows it, else ``"link"`` (said through ``say`` with the reason);
    any other mode as it is."""
    if mode != "isolate":
        return mode
    script_dir = os.path.dirname(os.path.abspath(script)) if script and os.path.isfile(script) else None
    iso, why = plan(source, script_dir, os.path.realpath(own))
    if iso is not None:
        why = probe(iso, Path(own) / "isolation-probe")
    if iso is None or why:
        say(
            f"your directory cannot be given a copy-on-write layer here ({why}); the runs link to it "
            f"instead, and fwd9m puts back what they write into it (--cwd link)"
        )
        return "link"
    covered = ", ".join(layer.name for layer in iso.layers if layer.name)
    say(
        "isolation: the runs see your directory through a copy-on-write layer (overlay mount); "
        + (
            "your files are never written"
            if not iso.skipped
            else "your files are not written but through the links below"
        )
        + (f" (covered too: {covered})" if covered else "")
    )
    for s in iso.skipped:
        say(f"isolation: WARNING: not covered, a run writes there for real: {s}")
    return iso
