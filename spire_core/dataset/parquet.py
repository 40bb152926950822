"""``ParquetDataset``: items in a Parquet file, written a row group (a batch of rows) at a time.

    books = ParquetDataset(Book, "books.parquet")
    await books.push(Book(title="Dune", price=9.5))

Needs the ``parquet`` extra (``pyarrow``). The columns follow the model: ``str``, ``int``, ``float``
and ``bool`` fields (optional or not) and lists of them get their Arrow types; anything else (a
nested model, a dict, a union) is a column of JSON text, named in the file's metadata and decoded
again on reading, so every item reads back equal to what was pushed.

Rows are held until ``batch_size`` of them are pending, then written as one row group in a worker
thread. A Parquet file is whole only once its footer is written: closing the dataset (the crawl does)
writes it. Reading before that closes the file first; a later push writes a new file holding the old
row groups and the new ones, and renames it over the old when it closes.
"""

from __future__ import annotations

import json
import os
import types
import typing
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, TypeVar, Union, get_args, get_origin

import anyio
from pydantic import BaseModel

from spire_core.dataset._files import check_writable
from spire_core.dataset.base import StoredDataset
from spire_core.errors import ConfigError, DatasetError
from spire_core.threads import SerialThread

try:
    import pyarrow as pa
    import pyarrow.parquet as pq
except ImportError as exc:  # pragma: no cover - the extra is installed for the tests
    raise ImportError("Parquet needs the parquet extra: pip install 'spire-crawl[parquet]'") from exc

__all__ = ["ParquetDataset", "ParquetStorage", "arrow_schema", "export_parquet"]

T = TypeVar("T", bound=BaseModel)
Row = dict[str, Any]

DEFAULT_BATCH = 1024
_JSON_COLUMNS = b"spire.json_columns"
_SCALARS: dict[Any, Any] = {str: pa.string(), bool: pa.bool_(), int: pa.int64(), float: pa.float64()}


def _without_none(annotation: Any) -> Any:
    """``X`` for ``X | None`` (or ``Optional[X]``); the annotation unchanged otherwise."""
    if get_origin(annotation) in (Union, types.UnionType):
        options = [arg for arg in get_args(annotation) if arg is not type(None)]
        if len(options) == 1:
            return options[0]
    return annotation


def _arrow_type(annotation: Any) -> Any | None:
    """The Arrow type of a field, or ``None`` when it is stored as JSON text."""
    annotation = _without_none(annotation)
    if get_origin(annotation) is typing.Annotated:
        annotation = get_args(annotation)[0]
    if annotation in _SCALARS:
        return _SCALARS[annotation]
    if get_origin(annotation) is list and len(get_args(annotation)) == 1:
        inner = _without_none(get_args(annotation)[0])
        if inner in _SCALARS:
            return pa.list_(_SCALARS[inner])
    return None


def arrow_schema(model: type[BaseModel]) -> tuple[Any, frozenset[str]]:
    """The Arrow schema for ``model``'s rows, and the names of the columns that hold JSON text."""
    fields = []
    as_json = set()
    for name, field in model.model_fields.items():
        arrow = _arrow_type(field.annotation)
        if arrow is None:
            arrow = pa.string()
            as_json.add(name)
        fields.append(pa.field(name, arrow, nullable=True))
    metadata = {_JSON_COLUMNS: json.dumps(sorted(as_json)).encode()}
    return pa.schema(fields, metadata=metadata), frozenset(as_json)


