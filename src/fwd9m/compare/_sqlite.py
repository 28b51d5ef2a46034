"""SQLite databases compared by content, not by bytes: MLflow's default tracking store
(``sqlite:///mlflow.db`` since MLflow 3: mlflow/store/tracking/__init__.py,
``DEFAULT_TRACKING_URI``), Optuna's ``sqlite:///`` storage, a script's own results
table. Two runs that log the same values write different bytes (page layout, free
lists, the time of each write, a random id per run), so a byte comparison says every
such run differs.

Each cell is a leaf ``table[row].column``, rows in insertion (rowid) order. What is not
the run's result is not compared: columns named as times (``start_time``,
``timestamp``, ``datetime_start``) are listed in :attr:`~fwd9m.compare.Flat.ignored`;
random ids found in id columns (a uuid, or 32 hex digits: MLflow's run ids) are
renamed ``<id 1>``, ``<id 2>`` in their order of first appearance, wherever they
appear, so two runs pair them as ``fwd9m check`` pairs MLflow's run folders;
MLflow's generated run name is bookkeeping, as in its file store. The database is
read from a copy (with its ``-wal`` and ``-journal`` files, whose rows it may still
hold or undo), with ``query_only`` on: the run's file is never opened for writing.
Those sidecars and the ``-shm`` index are not compared by their bytes when the
database beside them is compared (:func:`database_of`).
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

__all__ = ["MAGIC", "SIDECARS", "SUFFIXES", "database_of", "read_sqlite"]

#: the first 16 bytes of every SQLite database file (https://www.sqlite.org/fileformat.html)
MAGIC = b"SQLite format 3\x00"
SUFFIXES = (".db", ".sqlite", ".sqlite3")
#: the files SQLite keeps beside a database ``X`` while it is open or after a crash:
#: ``X-wal`` (committed pages not yet copied into ``X``), ``X-shm`` (the log's index in
#: shared memory) and ``X-journal`` (the pages to restore for an unfinished transaction)
#: (https://www.sqlite.org/tempfiles.html). Their bytes hold salts, checksums and page
#: order that differ between two runs that wrote the same rows; the rows they hold are
#: read with ``X``.
SIDECARS = ("-wal", "-shm", "-journal")
#: a column holding the time of a write: MLflow's ``start_time``, ``end_time``,
#: ``timestamp``, ``creation_time``; Optuna's ``datetime_start``, ``datetime_complete``
_TIME_WORDS = {"time", "timestamp", "date", "datetime", "starttime", "endtime"}
#: ``<event>_at``: the time of that event (``created_at``)
_EVENTS = ("created", "updated", "modified", "started", "ended", "finished", "completed", "deleted", "logged")
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
        for sidecar in ("-wal", "-journal"):  # the rows committed or rolled back, as SQLite reads them
            side = p.with_name(p.name + sidecar)
            if side.is_file() and not side.is_symlink():
                shutil.copyfile(side, Path(scratch, "db" + sidecar))
        con = sqlite3.connect(copy, isolation_level=None)
        try:
            con.execute("PRAGMA query_only = ON")
            con.execute("PRAGMA trusted_schema = OFF")
            return _cells(con)
        finally:
            con.close()


def database_of(name: str) -> str | None:
    """The database whose SQLite sidecar (:data:`SIDECARS`) file ``name`` is, or None."""
    for sidecar in SIDECARS:
        if name.endswith(sidecar) and name[: -len(sidecar)].endswith(SUFFIXES):
            return name[: -len(sidecar)]
    return None


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
    tables = {t: _rows(con, t) for t in _tables(con)}
    if sum(len(c) * len(r) for c, r in tables.values()) > CELL_LIMIT:
        raise _TooLarge(f"more than {CELL_LIMIT} cells")
    ids = _random_ids(tables)
    mlflow = _MLFLOW_TABLES <= set(tables)
    for table, (columns, rows) in tables.items():
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


def _random_ids(tables: dict[str, tuple[list[str], list[tuple]]]) -> dict[str, str]:
    """``{random id: <id N>}`` for the ids found in id columns (``run_uuid``,
    ``experiment_id``, ``id``; Optuna's ``study_name``), by order of first appearance.
    Only those are renamed, wherever they appear (a run's id inside its artifact path):
    a hex digest in another column (an MD5 of the predictions) is compared as it is."""
    ids: dict[str, str] = {}
    for table, (columns, rows) in tables.items():
        for row in rows:
            for column, value in zip(columns, row):
                if isinstance(value, str) and (_is_id(column) or (table, column) == ("studies", "study_name")):
                    for m in _RANDOM_ID.finditer(value):
                        ids.setdefault(m.group(), f"<id {len(ids) + 1}>")
    return ids


def _words(column: str) -> list[str]:
    return [w.lower() for w in re.split(r"[^A-Za-z0-9]+|(?<=[a-z])(?=[A-Z])", column) if w]


def _is_id(column: str) -> bool:
    words = _words(column)
    return bool(words) and (words[-1] in ("id", "uuid", "guid") or words[-1].endswith("uuid"))


def _is_time(column: str) -> bool:
    """Whether a column's name says it holds the time of a write: one of its words is
    :data:`_TIME_WORDS` (``start_time``, ``datetime_start``, ``timestamp``), or it ends
    in ``<created|updated|...>_at`` / ``_on``, or is ``created``, ``updated``, ``ts``.
    ``recall_at_10``, ``n_updated`` and ``lifetime_value`` are results, not times."""
    words = _words(column)
    if any(w in _TIME_WORDS for w in words):
        return True
    if len(words) >= 2 and words[-1] in ("at", "on") and words[-2] in _EVENTS:
        return True
    return len(words) == 1 and words[0] in (*_EVENTS, "ts")


def _renamed(value: Any, ids: dict[str, str]) -> Any:
    """``value`` with each random id of ``ids`` in it renamed."""
    if not isinstance(value, str):
        return value
    return _RANDOM_ID.sub(lambda m: ids.get(m.group(), m.group()), value)
