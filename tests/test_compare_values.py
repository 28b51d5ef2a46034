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
    arrays = {"ts": np.array(["2024-01-01", "NaT"], dtype="datetime64[D]"),
              "rec": np.array([(np.nan, 0)], dtype=[("x", "f8"), ("y", "i4")]),
              "s": np.array([b"a", b""], dtype="S3"), "u": np.array(["é", ""])}
    for side in "ab":
        (tmp_path / side).mkdir()
        for name, arr in arrays.items():
            np.save(tmp_path / side / f"{name}.npy", arr)
    for name in arrays:
        fa, fb = (read_structured(tmp_path / side / f"{name}.npy") for side in "ab")
        assert compare_flat(fa, fb) == [], name


def test_check_fn_with_nat_and_nan_records_is_reproducible():
    def fn():
        return {"ts": np.array(["2024-01-01", "NaT"], dtype="datetime64[D]"),
                "rec": np.array([(np.nan, 0)], dtype=[("x", "f8"), ("y", "i4")]),
                "obj": np.array([None, float("nan")], dtype=object)}

    assert fwd9m.check(fn)


def test_check_script_with_nat_file_and_global_is_reproducible(tmp_path):
    script = tmp_path / "ts.py"
    script.write_text(textwrap.dedent("""
        import numpy as np
        ts = np.array(["2024-01-01", "NaT"], dtype="datetime64[D]")
        rec = np.array([(np.nan, 0)], dtype=[("x", "f8"), ("y", "i4")])
        np.save("ts.npy", ts)
        np.save("rec.npy", rec)
    """))
    out = subprocess.run([sys.executable, "-m", "fwd9m", "check", str(script)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
