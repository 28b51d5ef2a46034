"""Printed output and text files: \r redraws, numbers by exact value, masked timing
values (listed as ignored), --strict, and a property test of the whole comparison."""

from __future__ import annotations

import datetime
import io
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fwd9m.compare import compare_text
from fwd9m.compare._text import IgnoredValues


def _text_pair(tmp_path, a: str, b: str):
    pa, pb = tmp_path / "a.txt", tmp_path / "b.txt"
    pa.write_text(a, newline="")
    pb.write_text(b, newline="")
    return pa, pb


def test_long_tqdm_lines_compare_by_their_last_redraw(tmp_path):
    """Regression: tqdm(range(3000), file=sys.stdout, mininterval=0) writes one line of
    ~200 KB of \\r redraws; read in 64 KiB pieces, the pieces of two runs did not line up
    and the runs were NOT REPRODUCIBLE. Redraws are now resolved while streaming."""
    tqdm = pytest.importorskip("tqdm").tqdm

    def bar(**kw):
        out = io.StringIO()
        for _ in tqdm(range(3000), file=out, **kw):
            pass
        return out.getvalue() + "done\n"

    a, b = bar(mininterval=0), bar(mininterval=0, miniters=7)  # a different number of redraws
    assert len(a) > 2 << 16 and a.count("\r") != b.count("\r")
    ignored = IgnoredValues()
    assert compare_text("stdout", *_text_pair(tmp_path, a, b), ignored=ignored) is None
    names = {e["name"] for e in ignored.to_list()}
    assert {"it/s (progress bar)", "elapsed (progress bar)"} <= names
    d = compare_text("stdout", *_text_pair(tmp_path, a, b.replace("3000/3000", "2999/3000")))
    assert d.n_diff == 1 and "2999/3000" in d.b and "\\r" not in d.b


def test_a_line_longer_than_the_limit_keeps_bounded_memory_and_compares_its_tail(tmp_path, monkeypatch):
    from fwd9m.compare import _text

    monkeypatch.setattr(_text, "LINE_LIMIT", 1000)
    head = "x" * 5000
    assert compare_text("stdout", *_text_pair(tmp_path, "old\r" + head + "1\n", head + "1\n")) is None
    d = compare_text("stdout", *_text_pair(tmp_path, head + "1\n", head + "2\n"))
    assert d is not None and d.n_diff == 1 and len(d.a) <= 160
    lines = list(_text._lines(io.StringIO(head + "1\n")))
    assert len(lines) == 1 and len(lines[0]) < 1100 and "+4001 characters, sha256 x" in lines[0]


@pytest.mark.parametrize(
    "a, b",
    [
        ("took 3.8e-06s", "took 1.25e-05s"),
        ("elapsed 0:00:00.010084 total", "elapsed 0:00:01.200000 total"),
        ("done in 1 day, 0:00:01", "done in 2 days, 3:04:05"),
        ("trained for 0.53 minutes", "trained for 1.2 minutes"),
        ("epoch took 3m45s", "epoch took 4m2s"),
        ("wall 00:01:02", "wall 00:02:13"),
        ("total 1h 2m", "total 2h 15m"),
        ("5/5 - 1s 12ms/step - loss: 0.5", "5/5 - 2s 30ms/step - loss: 0.5"),
        ("step 10 (1.42s/it)", "step 10 (0.97s/it)"),
        ("100%|##| 8/8 [00:10<00:00,  1.42s/it]", "100%|##| 8/8 [00:12<00:00,  1.61s/it]"),
        ("100%|##| 8/8 [00:00<00:00,  5.31img/s, loss=0.5]", "100%|##| 8/8 [00:00<00:00, 12.50img/s, loss=0.5]"),
        (
            "Epoch 0/0 ━━━━ 4/4 0:00:00 • 0:00:00 30.67it/s v_num: 0 train_loss: 0.693",
            "Epoch 0/0 ━━━━ 4/4 0:00:01 • -:--:-- 12.1it/s v_num: 0 train_loss: 0.693",
        ),
        (
            "Map: 100%|██| 100/100 [00:00<00:00, 12345.67 examples/s]",
            "Map: 100%|██| 100/100 [00:01<00:00, 99.1 examples/s]",
        ),
        ("2026-12-01 07:45:28,123 INFO step 3", "2026-12-01 07:45:29,987 INFO step 3"),
        ("logging to runs/Dec01_07-45-28_host", "logging to runs/Dec01_07-46-02_host"),
        ("at Tue Dec  1 07:45:28 2026", "at Tue Dec  1 07:46:01 2026"),
        ("<object object at 0x7f1234567890>", "<object object at 0x7f12345aaaa0>"),
        ("Layer(id=0x7fab12)", "Layer(id=0x7fcd34)"),
    ],
)
def test_durations_rates_timestamps_and_addresses_are_masked_and_listed(tmp_path, a, b):
    ignored = IgnoredValues()
    assert compare_text("stdout", *_text_pair(tmp_path, a + "\n", b + "\n"), ignored=ignored) is None, (a, b)
    assert ignored.to_list() and all(e["differed"] for e in ignored.to_list()[:1])
    # --strict masks nothing
    assert compare_text("stdout", *_text_pair(tmp_path, a + "\n", b + "\n"), strict=True) is not None


