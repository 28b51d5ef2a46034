"""SQLite databases compared by content, not by bytes: MLflow's default tracking store
(``sqlite:///mlflow.db`` since MLflow 3: mlflow/store/tracking/__init__.py,
``DEFAULT_TRACKING_URI``), Optuna's ``sqlite:///`` storage, a script's own results
table. Two runs that log the same values write different bytes (page layout, free
lists, the time of each write, a random id per run), so a byte comparison says every
such run differs.

Each cell is a leaf ``table[row].column``, rows in insertion (rowid) order. What is not
the run's result is not compared: columns named as times (``start_time``,
``timestamp``, ``datetime_start``) are listed in :attr:`~fwd9m.compare.Flat.ignored`;
random ids (a uuid, or 32 hex digits: MLflow's run ids) are renamed ``<id 1>``,
``<id 2>`` in their order of first appearance, so two runs pair them as ``fwd9m check``
pairs MLflow's run folders; MLflow's generated run name is bookkeeping, as in its file
store. The database is read from a copy (with its ``-wal`` file, whose rows it may
still hold), with ``query_only`` on: the run's file is never opened for writing.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from ._values import Flat

__all__ = ["MAGIC", "SUFFIXES", "read_sqlite"]

#: the first 16 bytes of every SQLite database file (https://www.sqlite.org/fileformat.html)
MAGIC = b"SQLite format 3\x00"
SUFFIXES = (".db", ".sqlite", ".sqlite3")
#: a column holding the time of a write: MLflow's ``start_time``, ``end_time``,
#: ``timestamp``, ``creation_time``; Optuna's ``datetime_start``, ``datetime_complete``
_TIME_WORDS = {"time", "timestamp", "date", "datetime", "ts", "at", "created", "updated", "modified"}
_RANDOM_ID = re.compile(
    r"(?<![0-9a-fA-F])(?:[0-9a-f]{32}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(?![0-9a-fA-F])"
)
#: an MLflow run's generated name (mlflow/utils/name_utils.py, _generate_random_name),
#: in the ``runs`` table and as the ``mlflow.runName`` tag
_MLFLOW_TABLES = {"runs", "experiments", "alembic_version"}
#: databases larger than this (bytes) are compared by hash
SIZE_LIMIT = 256 << 20
#: cells read at most; a larger database is compared by hash
CELL_LIMIT = 5_000_000


class _TooLarge(ValueError):
    """More cells than :data:`CELL_LIMIT` (the caller compares the bytes instead)."""


def read_sqlite(path: str | os.PathLike[str]) -> Flat:
    """Every cell of the database at ``path`` as a leaf of a :class:`Flat`.

    Raises:
        ValueError: not an SQLite database, larger than :data:`SIZE_LIMIT` or
            :data:`CELL_LIMIT`, or unreadable (sqlite3.DatabaseError is one).
    """
    p = Path(path)
    with open(p, "rb") as f:
        if f.read(len(MAGIC)) != MAGIC:
            raise ValueError("not an SQLite database (no 'SQLite format 3' header)")
    if p.stat().st_size > SIZE_LIMIT:
        raise _TooLarge(f"larger than {SIZE_LIMIT >> 20} MiB")
    with tempfile.TemporaryDirectory(prefix="fwd9m-sqlite-") as scratch:
        copy = Path(scratch, "db")
        shutil.copyfile(p, copy)
        wal = p.with_name(p.name + "-wal")
        if wal.is_file() and not wal.is_symlink():
            shutil.copyfile(wal, Path(scratch, "db-wal"))
        con = sqlite3.connect(copy, isolation_level=None)
        try:
            con.execute("PRAGMA query_only = ON")
            con.execute("PRAGMA trusted_schema = OFF")
            return _cells(con)
        finally:
            con.close()


def _tables(con: sqlite3.Connection) -> list[str]:
    rows = con.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
    return [r[0] for r in rows]


def _rows(con: sqlite3.Connection, table: str) -> tuple[list[str], list[tuple]]:
    """The column names and the rows of ``table``, in insertion order where the table
    has a rowid (else its primary key's)."""
    quoted = '"' + table.replace('"', '""') + '"'
    try:
        cur = con.execute(f"SELECT * FROM {quoted} ORDER BY rowid")
    except sqlite3.OperationalError:  # a WITHOUT ROWID table
        cur = con.execute(f"SELECT * FROM {quoted}")
    return [d[0] for d in cur.description], cur.fetchall()


def _cells(con: sqlite3.Connection) -> Flat:
    out = Flat()
    ids: dict[str, str] = {}
    tables = _tables(con)
    mlflow = _MLFLOW_TABLES <= set(tables)
    cells = 0
    for table in tables:
        columns, rows = _rows(con, table)
        cells += len(columns) * len(rows)
        if cells > CELL_LIMIT:
            raise _TooLarge(f"more than {CELL_LIMIT} cells")
        out.containers[table] = "table"
        for i, row in enumerate(rows):
            bookkeeping = mlflow and table == "tags" and dict(zip(columns, row)).get("key") == "mlflow.runName"
            for column, value in zip(columns, row):
                leaf = f"{table}[{i}].{column}"
                if _is_time(column):
                    out.ignored[leaf] = "a time stamp column"
                elif bookkeeping and column == "value" or (mlflow and table == "runs" and column == "name"):
                    out.ignored[leaf] = "MLflow's generated run name"
                out[leaf] = _renamed(value, ids)
    return out


def _is_time(column: str) -> bool:
    """Whether a column's name says it holds a time: one of its words (split at ``_``
    and case changes) is a time word, or ends in ``time`` (``starttime``)."""
    words = re.split(r"[^A-Za-z0-9]+|(?<=[a-z])(?=[A-Z])", column)
    return any(w.lower() in _TIME_WORDS or w.lower().endswith("time") for w in words if w)


def _renamed(value: Any, ids: dict[str, str]) -> Any:
    """``value`` with each random id in it renamed by its order of first appearance."""
    if not isinstance(value, str):
        return value
    return _RANDOM_ID.sub(lambda m: ids.setdefault(m.group(), f"<id {len(ids) + 1}>"), value)
