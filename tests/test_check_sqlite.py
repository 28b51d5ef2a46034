"""SQLite databases a run writes (MLflow 3's default tracking store ``mlflow.db``,
Optuna's storage, a script's own table) are compared cell by cell, with times and
random ids left out, never by their bytes; real MLflow, real sqlite3."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import uuid

import pytest

from fwd9m.compare import compare_flat, read_structured
from fwd9m.errors import FileFormatError


def _results_db(path, loss: float, wal: bool = False) -> sqlite3.Connection | None:
    con = sqlite3.connect(path)
    if wal:
        con.execute("PRAGMA journal_mode = WAL")
        con.execute("PRAGMA wal_autocheckpoint = 0")
    con.execute("CREATE TABLE runs (run_id TEXT, created_at INTEGER, updatedTime REAL, candidate TEXT, loss REAL)")
    con.execute("INSERT INTO runs VALUES (?, ?, ?, ?, ?)", (uuid.uuid4().hex, os.getpid(), 1.5, "b", loss))
    con.execute("CREATE TABLE notes (id TEXT PRIMARY KEY, text TEXT) WITHOUT ROWID")
    con.execute("INSERT INTO notes VALUES (?, ?)", (str(uuid.uuid4()), "seed 0"))
    con.commit()
    if not wal:
        con.close()
    return con if wal else None


def test_cells_are_compared_with_times_and_random_ids_left_out(tmp_path):
    _results_db(tmp_path / "a.db", 0.25)
    _results_db(tmp_path / "b.db", 0.25)
    _results_db(tmp_path / "c.db", 0.25000000000000006)
    a, b, c = (read_structured(tmp_path / f"{n}.db") for n in "abc")
    assert a["notes[0].id"] == "<id 1>" and a["runs[0].run_id"] == "<id 2>"  # tables in name order
    assert a.ignored["runs[0].created_at"] == a.ignored["runs[0].updatedTime"] == "a time stamp column"
    assert "runs[0].candidate" not in a.ignored  # 'date' inside a word is no time
    assert not compare_flat(a, b)
    (d,) = compare_flat(a, c)
    assert d.path == "runs[0].loss" and d.max_ulp == 1


def test_digests_and_results_named_like_times_are_compared(tmp_path):
    """A hex digest outside an id column is a value (an MD5 of the predictions), and
    ``recall_at_10``, ``n_updated``, ``lifetime_value`` are results, not times."""

    def db(name, digest, recall):
        con = sqlite3.connect(tmp_path / name)
        con.execute("CREATE TABLE evals (checksum TEXT, recall_at_10 REAL, n_updated INT, datetime_start TEXT)")
        con.execute("INSERT INTO evals VALUES (?, ?, 3, ?)", (digest, recall, str(uuid.uuid4())))
        con.commit()
        con.close()
        return read_structured(tmp_path / name)

    a = db("a.db", "0" * 31 + "1", 0.5)
    b = db("b.db", "0" * 31 + "2", 0.5)
    c = db("c.db", "0" * 31 + "1", 0.75)
    assert list(a.ignored) == ["evals[0].datetime_start"]
    assert [d.path for d in compare_flat(a, b)] == ["evals[0].checksum"]
    assert [d.path for d in compare_flat(a, c)] == ["evals[0].recall_at_10"]


def test_rows_still_in_the_write_ahead_log_are_read_and_the_file_is_not_touched(tmp_path):
    con = _results_db(tmp_path / "a.db", 0.5, wal=True)
    try:
        before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
        flat = read_structured(tmp_path / "a.db")
        assert flat["runs[0].loss"] == 0.5
        assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    finally:
        con.close()


@pytest.mark.parametrize("content", [b"", b"SQLite format 3\x00" + b"\x00" * 40, b"not a database at all"])
def test_a_db_file_that_is_not_a_readable_database_is_a_format_error(tmp_path, content):
    (tmp_path / "cache.db").write_bytes(content)
    with pytest.raises(FileFormatError):
        read_structured(tmp_path / "cache.db")


_MLFLOW = """
import mlflow
import torch
{seed}
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.ones(16, 4), torch.zeros(16, 1)
with mlflow.start_run():  # MLflow 3's default store: sqlite:///mlflow.db
    mlflow.log_params({{"lr": 0.1}})
    for step in range(3):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        mlflow.log_metric("loss", loss.item(), step=step)
"""


def _check(tmp_path, script: str) -> subprocess.CompletedProcess:
    (tmp_path / "train.py").write_text(script)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONHASHSEED", "MLFLOW_TRACKING_URI")}
    return subprocess.run(
        [sys.executable, "-m", "fwd9m", "check", "--no-hashseed-check", "--no-early-stop", "train.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_mlflow_default_sqlite_store_of_a_seeded_run_is_reproducible(tmp_path):
    pytest.importorskip("sqlalchemy")
    r = _check(tmp_path, _MLFLOW.format(seed="torch.manual_seed(0)"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "mlflow.db" in r.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]


def test_mlflow_default_sqlite_store_names_the_logged_value_that_differs(tmp_path):
    pytest.importorskip("sqlalchemy")
    r = _check(tmp_path, _MLFLOW.format(seed=""))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "mlflow.db:metrics[0].value" in r.stdout or "mlflow.db:latest_metrics" in r.stdout, r.stdout
    assert "content differs" not in r.stdout


_WAL_SCRIPT = """
import os
import sqlite3

con = sqlite3.connect("results.db")
con.execute("PRAGMA journal_mode = WAL")
con.execute("CREATE TABLE IF NOT EXISTS losses (step INTEGER, loss REAL)")
con.executemany("INSERT INTO losses VALUES (?, ?)", [(i, {loss} / (i + 1)) for i in range(5)])
con.commit()
os._exit(0)  # ends without closing: results.db-wal and results.db-shm stay beside the database
"""


@pytest.mark.parametrize("loss, verdict", [("1.0", 0), ("__import__('random').random()", 1)])
def test_a_databases_write_ahead_log_and_index_are_compared_by_its_rows(tmp_path, loss, verdict):
    """The -wal and -shm files SQLite leaves beside a database hold salts and checksums
    that differ between runs that wrote the same rows: they are not compared by bytes
    (a false NOT REPRODUCIBLE before), and a row that differs is still found."""
    r = _check(tmp_path, _WAL_SCRIPT.format(loss=loss))
    assert r.returncode == verdict, r.stdout + r.stderr
    assert "results.db-wal: content differs" not in r.stdout and "results.db-shm" not in r.stdout.split("Compared")[0]
    if verdict:
        assert "results.db:losses[" in r.stdout, r.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]
