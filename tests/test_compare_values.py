"""fwd9m.compare on values and structured files: dtypes compared by their meaningful
bits, the per-run folder in string leaves, every member of zip archives, HDF5
attributes, TensorBoard event files, and readers that fail only with FileFormatError."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fwd9m
from fwd9m.compare import compare, compare_flat, read_structured


def one(diffs):
    assert len(diffs) == 1, [d.summary() for d in diffs]
    return diffs[0]


def _nan_with_payload(payload: int) -> float:
    return np.array([0x7FF8000000000000 | payload], np.uint64).view(np.float64)[0]


# ----------------------------------------------------------------- dtypes by their bits


def test_datetime_with_nat_structured_with_nan_and_object_arrays_agree_with_themselves():
    ts = np.array(["2024-01-01", "NaT"], dtype="datetime64[D]")
    td = np.array([1, "NaT"], dtype="timedelta64[s]")
    rec = np.array([(np.nan, 0), (1.0, 2)], dtype=[("x", "f8"), ("y", "i4")])
    obj = np.array([None, np.nan, "x", np.array([np.nan, -0.0])], dtype=object)
    for value in (ts, td, rec, obj, np.array(np.datetime64("NaT")), rec[0]):
        assert compare(value, value.copy()) == [], value
    d = one(compare(ts, np.array(["2024-01-02", "NaT"], dtype="datetime64[D]")))
    assert (d.kind, d.n_diff, d.first_index, d.a, d.b) == ("values", 1, (0,), "2024-01-01", "2024-01-02")
    assert one(compare(td, np.array([1, 2], dtype="timedelta64[s]"))).a == "NaT"


def test_structured_and_object_arrays_differ_where_a_field_or_element_does():
    rec = np.array([(np.nan, 0, (1, 2)), (1.0, 2, (0, 0))], dtype=[("x", "f8"), ("y", "i4"), ("v", "f4", (2,))])
    other = rec.copy()
    other["x"].view(np.uint64)[0] ^= 1  # another NaN payload: "nan" vs "nan" in its repr
    d = one(compare(rec, other))
    assert d.n_diff == 1 and d.first_index == (0,) and d.a != d.b and "bits" in d.a
    other = rec.copy()
    other["v"][1, 1] = -0.0
    assert one(compare(rec, other)).first_index == (1,)
    obj = np.array([None, np.array([0.0])], dtype=object)
    d = one(compare(obj, np.array([None, np.array([-0.0])], dtype=object)))
    assert d.first_index == (1,) and d.n_diff == 1


def test_nan_payloads_and_signed_zero_by_their_bits_in_arrays_scalars_and_floats():
    a, b = _nan_with_payload(1), _nan_with_payload(2)
    assert compare(np.array([a]), np.array([a])) == []
    assert compare(float(a), float(a)) == []
    assert one(compare(np.array([a]), np.array([b]))).kind == "values"
    assert one(compare(float(a), float(b))).kind == "values"
    assert one(compare(np.float16(0.0), np.float16(-0.0))).kind == "values"
    assert one(compare(np.complex64(complex(0, 0.0)), np.complex64(complex(0, -0.0)))).kind == "values"


def test_npy_files_of_such_dtypes_agree_bit_for_bit(tmp_path):
    arrays = {
        "ts": np.array(["2024-01-01", "NaT"], dtype="datetime64[D]"),
        "rec": np.array([(np.nan, 0)], dtype=[("x", "f8"), ("y", "i4")]),
        "s": np.array([b"a", b""], dtype="S3"),
        "u": np.array(["é", ""]),
    }
    for side in "ab":
        (tmp_path / side).mkdir()
        for name, arr in arrays.items():
            np.save(tmp_path / side / f"{name}.npy", arr)
    for name in arrays:
        fa, fb = (read_structured(tmp_path / side / f"{name}.npy") for side in "ab")
        assert compare_flat(fa, fb) == [], name


def test_check_fn_with_nat_and_nan_records_is_reproducible():
    def fn():
        return {
            "ts": np.array(["2024-01-01", "NaT"], dtype="datetime64[D]"),
            "rec": np.array([(np.nan, 0)], dtype=[("x", "f8"), ("y", "i4")]),
            "obj": np.array([None, float("nan")], dtype=object),
        }

    assert fwd9m.check(fn)


def test_check_script_with_nat_file_and_global_is_reproducible(tmp_path):
    script = tmp_path / "ts.py"
    script.write_text(
        textwrap.dedent("""
        import numpy as np
        ts = np.array(["2024-01-01", "NaT"], dtype="datetime64[D]")
        rec = np.array([(np.nan, 0)], dtype=[("x", "f8"), ("y", "i4")])
        np.save("ts.npy", ts)
        np.save("rec.npy", rec)
    """)
    )
    out = subprocess.run(
        [sys.executable, "-m", "fwd9m", "check", str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stdout + out.stderr


# ----------------------------------------------------------------- the per-run folder


def test_the_run_folder_is_replaced_in_paths_strings_bytes_and_string_arrays():
    from fwd9m.compare import Tensor, replace_in_leaves

    def flat(root):
        return {
            f"best_k.{root}/a.ckpt": 1.0,
            "dirpath": f"{root}/checkpoints",
            "raw": f"{root}/x".encode(),
            "hp": [f"{root}/y", {"k": f"{root}/z"}],
            "names": Tensor(np.array([f"{root}/n", "m"]), "str"),
            "big": Tensor(np.array([f"{root}/n"], ">U40"), "str"),
            "b": Tensor(np.array([f"{root}".encode()]), "b"),
        }

    fa = replace_in_leaves(flat("/tmp/c/run1/cwd"), (("/tmp/c/run1/cwd", "<cwd>"),))
    fb = replace_in_leaves(flat("/tmp/c/run2/cwd"), (("/tmp/c/run2/cwd", "<cwd>"),))
    assert compare_flat(fa, fb) == []
    assert fa["dirpath"] == "<cwd>/checkpoints" and "best_k.<cwd>/a.ckpt" in fa
    fc = replace_in_leaves({**flat("/tmp/c/run2/cwd"), "dirpath": "/elsewhere"}, (("/tmp/c/run2/cwd", "<cwd>"),))
    assert one(compare_flat(fa, fc)).path == "dirpath"


def test_lightning_default_checkpoint_logger_and_timer_are_reproducible(tmp_path):
    """A real pytorch-lightning run (default ModelCheckpoint, which stores its dirpath and
    best_model_path as absolute paths, the default TensorBoard logger, a Timer): the
    run folder is masked, the Timer's elapsed times are listed as not compared."""
    pytest.importorskip("pytorch_lightning")
    script = tmp_path / "train.py"
    script.write_text(
        textwrap.dedent("""
        import os
        import pytorch_lightning as pl
        import torch
        from pytorch_lightning.callbacks import Timer
        from torch.utils.data import DataLoader, TensorDataset

        pl.seed_everything(0)


        class Tiny(pl.LightningModule):
            def __init__(self, lr=0.1):
                super().__init__()
                self.save_hyperparameters()
                self.fc = torch.nn.Linear(4, 1)

            def training_step(self, batch, _):
                x, y = batch
                loss = torch.nn.functional.mse_loss(self.fc(x), y)
                self.log("loss", loss)
                return loss

            def configure_optimizers(self):
                return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


        data = TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
        trainer = pl.Trainer(max_epochs=1, deterministic=True, callbacks=[Timer()], log_every_n_steps=1,
                             enable_progress_bar=False)
        trainer.fit(Tiny(), DataLoader(data, batch_size=8))
        best = trainer.checkpoint_callback.best_model_path  # the run folder in the final state
    """)
    )
    out = subprocess.run(
        [sys.executable, "-m", "fwd9m", "check", str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=900
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "3 files" in out.stdout  # the checkpoint, hparams.yaml and the event file
    assert "callbacks.Timer.time_elapsed" in out.stdout and "wall_time" in out.stdout


# ----------------------------------------------------------------- archives and HDF5


def _lookup_model(words):
    keras = pytest.importorskip("keras")
    layer = keras.layers.StringLookup()
    layer.adapt(words)
    return keras.Sequential([keras.Input((1,), dtype="string"), layer])


def test_keras_assets_are_compared_and_the_save_date_is_listed(tmp_path):
    import time

    model = _lookup_model(["cat", "cat", "dog"])
    model.save(tmp_path / "a.keras")
    time.sleep(1.1)  # date_saved has a resolution of one second
    model.save(tmp_path / "b.keras")
    fa, fb = read_structured(tmp_path / "a.keras"), read_structured(tmp_path / "b.keras")
    assert compare_flat(fa, fb) == []
    assert ("metadata.json.date_saved", "the time of the save") in fwd9m.compare.ignored(fa, fb)
    _lookup_model(["dog", "dog", "cat"]).save(tmp_path / "c.keras")
    paths = [d.path for d in compare_flat(fa, read_structured(tmp_path / "c.keras"))]
    assert "assets/layers/string_lookup/vocabulary.txt" in paths


def test_npz_and_torch_archives_compare_every_member(tmp_path):
    import zipfile

    torch = pytest.importorskip("torch")
    np.savez(tmp_path / "a.npz", w=np.ones(2))
    with zipfile.ZipFile(tmp_path / "a.npz", "a") as z:
        z.writestr("notes.txt", b"one")
    np.savez(tmp_path / "b.npz", w=np.ones(2))
    with zipfile.ZipFile(tmp_path / "b.npz", "a") as z:
        z.writestr("notes.txt", b"two")
    d = one(compare_flat(read_structured(tmp_path / "a.npz"), read_structured(tmp_path / "b.npz")))
    assert d.path == "notes.txt"
    torch.save({"w": torch.ones(2)}, tmp_path / "a.pt")
    fa = read_structured(tmp_path / "a.pt")
    assert "w" in fa and "<archive>/version" in fa and not any("data.pkl" in k for k in fa)


def test_hdf5_attributes_of_the_file_groups_and_datasets_are_compared(tmp_path):
    h5py = pytest.importorskip("h5py")
    for name, acc, unit in (("a", 0.91, "m"), ("b", 0.92, "m"), ("c", 0.91, "s")):
        with h5py.File(tmp_path / f"{name}.h5", "w") as f:
            f["g/w"] = np.ones(3)
            f.attrs["best_val_acc"] = acc
            f["g/w"].attrs["unit"] = unit
            f["g"].attrs["note"] = "x"
    fa = read_structured(tmp_path / "a.h5")
    assert set(fa) == {"@best_val_acc", "g@note", "g/w", "g/w@unit"}
    assert one(compare_flat(fa, read_structured(tmp_path / "b.h5"))).path == "@best_val_acc"
    assert one(compare_flat(fa, read_structured(tmp_path / "c.h5"))).path == "g/w@unit"


# ----------------------------------------------------------------- TensorBoard event files


def _events(folder, values):
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(folder))
    for i, v in enumerate(values):
        writer.add_scalar("loss", v, i)
    writer.add_histogram("weights", np.arange(5.0), 0)
    writer.close()
    (path,) = folder.glob("events.out.tfevents.*")
    return path


def test_event_files_compare_tags_steps_and_values_not_wall_times(tmp_path):
    pytest.importorskip("torch.utils.tensorboard")
    import time

    a = _events(tmp_path / "a", [1.0, 2.0])
    time.sleep(1.1)  # another wall time, another file name
    b = _events(tmp_path / "b", [1.0, 2.0])
    c = _events(tmp_path / "c", [1.0, 2.5])
    fa, fb = read_structured(a), read_structured(b)
    assert a.name != b.name and compare_flat(fa, fb) == []
    assert [k for k, _ in fwd9m.compare.ignored(fa, fb)] == ["wall_time"]
    d = one(compare_flat(fa, read_structured(c)))
    assert d.path == "loss/step 1" and (d.a, d.b) == ("2.0", "2.5")
    # the same values as tensorboard's own protobuf classes read
    from tensorboard.compat.proto import event_pb2

    raw = a.read_bytes()
    scalars, i = {}, 0
    while i < len(raw):
        (n,) = np.frombuffer(raw[i : i + 8], "<u8")
        event = event_pb2.Event.FromString(raw[i + 12 : i + 12 + int(n)])
        i += 16 + int(n)
        for v in event.summary.value:
            if v.WhichOneof("value") == "simple_value":
                scalars[f"{v.tag}/step {event.step}"] = v.simple_value
    assert scalars == {k: v for k, v in fa.items() if k.startswith("loss/")}


def test_event_values_tagged_as_timings_are_masked_and_listed(tmp_path):
    """Regression (HF ``Trainer(report_to="tensorboard")``): ``eval/runtime``,
    ``eval/samples_per_second`` and ``train/train_runtime`` were compared as values, and
    a reproducible run was NOT REPRODUCIBLE on its own speed. Tags named as timings are
    masked (listed, ``--strict`` compares them); the loss stays compared."""
    pytest.importorskip("torch.utils.tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    from fwd9m.compare import mask_timing_tags
    from fwd9m.compare._text import IgnoredValues

    def events(folder, runtime, loss):
        writer = SummaryWriter(str(folder))
        for tag, v in (
            ("train/loss", loss),
            ("eval/runtime", runtime),
            ("train/train_samples_per_second", 1 / runtime),
        ):
            writer.add_scalar(tag, v, 3)
        writer.add_scalar("time/total_timesteps", 64, 3)  # a count, not a timing
        writer.close()
        return read_structured(next(folder.glob("events.out.tfevents.*")))

    fa, fb, fc = events(tmp_path / "a", 0.25, 1.0), events(tmp_path / "b", 0.5, 1.0), events(tmp_path / "c", 0.5, 1.5)
    assert {d.path for d in compare_flat(fa, fb)} == {"eval/runtime/step 3", "train/train_samples_per_second/step 3"}
    masked = IgnoredValues()
    name = "tb/events.out.tfevents#1"
    assert compare_flat(*mask_timing_tags(name, fa, fb, masked)) == []
    listed = {e["name"]: e for e in masked.to_list()}
    assert set(listed) == {"eval/runtime", "train/train_samples_per_second"}
    assert listed["eval/runtime"]["differed"] == 1 and listed["eval/runtime"]["where"] == f"{name}:eval/runtime/step 3"
    assert one(compare_flat(*mask_timing_tags(name, fa, fc, None))).path == "train/loss/step 3"
    assert mask_timing_tags("metrics.h5", fa, fb, None) == (fa, fb)  # only event files


def test_event_files_pair_by_folder_and_order():
    from fwd9m.compare import pair_names

    names = [
        "logs/events.out.tfevents.1700000009.host.7.0",
        "logs/events.out.tfevents.1700000001.host.7.1",
        "logs/val/events.out.tfevents.1700000005.h.9.0",
        "hparams.yaml",
    ]
    assert pair_names(names) == {
        names[1]: "logs/events.out.tfevents#1",
        names[0]: "logs/events.out.tfevents#2",
        names[2]: "logs/val/events.out.tfevents#1",
        "hparams.yaml": "hparams.yaml",
    }
    # folders torch's SummaryWriter names by the clock: SummaryWriter() and add_hparams()
    run1 = [
        "runs/Dec01_08-22-33_vm/events.out.tfevents.1.vm.7.0",
        "runs/Dec01_08-22-33_vm/1796112645.123/events.out.tfevents.2.vm.7.1",
    ]
    run2 = [
        "runs/Dec01_08-22-41_vm/events.out.tfevents.9.vm.8.0",
        "runs/Dec01_08-22-41_vm/1796112653.9/events.out.tfevents.10.vm.8.1",
    ]
    assert (
        list(pair_names(run1).values())
        == list(pair_names(run2).values())
        == ["runs/<time>/events.out.tfevents#1", "runs/<time>/<time>/events.out.tfevents#1"]
    )


def test_names_with_time_stamps_pair_by_their_order():
    """Regression (a script that saves into ``checkpoints/<start time>/`` and logs into
    ``train_<start time>.log``): the names differed between runs, so every file was
    "written by run 1 only" and the run NOT REPRODUCIBLE. Time stamps in names read
    ``<time>``; names that then collide are numbered in order, so a run that wrote more
    files still differs."""
    from fwd9m.compare import pair_names

    run1 = ["checkpoints/2026-12-01_19-12-33/epoch0.pt", "train_20261201-191233.log", "model.pt"]
    run2 = ["checkpoints/2026-12-01_19-12-41/epoch0.pt", "train_20261201-191241.log", "model.pt"]
    assert (
        list(pair_names(run1).values())
        == list(pair_names(run2).values())
        == [
            "checkpoints/<time>/epoch0.pt",
            "train_<time>.log",
            "model.pt",
        ]
    )
    per_epoch = ["m_2026-12-01_19-12-35.csv", "m_2026-12-01_19-12-33.csv"]
    assert pair_names(per_epoch) == {per_epoch[1]: "m_<time>#1.csv", per_epoch[0]: "m_<time>#2.csv"}
    assert pair_names(run1, strict=True)["model.pt"] == "model.pt"
    assert pair_names(run1, strict=True)[run1[1]] == run1[1]  # --strict: names as they are
    # numbers that are not time stamps stay: a step, a seed, a 14-digit id out of range
    for name in ("ckpt/step_000120.pt", "seed_20261399-999999.pt", "epoch=2-step=1200.ckpt"):
        assert pair_names([name]) == {name: name}


# ----------------------------------------------------------------- readers under bad input

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from fwd9m.errors import FileFormatError  # noqa: E402


def _read(tmp, name: str, data: bytes):
    path = tmp / name
    path.write_bytes(data)
    try:
        return read_structured(path)
    except FileFormatError:
        return None


@pytest.fixture(scope="module")
def valid_files(tmp_path_factory):
    """One small valid file of each format the readers parse: ``{file name: bytes}``."""
    import io

    h5py = pytest.importorskip("h5py")
    torch = pytest.importorskip("torch")
    from safetensors.numpy import save as st_save

    tmp = tmp_path_factory.mktemp("valid")
    out = {}
    buf = io.BytesIO()
    np.save(buf, np.arange(6.0).reshape(2, 3))
    out["a.npy"] = buf.getvalue()
    np.savez_compressed(tmp / "a.npz", w=np.ones(3), t=np.array(["x"]))
    out["a.npz"] = (tmp / "a.npz").read_bytes()
    out["a.safetensors"] = st_save({"w": np.ones(3, np.float32)}, metadata={"k": "v"})
    with h5py.File(tmp / "a.h5", "w") as f:
        f["g/w"] = np.ones(3)
        f.attrs["acc"] = 0.5
    out["a.h5"] = (tmp / "a.h5").read_bytes()
    torch.save({"w": torch.ones(3), "n": 1}, tmp / "a.pt")
    out["a.pt"] = (tmp / "a.pt").read_bytes()
    out["events.out.tfevents.1.host.1.0"] = _events(tmp / "ev", [1.0, 2.0]).read_bytes()
    keras_file = tmp / "a.keras"
    _lookup_model(["a", "b"]).save(keras_file)
    out["a.keras"] = keras_file.read_bytes()
    out["fingerprint.pb"] = bytes([8, 5, 16, 7]) + b"\x3a\x02ab"  # two hashes and a uuid
    return out


_NAMES = [
    "a.npy",
    "a.npz",
    "a.safetensors",
    "a.h5",
    "a.pt",
    "events.out.tfevents.1.host.1.0",
    "a.keras",
    "fingerprint.pb",
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(_NAMES), how=st.sampled_from(["truncate", "flip", "random"]), data=st.data())
def test_damaged_files_fail_only_with_a_format_error(valid_files, tmp_path, name, how, data):
    raw = bytearray(valid_files[name])
    if how == "truncate":
        raw = raw[: data.draw(st.integers(0, len(raw) - 1))]
    elif how == "flip":
        for i in data.draw(st.lists(st.integers(0, len(raw) - 1), min_size=1, max_size=8)):
            raw[i] ^= data.draw(st.integers(1, 255))
    else:
        raw = bytearray(data.draw(st.binary(max_size=512)))
    _read(tmp_path, name, bytes(raw))  # returns or raises FileFormatError, nothing else


def test_valid_files_read(valid_files, tmp_path):
    for name in _NAMES:
        assert _read(tmp_path, name, valid_files[name]), name


def _npy_header(shape, descr="<f8") -> bytes:
    import io

    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False, "shape": shape})
    return buf.getvalue()


