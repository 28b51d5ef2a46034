"""The timing mask of printed lines as a grammar, tested on lines generated from the
formats real logs use: changing a result must always be a difference, changing a
timing never; and masking is linear in the line's length."""

from __future__ import annotations

import time
from datetime import datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fwd9m.compare._text import normalize_line, timing_name

TIMING_KEYS = ["time", "elapsed", "step_time", "train_runtime", "duration", "epoch_time", "time_s", "wall_time"]
RESULT_KEYS = ["loss", "acc", "val_loss", "f1", "reward", "f1_us", "epoch_time_loss", "survival_time", "eta_mae"]
RESULT_KEYS += ["ETA_regressor_output", "duration_loss", "val/acc", "ppl"]
#: (how a field is written, what separates two fields)
STYLES = (
    [("{k}={v}", sep) for sep in ("|", "&", ",", ";", " ", ":", "/", " | ", "\t", ", ", " - ")]
    + [("{k}: {v}", sep) for sep in (" | ", ", ", " ", "\t", " - ", "; ")]
    + [("'{k}': {v}", ", "), ('"{k}": {v}', ", "), ('"{k}":{v}', ",")]
)

timings = st.one_of(
    st.floats(0, 1e4, allow_nan=False).map(lambda x: f"{x:.3f}"),
    st.floats(0, 1e4, allow_nan=False).map(lambda x: f"{x:.2f}s"),
    st.integers(0, 999).map(lambda x: f"{x}ms/step"),
    st.integers(0, 59).map(lambda x: f"0:00:{x:02d}"),
)
results = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False).map(lambda x: f"{x:.4f}")


def _line(style, tkey, tval, rkey, rval, timing_first: bool) -> str:
    field, sep = style
    t, r = field.format(k=tkey, v=tval), field.format(k=rkey, v=rval)
    return "epoch 3" + sep + (t + sep + r if timing_first else r + sep + t)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(STYLES),
    st.sampled_from(TIMING_KEYS),
    timings,
    timings,
    st.sampled_from(RESULT_KEYS),
    results,
    results,
    st.booleans(),
)
def test_a_result_beside_a_timing_is_always_compared_and_the_timing_never(style, tkey, t1, t2, rkey, r1, r2, first):
    base = normalize_line(_line(style, tkey, t1, rkey, r1, first))
    assert normalize_line(_line(style, tkey, t2, rkey, r1, first)) == base  # a timing changed: no difference
    if r1 != r2:  # a result changed: always a difference
        assert normalize_line(_line(style, tkey, t1, rkey, r2, first)) != base


def test_result_names_are_never_timings():
    assert not any(timing_name(k) for k in RESULT_KEYS)
    assert all(timing_name(k) for k in TIMING_KEYS)


