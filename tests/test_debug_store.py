"""The trace reader (``fwd9m._recording._store.TraceReader``) on crafted and random bytes:
every problem is a FileFormatError naming the file (exit 2 from the CLI), never a
traceback, a hang or an unbounded allocation. No framework is needed: traces are
written with the real TraceWriter and then edited byte by byte."""

from __future__ import annotations

import os
import struct
import zlib

import pytest
from conftest import cli_in_process
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fwd9m._recording import _store
from fwd9m.debug._compare import sample_difference
from fwd9m.errors import FileFormatError

HEADER = {"frameworks": ["torch"], "level": "digests", "program": None, "environment": None}


def _frame(payload: bytes) -> bytes:
    return struct.pack("<I", len(payload)) + payload + struct.pack("<I", zlib.crc32(payload))


def _S(text: bytes) -> bytes:
    return struct.pack("<cI", b"S", len(text)) + text


def _O(name: int, ctx: int, tensors: list[bytes], n_in: int | None = None) -> bytes:
    n_in = len(tensors) if n_in is None else n_in
    return struct.pack("<cIIIBB", b"O", name, ctx, 0, n_in, len(tensors) - n_in) + b"".join(tensors)


def _header_bytes(tmp_path) -> bytes:
    """Signature and header frame of a real trace (no records)."""
    path = tmp_path / "empty.trace"
    w = _store.TraceWriter(path, HEADER)
    os.close(w._fd)  # no end record: only the header
    w._fd = None
    return path.read_bytes()


def _trace(tmp_path, records: bytes, name: str = "crafted.trace") -> str:
    """A trace whose one record frame holds ``records``, with a valid checksum."""
    path = tmp_path / name
    path.write_bytes(_header_bytes(tmp_path) + _frame(records))
    return str(path)


def _good_ops(n: int = 3) -> bytes:
    recs = _S(b"aten::add") + _S(b"m\x1fforward\x1fx.py:1\x1f\x1fcpu") + _S(b"float32[4]")
    t = struct.pack("<IBQ", 2, _store.HAS_DIGEST | _store.HAS_SAMPLE, 7) + bytes([8]) + b"\0" * 8
    return recs + b"".join(_O(0, 1, [t, t], n_in=1) for _ in range(n))


CRAFTED = {  # each was an IndexError or struct.error (exit 1 with a traceback) before
    "string id 999": (_S(b"add") + _S(b"ctx") + _O(999, 1, []), "names string 999, but only 2"),
    "op record cut short": (_S(b"add") + struct.pack("<cII", b"O", 0, 1), "cut short or malformed"),
    "tensor cut short": (
        _S(b"add")
        + _S(b"c")
        + _S(b"float32[4]")
        + struct.pack("<cIIIBB", b"O", 0, 1, 0, 2, 0)
        + struct.pack("<IB", 2, 0),
        "cut short or malformed",
    ),
    "5-byte float32 sample": (
        _S(b"add")
        + _S(b"c")
        + _S(b"float32[4]")
        + _O(0, 1, [struct.pack("<IB", 2, _store.HAS_SAMPLE) + bytes([5]) + b"12345"]),
        "holds 5 bytes, not a multiple of 4",
    ),
    "sample past the frame": (
        _S(b"add")
        + _S(b"c")
        + _S(b"float32[4]")
        + _O(0, 1, [struct.pack("<IB", 2, _store.HAS_SAMPLE) + bytes([200]) + b"1234"]),
        "declares 200 bytes of data but its frame holds 4",
    ),
    "string past the frame": (struct.pack("<cI", b"S", 1000) + b"ab", "declares 1000 bytes"),
    "end record past the frame": (struct.pack("<cI", b"E", 50) + b"{}", "declares 50 bytes"),
    "capture of 3 float32 bytes": (
        _good_ops(1) + struct.pack("<cIBBIQ", b"C", 0, 1, 0, 2, 3) + b"abc",
        "holds 3 bytes, not a multiple of 4",
    ),
    "capture naming string 50": (
        _good_ops(1) + struct.pack("<cIBBIQ", b"C", 0, 1, 0, 50, 4) + b"abcd",
        "names string 50",
    ),
}


