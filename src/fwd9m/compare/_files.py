"""Readers for saved tensors and checkpoints (``.npy/.npz/.safetensors/.h5/.keras/
.pt/.ckpt``, TensorFlow checkpoints, a SavedModel's ``fingerprint.pb``, TensorBoard
event files) into ``{tensor name: leaf}``, and a file's content digest.

Every reader checks what a header claims (shapes, offsets, lengths, archive member
sizes) against the bytes that are there before it allocates anything, never unpickles
(``.pt`` loads with ``torch.load(weights_only=True)``, whose unpickler builds tensors and
plain containers only), and fails with :class:`~fwd9m.errors.FileFormatError` only, so
the caller compares the file by its bytes instead."""

from __future__ import annotations

import io
import json
import math
import os
import re
import struct
import sys
import zipfile
from pathlib import Path
from typing import Any

from .._quiet import QuietNativeStderr
from ._sqlite import SUFFIXES as SQLITE_SUFFIXES
from ._sqlite import read_sqlite
from ._text import (
    CLOCK_AFTER_DATE,
    COMPACT_DATE,
    COMPACT_TIME,
    DATE,
    TB_STAMP,
    IgnoredValues,
    normalize_line,
    timing_name,
)
from ._values import Flat, Tensor, _np, flatten

#: File name suffixes read tensor by tensor; anything else is compared by content hash
#: (or line by line for :data:`TEXT_SUFFIXES`).
STRUCTURED_SUFFIXES = (
    *(".npy", ".npz", ".safetensors", ".h5", ".hdf5", ".keras", ".pt", ".pth", ".ckpt", ".zip", ".gz"),
    *SQLITE_SUFFIXES,
)
TEXT_SUFFIXES = (".txt", ".csv", ".tsv", ".json", ".jsonl", ".log", ".yaml", ".yml", ".md", ".out")
#: text files without a suffix: an MLflow file store's params, metrics and tags, one
#: file each (mlflow/store/tracking/file_store.py)
_TRACKER_TEXT = re.compile(r"(?:^|/)mlruns/[^/]+/[0-9a-f]{32}/(?:metrics|params|tags)/[^/]+$")


def is_text(name: str) -> bool:
    """Whether the file ``name`` (relative to the run's folder) is compared line by line."""
    return name.lower().endswith(TEXT_SUFFIXES) or bool(_TRACKER_TEXT.search(name))


#: Text files larger than this (bytes) are compared by hash.
TEXT_LIMIT = 64 << 20
#: TensorBoard event files: ``events.out.tfevents.<time>.<host>.<pid>...`` (TF's
#: tensorflow/core/util/events_writer.cc, torch.utils.tensorboard's event_file_writer.py)
EVENTS_PREFIX = "events.out.tfevents."
#: an archive member or HDF5 dataset may hold at most this many times the file's size
#: (deflate compresses at most about 1032:1; zeros in an HDF5 chunk that was never
#: written take no space at all), plus :data:`_SLACK` bytes
_RATIO = 1100
_SLACK = 64 << 20


class _Malformed(ValueError):
    """What a header claims does not fit the file (read_structured: FileFormatError)."""