@pytest.mark.parametrize(
    "a, b",
    [
        (str(2**62), str(2**62 + 1)),  # digits past 2**53: a checksum
        ("sum 1234567890123456789012345", "sum 1234567890123456789012346"),
        ("x 0.1", "x 0.1000000000000000055"),  # the same float64, different exact values
        ("loss 0.0", "loss -0.0"),
        ("loss -nan", "loss nan"),
        ("weights crc32: 0x1a2b3c00", "weights crc32: 0x1a2b3c02"),
        ("digest 0xdeadbeefcafe", "digest 0xdeadbeefcaff"),
        ("ok 1", "ok 0x1"),
    ],
)
def test_numbers_are_compared_by_exact_value_and_sign(tmp_path, a, b):
    """Regression: print(2**62 + k) for k=0, 1 agreed (compared as floats), and any 0x
    with 6+ hex digits was masked as an address (a crc32 printed in hex agreed)."""
    d = compare_text("stdout", *_text_pair(tmp_path, a + "\n", b + "\n"))
    assert d is not None and d.n_diff == 1, (a, b)
    assert compare_text("stdout", *_text_pair(tmp_path, a + "\n", a + " \n")) is None


def test_equal_values_printed_differently_agree(tmp_path):
    a, b = "1.0 2.50 1e3 nan inf 0x1A\n", "1.00 2.5 1000 nan inf 0x1a\n"
    assert compare_text("stdout", *_text_pair(tmp_path, a, b)) is None
    assert compare_text("stdout", *_text_pair(tmp_path, "x 2\n", "x 3\n")).max_abs == 1.0
    assert compare_text("stdout", *_text_pair(tmp_path, f"{2**62}\n", f"{2**62 + 1}\n")).max_abs == 1.0


def test_timing_values_by_name_in_dict_reprs_key_value_and_json(tmp_path):
    """Regression: transformers' Trainer prints its timings as quoted strings, so a
    reproducible Trainer run was NOT REPRODUCIBLE. Results in the same dict are compared."""
    a = (
        "{'train_runtime': '0.1976', 'train_samples_per_second': '647.9', 'train_steps_per_second': '80.99', "
        "'train_loss': '0.6943', 'epoch': '2'}\n"
        "step=3 elapsed=1.5 data_time: 0.01 time=4.5 num_timesteps=1000 time_step=3\n"
        '{"step": 3, "wall_time": 1733040000.123, "timestamp": 1733040000, "created_at": "2026-12-01", "loss": 0.5}\n'
    )
    b = (
        "{'train_runtime': '0.2011', 'train_samples_per_second': '636.6', 'train_steps_per_second': '79.56', "
        "'train_loss': '0.6943', 'epoch': '2'}\n"
        "step=3 elapsed=2.5 data_time: 0.02 time=5 num_timesteps=1000 time_step=3\n"
        '{"step": 3, "wall_time": 1733040099.9, "timestamp": 1733040100, "created_at": "2026-12-02", "loss": 0.5}\n'
    )
    ignored = IgnoredValues()
    assert compare_text("stdout", *_text_pair(tmp_path, a, b), ignored=ignored) is None
    names = {e["name"] for e in ignored.to_list()}
    assert {
        "train_runtime",
        "train_samples_per_second",
        "train_steps_per_second",
        "elapsed",
        "data_time",
        "time",
        "wall_time",
        "timestamp",
        "created_at",
    } <= names
    assert not names & {"train_loss", "epoch", "step", "num_timesteps", "time_step", "loss"}
    where = {e["name"]: e["where"] for e in ignored.to_list()}
    assert where["train_runtime"] == "stdout line 1" and where["elapsed"] == "stdout line 2"
    for old, new in [
        ("'train_loss': '0.6943'", "'train_loss': '0.6944'"),
        ("'epoch': '2'", "'epoch': '3'"),
        ("num_timesteps=1000", "num_timesteps=1001"),
        ("time_step=3", "time_step=4"),
        ('"loss": 0.5', '"loss": 0.25'),
        ("step=3 ", "step=4 "),
    ]:
        assert old in b
        assert compare_text("stdout", *_text_pair(tmp_path, a, b.replace(old, new))) is not None, new