@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_crafted_record_is_a_format_error_naming_the_file(tmp_path, case):
    records, message = CRAFTED[case]
    path = _trace(tmp_path, records)
    with pytest.raises(FileFormatError, match=message) as info:
        list(_store.TraceReader(path))
    assert path in str(info.value) and "checksum is right" in str(info.value)


def test_crafted_traces_exit_2_from_diff_and_in_rank_folders(capsys, tmp_path):
    """`fwd9m debug diff` of such a trace, alone or inside rank folders, exits 2 with
    the file and what is wrong (was: exit 1 and a traceback)."""
    good = _trace(tmp_path, _good_ops(), "good.trace")
    bad = _trace(tmp_path, CRAFTED["string id 999"][0], "bad.trace")
    code, err = cli_in_process(capsys, "debug", "diff", good, bad)
    assert code == 2 and bad in err and "names string 999" in err, err
    for run in ("runA", "runB"):
        (tmp_path / run).mkdir()
        (tmp_path / run / "rank0.trace").write_bytes(open(good, "rb").read())
    (tmp_path / "runB" / "rank1.trace").write_bytes(open(bad, "rb").read())
    (tmp_path / "runA" / "rank1.trace").write_bytes(open(good, "rb").read())
    code, err = cli_in_process(capsys, "debug", "diff", str(tmp_path / "runA"), str(tmp_path / "runB"))
    assert code == 2 and "rank1.trace" in err and "names string 999" in err, err
    code, err = cli_in_process(
        capsys, "debug", "--html", str(tmp_path / "r.html"), "diff", str(tmp_path / "runA"), str(tmp_path / "runB")
    )
    assert code == 2 and "--html writes the report of two traces" in err  # was: silently not written


def test_frame_declaring_4_gib_is_not_allocated(tmp_path):
    """A frame header declaring 0xFFFFFFF0 bytes in a small file: read(n) allocated n
    bytes before finding the file short (MemoryError under a memory limit); the reader
    now compares with the file size. Run under a 1 GiB address-space limit."""
    import subprocess
    import sys

    path = tmp_path / "big.trace"
    path.write_bytes(_header_bytes(tmp_path) + struct.pack("<I", 0xFFFFFFF0) + b"x" * 64)
    code = (
        "import resource, sys; from fwd9m._recording import _store\n"
        "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, resource.RLIM_INFINITY))\n"
        "r = _store.TraceReader(sys.argv[1]); print(list(r), r.truncated)"
    )
    p = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "frame of 4294967280 bytes incomplete" in p.stdout, p.stdout + p.stderr


def test_header_with_wrong_types_is_a_format_error(tmp_path):
    for bad in (
        b'{"format": "fwd9m.trace", "version": 1, "frameworks": 5}',
        b'{"format": "fwd9m.trace", "version": 1, "level": []}',
    ):
        path = tmp_path / "h.trace"
        path.write_bytes(_store.MAGIC + struct.pack("<HH", 1, 0) + _frame(bad))
        with pytest.raises(FileFormatError, match="not a fwd9m trace header"):
            _store.TraceReader(path)


def test_sample_difference_ignores_partial_values():
    """Defence in depth behind the reader's check: 5 bytes of float32 were struct.error."""
    assert sample_difference("float32[4]", b"12345", b"12346") is None
    assert sample_difference("float32[1]", b"\0\0\x80?", b"\0\0\x80?") == (0.0, 0)


# --------------------------------------------------------------------- fuzzing

_FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _read_all(path) -> None:
    try:
        r = _store.TraceReader(path)
        for op in r:
            op.describe()
    except FileFormatError:
        pass


@_FUZZ
@given(
    cut=st.integers(min_value=0, max_value=400),
    flips=st.lists(
        st.tuples(st.integers(min_value=0, max_value=10_000), st.integers(min_value=1, max_value=255)), max_size=4
    ),
)
def test_fuzz_truncated_and_bit_flipped_traces(tmp_path, cut, flips):
    good = bytearray(open(_trace(tmp_path, _good_ops()), "rb").read())
    data = good[: max(0, len(good) - cut)]
    for pos, x in flips:
        if data:
            data[pos % len(data)] ^= x
    path = tmp_path / "fuzz.trace"
    path.write_bytes(bytes(data))
    _read_all(path)


