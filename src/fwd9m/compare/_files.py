"""Readers for saved tensors and checkpoints (``.npy/.npz/.safetensors/.h5/.keras/
.pt/.ckpt``, TensorFlow checkpoints, a SavedModel's ``fingerprint.pb``) into
``{tensor name: leaf}``, and a file's content digest."""

from __future__ import annotations

import math
import os
import struct
import sys
from pathlib import Path
from typing import Any

from .._quiet import QuietNativeStderr
from ._values import Tensor, _np, flatten

#: File name suffixes read tensor by tensor; anything else is compared by content hash
#: (or line by line for :data:`TEXT_SUFFIXES`).
STRUCTURED_SUFFIXES = (".npy", ".npz", ".safetensors", ".h5", ".hdf5", ".keras", ".pt", ".pth", ".ckpt")
TEXT_SUFFIXES = (".txt", ".csv", ".tsv", ".json", ".jsonl", ".log", ".yaml", ".yml", ".md", ".out")
#: Text files larger than this (bytes) are compared by hash.
TEXT_LIMIT = 64 << 20

_SAFETENSORS_DTYPES = {"F64": "f8", "F32": "f4", "F16": "f2", "I64": "i8", "I32": "i4", "I16": "i2",
                       "I8": "i1", "U64": "u8", "U32": "u4", "U16": "u2", "U8": "u1", "BOOL": "?",
                       "BF16": "bfloat16", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2"}


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
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        if n > 100 << 20:
            raise ValueError(f"header of {n} bytes")
        import json

        header = json.loads(f.read(n))
        base = 8 + n
        for name in sorted(header):
            info = header[name]
            if name == "__metadata__":
                out[name] = info
                continue
            start, end = info["data_offsets"]
            f.seek(base + start)
            buf = f.read(end - start)
            label = _SAFETENSORS_DTYPES.get(info["dtype"], info["dtype"])
            try:
                dt = _np_dtype(label)
                label = dt.name
            except (ImportError, AttributeError, TypeError):
                dt = np.dtype(f"V{max(1, len(buf) // max(1, math.prod(info['shape'])))}")
            out[name] = Tensor(np.frombuffer(buf, dtype=dt).reshape(info["shape"]), label.lower())
    return out


def _read_h5(source: Any) -> dict[str, Any]:
    import h5py

    np = _np()
    out: dict[str, Any] = {}
    with h5py.File(source, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                value = obj[()]
                if isinstance(value, np.ndarray) and value.dtype != object:
                    out[name] = Tensor(value, value.dtype.name)
                elif isinstance(value, np.generic):
                    out[name] = Tensor(np.asarray(value), value.dtype.name)
                else:
                    out[name] = value.tolist() if hasattr(value, "tolist") else value
        f.visititems(visit)
    return out


def _read_keras(path: Path) -> dict[str, Any]:
    """A Keras 3 ``.keras`` archive: the weights in ``model.weights.h5`` and the model
    config; ``metadata.json`` (it holds the save date) is skipped."""
    import io
    import zipfile

    out: dict[str, Any] = {}
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        if "config.json" in names:
            import json

            out.update(flatten(_drop_ids(json.loads(z.read("config.json"))), "config.json"))
        for name in names:
            if name.endswith(".h5"):
                out.update(flatten(_read_h5(io.BytesIO(z.read(name))), name))
            elif name.endswith(".npz"):
                out.update(flatten(_read_npz(io.BytesIO(z.read(name))), name))
    return out


def _drop_ids(config: Any) -> Any:
    """A Keras config without ``shared_object_id`` (Keras writes ``id(obj)`` there, a
    memory address: keras/src/saving/serialization_lib.py,
    https://github.com/keras-team/keras/blob/master/keras/src/saving/serialization_lib.py)."""
    if isinstance(config, dict):
        return {k: _drop_ids(v) for k, v in config.items() if k != "shared_object_id"}
    if isinstance(config, list):
        return [_drop_ids(v) for v in config]
    return config


def _read_npz(source: Any) -> dict[str, Any]:
    np = _np()
    with np.load(source, allow_pickle=False) as z:
        return {k: Tensor(z[k], z[k].dtype.name) for k in z.files}


def _read_torch(path: Path) -> Any:
    if "torch" not in sys.modules and not _installed("torch"):
        raise ImportError("PyTorch is not installed")
    import torch

    return torch.load(path, map_location="cpu", weights_only=True)


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
_FINGERPRINT_FIELDS = {1: "saved_model_checksum", 2: "graph_def_program_hash", 3: "signature_def_hash",
                       4: "saved_object_graph_hash", 5: "checkpoint_hash", 6: "version"}


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
            value, i = buf[i:i + n], i + n
        else:
            raise ValueError(f"unexpected protobuf wire type {wire}")
        if number in _FINGERPRINT_FIELDS:
            out[_FINGERPRINT_FIELDS[number]] = value
    return out


def _installed(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def read_structured(path: str | os.PathLike[str], tf_checkpoint: bool = False) -> dict[str, Any]:
    """``{tensor name: leaf}`` of a ``.npy/.npz/.safetensors/.h5/.hdf5/.keras/.pt/.pth/
    .ckpt`` file, or of the TensorFlow checkpoint with prefix ``path`` when
    ``tf_checkpoint``. ``.pt``/``.ckpt`` load with ``torch.load(weights_only=True)`` (no
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
        if suffix == ".npy":
            arr = _np().load(p, allow_pickle=False)
            return {"": Tensor(arr, arr.dtype.name)}
        if suffix == ".npz":
            return _read_npz(p)
        if suffix == ".safetensors":
            return _read_safetensors(p)
        if suffix in (".h5", ".hdf5"):
            return _read_h5(p)
        if suffix == ".keras":
            return _read_keras(p)
        if suffix in (".pt", ".pth", ".ckpt"):
            return flatten(_read_torch(p))
    except Exception as exc:  # any parser failure means: compare by hash instead
        raise FileFormatError(f"{p.name}: not readable as {suffix or 'a checkpoint'} "
                              f"({type(exc).__name__}: {str(exc)[:200]})") from None
    raise FileFormatError(f"{p.name}: no reader for {suffix!r} files")


def file_digest(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file's bytes, read in 1 MiB blocks."""
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
