"""The HTML report of ``fwd9m debug --html`` (``fwd9m.debug._html``): its parts, its
bounds on large traces, escaping of everything a trace holds, and pages from real
``fwd9m debug`` runs loaded in a real headless Chromium (system package, installed by
``scripts/test`` through ``scripts/_chromium``; the browser tests skip, saying why,
without it). Small traces are written with the real TraceWriter; no framework needed
except for the real runs."""

from __future__ import annotations

import itertools
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from fwd9m import debug
from fwd9m._recording import _store
from fwd9m.debug import _timeline, _values
from fwd9m.debug._html import TITLE

DATA = Path(__file__).parent / "data" / "debug"
HEADER = {"frameworks": ["torch"], "level": "digests", "program": None, "environment": None}
CRAFTED = "<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\">\x1b[31m"


def _f32(*values: float) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


def _write(path, ops, captures=None) -> str:
    """A trace of ``ops``: (name, module, phase, location, step, input digest, output
    digest, output sample); ``captures``: {seq: output bytes}, written after their op
    as the recorders do."""
    with _store.TraceWriter(path, HEADER) as w:
        meta = w.string("float32[4]")
        for name, module, phase, loc, step, din, dout, sample in ops:
            ctx = w.string(_store.SEP.join([module, phase, loc, "", "cpu"]))
            flags = _store.HAS_SAMPLE if sample else 0
            seq = w.op(w.string(name), ctx, step, [(meta, 0, din, None, None)], [(meta, flags, dout, sample, None)])
            if seq in (captures or {}):
                w.capture(seq, True, 0, meta, captures[seq])
    return str(path)


def _pair(tmp_path, name="aten::add", module="Net.fc", loc="train.py:7", captured=False):
    """Two traces whose op #2 has equal inputs and different outputs (a culprit)."""
    same, a, b = _f32(1, 2, 3, 4), _f32(1, 2, 3, 4.5), _f32(1, 2.0000002, 3, 4)
    ops_a = [
        ("aten::mm", "Net.fc", "forward", "train.py:5", 0, 1, 2, same),
        ("aten::relu", "Net.act", "forward", "train.py:6", 0, 2, 3, same),
        (name, module, "forward", loc, 0, 3, 4, a),
        ("aten::sum", "", "backward", "", 1, 4, 5, a),
    ]
    # run B's op #3 reads op #2's output: its digest in run B (the data flow is followed)
    ops_b = [o if i < 2 else (*o[:5], o[5] + (10 if i > 2 else 0), o[6] + 10, b) for i, o in enumerate(ops_a)]
    caps_a, caps_b = ({2: a}, {2: b}) if captured else (None, None)
    return _write(tmp_path / "a.trace", ops_a, caps_a), _write(tmp_path / "b.trace", ops_b, caps_b)


def test_page_parts_and_self_contained(tmp_path):
    report = debug.diff(*_pair(tmp_path, captured=True))
    page = report.render("html")
    assert f"<title>{TITLE}</title>" in page[:256]  # how --html recognises its own page
    for part in (
        "id='first-divergence'",
        "id='timeline'",
        "id='heatmap'",
        "id='values'",
        "id='raw-json'",
        "id='first-cell'",
        "id='first-mark'",
    ):
        assert part in page, part
    assert "all inputs agree" in page and "output 0 differs" in page
    assert "<code>train.py:7</code>" in page  # file:line on the card
    assert "captured in full: 2 of 4 values compared differ" in page
    assert "<details id='raw-json'>" in page  # collapsed
    # no network: nothing is loaded, and the CSP forbids loads and foreign scripts
    assert not re.search(r"<(script|img|link|iframe|object)[^>]*\s(src|href)=", page)
    assert "default-src 'none'" in page and page.count("<script") == 1
    assert len(page) < 20_000


def test_replay_result_is_rendered_when_the_report_has_one(tmp_path):
    report = debug.diff(*_pair(tmp_path))
    assert "id='replay'" in report.render("html") and "Not replayed" in report.render("html")
    report.first.explanation["replay"] = {"distinct": 7, "replays": 20, "max_ulp": 50, "switch": "deterministic"}
    page = report.render("html")
    assert "confirmed</span>: 7 distinct outputs in 20 replays (max 50 ULP)" in page
    assert "with the determinism switch: deterministic" in page
    report.first.explanation["replay"] = {"distinct": 1, "replays": 20, "max_ulp": 0, "switch": {"on": "raises"}}
    page = report.render("html")
    assert "not reproduced in isolation" in page and "on: raises" in page