@_FUZZ
@given(records=st.binary(max_size=300))
def test_fuzz_random_records_behind_a_valid_checksum(tmp_path, records):
    """Random record bytes in a frame whose checksum is right: only FileFormatError."""
    _read_all(_trace(tmp_path, records))


_record = st.one_of(
    st.binary(max_size=20).map(_S),
    st.builds(
        lambda name, ctx, metas, flags, tail: _O(
            name, ctx, [struct.pack("<IB", m, f) + tail for m, f in zip(metas, flags)]
        ),
        st.integers(0, 6),
        st.integers(0, 6),
        st.lists(st.integers(0, 6), max_size=3),
        st.lists(st.integers(0, 31), min_size=3, max_size=3),
        st.binary(max_size=14),
    ),
    st.builds(
        lambda seq, meta, data: struct.pack("<cIBBIQ", b"C", seq, 1, 0, meta, len(data)) + data,
        st.integers(0, 3),
        st.integers(0, 6),
        st.binary(max_size=9),
    ),
    st.binary(max_size=12).map(lambda j: struct.pack("<cI", b"E", len(j)) + j),
)


@_FUZZ
@given(records=st.lists(_record, max_size=8))
def test_fuzz_well_formed_looking_records(tmp_path, records):
    """Records of the right kinds with random ids, flags and lengths."""
    _read_all(_trace(tmp_path, _S(b"float32[2]") + b"".join(records)))


# ------------------------------------------------------- what the reports print

_EVIL = "x\x1b]0;pwned\x07\x1b[2J\nREPRODUCIBLE: forged\u202e"


def _evil_trace(path, digest: int) -> str:
    """A complete trace of one op whose name, module, location and meta hold control
    characters and a newline, with output digest ``digest``."""
    program = {"script": f"/nowhere/{_EVIL}.py", "argv": [], "module": False}
    with _store.TraceWriter(path, {**HEADER, "program": program, "environment": {"env": {_EVIL: _EVIL}}}) as w:
        name = w.string(f"aten::{_EVIL}")
        ctx = w.string(_store.SEP.join([_EVIL, "forward", f"{_EVIL}.py:3", "", "cpu"]))
        meta = w.string("float32[2]")
        w.op(name, ctx, 0, [(meta, 0, 1, None, None)], [(meta, 0, digest, None, None)])
    return str(path)


def _assert_clean(text: str) -> None:
    assert not any(c in text for c in "\x1b\x07\u202e"), repr(text)
    assert not any(line.startswith("REPRODUCIBLE") for line in text.splitlines()), text


def test_debug_reports_escape_what_comes_from_the_traces(capsys, tmp_path):
    """Names recorded from the program (op, module, location, environment, trace file
    names) reached stdout and stderr raw: a newline in a name forged a report line."""
    named = tmp_path / f"run{_EVIL}"
    named.mkdir()
    a = _evil_trace(named / "a.trace", 1)
    b = _evil_trace(tmp_path / "b.trace", 2)
    from fwd9m.cli import main

    assert main(["debug", "diff", a, b]) == 1
    out = capsys.readouterr()
    _assert_clean(out.out + out.err)
    assert "aten::x\\x1b]0;pwned\\x07\\x1b[2J\\nREPRODUCIBLE: forged\\u202e" in out.out, out.out
    for run, digest in (("runA", 1), ("runB", 2)):
        (tmp_path / run).mkdir()
        _evil_trace(tmp_path / run / "rank0.trace", digest)
    assert main(["debug", "diff", str(tmp_path / "runA"), str(tmp_path / "runB")]) == 1
    out = capsys.readouterr()
    _assert_clean(out.out + out.err)
    (named / "bad.trace").write_bytes(b"junk")
    code, err = cli_in_process(capsys, "debug", "diff", str(named / "bad.trace"), b)
    assert code == 2 and "is not a fwd9m trace" in err
    _assert_clean(err)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=6),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
    max_leaves=12,
)
_header = st.fixed_dictionaries(
    {},
    optional={
        "frameworks": st.one_of(_json, st.lists(st.sampled_from(["torch", "jax", "tensorflow", "x"]), max_size=2)),
        "level": _json,
        "program": st.one_of(
            _json, st.fixed_dictionaries({}, optional={"script": _json, "argv": _json, "module": _json})
        ),
        "environment": st.one_of(
            _json,
            st.fixed_dictionaries({}, optional={"frameworks": _json, "packages": _json, "env": _json, "gpus": _json}),
        ),
    },
)