def test_headers_claiming_more_than_the_file_holds_are_rejected_before_allocating(tmp_path):
    import io
    import json
    import struct
    import zipfile

    h5py = pytest.importorskip("h5py")
    huge = _npy_header((2**40,)) + b"\0" * 64
    (tmp_path / "h.npy").write_bytes(huge)
    with pytest.raises(FileFormatError, match="claims shape"):
        read_structured(tmp_path / "h.npy")
    with zipfile.ZipFile(tmp_path / "h.npz", "w") as z:
        z.writestr("w.npy", huge)
    with pytest.raises(FileFormatError, match="claims shape"):
        read_structured(tmp_path / "h.npz")
    header = json.dumps({"w": {"dtype": "F64", "shape": [2**40], "data_offsets": [0, 2**43]}}).encode()
    (tmp_path / "h.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 8)
    with pytest.raises(FileFormatError, match="do not fit"):
        read_structured(tmp_path / "h.safetensors")
    with h5py.File(tmp_path / "h.h5", "w") as f:  # chunks never written take no space
        f.create_dataset("x", shape=(2**40,), dtype="f8", chunks=(1024,))
    with pytest.raises(FileFormatError, match="claims"):
        read_structured(tmp_path / "h.h5")
    # a zip member whose central directory entry claims 4 GiB
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("notes.txt", b"x")
    raw = bytearray(buf.getvalue())
    cd = raw.index(b"PK\x01\x02")
    raw[cd + 24 : cd + 28] = struct.pack("<I", 0xFFFFFFF0)
    (tmp_path / "h.keras").write_bytes(bytes(raw))
    with pytest.raises(FileFormatError, match="claim"):
        read_structured(tmp_path / "h.keras")
    # an event record whose (correctly checksummed) length is 2**40
    from fwd9m.compare._files import _masked_crc

    length = struct.pack("<Q", 2**40)
    (tmp_path / "events.out.tfevents.1.h.1").write_bytes(length + struct.pack("<I", _masked_crc(length)) + b"\0" * 9)
    with pytest.raises(FileFormatError, match="record of"):
        read_structured(tmp_path / "events.out.tfevents.1.h.1")


def test_pickles_in_files_are_never_run(tmp_path):
    import pickle
    import zipfile

    pytest.importorskip("torch")
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (exec, (f"open({str(marker)!r}, 'w').close()",))

    payload = pickle.dumps(Evil())
    np.save(tmp_path / "o.npy", np.array([None, 1], dtype=object), allow_pickle=True)
    raw = (tmp_path / "o.npy").read_bytes()
    (tmp_path / "o.npy").write_bytes(raw[: raw.index(b"\n") + 1] + payload)
    with zipfile.ZipFile(tmp_path / "o.npz", "w") as z:
        z.writestr("o.npy", (tmp_path / "o.npy").read_bytes())
    with zipfile.ZipFile(tmp_path / "o.pt", "w") as z:
        z.writestr("archive/data.pkl", payload)
        z.writestr("archive/version", b"3\n")
    (tmp_path / "o.ckpt").write_bytes(payload)  # a legacy (non-zip) torch file
    for name in ("o.npy", "o.npz", "o.pt", "o.ckpt"):
        with pytest.raises(FileFormatError):
            read_structured(tmp_path / name)
    assert not marker.exists()


# ----------------------------------------------------------------- the verdict is the bits

_DTYPES = [
    "?",
    "i1",
    "i2",
    "<i4",
    ">i8",
    "u1",
    "u2",
    "u4",
    "u8",
    "<f2",
    "f4",
    ">f8",
    "c8",
    "c16",
    "M8[D]",
    "M8[ns]",
    "m8[s]",
    "m8[us]",
    "S5",
    "V3",
    "U2",
    [("x", "<f8"), ("y", "i1")],
    [("t", "M8[s]"), ("v", "<f4", (2,)), ("s", "S2")],
]


@st.composite
def _array_pair(draw):
    """Two arrays of one dtype from raw bytes (every NaN payload, -0.0, NaT, every
    string byte), the second with some bytes changed or not: whether they should agree
    is whether the bytes do (the structured dtypes above have no padding)."""
    dtype = np.dtype(draw(st.sampled_from(_DTYPES)))
    n = draw(st.integers(0, 6))
    # any bytes, also in a str array (those that are no code point come from damaged files)
    raw = bytearray(draw(st.binary(min_size=n * dtype.itemsize, max_size=n * dtype.itemsize)))
    if n:  # random bytes seldom make these: NaN payloads, -0.0, inf, NaT
        arr = np.frombuffer(bytes(raw), dtype).copy()
        for i in draw(st.lists(st.integers(0, n - 1), max_size=n)):
            for field in dtype.names or [None]:
                view = arr[field] if field else arr
                if view.dtype.kind in "fc":
                    view[i] = draw(st.sampled_from([np.nan, -np.nan, -0.0, 0.0, np.inf, -np.inf]))
                    if view.dtype.itemsize >= 4 and draw(st.booleans()):
                        view.reshape(n, -1).view(np.uint8)[i, 0] ^= 1  # another NaN payload
                elif view.dtype.kind in "Mm":
                    view[i] = np.array("NaT", view.dtype)
        raw = bytearray(arr.tobytes())
    other = bytearray(raw)
    if raw and draw(st.booleans()):
        other[draw(st.integers(0, len(raw) - 1))] ^= 1 << draw(st.integers(0, 7))
    a, b = (np.frombuffer(bytes(x), dtype).copy() for x in (raw, other))
    return a, b, raw == other


_OBJECTS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.text(max_size=3),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(0, 2**64 - 1).map(lambda u: float(np.array(u, np.uint64).view(np.float64))),
)


