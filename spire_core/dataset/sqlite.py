"""``SqliteDataset``: items as rows of a SQLite table, one JSON document per row.

    books = SqliteDataset(Book, "crawl.db")                   # table "book"
    reviews = SqliteDataset(Review, "crawl.db", table="reviews")

Each item is one row ``(id INTEGER PRIMARY KEY, item TEXT)`` holding the item's JSON. One column
rather than one per field, because the model then owns the shape: adding a field needs no
migration, nested lists and models need no mapping, and SQL still reaches every field through
SQLite's JSON functions (``SELECT json_extract(item, '$.price') FROM book``). Rows read back in ``id`` order,
which is the order they were pushed.

A push is one transaction, so a killed process keeps a batch whole or not at all. The database runs
in WAL mode; several datasets may share one file, each in its own table, each with its own
connection (a writer waits up to ``timeout`` seconds for another's transaction to end).
"""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
import time
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import anyio
from pydantic import BaseModel

from spire_core.dataset._files import check_writable, dump_row, make_parent
from spire_core.dataset.base import StoredDataset
from spire_core.errors import ConfigError, DatasetError
from spire_core.outcome import seconds
from spire_core.threads import SerialThread

__all__ = ["SqliteDataset", "SqliteStorage", "table_name"]

T = TypeVar("T", bound=BaseModel)
Row = dict[str, Any]

#: Rows per trip to the worker thread when reading.
_READ_BATCH = 1000


def table_name(model: type[BaseModel]) -> str:
    """The default table for ``model``: its class name in snake case (``BookReview`` -> ``book_review``)."""
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", getattr(model, "__name__", "item"))
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


class SqliteStorage:
    """Rows as JSON in one table of a SQLite file; connects on first use, creating the file and table."""

    def __init__(self, path: str | Path, table: str, *, timeout: float | timedelta = 30.0) -> None:
        if not table or table.lower().startswith("sqlite_"):
            raise ConfigError(f"{table!r} cannot name a SQLite table (empty, or reserved by SQLite)")
        self.path = Path(path)
        self.table = table
        self.timeout = seconds(timeout) or 0.0
        self._quoted = _quote(table)
        self._db: sqlite3.Connection | None = None
        self._blocking = SerialThread()

    def __repr__(self) -> str:
        return f"SqliteStorage({str(self.path)!r}, table={self.table!r})"

    async def append(self, rows: list[Row]) -> None:
        documents = [(dump_row(row),) for row in rows]
        await self._blocking.run(self._insert, documents)

    async def rows(self) -> AsyncIterator[Row]:
        after = 0
        while True:
            batch = await self._blocking.run(self._select, after)
            for after, document in batch:
                yield self._decode(after, document)
            if len(batch) < _READ_BATCH:
                return

    async def check(self) -> None:
        """Raise ``DatasetError`` when no row can ever be written (SQLite writes its journal in the folder too)."""
        await self._blocking.run(check_writable, self.path, True)

    async def aclose(self) -> None:
        """Close the connection; a later push or read connects again."""
        with anyio.CancelScope(shield=True):
            await self._blocking.run(self._close)

    def _decode(self, id: int, document: str) -> Row:
        try:
            row = json.loads(document)
        except ValueError as exc:
            problem = f"is not valid JSON ({exc})"
        else:
            if isinstance(row, dict):
                return row
            problem = f"holds a JSON {type(row).__name__}, not an object"
        raise DatasetError(f"{self.path}: row {id} of table {self.table!r} {problem}", path=str(self.path), line=id)

    # -- in a worker thread -----------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self._db is not None:
            return self._db
        make_parent(self.path)
        # Autocommit mode: every transaction is explicit, and a write takes its lock up front
        # (BEGIN IMMEDIATE), so a writer sharing the file waits for the lock instead of failing.
        db = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False)
        try:
            self._use_wal(db)
            db.execute("PRAGMA synchronous=NORMAL")  # in WAL mode: durable against a killed process
            db.execute(f"CREATE TABLE IF NOT EXISTS {self._quoted} (id INTEGER PRIMARY KEY, item TEXT NOT NULL)")
            columns = {column[1] for column in db.execute(f"PRAGMA table_info({self._quoted})")}
            if not {"id", "item"} <= columns:
                raise DatasetError(
                    f"{self.path}: table {self.table!r} exists with columns ({', '.join(sorted(columns))}), "
                    "not a dataset's (id, item); give the dataset another table=",
                    path=str(self.path),
                )
        except BaseException:
            db.close()
            raise
        self._db = db
        return db

    def _use_wal(self, db: sqlite3.Connection) -> None:
        """Switch the file to WAL, once. Two connections switching a new file at once can make one
        fail at once instead of waiting (SQLite's busy handler does not cover it), so retry that."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                    db.execute("PRAGMA journal_mode=WAL")  # where WAL is unsupported, the mode stays
                return
            except sqlite3.OperationalError as exc:
                # Only a busy file is worth waiting for; a full disk or a read-only folder stays so.
                busy = exc.sqlite_errorcode & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
                if not busy or time.monotonic() > deadline:
                    raise
                time.sleep(0.005)  # in a worker thread: the event loop runs on

    def _insert(self, documents: list[tuple[str]]) -> None:
        with self._translated():
            db = self._connect()
            db.execute("BEGIN IMMEDIATE")
            try:
                db.executemany(f"INSERT INTO {self._quoted} (item) VALUES (?)", documents)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def _select(self, after: int) -> list[tuple[int, str]]:
        if self._db is None and not self.path.exists():
            return []  # nothing was ever written; reading creates no file
        with self._translated():
            rows = self._connect().execute(
                f"SELECT id, item FROM {self._quoted} WHERE id > ? ORDER BY id LIMIT ?", (after, _READ_BATCH)
            )
            return rows.fetchall()

    def _close(self) -> None:
        if self._db is not None:
            db, self._db = self._db, None
            with self._translated():
                db.close()

    @contextlib.contextmanager
    def _translated(self) -> Iterator[None]:
        """sqlite3's errors (a lock held too long, a full disk, not a database) as ``DatasetError``."""
        try:
            yield
        except sqlite3.Error as exc:
            raise DatasetError(f"{self.path}: table {self.table!r}: {exc}", path=str(self.path)) from exc


class SqliteDataset(StoredDataset[T]):
    """Items of ``model`` in a SQLite table (default: the model's name in snake case) of the file at ``path``."""

    def __init__(self, model: type[T], path: str | Path, *, table: str | None = None) -> None:
        super().__init__(model, SqliteStorage(path, table if table is not None else table_name(model)))