class ParquetStorage:
    """Rows of ``model`` in one Parquet file, written ``batch_size`` rows to a row group."""

    def __init__(
        self, path: str | Path, model: type[BaseModel], *, batch_size: int = DEFAULT_BATCH, replace: bool = False
    ) -> None:
        """``replace=True`` (an export): the file replaces ``path``, even with no rows, rather than adding to it."""
        if batch_size < 1:
            raise ConfigError(f"batch_size must be at least 1, not {batch_size}")
        self.path = Path(path)
        self.batch_size = batch_size
        self.schema, self._json = arrow_schema(model)
        self._pending: list[Row] = []
        self._writer: Any = None
        self._temporary: Path | None = None
        self._replace = replace
        self._blocking = SerialThread()

    def __repr__(self) -> str:
        return f"ParquetStorage({str(self.path)!r})"

    async def append(self, rows: list[Row]) -> None:
        self._pending.extend(rows)
        if len(self._pending) >= self.batch_size:
            batch, self._pending = self._pending, []
            await self._blocking.run(self._write, batch)

    async def rows(self) -> AsyncIterator[Row]:
        """Every row, in order: pending rows are written and the file completed first."""
        await self.aclose()
        if not self.path.exists():
            return
        file = await self._blocking.run(self._open_for_reading)
        try:
            for group in range(file.num_row_groups):
                for row in await self._blocking.run(self._read_group, file, group):
                    yield row
        finally:
            await self._blocking.run(file.close)

    async def check(self) -> None:
        """Raise ``DatasetError`` when the file can never be written (its folder takes the temporary file)."""
        await self._blocking.run(check_writable, self.path, True)

    async def aclose(self) -> None:
        """Write what is pending and complete the file (its footer)."""
        with anyio.CancelScope(shield=True):
            batch, self._pending = self._pending, []
            await self._blocking.run(self._finish, batch)

    async def discard(self) -> None:
        """Drop what is pending and the file being written; ``path`` keeps what it held before."""
        with anyio.CancelScope(shield=True):
            self._pending = []
            await self._blocking.run(self._discard)

    # -- in a worker thread -----------------------------------------------------------------------

    def _encode(self, rows: list[Row]) -> Any:
        columns: dict[str, list[Any]] = {name: [] for name in self.schema.names}
        for row in rows:
            for name, values in columns.items():
                value = row.get(name)
                if name in self._json and value is not None:
                    value = json.dumps(value, ensure_ascii=False)
                values.append(value)
        try:
            return pa.Table.from_pydict(columns, schema=self.schema)
        except (pa.ArrowException, TypeError, ValueError) as exc:
            raise DatasetError(f"cannot write rows to {self.path}: {exc}") from exc

    def _write(self, rows: list[Row]) -> None:
        if not rows:
            return
        table = self._encode(rows)
        try:
            if self._writer is None:
                self._writer = self._open_for_writing()
            self._writer.write_table(table)
        except (pa.ArrowException, OSError) as exc:
            raise DatasetError(f"cannot write {self.path}: {exc}") from exc

    def _open_for_writing(self) -> Any:
        """A writer to a temporary file beside ``path``, holding ``path``'s row groups first if it exists."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._temporary = self.path.with_name(f".{self.path.name}.{uuid.uuid4().hex[:12]}.tmp")
        writer = pq.ParquetWriter(self._temporary, self.schema)
        if self.path.exists() and not self._replace:
            existing = pq.ParquetFile(self.path)
            try:
                for group in range(existing.num_row_groups):
                    writer.write_table(existing.read_row_group(group).cast(self.schema))
            finally:
                existing.close()
        return writer

    def _finish(self, rows: list[Row]) -> None:
        self._write(rows)
        if self._writer is None and self._replace:
            self._writer = self._open_for_writing()  # an export of no rows is still a valid, empty file
        writer, self._writer = self._writer, None
        temporary, self._temporary = self._temporary, None
        if writer is None or temporary is None:
            return
        try:
            writer.close()
            os.replace(temporary, self.path)
        except (pa.ArrowException, OSError) as exc:
            temporary.unlink(missing_ok=True)
            raise DatasetError(f"cannot write {self.path}: {exc}") from exc
        self._replace = False  # what is at path now is this storage's own

    def _discard(self) -> None:
        writer, self._writer = self._writer, None
        temporary, self._temporary = self._temporary, None
        if writer is not None:
            writer.close()
        if temporary is not None:
            temporary.unlink(missing_ok=True)

    def _open_for_reading(self) -> Any:
        try:
            return pq.ParquetFile(self.path)
        except (pa.ArrowException, OSError) as exc:
            raise DatasetError(f"cannot read {self.path} as Parquet: {exc}") from exc

    def _read_group(self, file: Any, group: int) -> list[Row]:
        try:
            rows: list[Row] = file.read_row_group(group).to_pylist()
        except (pa.ArrowException, OSError) as exc:
            raise DatasetError(f"cannot read {self.path} as Parquet: {exc}") from exc
        metadata = file.schema_arrow.metadata or {}
        as_json = json.loads(metadata.get(_JSON_COLUMNS, b"[]"))
        for row in rows:
            for name in as_json:
                if row.get(name) is not None:
                    row[name] = json.loads(row[name])
        return rows


class ParquetDataset(StoredDataset[T]):
    """Items of ``model`` in a Parquet file, ``batch_size`` rows to a row group."""

    def __init__(self, model: type[T], path: str | Path, *, batch_size: int = DEFAULT_BATCH) -> None:
        super().__init__(model, ParquetStorage(path, model, batch_size=batch_size))


async def export_parquet(rows: AsyncIterator[Row], path: Path, *, model: type[BaseModel]) -> int:
    """Write ``rows`` of ``model`` to the Parquet file ``path`` in batches; return how many.

    The file appears at ``path`` whole, renamed over it when complete.
    """
    storage = ParquetStorage(path, model, replace=True)
    count = 0
    batch: list[Row] = []
    try:
        async for row in rows:
            batch.append(row)
            count += 1
            if len(batch) >= DEFAULT_BATCH:
                await storage.append(batch)
                batch = []
        await storage.append(batch)
    except BaseException:
        await storage.discard()
        raise
    await storage.aclose()
    return count