@pytest.mark.parametrize(
    "key, timing",
    [
        ("train_runtime", True),
        ("eval_samples_per_second", True),
        ("train_steps_per_second", True),
        ("time", True),
        ("elapsed", True),
        ("duration", True),
        ("timestamp", True),
        ("date", True),
        ("wall_time", True),
        ("created", True),
        ("created_at", True),
        ("epoch_time", True),
        ("time_ms", True),
        ("stepTime", True),
        ("it/s", True),
        ("ETA", True),
        ("train_loss", False),
        ("epoch", False),
        ("step", False),
        ("learning_rate", False),
        ("grad_norm", False),
        ("timesteps", False),
        ("num_timesteps", False),
        ("time_step", False),
        ("total_flos", False),
        ("eval_steps", False),
        ("update", False),
        ("runtimes_count", False),
    ],
)
def test_timing_names_are_precise(key, timing):
    from fwd9m.compare._text import _tokens, timing_name

    assert timing_name(key) is timing
    for line in (f"{key}: 1.5", f"{key}=1.5", f"'{key}': '1.5'", f'"{key}": 1.5,'):  # the fast test lets it through
        assert bool(_tokens(line, False).masked) is timing, line


def test_csv_timing_columns_are_masked_by_header(tmp_path):
    pa, pb = tmp_path / "a" / "metrics.csv", tmp_path / "b" / "metrics.csv"
    pa.parent.mkdir()
    pb.parent.mkdir()
    pa.write_text("epoch,step,train_loss,time,wall_time\n0,3,0.5,1.25,1733040000\n1,7,0.25,2.5,1733040001\n")
    pb.write_text("epoch,step,train_loss,time,wall_time\n0,3,0.5,1.75,1733040100\n1,7,0.25,2.75,1733040102\n")
    ignored = IgnoredValues()
    assert compare_text("metrics.csv", pa, pb, ignored=ignored) is None
    assert {(e["name"], e["count"], e["differed"]) for e in ignored.to_list()} == {("time", 2, 2), ("wall_time", 2, 2)}
    pb.write_text("epoch,step,train_loss,time,wall_time\n0,3,0.5,1.75,1733040100\n1,7,0.26,2.75,1733040102\n")
    assert compare_text("metrics.csv", pa, pb).first_index == (3,)


# --- property test: the verdict is "same" exactly when the meaningful values agree ---

_ints = st.one_of(
    st.integers(-1000, 1000), st.integers(-(2**70), 2**70), st.integers(2**62 - 4, 2**62 + 4)
)  # a checksum past 2**53
_floats = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, -0.0, 0.1, 1e-300]))


def _same_float(x: float, y: float) -> bool:
    """What repr prints the same: equal with the same sign, or both NaN (repr(-nan) is
    'nan': Python prints no sign for a NaN)."""
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    return x == y and math.copysign(1, x) == math.copysign(1, y)


@st.composite
def _meaningful(draw):
    """(text in run a, text in run b, whether they mean the same)."""
    kind = draw(st.sampled_from(["int", "float", "hex", "bar"]))
    if kind == "int":
        x = draw(_ints)
        y = draw(st.one_of(st.just(x), _ints))
        return str(x), str(y), x == y
    if kind == "hex":
        x = draw(st.integers(0, 2**64))
        y = draw(st.one_of(st.just(x), st.integers(0, 2**64)))
        return f"crc {x:#010x}", f"crc {y:#010x}", x == y
    if kind == "float":
        x = draw(_floats)
        y = draw(st.one_of(st.just(x), _floats))
        rx, ry = repr(x), repr(y)
        if draw(st.booleans()) and "." in ry and "e" not in ry:
            ry += "0"  # 1.5 and 1.50: the same value
        return rx, ry, _same_float(x, y)
    n = draw(st.integers(0, 5000))  # a finished progress bar: its count is a result
    m = draw(st.one_of(st.just(n), st.integers(0, 5000)))
    return f"{n}/5000", f"{m}/5000", n == m