@settings(max_examples=400, deadline=None)
@given(_array_pair(), st.sampled_from(["bare", "nested"]))
def test_arrays_of_every_dtype_agree_exactly_when_their_bits_do(pair, how):
    a, b, same = pair
    if how == "nested":
        a, b = {"x": [a, (a[:1],)]}, {"x": [b, (b[:1],)]}
    assert (compare(a, b) == []) == same
    for d in compare(a, b):
        assert d.summary()  # a report can always be written


@settings(max_examples=200, deadline=None)
@given(st.lists(_OBJECTS, max_size=5), st.data())
def test_object_arrays_agree_exactly_when_their_elements_do(elements, data):
    import struct

    a = np.empty(len(elements), object)
    a[:] = elements
    b = a.copy()
    same = True
    if elements and data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(elements) - 1))
        b[i] = data.draw(_OBJECTS)
        x, y = a[i], b[i]
        same = type(x) is type(y) and (struct.pack("<d", x) == struct.pack("<d", y) if isinstance(x, float) else x == y)
    assert (compare(a, b) == []) == same


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_array_pair(), st.sampled_from([".npy", ".npz"]))
def test_saved_arrays_of_every_dtype_agree_exactly_when_their_bits_do(tmp_path, pair, suffix):
    a, b, same = pair
    for side, arr in (("a", a), ("b", b)):
        path = tmp_path / f"{side}{suffix}"
        np.save(path, arr) if suffix == ".npy" else np.savez(path, w=arr)
    fa, fb = read_structured(tmp_path / f"a{suffix}"), read_structured(tmp_path / f"b{suffix}")
    assert (compare_flat(fa, fb) == []) == same


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=60), st.lists(st.integers(0, 60), max_size=6))
def test_the_run_folder_is_masked_in_bytes_across_block_boundaries(data, cuts):
    from fwd9m.compare._files import _replaced

    pairs = {b"/r/run1/cwd": b"<cwd>", b"/p/r/run1/cwd": b"<cwd>"}
    data = data.replace(b"x", b"/r/run1/cwd").replace(b"y", b"/p/r/run1/cwd")
    edges = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    blocks = [data[i:j] for i, j in zip(edges, edges[1:])]
    expected = data.replace(b"/p/r/run1/cwd", b"<cwd>").replace(b"/r/run1/cwd", b"<cwd>")
    assert b"".join(_replaced(iter(blocks), pairs)) == expected