def test_crafted_names_cannot_inject_markup(tmp_path):
    """Op name, module, location and a catalog-free headline all come from the trace."""
    report = debug.diff(*_pair(tmp_path, name=CRAFTED, module=CRAFTED, loc=CRAFTED + ":1"))
    page = report.render("html")
    assert "<img" not in page and "document.title='pwned'</script>" not in page
    assert page.count("<script") == 1 and "\x1b" not in page
    assert "&lt;img src=x onerror=&quot;" in page and "\\x1b[31m" in page


def test_timeline_is_bounded_and_keeps_counts():
    """5000 steps, 360 modules: at most 64 columns and 40 rows, split where ops differ."""
    tl = _timeline.Timeline()
    n = 0
    for step in range(5000):
        for i in range(360):
            layer, block, sub = i // 60, i // 10 % 6, i % 10
            if (step * 360 + i) % 97 == 0:  # not every cell, not in order
                tl.add(f"Net.layer{layer}.block{block}.conv{sub}", "forward", step, layer == 2 and sub == 3, (0.5, 9))
                n += 1
    tl.add("", "optimizer", 4999, False, None)
    d = tl.to_dict()
    assert len(d["rows"]) <= _timeline.MAX_ROWS and len(d["columns"]) <= _timeline.MAX_COLUMNS
    assert sum(c[1] for r in d["rows"] for c in r["cells"]) == n + 1  # every op counted once
    names = [r["name"] for r in d["rows"]]
    assert "(optimizer)" in names and d["grouped"] and len(names) > 20  # split, not one "Net" row
    assert "Net.layer2.block0" in names and "Net.layer0.block0.conv0" not in names
    assert names[d["first"][0]].startswith("Net.layer2.block")  # where the first op differs
    assert d["columns"][0] == 0 and d["step_width"] >= 5000 / _timeline.MAX_COLUMNS


def test_timeline_stream_cap_shortens_paths():
    tl = _timeline.Timeline()
    for i in range(3 * _timeline.MAX_MODULES):
        tl.add(f"Net.m{i}.conv", "forward", 0, i == 5, None)
    assert len(tl.rows) <= _timeline.MAX_MODULES
    d = tl.to_dict()
    assert sum(c[1] for r in d["rows"] for c in r["cells"]) == 3 * _timeline.MAX_MODULES
    assert d["rows"][d["first"][0]]["name"] == "Net"


def test_timeline_many_flat_names_keep_the_ones_that_differ():
    tl = _timeline.Timeline()
    for i in range(300):
        tl.add(f"op_{i}", "forward", 0, i == 250, (1.0, 1))
    d = tl.to_dict()
    names = [r["name"] for r in d["rows"]]
    assert len(names) == _timeline.MAX_ROWS and names[-1] == _timeline.OTHER
    assert "op_250" in names or _timeline.OTHER in names
    assert sum(c[1] for r in d["rows"] for c in r["cells"]) == 300


def test_values_side_by_side_counts_bits_not_ulps(tmp_path):
    """+0.0 and -0.0 are 0 ULP apart but differ bit for bit; a digest sees them differ."""
    a = _store.Op(
        0,
        "x",
        "",
        "",
        "",
        "",
        "",
        0,
        [],
        [_store.Tensor("float32[3]", 0, 1)],
        {(1, 0): ("float32[3]", _f32(0.0, 1.0, 2.0))},
    )
    b = _store.Op(
        0,
        "x",
        "",
        "",
        "",
        "",
        "",
        0,
        [],
        [_store.Tensor("float32[3]", 0, 2)],
        {(1, 0): ("float32[3]", _f32(-0.0, 1.0, 2.0000002))},
    )
    [t] = _values.side_by_side(a, b, [], [0])
    assert t["source"] == "captured" and t["differ"] == 2 and t["compared"] == 3
    assert [r[0] for r in t["rows"]] == [0, 2] and t["rows"][1][3] == 1  # 1 ULP


def test_large_trace_page_stays_small(tmp_path):
    """20 000 ops over 400 modules and 2000 steps: the page is bounded by the series
    (400 points) and the grid (40 x 64), not by the trace."""
    ops_a, ops_b = [], []
    for i in range(20_000):
        step, mod = i // 10, f"Net.stage{i % 400 // 40}.block{i % 40}"
        s = _f32(1, 2, 3, float(i))
        ops_a.append(("aten::mm", mod, "forward", "t.py:1", step, i, i + 1, s))
        ops_b.append(
            (
                "aten::mm",
                mod,
                "forward",
                "t.py:1",
                step,
                i,
                i + 1 + (i >= 5000),
                _f32(1, 2, 3, i + 0.5) if i >= 5000 else s,
            )
        )
    report = debug.diff(_write(tmp_path / "a.trace", ops_a), _write(tmp_path / "b.trace", ops_b))
    page = report.render("html")
    tl = report.spread["timeline"]
    assert len(tl["rows"]) <= _timeline.MAX_ROWS and len(tl["columns"]) <= _timeline.MAX_COLUMNS
    print(f"page for 20000 ops, 400 modules, 2000 steps: {len(page)} bytes")
    assert len(page) < 250_000