_FORMS = [
    lambda x, s, t: f"took {x:.3g}s",
    lambda x, s, t: f"took {x:g} seconds",
    lambda x, s, t: f"elapsed {datetime.timedelta(seconds=x)}",
    lambda x, s, t: t.isoformat(sep=" "),
    lambda x, s, t: f"{t.isoformat()}Z",
    lambda x, s, t: f"{x:.2f}it/s",
    lambda x, s, t: f"{x:.1f} samples/s",
    lambda x, s, t: f"<object object at {0x7F0000000000 + s * 16:#x}>",
    lambda x, s, t: f"'train_runtime': '{x:.4g}'",
    lambda x, s, t: f"step_time={x:.3f}",
    lambda x, s, t: f"[{s // 60 % 60:02d}:{s % 60:02d}<00:00, {x:.2f}it/s]",
    lambda x, s, t: f"{int(x) // 60}m{int(x) % 60}s",
    lambda x, s, t: f"{t:%H:%M:%S}",
]


def _volatile(draw, form) -> str:
    """A value that changes from run to run without meaning a different result."""
    x = draw(st.floats(0, 1e5, allow_nan=False))
    s = draw(st.integers(0, 10**6))
    t = datetime.datetime(2026, 1, 1) + datetime.timedelta(seconds=s, microseconds=draw(st.integers(0, 999999)))
    return form(x, s, t)


def _redrawn(redraws: list[str], line: str) -> str:
    """``line`` after ``redraws`` of it, each from the first column after a ``\r`` and
    padded with blanks over the longer one before it, as tqdm draws (``print_status``,
    tqdm/std.py): a terminal then shows ``line`` alone."""
    out, before = [], 0
    for s in [*redraws, line]:
        out.append(s + " " * max(before - len(s), 0))
        before = len(s)
    return "\r".join(out)


@st.composite
def _runs_output(draw):
    """The stdout of two runs and whether their meaningful values all agree."""
    lines_a, lines_b, same = [], [], True
    for _ in range(draw(st.integers(1, 6))):
        fa, fb = [], []
        for _ in range(draw(st.integers(1, 4))):
            if draw(st.booleans()):
                a, b, s = draw(_meaningful())
                same &= s
            else:
                form = draw(st.sampled_from(_FORMS))
                a, b = _volatile(draw, form), _volatile(draw, form)
            word = draw(st.sampled_from(["loss", "step", "|", "acc", "#"]))
            fa.append(f"{word} {a}")
            fb.append(f"{word} {b}")
        la, lb = " ; ".join(fa), " ; ".join(fb)
        # a progress bar redraws the line a timing-dependent number of times first
        la = _redrawn([f"{i}%|#|" for i in range(draw(st.integers(0, 3)))], la)
        lb = _redrawn([f"{i}0%|##|" for i in range(draw(st.integers(0, 3)))], lb)
        lines_a.append(la)
        lines_b.append(lb)
    return "\n".join(lines_a) + "\n", "\n".join(lines_b) + "\n", same


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_runs_output())
def test_text_verdict_is_same_exactly_when_the_meaningful_values_agree(tmp_path, runs):
    a, b, same = runs
    d = compare_text("stdout", *_text_pair(tmp_path, a, b))
    assert (d is None) == same, (a, b, d)


def test_lines_that_differ_only_in_the_width_of_their_blanks_agree(tmp_path):
    """Regression (CI, Lightning's rich progress bar): the metrics column wraps onto the
    next line, padded by the width of the rate on the bar's line (38.44it/s in one run,
    188.46it/s in the other); the runs were NOT REPRODUCIBLE on that padding."""
    bar = "Epoch 1/1  ━━━━━━━ 4/4 0:00:00 • 0:00:00 {rate}it/s v_num: 0\n{pad}train_loss: 3.160\n"
    a = bar.format(rate="38.44", pad=" " * 62)
    b = bar.format(rate="188.46", pad=" " * 61)
    ignored = IgnoredValues()
    assert compare_text("stdout", *_text_pair(tmp_path, a, b), ignored=ignored) is None
    spacing = [e for e in ignored.to_list() if e["name"] == "spacing"]
    assert spacing and spacing[0]["differed"] == 1 and spacing[0]["a"] == "blanks 62, 1"
    # the numbers are still compared, blanks are never inserted, and --strict keeps blanks
    assert compare_text("stdout", *_text_pair(tmp_path, a, b.replace("3.160", "3.161"))) is not None
    assert compare_text("stdout", *_text_pair(tmp_path, "x 12\n", "x 1 2\n")) is not None
    assert compare_text("stdout", *_text_pair(tmp_path, "a  b\n", "a b\n"), strict=True) is not None