def is_structured(name: str) -> bool:
    """Whether a file named ``name`` is read leaf by leaf by :func:`read_structured`."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    return base.lower().endswith(STRUCTURED_SUFFIXES) or base.startswith(EVENTS_PREFIX)


#: folder names TensorBoard writers make from the clock: torch's ``SummaryWriter()``
#: default ``runs/<%b%d_%H-%M-%S>_<host><comment>`` and ``add_hparams``'s
#: ``str(time.time())`` (torch/utils/tensorboard/writer.py,
#: https://github.com/pytorch/pytorch/blob/main/torch/utils/tensorboard/writer.py)
_TIMED_FOLDER = re.compile(r"[A-Z][a-z]{2}\d{2}_\d{2}-\d{2}-\d{2}_.*|\d{9,11}\.\d+")


#: a time stamp inside a file or folder name: ``2026-12-01_19-12-33`` (and its date
#: alone; a real year, month and day: ``model_1024-64-32.pt`` names layer sizes),
#: ``20261201-191233``, TensorBoard's ``Dec01_19-12-33``
_STAMP_IN_NAME = re.compile(
    r"(?<!\d)(?:" + DATE + CLOCK_AFTER_DATE + r")?"
    r"|" + COMPACT_DATE + r"[-_T]?" + COMPACT_TIME + r"|" + TB_STAMP + r")(?!\d)"
    r"|(?<![\d.])1[6-9]\d{8}(?![\d])"  # Unix seconds (2020-2033): CleanRL's runs/<exp>__<seed>__<int(time.time())>
)


#: a folder named by the time of day alone, below one named by the date: Hydra's
#: default ``outputs/${now:%Y-%m-%d}/${now:%H-%M-%S}`` (hydra/conf/hydra/config.yaml)
_CLOCK_FOLDER = re.compile(r"(?:[01]\d|2[0-3])[-_:.]?[0-5]\d[-_:.]?[0-5]\d(?:[.,_]\d{1,6})?")
#: a tracker's run folder: wandb's ``offline-run-<time>-<run id>`` (8 random letters and
#: digits), and MLflow's ``mlruns/<experiment>/<run id>`` (a uuid4 hex)
_RUN_ID = re.compile(r"((?:offline-)?run-<time>-)([a-z0-9]{8})")
#: a tracker's own bookkeeping, named as :func:`pair_names` pairs it: logs of its
#: processes, its binary record of the run and the host's description (clock, host
#: and process ids in every line); the run's results (wandb-summary.json,
#: config.yaml, metrics) are compared
TRACKER_BOOKKEEPING = re.compile(
    r"(?:^|/)wandb/(?:[^/]+/)?(?:logs/)?debug(?:-internal|-core|-cli\.[^/]*)?\.log$"
    r"|(?:^|/)wandb/[^/]+/run-<run id>\.wandb$"
    r"|(?:^|/)wandb/[^/]+/files/wandb-metadata\.json$"
    # MLflow's file store: a run's meta.yaml (its ids, random name, start and end time,
    # user) and its random name as a tag; its params, metrics and other tags are compared
    r"|(?:^|/)mlruns/[^/]+/<run id>/(?:meta\.yaml|tags/mlflow\.runName)$"
)
_MLFLOW_RUN = re.compile(r"[0-9a-f]{32}")
#: an MLflow experiment's id: 18 digits from a uuid4 (mlflow/utils/name_utils.py,
#: _generate_unique_integer_id, _EXPERIMENT_ID_FIXED_WIDTH); "0" is the default experiment
_MLFLOW_EXPERIMENT = re.compile(r"\d{18}")


def _timeless(name: str) -> str:
    """``name`` with each folder named by the clock (:data:`_TIMED_FOLDER`, and
    :data:`_CLOCK_FOLDER` under a dated one) and each time stamp in it
    (:data:`_STAMP_IN_NAME`) as ``<time>``, a tracker's run id (:data:`_RUN_ID`, MLflow's)
    as ``<run id>`` and an MLflow experiment's id as ``<experiment id>``."""
    parts: list[str] = []
    run_id = None
    for i, part in enumerate(name.split("/")):
        if _TIMED_FOLDER.fullmatch(part) or (parts and parts[-1].endswith("<time>") and _CLOCK_FOLDER.fullmatch(part)):
            parts.append("<time>")
            continue
        if run_id:  # wandb names files in its run folder by the run id too (run-<id>.wandb)
            part = part.replace(run_id, "<run id>")
        part = _STAMP_IN_NAME.sub("<time>", part)
        m = _RUN_ID.fullmatch(part)
        if m:
            run_id, part = m.group(2), m.group(1) + "<run id>"
        if i >= 2 and parts[i - 2] == "mlruns" and _MLFLOW_RUN.fullmatch(part):
            part = "<run id>"
        elif i >= 1 and parts[i - 1] == "mlruns" and _MLFLOW_EXPERIMENT.fullmatch(part):
            part = "<experiment id>"
        parts.append(part)
    return "/".join(parts)


