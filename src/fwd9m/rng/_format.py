"""The RNG-state file format (npz + JSON header, no pickle) and the torch state_dict pair."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path

from .._rng_adapters import _np
from ..errors import ConfigurationError, FileFormatError
from ._state import RestoreReport, State, _copy_tree, _validate, capture_rng_state, restore_rng_state

FORMAT = "fwd9m.rng-state"
FORMAT_VERSION = 1
_HEADER = "__fwd9m_header__"
#: An RNG-state file is a few KiB plus the registered generators' state; a file, or the
#: arrays it declares, larger than this is not one (and would be read whole).
MAX_RNG_STATE_BYTES = 256 << 20
_FIX = "Fix: point to a file written by fwd9m.save_rng_state, or re-save the state."


# --------------------------------------------------------------------------- file format


def _framework_versions() -> dict[str, str]:
    from .._frameworks import FRAMEWORKS, installed_version

    out = {"python": sys.version.split()[0]}
    for name in ["numpy", *FRAMEWORKS]:
        if name in sys.modules:
            out[name] = str(getattr(sys.modules[name], "__version__", None) or installed_version(name))
    return out


def _split(tree, arrays: dict, path: str):
    np = _np()
    if isinstance(tree, dict):
        return {k: _split(v, arrays, f"{path}/{k}") for k, v in tree.items()}
    if isinstance(tree, list):
        return [_split(v, arrays, f"{path}/{i}") for i, v in enumerate(tree)]
    if isinstance(tree, np.ndarray):
        key = f"a{len(arrays)}"
        arrays[key] = tree
        return {"__array__": key}
    if tree is None or isinstance(tree, (bool, int, float, str)):
        return tree
    raise TypeError(f"cannot save {type(tree).__name__} at {path} in an RNG state")


def _join(tree, arrays):
    if isinstance(tree, dict):
        if set(tree) == {"__array__"}:
            return arrays[tree["__array__"]]
        return {k: _join(v, arrays) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_join(v, arrays) for v in tree]
    return tree


def to_bytes(state: State | None = None) -> bytes:
    """Serialise ``state`` (default: :func:`capture_rng_state`) to the file format."""
    np = _np()
    state = capture_rng_state() if state is None else state
    arrays: dict = {}
    sources = _split(_copy_tree(state), arrays, "")
    header = {"format": FORMAT, "version": FORMAT_VERSION, "sources": sources, "versions": _framework_versions()}
    blob = json.dumps(header, sort_keys=True).encode("utf-8")
    buf = io.BytesIO()
    np.savez(buf, **{_HEADER: np.frombuffer(blob, dtype=np.uint8)}, **arrays)
    return buf.getvalue()


def _check_members(archive: bytes, origin: str) -> None:
    """Refuse, before NumPy reads them, archive members that declare more than they
    hold: ``np.load`` allocates an array of the shape a ``.npy`` header declares before
    reading its data (``numpy/lib/format.py``, ``read_array``: ``numpy.ndarray(count,
    dtype=dtype)`` for a file inside a zip), so 200 bytes declaring ``(2**40,)`` would
    ask for terabytes. Each member's declared data must fit in its uncompressed size,
    and the sizes together stay under :data:`MAX_RNG_STATE_BYTES` (a zip bomb)."""
    import zipfile

    np = _np()
    fmt = np.lib.format
    with zipfile.ZipFile(io.BytesIO(archive)) as z:
        infos = z.infolist()
        total = sum(i.file_size for i in infos)
        if total > MAX_RNG_STATE_BYTES:
            raise FileFormatError(
                f"{origin}: its members unpack to {total} bytes, more than any "
                f"RNG-state file holds ({MAX_RNG_STATE_BYTES} at most). {_FIX}"
            )
        for info in infos:
            if not info.filename.endswith(".npy"):
                continue
            with z.open(info) as f:
                version = fmt.read_magic(f)
                read = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
                shape, _, dtype = read(f, max_header_size=10_000)
                count = 1
                for dim in shape:
                    count *= dim
                need = count * dtype.itemsize
                if need > info.file_size:
                    raise FileFormatError(
                        f"{origin}: member {info.filename!r} declares a {dtype} array "
                        f"of shape {shape} ({need} bytes) but holds {info.file_size} "
                        f"bytes. {_FIX}"
                    )


def from_bytes(data: bytes, *, origin: str = "<bytes>") -> State:
    """Parse the file format; raises FileFormatError on anything unexpected."""
    np = _np()
    fix = "Fix: point to a file written by fwd9m.save_rng_state, or re-save the state."
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"expected bytes, got {type(data).__name__}")
    if bytes(data[:4]) != b"PK\x03\x04":
        raise FileFormatError(
            f"{origin} is not an fwd9m RNG-state file (it is not a zip/npz archive; {len(data)} bytes). {fix}"
        )
    header, arrays = _read_archive(np, data, origin, fix)
    try:
        state = _join(header["sources"], arrays)
    except RecursionError:
        raise FileFormatError(f"{origin}: the header is nested too deeply. {fix}") from None
    except (KeyError, TypeError) as exc:
        raise FileFormatError(f"{origin}: the header refers to a missing array ({exc}). {fix}") from exc
    if not isinstance(state, dict):
        raise FileFormatError(f"{origin}: sources is not a mapping. {fix}")
    try:
        _validate(state)
    except ConfigurationError as exc:
        raise FileFormatError(f"{origin}: {exc}. {fix}") from exc
    return state


def _read_archive(np, data, origin: str, fix: str) -> tuple[dict, dict]:
    """The header and the arrays of the npz archive ``data``, without unpickling.

    Raises:
        FileFormatError: no or a foreign header, another format version, or an archive
            that is truncated or corrupted.
    """
    import zipfile

    try:
        _check_members(bytes(data), origin)
        with np.load(io.BytesIO(bytes(data)), allow_pickle=False) as z:
            if _HEADER not in z.files:
                raise FileFormatError(
                    f"{origin} is an npz archive but has no {_HEADER} entry: not an fwd9m RNG-state file. {fix}"
                )
            header = json.loads(z[_HEADER].tobytes().decode("utf-8"))
            _check_header(header, origin, fix)
            arrays = {k: z[k] for k in z.files if k != _HEADER}
    except FileFormatError:
        raise
    except (
        zipfile.BadZipFile,
        EOFError,
        OSError,
        ValueError,
        KeyError,
        RecursionError,
        NotImplementedError,
        SyntaxError,
        TypeError,
        OverflowError,
        MemoryError,
    ) as exc:
        # NotImplementedError: an unsupported zip compression; SyntaxError/TypeError: a
        # .npy header that is not a Python literal dict; MemoryError: last resort
        raise FileFormatError(f"{origin} is truncated or corrupted ({type(exc).__name__}: {exc}). {fix}") from exc
    return header, arrays


def _check_header(header, origin: str, fix: str) -> None:
    """The header names this format and its version.

    Raises:
        FileFormatError: another format or version.
    """
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        got = header.get("format") if isinstance(header, dict) else header
        raise FileFormatError(f"{origin}: header format is {got!r}, expected {FORMAT!r}. {fix}")
    version = header.get("version")
    if version != FORMAT_VERSION:
        raise FileFormatError(
            f"{origin} was written in RNG-state format version {version!r}; this "
            f"fwd9m reads version {FORMAT_VERSION}. Fix: use the fwd9m version that "
            f"wrote it (pip install -U framework-determinism for newer files)."
        )


def save_rng_state(path: str | os.PathLike, state: State | None = None, *, overwrite: bool = False) -> Path:
    """Write ``state`` (default: capture now) to ``path`` atomically (temp + rename).

    An existing RNG-state file is replaced (a checkpoint saved again); any other existing
    file only with ``overwrite=True``, so a mistyped path cannot destroy a user's file.

    Returns:
        the path written. The file is an ``.npz`` archive (see the module docstring);
        a few KiB plus the registered generators' state.

    Raises:
        ConfigurationError: ``path`` exists and is not an RNG-state file (nor
            ``overwrite``), or is a directory.
    """
    from .._files import refuse_overwrite

    path = Path(path)
    if path.is_dir():
        raise ConfigurationError(
            f"save_rng_state({str(path)!r}): that is a directory; name the file, e.g. {str(path / 'rng.npz')!r}"
        )
    refuse_overwrite(
        path,
        "save_rng_state:",
        ours=_is_state_file,
        force=overwrite,
        what="an RNG-state file",
        example="rng.npz",
        force_fix="pass overwrite=True to replace it",
    )
    data = to_bytes(state)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def _is_state_file(path: Path) -> bool:
    """Whether ``path`` is an archive holding the fwd9m header entry (or empty)."""
    import zipfile

    try:
        if path.stat().st_size == 0:
            return True
        with zipfile.ZipFile(io.BytesIO(read_file(path))) as z:
            return _HEADER + ".npy" in z.namelist()
    except (OSError, zipfile.BadZipFile, FileFormatError, ValueError):
        return False


def load_rng_state(path: str | os.PathLike, *, restore: bool = True, strict: bool = False) -> State:
    """Read an RNG-state file and (by default) restore it.

    The whole file is read and checked before any RNG changes: a truncated, corrupted
    or unknown-version file raises and leaves every RNG as it was.

    Returns:
        the state dict.

    Raises:
        FileFormatError: unreadable, not a regular file (a named pipe or device is
            refused before reading: it would block or never end), larger than
            :data:`MAX_RNG_STATE_BYTES`, truncated, not an RNG-state file, or unknown
            format version.
        FileNotFoundError: no such file.
    """
    from .._files import shown

    state = from_bytes(read_file(path), origin=shown(path))
    if restore:
        _restore(state, strict, shown(path))
    return state


def read_file(path: str | os.PathLike) -> bytes:
    """The bytes of the RNG-state file ``path``, read with the checks every fwd9m reader
    uses (:func:`fwd9m._files.read_regular_file`).

    Raises:
        FileNotFoundError: no such file (a missing file is a fresh start for callers).
        FileFormatError: not a regular file, unreadable, or too large.
    """
    from .._files import read_regular_file

    if not os.path.lexists(path):
        raise FileNotFoundError(f"no such RNG-state file: {os.fspath(path)}")
    return read_regular_file(path, "RNG-state", "point to a file written by fwd9m.save_rng_state", MAX_RNG_STATE_BYTES)


def _restore(state: State, strict: bool, origin: str) -> RestoreReport:
    """restore_rng_state, with a state the generator itself refuses (a Python state of
    another version, an out-of-range word) as FileFormatError: nothing was changed
    (restore_rng_state rolls back)."""
    from ..errors import Fwd9mError

    try:
        return restore_rng_state(state, strict=strict)
    except Fwd9mError:
        raise
    except (ValueError, TypeError, KeyError, IndexError, OverflowError) as exc:
        raise FileFormatError(
            f"{origin}: a saved RNG state does not fit its generator "
            f"({type(exc).__name__}: {exc}); no RNG was changed. Fix: point to a "
            f"file written by fwd9m.save_rng_state, or re-save the state."
        ) from exc


def state_dict(sources: list[str] | None = None) -> dict:
    """RNG state for a PyTorch checkpoint: ``{"format": ..., "data": uint8 tensor}``.

    Safe with ``torch.load(..., weights_only=True)`` (a str, an int and a tensor).
    Pair: :func:`load_state_dict`.
    """
    import torch

    blob = to_bytes(capture_rng_state(sources))
    return {"format": FORMAT, "version": FORMAT_VERSION, "data": torch.frombuffer(bytearray(blob), dtype=torch.uint8)}


def load_state_dict(sd: dict, *, strict: bool = False) -> RestoreReport:
    """Restore from :func:`state_dict` output. Raises FileFormatError when malformed."""
    if not isinstance(sd, dict) or "data" not in sd:
        raise FileFormatError("not an fwd9m RNG state_dict (no 'data' entry)")
    data = sd["data"]
    raw = data.numpy().tobytes() if hasattr(data, "numpy") else bytes(data)
    return _restore(from_bytes(raw, origin="state_dict"), strict, "state_dict")