def test_nested_tqdm_bars_compare_by_what_the_terminal_shows(tmp_path):
    """Regression (a torch loop with ``trange(epochs, file=sys.stdout)`` around
    ``tqdm(batches, leave=False, file=sys.stdout)``): the inner bar redraws its row below
    the outer one with ``\\n`` and moves back up with ``CSI A``, so each redraw was a line
    of its own; their number follows the clock and the runs were NOT REPRODUCIBLE. The
    screen is now resolved as a terminal shows it once the program has ended."""
    tqdm = pytest.importorskip("tqdm").tqdm

    def bars(**kw):
        out = io.StringIO()
        for epoch in tqdm(range(2), file=out, mininterval=0):
            for _ in tqdm(range(50), file=out, leave=False, mininterval=0, **kw):
                pass
            tqdm.write(f"epoch {epoch} loss 0.25", file=out)
        return out.getvalue() + "done\n"

    a, b = bars(), bars(miniters=7)  # a different number of redraws of the inner bar
    assert a.count("\n") != b.count("\n") and "\x1b[A" in a
    assert compare_text("stdout", *_text_pair(tmp_path, a, b)) is None
    # what stays on the screen is still compared
    d = compare_text("stdout", *_text_pair(tmp_path, a, b.replace("epoch 1 loss 0.25", "epoch 1 loss 0.26")))
    assert d is not None and "0.26" in d.b
    # rows above the screen's reach are final; CSI 2 A moves two rows; a cut escape is text
    assert compare_text("stdout", *_text_pair(tmp_path, "a 1\nb 2\n\x1b[2Ac 3\n", "c 3\nb 2\n")) is None
    assert compare_text("stdout", *_text_pair(tmp_path, "x\n\x1b[", "x\n")) is not None


@pytest.mark.parametrize(
    "a, b",
    [
        # Keras's progress bar: the time per step in us, ms or s, as fast as the step was
        ("32/32 - 0s - 987us/step - loss: 0.5012\n", "32/32 - 1s - 1ms/step - loss: 0.5012\n"),
        ("32/32 - 0s - 8ms/step - loss: 0.5012\n", "32/32 - 2s - 2s/step - loss: 0.5012\n"),
        # tqdm: under 1 it/s the rate turns into seconds per iteration
        ("100%|##| 3/3 [00:01<00:00,  1.52it/s, loss=0.5]\n", "100%|##| 3/3 [00:04<00:00,  1.42s/it, loss=0.5]\n"),
    ],
)
def test_a_timing_agrees_whatever_its_unit(tmp_path, a, b):
    """Regression: a masked value stood in the line by its name, which holds its unit, so
    a step that took 987us in one run and 1ms in the other (a tiny Keras model on a busy
    machine) was a different line. Masked values now stand by their kind; the numbers
    around them are still compared, and a timing does not agree with a timestamp."""
    ignored = IgnoredValues()
    assert compare_text("stdout", *_text_pair(tmp_path, a, b), ignored=ignored) is None
    assert any(e["differed"] for e in ignored.to_list())
    assert compare_text("stdout", *_text_pair(tmp_path, a, b.replace("0.5", "0.6"))) is not None
    assert compare_text("stdout", *_text_pair(tmp_path, "at 1ms\n", "at 2026-01-01\n")) is not None


def test_a_progress_bar_whose_width_follows_its_rate_agrees(tmp_path):
    """Regression (Lightning's RichProgressBar under FORCE_COLOR, a busy machine): Rich
    gives the bar the width the other columns leave, so a wider rate drew one ``━``
    fewer and the runs were NOT REPRODUCIBLE. On a line with a masked timing, the length
    of a run of bar glyphs is layout; the counts beside the bar are still compared, and a
    line without a timing (a sparkline) keeps its glyphs."""
    line = "Epoch 2/2  {bar} {n}/32 0:00:01 • 0:00:00 {rate}it/s v_num: 0\n"
    a = line.format(bar="━" * 17, n=32, rate="9.98")
    b = line.format(bar="━" * 16, n=32, rate="16.21")
    ignored = IgnoredValues()
    assert compare_text("stdout", *_text_pair(tmp_path, a, b), ignored=ignored) is None
    spacing = [e for e in ignored.to_list() if e["name"] == "spacing"]
    assert spacing and spacing[0]["a"].endswith("; bar 17")
    tqdm_a, tqdm_b = (
        "100%|██████████| 3/3 [00:01<00:00,  1.52it/s]\n",
        "100%|█████████▌| 3/3 [00:04<00:00,  1.42s/it]\n",
    )
    assert compare_text("stdout", *_text_pair(tmp_path, tqdm_a, tqdm_b)) is None
    assert compare_text("stdout", *_text_pair(tmp_path, a, b.replace("32/32", "31/32"))) is not None
    assert compare_text("stdout", *_text_pair(tmp_path, "loss ▁▂▃▃ 2\n", "loss ▁▂▃ 2\n")) is not None
    assert compare_text("stdout", *_text_pair(tmp_path, a, b), strict=True) is not None


