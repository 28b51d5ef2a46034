"""What two runs left, compared as ``fwd9m check`` compares it, for a command that
compares something else first (``fwd9m debug`` compares ops): their output logs and the
files in their working folders. Names what differs; an empty list when all agree."""

from __future__ import annotations

import os
from pathlib import Path

from ._files import pair_names, read_structured, renamed_folders
from ._stderr import for_comparison

__all__ = ["differing_outputs"]


def _files(folder: Path) -> dict[str, Path]:
    """Regular files under ``folder`` (links not followed), by relative path."""
    out: dict[str, Path] = {}
    for root, dirs, names in os.walk(folder, followlinks=False):
        dirs[:] = [d for d in dirs if d != "__pycache__" and not os.path.islink(os.path.join(root, d))]
        for name in names:
            p = Path(root, name)
            if not p.is_symlink() and p.is_file() and not name.endswith((".pyc", ".tmp")):
                out[p.relative_to(folder).as_posix()] = p
    return out


def _file_differs(name: str, pa: Path, pb: Path, ra: tuple, rb: tuple) -> bool:
    from ..errors import FileFormatError
    from . import TEXT_LIMIT, compare_flat, compare_text, file_digest, is_structured, is_text, replace_in_leaves

    if is_text(str(pa)) and max(pa.stat().st_size, pb.stat().st_size) <= TEXT_LIMIT:
        return bool(compare_text(name, pa, pb, ra, rb))
    if is_structured(name):
        try:
            fa, fb = replace_in_leaves(read_structured(pa), ra), replace_in_leaves(read_structured(pb), rb)
            return bool(compare_flat(fa, fb))
        except FileFormatError:
            pass
    return file_digest(pa, ra) != file_digest(pb, rb)


def differing_outputs(logs: tuple[Path | None, Path | None], folders: tuple[Path, Path], scratch: Path) -> list[str]:
    """What differs between two runs' output logs (stdout and stderr together, the
    frameworks' own log lines left out, timings masked) and the files in their folders
    (paired as ``fwd9m check`` pairs them); ``scratch``: a folder for the filtered logs."""
    from . import compare_text

    found = []
    files = [_files(f) for f in folders]
    names = [pair_names(f) for f in files]
    ra, rb = ((*renamed_folders(n), (str(f), "<cwd>")) for n, f in zip(names, folders))
    if all(logs):
        scratch.mkdir(parents=True, exist_ok=True)
        la, _ = for_comparison(logs[0], scratch / "a.log")  # type: ignore[arg-type]
        lb, _ = for_comparison(logs[1], scratch / "b.log")  # type: ignore[arg-type]
        d = compare_text("output", la, lb, ra, rb)
        if d:
            found.append(f"their printed output (line {d.first_index[0]}: {d.a} vs {d.b})")
    by_a = {names[0][k]: p for k, p in files[0].items()}
    by_b = {names[1][k]: p for k, p in files[1].items()}
    for name in sorted(set(by_a) | set(by_b)):
        if name not in by_a or name not in by_b:
            found.append(f"{name} (written by run {1 if name in by_a else 2} only)")
        elif _file_differs(name, by_a[name], by_b[name], ra, rb):
            found.append(name)
    return found