@_FUZZ
@given(ha=_header, hb=_header, digest=st.integers(0, 2))
def test_fuzz_crafted_headers_through_the_whole_diff(tmp_path, ha, hb, digest):
    """Headers of any shape, through reading, comparing, explaining and rendering
    (text, JSON, HTML): FileFormatError or a report, nothing else."""
    from fwd9m import debug

    paths = []
    for name, header, d in (("a", ha, 1), ("b", hb, digest)):
        path = tmp_path / f"{name}.trace"
        with _store.TraceWriter(path, header) as w:
            meta = w.string("float32[2]")
            w.op(
                w.string("aten::add"),
                w.string(_store.SEP.join(["m", "forward", "x.py:1", "", "cpu"])),
                0,
                [(meta, _store.IS_MODEL_INPUT, d, None, None)],
                [(meta, 0, d, None, None)],
            )
        paths.append(str(path))
    try:
        report = debug.diff(*paths)
    except FileFormatError:
        return
    for fmt in ("text", "json", "html"):
        report.render(fmt)


@_FUZZ
@given(
    names=st.lists(
        st.sampled_from(["rank0.trace", "rank1.trace", "rank01.trace", "rank0.trace.log", "x.trace"]),
        max_size=3,
        unique=True,
    ),
    contents=st.lists(st.sampled_from([b"", b"junk", "good", "bad"]), min_size=3, max_size=3),
)
def test_fuzz_rank_folders(tmp_path, names, contents):
    """Rank folders holding junk, empty, damaged and good traces: a report, a
    ConfigurationError (no rank traces) or a FileFormatError."""
    import shutil

    from fwd9m.distributed import diff_ranks
    from fwd9m.errors import ConfigurationError

    good, bad = (
        open(_trace(tmp_path, _good_ops(), "g.trace"), "rb").read(),
        open(_trace(tmp_path, CRAFTED["tensor cut short"][0], "b.trace"), "rb").read(),
    )
    for run in ("runA", "runB"):
        shutil.rmtree(tmp_path / run, ignore_errors=True)
        (tmp_path / run).mkdir()
    for name, content in zip(names, contents):
        data = {"good": good, "bad": bad}.get(content, content)
        (tmp_path / "runA" / name).write_bytes(good)
        (tmp_path / "runB" / name).write_bytes(data)
    try:
        diff_ranks(tmp_path / "runA", tmp_path / "runB").render("text")
    except (FileFormatError, ConfigurationError):
        pass


def test_a_forked_child_writes_nothing_into_the_parents_trace(tmp_path):
    # a DataLoader worker forked while recording shares the trace's file: its records
    # interleaved with the parent's, in a different order each run (a false EXTERNAL
    # SOURCE verdict on a reproducible training with num_workers=2)
    path = tmp_path / "run.trace"
    w = _store.TraceWriter(path, HEADER)
    name, ctx = w.string("aten::add"), w.string("ctx")
    w.op(name, ctx, 0, [], [])
    pid = os.fork()
    if pid == 0:  # the child: records, flushes and ends the trace as a recorder would
        try:
            for _ in range(5):
                w.op(name, ctx, 0, [], [])
            w.flush()
            w.close()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    w.op(name, ctx, 0, [], [])
    w.close()
    reader = _store.TraceReader(path)
    assert len(list(reader)) == 2
    assert reader.end is not None and reader.end["ops"] == 2 and reader.truncated is None