def test_check_masks_the_run_folder_in_files_compared_by_bytes_and_in_bytes_state(tmp_path):
    script = tmp_path / "paths.py"
    script.write_text(
        textwrap.dedent("""
        import os, pickle
        here = os.fsencode(os.path.abspath("out"))  # a bytes leaf of the final state
        with open("paths.pkl", "wb") as f:  # compared by its bytes
            pickle.dump({"out": os.path.abspath("out"), "n": 1}, f)
    """)
    )
    out = subprocess.run(
        [sys.executable, "-m", "fwd9m", "check", str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stdout + out.stderr


# ----------------------------------------------------------------- Orbax checkpoint folders

_ORBAX_SCRIPT = """
import os, sys
import numpy as np
import orbax.checkpoint as ocp

rng = np.random.default_rng(0 if sys.argv[1:] == ["seeded"] else None)
state = {"w": rng.standard_normal(4), "step": np.array(3)}
ckpt = ocp.StandardCheckpointer()
ckpt.save(os.path.abspath(os.environ.get("OUT", "ckpt")), state)
ckpt.wait_until_finished()
with ocp.CheckpointManager(os.path.abspath("managed")) as mgr:
    mgr.save(1, args=ocp.args.StandardSave(state))
    mgr.wait_until_finished()
"""


def test_orbax_checkpoints_compare_their_arrays_not_their_random_file_names(tmp_path):
    """An Orbax checkpoint names its data files at random and stamps its metadata with
    the time: it is read as one folder (arrays restored by Orbax), its time stamps listed."""
    pytest.importorskip("orbax.checkpoint")
    import os

    script = tmp_path / "save.py"
    script.write_text(_ORBAX_SCRIPT)
    out = subprocess.run(
        [sys.executable, "-m", "fwd9m", "check", "--no-hashseed-check", str(script), "seeded"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 files" in out.stdout.splitlines()[0] and "ckpt:_CHECKPOINT_METADATA.commit_timestamp_nsecs" in out.stdout
    for name in ("a", "b"):  # unseeded: the arrays differ, and that is what is reported
        subprocess.run(
            [sys.executable, str(script)],
            cwd=tmp_path,
            env={**os.environ, "OUT": name},
            check=True,
            capture_output=True,
            timeout=300,
        )
    diffs = compare_flat(read_structured(tmp_path / "a"), read_structured(tmp_path / "b"))
    assert [d.path for d in diffs] == ["w"]


def test_check_pairs_summary_writer_folders_named_by_the_clock_and_compares_their_values(tmp_path):
    pytest.importorskip("torch.utils.tensorboard")
    script = tmp_path / "sw.py"
    script.write_text(
        textwrap.dedent("""
        import random
        from torch.utils.tensorboard import SummaryWriter
        w = SummaryWriter()  # runs/<month day time>_<host>
        for i in range(3):
            w.add_scalar("loss", 1.0 / (i + 1), i)
        w.add_scalar("noise", random.random(), 2)
        w.add_hparams({"lr": 0.1}, {"hparam/loss": 0.3})  # a folder named str(time.time()) inside
        w.close()
    """)
    )
    out = subprocess.run(
        [sys.executable, "-m", "fwd9m", "check", "--no-hashseed-check", str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 1, out.stdout + out.stderr
    assert "1 difference(s)" in out.stdout and "runs/<time>/events.out.tfevents#1:noise/step 2" in out.stdout
