"""Adversarial guards for the relaxations of the output comparison: for each, two runs
whose results genuinely differ (a loss, a metric, a count, a printed tensor) that it must
not call identical, beside the layout change it was made for, which must still agree."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from fwd9m.compare import compare_text, pair_names
from fwd9m.compare._text import timing_name


def _same(tmp_path, a: str, b: str, name: str = "stdout", **kw) -> bool:
    pa, pb = tmp_path / "a", tmp_path / "b"
    pa.write_text(a, newline="")
    pb.write_text(b, newline="")
    return compare_text(name, pa, pb, **kw) is None


BAR = "Epoch 1/1  ━━━━━━━ 4/4 0:00:00 • 0:00:00 {rate}it/s v_num: 0\n"


@pytest.mark.parametrize(
    "a, b, name",
    [
        # a TSV row whose empty cell is another column: 0.5 is the loss in one run, the accuracy in the other
        ("epoch\tloss\tacc\n1\t\t0.5\n", "epoch\tloss\tacc\n1\t0.5\t\n", "metrics.tsv"),
        ("1\t\t0.5\n", "1\t0.5\n", "stdout"),
        # a table whose empty cell moves a value to another column
        ("epoch  loss  acc\n1            0.5\n", "epoch  loss  acc\n1      0.5\n", "stdout"),
        ("  3           0.871   12.3s\n", "  3   0.871           12.3s\n", "stdout"),  # beside a time too
        # YAML whose nesting differs: warmup under the scheduler, or at the top
        ("sched:\n  name: cos\n  warmup: 100\n", "sched:\n  name: cos\nwarmup: 100\n", "hparams.yaml"),
        # the same after a progress bar's line: only a line with leading blanks in both continues it
        (BAR.format(rate="38.44") + "  warmup: 100\n", BAR.format(rate="188.46") + "warmup: 100\n", "stdout"),
    ],
)
def test_blanks_that_move_a_value_to_another_column_differ(tmp_path, a, b, name):
    assert not _same(tmp_path, a, b, name)


def test_the_wrapped_metrics_of_a_progress_bar_still_agree(tmp_path):
    """The layout the spacing relaxation was made for (Rich pads the wrapped metrics lines
    by the width of the rate on the bar's line), with a value still compared."""
    a = BAR.format(rate="38.44") + " " * 62 + "train_loss: 3.160\n" + " " * 62 + "val_loss: 2.5\n"
    b = BAR.format(rate="188.46") + " " * 61 + "train_loss: 3.160\n" + " " * 61 + "val_loss: 2.5\n"
    assert _same(tmp_path, a, b)
    assert not _same(tmp_path, a, b.replace("2.5", "2.25"))


@pytest.mark.parametrize(
    "a, b",
    [
        # numpy pads a column to its widest value: the padding moves, the values differ
        ("[1.5  2.25]\n", "[1.25 2.5 ]\n"),
        (
            "tensor([[1.0000, 2.2500],\n        [3.5000, 4.0000]])\n",
            "tensor([[1.0000, 2.2500],\n        [3.5000, 4.0001]])\n",
        ),
        # a loss in a tqdm postfix, beside a masked rate
        ("100%|███| 3/3 [00:01<00:00,  1.52it/s, loss=0.5]\n", "100%|███| 3/3 [00:04<00:00,  1.42s/it, loss=0.6]\n"),
        # a sparkline of losses beside a masked time: its glyphs are values
        ("loss ▁▂▃█ 2s\n", "loss █▃▂▁ 3s\n"),
        ("loss ▁▂██ 2s\n", "loss ▁▂█ 3s\n"),
        # a timing's slot holds a plain number in the other run
        ("step 3 took 3s\n", "step 3 took 3\n"),
    ],
)
def test_values_beside_masked_layout_differ(tmp_path, a, b):
    assert not _same(tmp_path, a, b)


@pytest.mark.parametrize(
    "a, b",
    [
        # a cut word in one run holds a number the other's cut dropped: the numbers after it
        # would be compared out of line (2 with 2, 2 with 2, and run b's 3 never)
        ("x=… 2 2\n", "x=2… 2 3\n"),
        ("(… 1 1\n", "(1… 1 2\n"),
        ("loss=0.1234… acc\n", "loss=0.12… acc\n"),
    ],
)
def test_words_cut_with_an_ellipsis_keep_their_numbers_in_line(tmp_path, a, b):
    assert not _same(tmp_path, a, b)
    bar_a, bar_b = BAR.format(rate="7.70") + "  ", BAR.format(rate="11.42") + "   "
    assert _same(tmp_path, bar_a + "another_metric_wi…\n", bar_b + "another_metric_w…\n")


def test_words_cut_with_an_ellipsis_agree_only_where_a_timing_sets_the_width(tmp_path):
    """A program's own cut (a generated sample shortened to a width) is no layout: where
    no masked timing sets the column's width, a cut at another place is another text."""
    assert not _same(tmp_path, "sample: The cat sat…\n", "sample: The cat sa…\n")


@pytest.mark.parametrize(
    "a, b",
    [
        # a shorter redraw leaves the rest of the row on the terminal: the loss stays visible
        ("step 99 loss 0.51\rok\n", "step 99 loss 0.73\rok\n"),
        # a cursor movement up, then a shorter row over the loss
        ("loss 0.51\n\x1b[Aok\n", "loss 0.73\n\x1b[Aok\n"),
        ("loss 0.51\n\x1b[1Fok\n", "loss 0.73\n\x1b[1Fok\n"),
    ],
)
def test_a_value_a_shorter_redraw_leaves_on_the_screen_is_compared(tmp_path, a, b):
    assert not _same(tmp_path, a, b)
    assert not _same(tmp_path, a, b, strict=True)
    # erased (CSI K, as Rich does) or padded with blanks (as tqdm and Keras do), it is gone
    assert _same(tmp_path, a.replace("ok", "\x1b[2Kok"), b.replace("ok", "\x1b[2Kok"))
    assert _same(tmp_path, a.replace("ok", "ok" + " " * 20), b.replace("ok", "ok" + " " * 20))


def test_a_rich_bar_whose_columns_follow_its_rate_agrees(tmp_path):
    """Rich lays out a progress row as Lightning's RichProgressBar does (a flexible bar,
    then the count, the time, the rate, the metrics): a wider rate draws a shorter bar and
    pads the rate's column; the loss is still compared."""
    rich_console = pytest.importorskip("rich.console")
    rp = pytest.importorskip("rich.progress")

    def run(rates: list[str], loss: str) -> str:
        out = io.StringIO()
        console = rich_console.Console(file=out, force_terminal=True, width=90)
        columns = (
            rp.TextColumn("{task.description}"),
            rp.BarColumn(bar_width=None),
            rp.MofNCompleteColumn(),
            rp.TimeElapsedColumn(),
            rp.TextColumn("{task.fields[rate]}it/s", justify="right"),
            rp.TextColumn("loss: {task.fields[loss]}"),
        )
        with rp.Progress(*columns, console=console, expand=True, auto_refresh=False) as p:
            tasks = [p.add_task(name, total=4, rate=r, loss=loss) for name, r in zip(["train", "val"], rates)]
            for t in tasks:
                p.update(t, advance=4)
            p.refresh()
        return out.getvalue()

    a, b = run(["9.98", "7.5"], "0.25"), run(["16.21", "7.5"], "0.25")
    assert a != b
    assert _same(tmp_path, a, b)
    assert not _same(tmp_path, a, run(["16.21", "7.5"], "0.26"))


def test_rich_progress_redraws_still_agree(tmp_path):
    """Rich redraws its live rows with CR, CSI A and CSI 2K (erase): what it printed
    stays compared, the number of redraws does not matter."""
    rich_console = pytest.importorskip("rich.console")
    rich_progress = pytest.importorskip("rich.progress")

    def run(steps_per_refresh: int, loss: str) -> str:
        out = io.StringIO()
        console = rich_console.Console(file=out, force_terminal=True, width=100)
        with rich_progress.Progress(console=console, auto_refresh=False) as p:
            task = p.add_task("epoch", total=20)
            for i in range(20):
                p.advance(task)
                if i % steps_per_refresh == 0:
                    p.refresh()
                if i == 9:
                    console.print(f"half loss {loss}")
        console.print("done")
        return out.getvalue()

    a, b = run(1, "0.25"), run(3, "0.25")
    assert a.count("\r") != b.count("\r")
    assert _same(tmp_path, a, b)
    assert not _same(tmp_path, a, run(3, "0.125"))


@pytest.mark.parametrize(
    "a, b",
    [
        # layer sizes are no date (a year 19xx/20xx, a month 01-12, a day 01-31 are)
        ("best arch 1024-64-32\n", "best arch 1024-32-16\n"),
        ("hidden=0512-16-08 acc 0.9\n", "hidden=0512-32-16 acc 0.9\n"),
        ("saved model_1024-64-32.pt\n", "saved model_1024-32-16.pt\n"),
    ],
)
def test_numbers_shaped_like_no_real_date_are_compared(tmp_path, a, b):
    assert not _same(tmp_path, a, b)


def test_file_names_shaped_like_no_real_date_keep_their_numbers():
    """Each run wrote one model, named by its layer sizes: the names do not pair."""
    a, b = pair_names(["model_1024-64-32.pt"]), pair_names(["model_1024-32-16.pt"])
    assert a["model_1024-64-32.pt"] != b["model_1024-32-16.pt"]
    assert pair_names(["run_2026-12-01_19-12-33/x.pt"]) == {"run_2026-12-01_19-12-33/x.pt": "run_<time>/x.pt"}


@pytest.mark.parametrize(
    "key",
    ["duration_loss", "train/duration_loss", "eta_mae", "runtime_error_rate", "loss/ns", "arrival_time_pred", "eta"],
)
def test_a_result_named_after_a_time_is_no_timing(tmp_path, key):
    """FastSpeech's duration_loss, an arrival-time model's eta_mae, DDIM's or XGBoost's
    eta (a step size; an estimated time is written ETA): a result, compared (in printed
    lines, JSON, CSV columns and TensorBoard tags alike)."""
    assert not timing_name(key)
    assert not _same(tmp_path, f"{key}: 0.51\n", f"{key}: 0.73\n")
    assert timing_name("train/train_runtime") and timing_name("eval_samples_per_second") and timing_name("ETA")


def _run(tmp_path: Path, name: str, text: str):
    from fwd9m.check._process import _Run

    out = tmp_path / f"{name}.txt"
    out.write_text(text)
    return _Run(None, tmp_path, tmp_path, out)  # type: ignore[arg-type]


def test_shared_stdout_of_spawned_ranks_is_split_by_rank_names_only(tmp_path):
    """Without a launcher, lines are compared rank by rank only by a prefix naming a rank:
    a script's ``[batch 17]`` names no process, and an order change between such lines
    (the data order a shuffle chose) is a difference; --strict masks nothing there too."""
    from fwd9m.check._runs import _interleaved_only

    def how(a: str, b: str, strict: bool = False):
        return _interleaved_only(_run(tmp_path, "a", a), _run(tmp_path, "b", b), launched=False, strict=strict)

    ranks = "[rank 0] step 1 took 3.2s\n[rank 1] step 1 took 3.1s\n"
    swapped = "[rank 1] step 1 took 3.5s\n[rank 0] step 1 took 3.0s\n"
    assert how(ranks, swapped) is not None
    assert how(ranks, swapped, strict=True) is None
    assert how("[batch 3] size 32\n[batch 7] size 32\n", "[batch 7] size 32\n[batch 3] size 32\n") is None
    # a rank's loss a shorter redraw leaves on the screen is compared there too
    r0 = "[rank 0] step 9 loss {}\r[rank 0] ok\n"
    assert how(r0.format("0.51") + "[rank 1] x\n", "[rank 1] x\n" + r0.format("0.73")) is None
    assert how(r0.format("0.51") + "[rank 1] x\n", "[rank 1] x\n" + r0.format("0.51")) is not None


def test_ranks_lines_merged_by_unbuffered_writes_are_split_again(tmp_path):
    """Regression (``mp.spawn`` of two DDP ranks under PYTHONUNBUFFERED=1, as in many
    Docker images): ``print`` writes its text and its newline separately, so two ranks'
    lines landed as ``rank 0 ...rank 1 ...`` plus a blank line, and a reproducible run was
    NOT REPRODUCIBLE. Such lines are split at each prefix of the same form; what a rank
    printed, and its order, is still compared."""
    from fwd9m.check._runs import _interleaved_only

    def how(a: str, b: str, launched: bool = False):
        return _interleaved_only(_run(tmp_path, "a", a), _run(tmp_path, "b", b), launched=launched)

    clean = "rank 0 step 0 loss 1.65\nrank 1 step 0 loss 3.76\nrank 0 step 1 loss 0.35\nrank 1 step 1 loss 0.76\n"
    merged = "rank 0 step 0 loss 1.65rank 1 step 0 loss 3.76\n\nrank 1 step 1 loss 0.76rank 0 step 1 loss 0.35\n\n"
    said = how(clean, merged)
    assert said is not None and "split at each prefix" in said
    assert how(merged, clean) == said and how(clean, merged, launched=True) == said
    # a different value, or a rank's own lines in another order, still differ
    assert how(clean, merged.replace("0.35", "0.36")) is None
    swapped = "rank 0 step 1 loss 0.35rank 1 step 0 loss 3.76\n\nrank 1 step 1 loss 0.76rank 0 step 0 loss 1.65\n\n"
    assert how(clean, swapped) is None
    # only a prefix of the line's own form splits it: torchrun's [default0]: before a [3]
    tee = "[default0]:shape [3] ok\n[default1]:shape [3] ok\n"
    assert how(tee, "[default1]:shape [3] ok\n[default0]:shape [3] ok\n", launched=True) is not None
    assert "split" not in how(tee, "[default1]:shape [3] ok\n[default0]:shape [3] ok\n", launched=True)
    # lines without a rank prefix are never split or reordered when spawned
    assert how("a 1\nb 2\n", "b 2\na 1\n") is None
    # a timing at the end of the cut piece is masked as on a clean line
    assert how("rank 0 took 3.2s\nrank 1 took 3.1s\n", "rank 0 took 3.0srank 1 took 3.5s\n\n") is not None
    # lines that only mention another rank (no blank line a merge would leave) are not cut:
    # an exchange of values between ranks, or a rank's own lines reordered, still differ
    assert how("rank 0 peer rank 1 val 5\nrank 1 val 6\n", "rank 1 val 5\nrank 0 peer rank 1 val 6\n") is None
    mention = "rank 0 sees rank 1 acc 0.5\nrank 0 sees rank 1 acc 0.7\nrank 1 acc 0.5\n"
    assert how(mention, "rank 1 acc 0.5\nrank 0 sees rank 1 acc 0.7\nrank 0 sees rank 1 acc 0.5\n") is None
    # ... and, only interleaved, agree without being cut
    said = how("rank 0 waits for rank 1\nrank 1 ready\n", "rank 1 ready\nrank 0 waits for rank 1\n")
    assert said is not None and "split" not in said
    hvd = "[0]<stdout>:torch.Size([1]) ok\n[1]<stdout>:done\n"
    assert how(hvd, "[1]<stdout>:done\n[0]<stdout>:torch.Size([1]) ok\n", launched=True) is not None


def test_the_interleave_note_names_runs_once():
    from fwd9m.check._runs import _and_list

    assert _and_list(["run 2"]) == "run 2" and _and_list(["run 2", "run 3", "run 4"]) == "runs 2, 3 and 4"
    assert _and_list(["run 2", "PYTHONHASHSEED=0 run 1"]) == "run 2 and PYTHONHASHSEED=0 run 1"