def test_time_stamps_inside_names_are_masked(tmp_path):
    """A script that prints where it saved (``run_2026-12-01_19-12-33/model.pt``,
    ``train_20261201-191233.log``): the time stamp inside the name was text, compared.
    It is masked after a letter or ``_`` too, never after a digit."""
    for a, b in [
        ("saved to run_2026-12-01_19-12-33/model.pt\n", "saved to run_2026-12-01_19-12-41/model.pt\n"),
        ("log train_20261201-191233.log\n", "log train_20261201-191241.log\n"),
    ]:
        assert compare_text("stdout", *_text_pair(tmp_path, a, b)) is None
    assert compare_text("stdout", *_text_pair(tmp_path, "id 120261201-191233\n", "id 120261201-191241\n")) is not None
    assert (
        compare_text("stdout", *_text_pair(tmp_path, "run_2026-12-01 loss 1\n", "run_2026-12-01 loss 2\n")) is not None
    )


def test_a_cursor_movement_cut_by_a_read_is_still_one():
    """The stream is read 64 KiB at a time: an escape sequence cut at that boundary is
    completed by the next piece, and a lone ``ESC [`` before a line feed keeps the line feed."""
    from fwd9m.compare._text import _lines

    assert list(_lines(io.StringIO("x" * 65533 + "\n" + "\x1b[1Ay\n"))) == ["y" + "x" * 65532]  # y over the row
    assert list(_lines(io.StringIO("x\x1b[\ny\n"))) == ["x\x1b[", "y"]


def test_words_rich_cuts_to_a_width_that_follows_the_rate_agree(tmp_path):
    """Regression (Lightning's RichProgressBar, a long metric name): Rich cuts a metric's
    name to its column's width, which follows the width of the masked rate, so one run
    showed ``another_metric_wi…`` and the other ``another_metric_w…``. Words cut with
    ``…`` agree when one shows a prefix of the other; other words and numbers do not."""
    bar = "Epoch 2/2  {bar} 32/32 0:00:04 • 0:00:00 {rate}it/s v_num: 0\n"
    metrics = "{pad}train_loss: 0.166\n{pad}{cut}\n{pad}0.332 val_loss:\n"
    a = bar.format(bar="━" * 17, rate="7.70") + metrics.format(pad=" " * 62, cut="another_metric_wi…")
    b = bar.format(bar="━" * 16, rate="11.42") + metrics.format(pad=" " * 63, cut="another_metric_w…")
    assert compare_text("stdout", *_text_pair(tmp_path, a, b)) is None
    for x, y in [("loss_a…\n", "loss_b…\n"), ("loss 0.12…\n", "loss 0.1…\n"), ("val_loss…\n", "val_loss\n")]:
        assert compare_text("stdout", *_text_pair(tmp_path, x, y)) is not None


def test_a_line_written_over_a_tqdm_bar_leaves_no_piece_of_its_timings():
    """tqdm's nested bars: a logging line written into the outer bar's row from its first
    column showed the tail of the bar's rate, ``/s]`` in one run and ``it]`` in the
    next (a false NOT REPRODUCIBLE under load); a shorter line still leaves the rest of
    what it was written over, as on a terminal."""
    from fwd9m.compare._text import _overlay

    bar = "epochs:  50%|█████     | 1/2 [00:01<00:01,  4.57it/s]"
    line = "2026-12-03 17:58:23,801 INFO epoch 1 loss 0.055173"
    assert _overlay(bar, line) == line
    assert _overlay(bar.replace(" 4.57it/s", "1.09s/it"), line) == line
    assert _overlay(bar, "short") == "short" + bar[5:]
    assert _overlay("step 9 loss 0.51", "ok") == "okep 9 loss 0.51"