# -- a real headless browser -------------------------------------------------------------


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip(
        "Chromium is not installed: scripts/test installs it with apt (scripts/_chromium) where apt can be used"
    )


def _browse(page: Path, out: Path) -> tuple[str, list[str]]:
    """Load ``page`` in headless Chromium: (the DOM after its script ran, console lines);
    keeps a screenshot beside it in ``out``."""
    chrome = _chromium()
    base = [
        chrome,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        f"--user-data-dir={out / 'profile'}",
        "--enable-logging=stderr",
        "--v=0",
    ]
    url = page.resolve().as_uri()
    p = subprocess.run([*base, "--dump-dom", url], check=False, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr[-2000:]
    console = [ln for ln in p.stderr.splitlines() if ":CONSOLE" in ln]
    shot = out / (page.stem + ".png")
    s = subprocess.run(
        [*base, "--hide-scrollbars", "--window-size=1100,2600", f"--screenshot={shot}", url],
        check=False,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert s.returncode == 0 and shot.stat().st_size > 10_000, s.stderr[-2000:]
    print(f"screenshot: {shot}")
    return p.stdout, console


def _assert_rendered(dom: str, console: list[str]) -> None:
    assert not console, console  # no console errors (a CSP refusal is one too)
    assert 'data-fwd9m-rendered="ok"' in dom
    assert re.search(r'data-fwd9m-cells="[1-9]', dom)  # the script read the heat map back from the raw data
    for part in ("first-divergence", "timeline", "heatmap", "values", "raw-json"):
        assert f'id="{part}"' in dom, part


def test_browser_refuses_an_injected_script(tmp_path):
    """Even a script that got past the escaping would not run: the page's CSP allows
    only its own script (by hash). The crafted names render as text."""
    page = tmp_path / "crafted.html"
    page.write_text(debug.diff(*_pair(tmp_path, name=CRAFTED, module=CRAFTED)).render("html"))
    dom, console = _browse(page, tmp_path)
    _assert_rendered(dom, console)
    assert "pwned" not in re.search(r"<title>(.*?)</title>", dom).group(1) and "<img" not in dom
    tampered = tmp_path / "tampered.html"
    injected = "<body><script>document.title='pwned'</script>"
    tampered.write_text(page.read_text().replace("<body>", injected, 1))
    dom, console = _browse(tampered, tmp_path)
    assert "<title>fwd9m debug report</title>" in dom
    assert any("Content Security Policy" in line for line in console), console


@pytest.mark.slow
def test_browser_renders_real_torch_and_keras_reports(fwd9m_cli, tmp_path):
    """Pages from two real `fwd9m debug --html` runs: a PyTorch culprit (a custom op
    whose kernel differs between runs for certain) and a Keras/TF external source
    (unseeded initializers), each loaded in Chromium without console errors."""
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    _chromium()
    counter, cwd = tmp_path / "runs", tmp_path / "cwd"  # the counter outside the runs' folder:
    counter.write_text("0")  # debug puts back what they write there
    cwd.mkdir()
    cases = {
        "torch_noisy_op.py": ("CULPRIT OP", "fwd9m_test::noisy_scale", "Replay"),
        "keras_initializer.py": ("EXTERNAL SOURCE", "keras.seed-generator", "catalog"),
    }
    for script, words in cases.items():
        page = tmp_path / (Path(script).stem + ".html")
        p = fwd9m_cli(
            "debug",
            "--no-hashseed-check",
            "--html",
            str(page),
            str(DATA / script),
            cwd=cwd,
            env={"FWD9M_TEST_RUN_COUNTER": str(counter)},
        )
        assert p.returncode == 1, p.stdout + p.stderr
        print(f"{script}: page {page.stat().st_size} bytes")
        dom, console = _browse(page, tmp_path)
        _assert_rendered(dom, console)
        for w in words:
            assert w in dom, w


def test_reproducible_and_structural_pages(tmp_path):
    same = _f32(1, 2, 3, 4)
    ops = [
        ("aten::mm", "Net.fc", "forward", "t.py:1", 0, 1, 2, same),
        ("aten::relu", "Net.act", "forward", "t.py:2", 0, 2, 3, same),
    ]
    a = _write(tmp_path / "a.trace", ops)
    page = debug.diff(a, _write(tmp_path / "b.trace", ops)).render("html")
    assert "id='verdict'" in page and "REPRODUCIBLE" in page and "id='heatmap'" in page
    assert "id='first-cell'" not in page and "id='values'" not in page
    other = [ops[0], ("aten::tanh", "Net.act", "forward", "t.py:2", 0, 2, 3, same)]
    page = debug.diff(a, _write(tmp_path / "c.trace", other)).render("html")
    assert "STRUCTURAL DIFFERENCE" in page and "<th>run A</th><th>run B</th>" in page
    assert "aten::relu" in page and "aten::tanh" in page
    longer = debug.diff(a, _write(tmp_path / "d.trace", [*ops, ops[1]])).render("html")
    assert "(end of run)" in longer and "op / step</dt><dd>#2 / -" in longer


def test_values_of_integer_captures_and_missing_values():
    ints = _store.Tensor("int64[2]", 0, 1)
    a = _store.Op(0, "x", "", "", "", "", "", 0, [], [ints], {(1, 0): ("int64[2]", struct.pack("<2q", 5, -7))})
    b = _store.Op(0, "x", "", "", "", "", "", 0, [], [ints], {(1, 0): ("int64[2]", struct.pack("<2q", 5, 9))})
    [t] = _values.side_by_side(a, b, [], [0])
    assert t["unit"] == "abs" and t["rows"] == [[1, -7, 9, 16]]
    bare = _store.Op(0, "x", "", "", "", "", "", 0, [], [ints])
    assert _values.side_by_side(bare, bare, [], [0]) == []  # no sample, no capture: left out


def test_axis_labels_do_not_overlap(tmp_path):
    """The old plot printed every decade (1e-13 ... 1e-1, 12 px apart on a 260 px
    plot) and, for a short trace, non-integer op indices rounded to the same label."""
    report = debug.diff(*_pair(tmp_path))
    report.spread["series"] = [[i, 1, 10.0 ** (i - 30), i, i // 10] for i in range(61)]
    page = report.render("html")
    chart = page[page.index("id='timeline'") : page.index("id='heatmap'")]
    ys = sorted(float(y) for y in re.findall(r"<text x='64' y='([0-9.]+)' text-anchor='end'>1e-?\d+</text>", chart))
    assert 3 <= len(ys) <= 7 and min(b - a for a, b in itertools.pairwise(ys)) >= 14, ys
    ticks = r"<line class='axis'[^>]*/><text [^>]*>([0-9,]+)</text>"  # the x axis' labels
    xs = re.findall(ticks, chart)
    assert len(xs) == len(set(xs)) >= 3, xs  # whole op indices, each once
    small = debug.diff(*_pair(tmp_path)).render("html")
    labels = re.findall(ticks, small[small.index("id='timeline'") : small.index("id='heatmap'")])
    assert labels == ["0", "1", "2", "3", "4"], labels


def test_the_html_report_lists_the_harmless_divergences_as_the_text_report_does():
    """Issue 27: the page names the earlier divergences whose values reach no result,
    with the text report's words, after the card of the one that matters."""
    import html as html_lib

    from fwd9m.debug._compare import DebugReport, Divergence

    first = Divergence(
        kind="external",
        seq=31,
        step=0,
        op="aten::normal_",
        module="",
        phase="data",
        location="train.py:20",
        node="random",
        device="cpu",
        source="rng",
        explanation={"headline": "random-number generator state differs"},
    )
    gone = {
        "kind": "external",
        "source": "rng",
        "seq": 4,
        "step": 0,
        "op": "aten::uniform_",
        "module": "Linear",
        "phase": "other",
        "location": "train.py:7",
        "why": "overwritten at op #24 (aten::copy_ at train.py:12) before any op read it",
        "overwritten": None,
        "to_python": False,
    }
    report = DebugReport(
        a="a",
        b="b",
        framework="torch",
        reproducible=False,
        kind="external",
        ops_a=40,
        ops_b=40,
        first=first,
        harmless=[gone],
    )
    text_lines = [x for x in report.render("text").splitlines() if x.startswith("harmless: ")]
    page = html_lib.unescape(report.render("html"))
    assert len(text_lines) == 1
    assert "id='harmless'" in page and "Harmless divergences" in page
    assert text_lines[0].removeprefix("harmless: ") in page
    assert page.index("id='first-divergence'") < page.index("id='harmless'")