@pytest.mark.serial
def test_masking_is_linear_in_the_line_length():
    """Lines that took minutes (a long run of digits, ``1e1e...``, ``1:1:...``): 16
    times longer costs at most about 16 times as long (60 with a busy machine's noise)."""
    for unit in ("1", "1e", "1:", "time=1.5s|", "1 "):
        short, long_ = unit * (4000 // len(unit)) + "s", unit * (64000 // len(unit)) + "s"
        t0 = time.perf_counter()
        normalize_line(short)
        t1 = time.perf_counter()
        normalize_line(long_)
        t2 = time.perf_counter()
        assert t2 - t1 < max(60 * (t1 - t0), 0.5), (unit, t1 - t0, t2 - t1)


def test_a_dict_of_timings_and_quoted_csv_cells_are_masked_whole(tmp_path):
    from fwd9m.compare import compare_text

    a = normalize_line('{"epoch": 1, "time": {"data": 0.12, "step": 0.33}, "loss": 0.5}')
    assert a == normalize_line('{"epoch": 1, "time": {"data": 0.93, "step": 0.01}, "loss": 0.5}')
    assert a != normalize_line('{"epoch": 1, "time": {"data": 0.12, "step": 0.33}, "loss": 0.6}')
    for i, (t, loss) in enumerate((("1.5", "0.5"), ("9.1", "0.5"), ("1.5", "0.7"))):
        (tmp_path / f"{i}.csv").write_text(f'"epoch","time","loss"\n"1","{t}","{loss}"\n')
    assert not compare_text("m.csv", tmp_path / "0.csv", tmp_path / "1.csv")  # QUOTE_ALL: the time masked
    assert compare_text("m.csv", tmp_path / "0.csv", tmp_path / "2.csv")  # the loss compared


#: clocks and dates in the layouts loggers print (strftime of a real time), each with a
#: result after it
CLOCKS = [
    "%Y-%m-%d %H:%M:%S,{ms}",  # logging's asctime
    "%m/%d/%Y %H:%M:%S",  # HF examples' datefmt
    "%Y%m%d %H%M%S",
    "%Y%m%d-%H%M%S",
    "[%d/%b/%Y:%H:%M:%S +0000]",  # the Common Log Format (Apache, nginx, gunicorn)
    "[%x %X]",  # Rich's RichHandler
]


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(CLOCKS),
    st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2099, 12, 31)),
    st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2099, 12, 31)),
    results,
    results,
)
def test_a_clock_in_any_logger_layout_is_masked_and_the_result_after_it_compared(fmt, t1, t2, r1, r2):
    def line(t, r):
        return t.strftime(fmt).replace("{ms}", f"{t.microsecond // 1000:03d}") + f" - INFO - loss {r}"

    assert normalize_line(line(t1, r1)) == normalize_line(line(t2, r1))
    if r1 != r2:
        assert normalize_line(line(t1, r1)) != normalize_line(line(t1, r2))


def test_rich_console_log_leaves_a_repeated_time_blank_and_that_agrees(tmp_path):
    """Rich's console.log prints the time only when it changed since the line before."""
    from rich.console import Console
    from rich.text import Text

    from fwd9m.compare._text import IgnoredValues, compare_text

    for name, times in (("a", ["[13:37:04]", "[13:37:04]"]), ("b", ["[13:37:04]", "[13:37:05]"])):
        clock = iter(times)
        with open(tmp_path / name, "w") as f:
            console = Console(file=f, width=80, log_path=False, log_time_format=lambda _, c=clock: Text(next(c)))
            console.log("start")
            console.log("loss 0.5")
    a, b = (tmp_path / "a").read_text().splitlines(), (tmp_path / "b").read_text().splitlines()
    assert a[1].startswith("           loss") and b[1].startswith("[13:37:05] loss"), (a, b)
    assert compare_text("stdout", tmp_path / "a", tmp_path / "b", ignored=IgnoredValues()) is None
    (tmp_path / "b").write_text((tmp_path / "b").read_text().replace("loss 0.5", "loss 0.6"))
    assert compare_text("stdout", tmp_path / "a", tmp_path / "b") is not None


def test_a_timing_dict_printed_over_several_lines_is_masked_and_the_rest_compared(tmp_path):
    import json

    from fwd9m.compare._text import compare_text

    def write(name, data, step, loss):
        record = {"epoch": 1, "time": {"data": data, "step": [step, 2]}, "loss": loss}
        (tmp_path / f"{name}.json").write_text(json.dumps(record, indent=2))
        (tmp_path / f"{name}.yaml").write_text(f"epoch: 1\ntiming:\n  data: {data}\n  step: {step}\nloss: {loss}\n")

    write("a", 0.1, 0.2, 0.5)
    write("b", 0.3, 0.4, 0.5)
    write("c", 0.1, 0.2, 0.7)
    for ext in ("json", "yaml"):
        assert compare_text(ext, tmp_path / f"a.{ext}", tmp_path / f"b.{ext}") is None
        assert compare_text(ext, tmp_path / f"a.{ext}", tmp_path / f"c.{ext}") is not None