def renamed_folders(names: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """(folder as written, folder as paired) for each folder :func:`pair_names` renamed
    (``outputs/2026-12-02/10-31-40`` -> ``outputs/<time>/<time>``), longest first: a file's
    content that names its own run folder (Hydra's ``hydra.yaml``, a Lightning checkpoint's
    ``dirpath``) reads the same in every run."""
    out = set()
    for name, paired in names.items():
        real, masked = name.split("/"), paired.split("/")
        if len(real) != len(masked):
            continue
        for i in range(len(real) - 1):
            if real[i] != masked[i]:
                out.add(("/".join(real[: i + 1]), "/".join(masked[: i + 1])))
                if masked[i].endswith("<run id>"):  # the id alone, as a tracker's files quote it
                    out.add((real[i][-8:] if masked[i] != "<run id>" else real[i], "<run id>"))
                elif masked[i] == "<experiment id>":
                    out.add((real[i], "<experiment id>"))
    return tuple(sorted(out, key=lambda kv: -len(kv[0])))


def pair_names(names: Any, strict: bool = False) -> dict[str, str]:
    """``{name: name to pair it with}``: TensorBoard event files, whose names hold the
    time, host name and process id, become ``<folder>/events.out.tfevents#k``, the k-th
    in that folder by the time in its name, where a folder named by the clock (see
    :data:`_TIMED_FOLDER`) reads ``<time>``. Other names keep their text but for the
    time stamps in them, which read ``<time>`` (a run folder or log named by the start
    time: ``checkpoints/2026-12-01_19-12-33/epoch0.pt``), and names that are then the
    same get ``#k`` after their last ``<time>``, the k-th by their own text (time stamps in the usual formats sort
    by time); with ``strict``, they stay as they are. Safe: files still pair one to one,
    their contents are compared, and a run that wrote more or fewer of them still differs."""
    out: dict[str, str] = {}
    by_dir: dict[str, list[str]] = {}
    same: dict[str, list[str]] = {}
    for name in names:
        folder, _, base = name.rpartition("/")
        if base.startswith(EVENTS_PREFIX):
            by_dir.setdefault(_timeless(folder) if folder else "", []).append(name)
        else:
            same.setdefault(name if strict else _timeless(name), []).append(name)
    for masked, group in same.items():
        if len(group) == 1:
            out[group[0]] = masked
        else:
            head, _, tail = masked.rpartition("<time>")  # the suffix stays last (.csv)
            out.update((name, f"{head}<time>#{k}{tail}") for k, name in enumerate(sorted(group), 1))

    def when(name: str) -> tuple[str, int, str]:
        folder, _, base = name.rpartition("/")
        stamp = base[len(EVENTS_PREFIX) :].split(".", 1)[0]
        return (folder, int(stamp) if stamp.isdigit() else -1, name)

    for folder, group in by_dir.items():
        for k, name in enumerate(sorted(group, key=when), 1):
            out[name] = f"{folder + '/' if folder else ''}{EVENTS_PREFIX.rstrip('.')}#{k}"
    return out


_SAFETENSORS_DTYPES = {
    "F64": "f8",
    "F32": "f4",
    "F16": "f2",
    "I64": "i8",
    "I32": "i4",
    "I16": "i2",
    "I8": "i1",
    "U64": "u8",
    "U32": "u4",
    "U16": "u2",
    "U8": "u1",
    "BOOL": "?",
    "BF16": "bfloat16",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
}


def _np_dtype(name: str) -> Any:
    np = _np()
    try:
        return np.dtype(name)
    except TypeError:
        import ml_dtypes  # bfloat16 and float8 types

        return np.dtype(getattr(ml_dtypes, name))


def _read_safetensors(path: Path) -> dict[str, Any]:
    """The safetensors layout (8-byte little-endian header size, JSON header, raw
    little-endian data; https://github.com/huggingface/safetensors#format), read
    without importing any framework."""
    np = _np()
    out: dict[str, Any] = {}
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        if n > min(size - 8, 100 << 20):
            raise _Malformed(f"header of {n} bytes in a file of {size}")
        header = json.loads(f.read(n))
        if not isinstance(header, dict):
            raise _Malformed("header is not a JSON object")
        base = 8 + n
        for name in sorted(header):
            info = header[name]
            if name == "__metadata__":
                out.update(flatten(info, name))
                continue
            start, end = info["data_offsets"]
            shape = info["shape"]
            if not (
                isinstance(shape, list)
                and all(type(d) is int and d >= 0 for d in shape)
                and type(start) is int
                and type(end) is int
                and 0 <= start <= end <= size - base
            ):
                raise _Malformed(f"tensor {name!r}: shape {shape!r} or offsets {[start, end]!r} do not fit the file")
            label = _SAFETENSORS_DTYPES.get(info["dtype"], str(info["dtype"]))
            count = math.prod(shape)
            try:
                dt = _np_dtype(label)
                label = dt.name
            except (ImportError, AttributeError, TypeError):
                dt = np.dtype(f"V{max(1, (end - start) // max(1, count))}")
            if count * dt.itemsize != end - start:
                raise _Malformed(
                    f"tensor {name!r}: shape {shape} of {label} needs {count * dt.itemsize} bytes, "
                    f"its offsets hold {end - start}"
                )
            f.seek(base + start)
            out[name] = Tensor(np.frombuffer(f.read(end - start), dtype=dt).reshape(shape), label.lower())
    return out


def _read_npy(f: Any, size: int) -> Any:
    """One ``.npy`` array from the file object ``f`` of ``size`` bytes, without pickle;
    the shape in its header must fit the bytes that follow it."""
    np = _np()
    fmt = np.lib.format
    version = fmt.read_magic(f)
    if version not in ((1, 0), (2, 0), (3, 0)):
        raise _Malformed(f"npy format version {version}")
    read_header = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
    shape, fortran, dtype = read_header(f, max_header_size=1 << 16)
    if dtype.hasobject:
        raise _Malformed("object arrays are stored with pickle (not read)")
    count = math.prod(shape)
    need, left = count * dtype.itemsize, size - f.tell()
    if need > left:
        raise _Malformed(f"header claims shape {shape} of {dtype} ({need} bytes); {left} bytes follow")
    arr = np.frombuffer(f.read(need), dtype=dtype, count=count) if need else np.zeros(count, dtype)
    return arr.reshape(shape[::-1]).transpose() if fortran else arr.reshape(shape)


def _tensor(arr: Any) -> Tensor:
    return Tensor(arr, arr.dtype.name)


def _h5_leaf(value: Any) -> Any:
    np = _np()
    if isinstance(value, np.ndarray) and value.dtype != object:
        return Tensor(value, value.dtype.name)
    if isinstance(value, np.generic):
        return Tensor(np.asarray(value), value.dtype.name)
    if isinstance(value, (str, bytes, int, float, type(None))):
        return value
    return value.tolist() if hasattr(value, "tolist") else repr(value)  # h5py.Empty, references


def _read_h5(source: Any, size: int) -> dict[str, Any]:
    """Every dataset of an HDF5 file by its path, and every attribute of the file, its
    groups and datasets as ``path@name`` (``@name`` for the file's own)."""
    import h5py

    out: dict[str, Any] = {}
    limit = _RATIO * size + _SLACK

    def attrs(name: str, obj: Any) -> None:
        for key in sorted(obj.attrs):
            out[f"{name}@{key}"] = _h5_leaf(obj.attrs[key])

    with h5py.File(source, "r") as f:

        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                nbytes = math.prod(obj.shape or ()) * obj.dtype.itemsize if obj.shape is not None else 0
                if nbytes > limit:
                    raise _Malformed(f"dataset {name!r} claims {nbytes} bytes in a file of {size}")
                out[name] = _h5_leaf(obj[()])
            attrs(name, obj)

        attrs("", f)
        f.visititems(visit)
    return out


def _zip_members(z: zipfile.ZipFile, size: int) -> list[zipfile.ZipInfo]:
    """An archive's members, once each, after checking that their sizes fit the file."""
    infos = [i for i in z.infolist() if not i.is_dir()]
    claimed = sum(i.file_size for i in infos)
    if claimed > _RATIO * size + _SLACK:
        raise _Malformed(f"members claim {claimed} bytes in an archive of {size}")
    names = [i.filename for i in infos]
    if len(set(names)) != len(names):
        raise _Malformed("two members have the same name")
    return sorted(infos, key=lambda i: i.filename)


#: fields of Keras's ``metadata.json`` that hold the time of the save
#: (``"date_saved": datetime.datetime.now()...`` in keras/src/saving/saving_lib.py,
#: https://github.com/keras-team/keras/blob/master/keras/src/saving/saving_lib.py)
_KERAS_TIME_STAMPS = ("date_saved",)


def _read_member(z: zipfile.ZipFile, info: zipfile.ZipInfo, out: Flat) -> None:
    """One member of a ``.keras`` or ``.npz`` archive into ``out``: ``.npy``, ``.npz`` and
    ``.h5`` members tensor by tensor, ``.json`` members value by value, any other member
    as its bytes."""
    name = info.filename
    data = z.read(info)
    if name.endswith(".npy"):
        out[name] = _tensor(_read_npy(io.BytesIO(data), len(data)))
    elif name.endswith(".npz"):
        out.update(flatten(dict(_read_zip(io.BytesIO(data), len(data))), name))
    elif name.endswith(".h5"):
        out.update(flatten(_read_h5(io.BytesIO(data), len(data)), name))
    elif name.endswith(".json") or _json_member(data) is not None:
        value = json.loads(data)
        if name == "config.json":
            value = _drop_ids(value)
        flat = flatten(value, name)
        for path, leaf in flat.items():  # addresses and times in strings, as in printed lines
            if isinstance(leaf, str) and len(leaf) <= _STRING_LIMIT:
                flat[path] = normalize_line(leaf)
        out.update(flat)
        out.containers.update(flat.containers)
        for path in flat:  # a timing saved with the model (SB3's start_time) is no result
            if timing_name(str(path).rsplit(".", 1)[-1]):
                out.ignored[str(path)] = "a timing"
        if isinstance(value, dict):
            for key in _KERAS_TIME_STAMPS if name == "metadata.json" else _SB3_TIMED if name == "data" else ():
                for path in flat:  # the key's value, or each leaf under it
                    if str(path) == f"{name}.{key}" or str(path).startswith(f"{name}.{key}."):
                        out.ignored[str(path)] = "the time of the save"
    elif data[:4] == b"PK\x03\x04" and len(data) <= _NESTED_LIMIT:  # an archive in the archive (SB3's policy.pth)
        out.update(flatten(dict(_read_zip(io.BytesIO(data), len(data))), name))
    else:
        out[name] = data


#: members of a Stable-Baselines3 archive's ``data`` (JSON) that hold wall times, pickled:
#: ``ep_info_buffer`` keeps each episode's ``{"r", "l", "t": time.time() - t_start}``
#: (stable_baselines3/common/monitor.py, Monitor.step)
_SB3_TIMED = ("ep_info_buffer",)


def _json_member(data: bytes) -> Any:
    """A member without a suffix that holds JSON (SB3's ``data``): its value, else None."""
    head = data[:64].lstrip()
    if not head.startswith((b"{", b"[")):
        return None
    try:
        return json.loads(data)
    except ValueError:
        return None


#: strings of a JSON member masked as printed lines are (``<function f at 0x7f..>``) up to this length
_STRING_LIMIT = 1 << 16

#: archives inside an archive read member by member up to this size (else their bytes)
_NESTED_LIMIT = 256 << 20


def _read_gzip(p: Path) -> Flat:
    """A ``.gz`` file by its content: the header's write time and file name are not the
    content (RFC 1952: MTIME, FNAME)."""
    import gzip

    out = Flat()
    with gzip.open(p, "rb") as f:
        data = f.read(_NESTED_LIMIT + 1)
    if len(data) > _NESTED_LIMIT:
        raise _Malformed("larger than fwd9m reads uncompressed")
    out["<content>"] = data
    out.ignored["<gzip header>"] = "the time of the write"
    return out


def _read_zip(source: Any, size: int) -> Flat:
    """Every member of a ``.keras`` or ``.npz`` archive (:func:`_read_member`); the
    members of an ``.npz`` are named without their ``.npy``, as ``numpy.load`` names them."""
    out = Flat()
    with zipfile.ZipFile(source) as z:
        for info in _zip_members(z, size):
            _read_member(z, info, out)
    renamed = Flat(containers=out.containers, ignored=out.ignored)
    for k, v in out.items():
        renamed[k[:-4] if k.endswith(".npy") and isinstance(v, Tensor) else k] = v
    return renamed


def _drop_ids(config: Any) -> Any:
    """A Keras config without ``shared_object_id`` (Keras writes ``id(obj)`` there, a
    memory address: keras/src/saving/serialization_lib.py,
    https://github.com/keras-team/keras/blob/master/keras/src/saving/serialization_lib.py)."""
    if isinstance(config, dict):
        return {k: _drop_ids(v) for k, v in config.items() if k != "shared_object_id"}
    if isinstance(config, list):
        return [_drop_ids(v) for v in config]
    return config


#: members of a ``torch.save`` zip archive that ``torch.load`` reads (the pickled
#: structure and the tensors' storages), and ``.data/serialization_id``, a checksum
#: over the archive's records (torch/csrc/.../inline_container.cc), so it differs
#: whenever the pickle's bytes do even where the values agree; the values are compared
#: instead. https://github.com/pytorch/pytorch/blob/main/caffe2/serialize/inline_container.cc
_TORCH_READ = re.compile(r"[^/]+/(data\.pkl|data/\d+|\.data/serialization_id)")

#: Lightning's ``Timer`` callback saves the time spent in each stage
#: (``{"time_elapsed": {stage: seconds}}``, pytorch_lightning/callbacks/timer.py,
#: https://github.com/Lightning-AI/pytorch-lightning/blob/master/src/lightning/pytorch/callbacks/timer.py)
_LIGHTNING_TIMER = re.compile(r"callbacks\.Timer\b.*\.time_elapsed(\.|$)")


def _read_torch(path: Path) -> Flat:
    """A ``torch.save`` file with ``torch.load(weights_only=True)``; the members of its
    zip archive that the load does not read (``version``, ``byteorder``, ...) are
    compared by their bytes."""
    if "torch" not in sys.modules and not _installed("torch"):
        raise ImportError("PyTorch is not installed")
    import warnings

    import torch

    with warnings.catch_warnings():  # a file's pickle protocol is no message for fwd9m's user
        warnings.simplefilter("ignore")
        out = flatten(torch.load(path, map_location="cpu", weights_only=True))
    out.ignored.update(
        (k, "time spent training (Lightning's Timer callback)") for k in out if _LIGHTNING_TIMER.search(k)
    )
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            for info in _zip_members(z, os.path.getsize(path)):
                if not _TORCH_READ.fullmatch(info.filename):
                    out["<archive>/" + info.filename.partition("/")[2]] = z.read(info)
    return out


def _read_tf_checkpoint(prefix: Path) -> dict[str, Any]:
    if "tensorflow" not in sys.modules and not _installed("tensorflow"):
        raise ImportError("TensorFlow is not installed")
    with QuietNativeStderr():
        import tensorflow as tf

        reader = tf.train.load_checkpoint(str(prefix))
        out: dict[str, Any] = {}
        for name in sorted(reader.get_variable_to_dtype_map()):
            value = _np().asarray(reader.get_tensor(name))
            out[name] = Tensor(value, value.dtype.name) if value.dtype != object else value.tolist()
    return out


#: fields of TensorFlow's SavedModel ``fingerprint.pb`` (``FingerprintDef``,
#: https://github.com/tensorflow/tensorflow/blob/master/tensorflow/core/protobuf/fingerprint.proto;
#: numbers checked against the installed TF 2.21 ``fingerprint_pb2``). Field 7, ``uuid``,
#: is random for every save and is skipped.
_FINGERPRINT_FIELDS = {
    1: "saved_model_checksum",
    2: "graph_def_program_hash",
    3: "signature_def_hash",
    4: "saved_object_graph_hash",
    5: "checkpoint_hash",
    6: "version",
}


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7


def _read_saved_model_fingerprint(path: Path) -> dict[str, Any]:
    """The hashes in a SavedModel's ``fingerprint.pb`` (protobuf wire format, read
    without TensorFlow), without its per-save ``uuid``."""
    buf = path.read_bytes()
    out: dict[str, Any] = {}
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 2:
            n, i = _varint(buf, i)
            value, i = buf[i : i + n], i + n
        else:
            raise ValueError(f"unexpected protobuf wire type {wire}")
        if number in _FINGERPRINT_FIELDS:
            out[_FINGERPRINT_FIELDS[number]] = value
    return out


#: TFRecord framing of an event file: uint64 length, uint32 masked CRC-32C of the length,
#: the data, uint32 masked CRC-32C of the data, all little-endian
#: (tensorflow/core/lib/io/record_writer.cc,
#: https://github.com/tensorflow/tensorflow/blob/master/tensorflow/core/lib/io/record_writer.cc).
#: The length's CRC is checked; the data's is not (pure Python would be slow), a damaged
#: record shows up as a difference or an unparsable event.
_MASK_DELTA = 0xA282EAD8


def _crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def _masked_crc(data: bytes) -> int:
    crc = _crc32c(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def _records(f: Any, size: int) -> Any:
    while True:
        head = f.read(12)
        if not head:
            return
        if len(head) < 12:
            raise _Malformed("truncated record header")
        (n,), (crc,) = struct.unpack("<Q", head[:8]), struct.unpack("<I", head[8:])
        if crc != _masked_crc(head[:8]):
            raise _Malformed("record length fails its CRC (not a TFRecord file)")
        if n + 4 > size - f.tell():
            raise _Malformed(f"record of {n} bytes in a file of {size}")
        data = f.read(n)
        f.read(4)
        yield data


def _fields(buf: bytes) -> list[tuple[int, int, Any]]:
    """``(number, wire type, value)`` of a protobuf message's fields: varints as ints,
    fixed64/fixed32 as their bytes, length-delimited fields as bytes."""
    out, i = [], 0
    while i < len(buf):
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            value, i = buf[i : i + width], i + width
        elif wire == 2:
            n, i = _varint(buf, i)
            value, i = buf[i : i + n], i + n
        else:
            raise _Malformed(f"unexpected protobuf wire type {wire}")
        if i > len(buf):
            raise _Malformed("truncated protobuf field")
        out.append((number, wire, value))
    return out


def _encode_fields(fields: list[tuple[int, int, Any]]) -> bytes:
    def varint(v: int) -> bytes:
        out = bytearray()
        while True:
            out.append((v & 0x7F) | (0x80 if v > 0x7F else 0))
            v >>= 7
            if not v:
                return bytes(out)

    parts = []
    for number, wire, value in fields:
        parts.append(varint(number << 3 | wire))
        parts.append(varint(value) if wire == 0 else (varint(len(value)) + value if wire == 2 else value))
    return b"".join(parts)


#: the ``Event`` and ``Summary.Value`` fields read (tensorflow/core/util/event.proto,
#: tensorflow/core/framework/summary.proto; numbers checked against tensorboard 2.21's
#: ``tensorboard.compat.proto``): Event 1 wall_time (double), 2 step, 5 summary;
#: Summary 1 value (repeated); Value 1 tag, 2 simple_value (float)
_EV_WALL, _EV_STEP, _EV_SUMMARY, _VAL_TAG, _VAL_SIMPLE = 1, 2, 5, 1, 2


def _event_values(data: bytes) -> tuple[int, list[tuple[str, Any]], list[tuple[int, bytes]]]:
    """One event: its step, its summary values ``(tag, value)`` (a ``float`` for a
    ``simple_value``, else the value's other fields as bytes: a tensor, histogram,
    image...), and its other fields ``(number, bytes)`` but the wall time."""
    step, values, other = 0, [], []
    for number, wire, value in _fields(data):
        if number == _EV_WALL:
            continue
        if number == _EV_STEP and wire == 0:
            step = value - (1 << 64) if value >= 1 << 63 else value
        elif number == _EV_SUMMARY and wire == 2:
            for vn, vw, v in _fields(value):
                if vn != 1 or vw != 2:
                    other.append((_EV_SUMMARY, _encode_fields([(vn, vw, v)])))
                    continue
                parts = _fields(v)
                tag = next((x for n, w, x in parts if n == _VAL_TAG and w == 2), b"").decode("utf-8", "replace")
                simple = [x for n, w, x in parts if n == _VAL_SIMPLE and w == 5]
                rest = [(n, w, x) for n, w, x in parts if n not in (_VAL_TAG, _VAL_SIMPLE)]
                leaf = (
                    struct.unpack("<f", simple[0])[0]
                    if simple and not rest
                    else _encode_fields([(n, w, x) for n, w, x in parts if n != _VAL_TAG])
                )
                values.append((tag, leaf))
        else:
            other.append((number, _encode_fields([(number, wire, value)])))
    return step, values, other


def _read_events(path: Path) -> Flat:
    """A TensorBoard event file's summary values as ``<tag>/step <step>`` (``#2``... for
    a tag written again at one step), other fields as ``event <k>/field <n>``; the wall
    time of every event is ignored (it is listed)."""
    out = Flat()
    seen: dict[str, int] = {}
    n = 0
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        for k, data in enumerate(_records(f, size)):
            n += 1
            step, values, other = _event_values(data)
            for tag, leaf in values:
                key = f"{tag}/step {step}"
                seen[key] = seen.get(key, 0) + 1
                out[key if seen[key] == 1 else f"{key}#{seen[key]}"] = leaf
            for number, raw in other:
                out[f"event {k}/field {number}"] = raw
    if n:
        out.ignored["wall_time"] = f"the time each of the {n} events was written"
    return out


#: an event file's leaf path (:func:`_read_events`): ``<tag>/step <step>``, ``#k`` for a
#: tag written again at one step
_EVENT_LEAF = re.compile(r"(?P<tag>.+)/step -?\d+(?:#\d+)?")


def mask_timing_tags(name: str, fa: Flat, fb: Flat, masked: IgnoredValues | None) -> tuple[Flat, Flat]:
    """Two runs' TensorBoard event file ``name`` without the values whose tag names a
    timing (:func:`~fwd9m.compare._text.timing_name` of the tag: HF ``Trainer``'s
    ``train/train_runtime``, ``eval/samples_per_second``, Keras's
    ``epoch_steps_per_second``), each counted in ``masked``; other files as they are.
    Safe: the same names are masked in printed lines, JSON and CSV, where the same values
    are logged; a tag such as ``train/loss``, ``time/total_timesteps`` or ``epoch`` is
    not a timing name and stays compared (``--strict`` does not call this)."""
    if not name.rsplit("/", 1)[-1].startswith(EVENTS_PREFIX.rstrip(".")):
        return fa, fb
    paths = {}
    for path in [*fa, *fb]:
        m = _EVENT_LEAF.fullmatch(str(path))
        if m and timing_name(m.group("tag")):
            paths[path] = m.group("tag")
    if not paths:
        return fa, fb
    if masked is not None:
        for path, tag in paths.items():
            if path in fa and path in fb:
                masked.add(name, "timing", tag, str(path), repr(fa[path]), repr(fb[path]))

    def rest(f: Flat) -> Flat:
        return Flat({k: v for k, v in f.items() if k not in paths}, containers=f.containers, ignored=f.ignored)

    return rest(fa), rest(fb)


#: An Orbax checkpoint (JAX) is a folder: ``_CHECKPOINT_METADATA`` (a step's JSON
#: metadata) and, per saved item, ``_METADATA`` (its tree) beside its TensorStore data in
#: files with random names (``d/<hex>``, ``ocdbt.process_0/...``), so it is read as one
#: unit, its arrays restored with Orbax.
ORBAX_STEP, ORBAX_ITEM = "_CHECKPOINT_METADATA", "_METADATA"
#: fields of ``_CHECKPOINT_METADATA`` that change with every save: the ``StepMetadata``
#: timestamps and ``performance_metrics`` ("time, memory") of
#: orbax/checkpoint/_src/metadata/checkpoint.py,
#: https://github.com/google/orbax/blob/main/checkpoint/orbax/checkpoint/_src/metadata/checkpoint.py
_ORBAX_VOLATILE = {
    "init_timestamp_nsecs": "the time the save began",
    "commit_timestamp_nsecs": "the time of the save",
    "performance_metrics": "how long the save took",
}


def orbax_roots(names: Any) -> list[str]:
    """The folders (relative names, ``""`` for the top) among ``names`` (relative file
    names) that hold an Orbax checkpoint: the topmost folder with a
    ``_CHECKPOINT_METADATA``, else with an item's ``_METADATA``."""
    folders = {n.rpartition("/")[0] for n in names if n.rpartition("/")[2] in (ORBAX_STEP, ORBAX_ITEM)}
    roots = []
    for folder in sorted(folders, key=lambda f: (f.count("/") if f else -1, f)):
        if not any(folder == r or not r or folder.startswith(r + "/") for r in roots):
            roots.append(folder)
    return roots


def _read_orbax(root: Path) -> Flat:
    """An Orbax checkpoint folder: the JSON files (``_CHECKPOINT_METADATA`` without its
    time stamps, each item's ``_METADATA``), each item's arrays as Orbax restores them,
    and any other file that is not TensorStore data by its bytes."""
    out = Flat()
    files = sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink())
    items = sorted({p.parent for p in files if p.name == ORBAX_ITEM})
    for p in files:
        rel = p.relative_to(root).as_posix()
        if any(i in p.parents for i in items) and p.name not in (ORBAX_STEP, ORBAX_ITEM):
            continue  # the item's data, compared as the restored arrays below
        if p.name in (ORBAX_STEP, ORBAX_ITEM):
            value = json.loads(p.read_bytes())
            flat = flatten(value, rel)
            out.update(flat)
            if p.name == ORBAX_STEP and isinstance(value, dict):
                for key, why in _ORBAX_VOLATILE.items():
                    if key in value:
                        for k in [k for k in out if k == f"{rel}.{key}" or k.startswith(f"{rel}.{key}.")]:
                            del out[k]
                        out.ignored[f"{rel}.{key}"] = why
        else:
            out[rel] = p.read_bytes()
    if items:
        if "orbax.checkpoint" not in sys.modules and not _installed("orbax.checkpoint"):
            raise ImportError("orbax-checkpoint is not installed")
        import logging

        with QuietNativeStderr():
            import orbax.checkpoint as ocp

            quiet = logging.getLogger("absl")
            level = quiet.level
            quiet.setLevel(logging.ERROR)
            try:
                for item in items:
                    rel = item.relative_to(root).as_posix()
                    out.update(flatten(ocp.PyTreeCheckpointer().restore(item), "" if rel == "." else rel))
            finally:
                quiet.setLevel(level)
    return out


def _installed(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def read_structured(path: str | os.PathLike[str], tf_checkpoint: bool = False) -> dict[str, Any]:
    """``{tensor name: leaf}`` of a ``.npy/.npz/.safetensors/.h5/.hdf5/.keras/.pt/.pth/
    .ckpt`` file or a TensorBoard event file, or of the TensorFlow checkpoint with prefix
    ``path`` when ``tf_checkpoint``. Leaves that change with every save (Keras's
    ``date_saved``, events' wall times) are listed in the result's ``ignored`` (a
    :class:`~fwd9m.compare.Flat`) and not compared. ``.pt``/``.ckpt`` load with ``torch.load(weights_only=True)`` (no
    arbitrary code runs), TF checkpoints with ``tf.train.load_checkpoint``; the framework
    is imported only for those.

    Raises:
        FileFormatError: the file cannot be parsed as its suffix says, or the framework
            needed to read it is not installed (callers fall back to a content hash).
    """
    from ..errors import FileFormatError

    p = Path(path)
    suffix = p.suffix.lower()
    try:
        if tf_checkpoint:
            return _read_tf_checkpoint(p)
        if p.name == "fingerprint.pb":
            return _read_saved_model_fingerprint(p)
        if p.is_dir():
            return _read_orbax(p)
        if p.name.startswith(EVENTS_PREFIX):
            return _read_events(p)
        if suffix == ".npy":
            with open(p, "rb") as f:
                return {"": _tensor(_read_npy(f, os.path.getsize(p)))}
        if suffix in (".npz", ".keras", ".zip"):  # by member: the headers hold each member's write time
            return _read_zip(p, os.path.getsize(p))
        if suffix == ".gz":
            return _read_gzip(p)
        if suffix == ".safetensors":
            return _read_safetensors(p)
        if suffix in (".h5", ".hdf5"):
            return _read_h5(p, os.path.getsize(p))
        if suffix in (".pt", ".pth", ".ckpt"):
            return _read_torch(p)
        if suffix in SQLITE_SUFFIXES:
            return read_sqlite(p)
    except Exception as exc:  # any parser failure means: compare by hash instead
        raise FileFormatError(
            f"{p.name}: not readable as {suffix or 'a checkpoint'} ({type(exc).__name__}: {str(exc)[:200]})"
        ) from None
    raise FileFormatError(f"{p.name}: no reader for {suffix!r} files")


def file_digest(path: str | os.PathLike[str], replacements: tuple[tuple[str, str], ...] = ()) -> str:
    """SHA-256 of a file's bytes, read in 1 MiB blocks, with every ``(old, new)`` of
    ``replacements`` (a run's own folder) replaced in them first (UTF-8 and file-system
    encodings of ``old``; a pickle that holds an absolute path)."""
    import hashlib

    pairs = {enc(o): n.encode() for o, n in replacements if o for enc in (str.encode, os.fsencode)}
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in _replaced(iter(lambda: f.read(1 << 20), b""), pairs):
            h.update(block)
    return h.hexdigest()


def _replaced(blocks: Any, pairs: dict[bytes, bytes]) -> Any:
    """``blocks`` with every key of ``pairs`` replaced by its value, also where one
    straddles two blocks (each block keeps back the bytes a match could still start in)."""
    if not pairs:
        yield from blocks
        return
    pattern = re.compile(b"|".join(re.escape(k) for k in sorted(pairs, key=len, reverse=True)))
    keep = max(map(len, pairs)) - 1
    carry = b""
    for block in blocks:
        buf = carry + block
        cut, pos, out = len(buf) - keep, 0, []
        for m in pattern.finditer(buf):
            if m.start() >= cut:
                break
            out += [buf[pos : m.start()], pairs[m.group()]]
            pos = m.end()
        end = max(pos, cut)
        out.append(buf[pos:end])
        carry = buf[end:]
        yield b"".join(out)
    yield pattern.sub(lambda m: pairs[m.group()], carry)
