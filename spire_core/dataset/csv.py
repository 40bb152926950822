"""``CsvDataset``: items appended to a CSV file, one row each, under a header of the model's fields.

    books = CsvDataset(Book, "books.csv")

A cell holds a text field's value as it is, and any other value (a number, a flag, a list, a dict,
a nested model) as JSON text; an empty cell is ``None``. Which fields are text comes from the
model, so reading a row back gives every item exactly as it was pushed. The header is written once,
with the first row; reopening the file checks it against the model and appends below it.

Like ``JsonlDataset``, a push is one ``write``: a killed process leaves at most one torn row at the
end, which reading skips and reopening cuts off.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, TypeVar

from pydantic import BaseModel

from spire_core.dataset._files import (
    READ_CHUNK,
    ChunkedFileStorage,
    WriteMode,
    append_whole,
    make_parent,
    start_file,
    write_failed,
)
from spire_core.dataset.base import StoredDataset
from spire_core.dataset.columns import CsvColumns, Row
from spire_core.errors import DatasetError

__all__ = ["CsvColumns", "CsvDataset", "CsvStorage"]

T = TypeVar("T", bound=BaseModel)


class _Lines:
    """A binary file's lines as text for ``csv.reader``, counting what the reader has consumed.

    ``csv.reader`` asks for a line only when the record in hand needs one, so right after it yields
    a record, ``consumed`` is exactly where that record ends.
    """

    def __init__(self, file: BinaryIO, line: int) -> None:
        self.file = file
        self.consumed = 0
        self.line = line
        self.last = b""
        self.exhausted = False

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        raw = self.file.readline()
        if not raw:
            self.exhausted = True
            raise StopIteration
        self.consumed += len(raw)
        self.line += 1
        self.last = raw
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise csv.Error(f"not UTF-8 ({exc})") from None


@dataclasses.dataclass(slots=True)
class _Scan:
    """Whole records read from some offset on, and where the last of them ends."""

    records: list[tuple[int, list[str]]]  # (line the record starts on, cells), blank lines left out
    end: int  # the file offset just past the last whole record
    line: int  # the lines read through the last whole record
    more: bool = False  # whether the file may hold more records past ``end``


def _scan(
    path: Path, file: BinaryIO, offset: int, line: int, *, size: int | None = None, count: int | None = None
) -> _Scan:
    """Whole records from ``offset`` on, until about ``size`` bytes or ``count`` records, the end, or a torn record."""
    file.seek(offset)
    lines = _Lines(file, line)
    reader = csv.reader(lines, strict=True)
    scan = _Scan([], offset, line)
    while (size is None or lines.consumed < size) and (count is None or len(scan.records) < count):
        start = lines.line + 1
        try:
            cells = next(reader)
        except StopIteration:
            return scan
        except csv.Error as exc:
            if lines.exhausted:  # the file ends inside a quoted cell: a torn write
                return scan
            raise DatasetError(f"{path}: line {start} is not valid CSV ({exc})", path=str(path), line=start) from None
        if not lines.last.endswith(b"\n"):  # the last record has no line end: a torn write
            return scan
        scan.end, scan.line = offset + lines.consumed, lines.line
        if cells:
            scan.records.append((start, cells))
    scan.more = True
    return scan


class CsvStorage(ChunkedFileStorage):
    """Rows as CSV records under a header of ``columns.names``; opened on the first append, created if missing."""

    def __init__(self, path: str | Path, columns: CsvColumns) -> None:
        self.columns = columns
        self._fd: int | None = None
        self._header_written = False
        super().__init__(path)

    def __repr__(self) -> str:
        return f"CsvStorage({str(self.path)!r})"

    async def append(self, rows: list[Row]) -> None:
        records = [self.columns.encode(row) for row in rows]
        await self._blocking.run(self._write, records)

    # -- in a worker thread -----------------------------------------------------------------------

    def _write(self, records: list[list[str]]) -> None:
        if self._fd is None:
            try:
                self._fd = self._open()
            except OSError as exc:
                raise write_failed(self.path, exc) from exc
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        if not self._header_written:
            writer.writerow(self.columns.names)  # with the first rows, in the same write
        writer.writerows(records)
        try:
            data = buffer.getvalue().encode("utf-8")
        except UnicodeEncodeError as exc:
            raise DatasetError(
                f"{self.path}: a value cannot be written as UTF-8 ({exc})", path=str(self.path)
            ) from None
        append_whole(self._fd, data, self.path)
        self._header_written = True

    def _open(self) -> int:
        """Open for appending after the last whole record (cutting off a torn one), checking the header."""
        make_parent(self.path)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            with open(self.path, "rb") as file:
                header = self._header(file)
                end = 0
                if header is not None:
                    end = _scan(self.path, file, header.end, header.line).end
            if end < os.fstat(fd).st_size:
                os.ftruncate(fd, end)
            self._header_written = header is not None
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _header(self, file: BinaryIO) -> _Scan | None:
        """The scan of the header record, checked against the columns; ``None`` when there is none yet."""
        scan = _scan(self.path, file, 0, 0, count=1)
        if not scan.records:
            return None
        line, names = scan.records[0]
        if names and names[0].startswith("\ufeff"):
            names[0] = names[0][1:]  # a byte order mark from a spreadsheet that saved the file
        if tuple(names) != self.columns.names:
            raise DatasetError(
                f"{self.path}: its header ({', '.join(names)}) is not the model's fields "
                f"({', '.join(self.columns.names)}); write this model to a new file",
                path=str(self.path),
                line=line,
            )
        return scan

    def _read(self, offset: int, line: int) -> tuple[list[Row], int, int, bool]:
        """Rows from ``offset`` on: ``(rows, next offset, lines read, more to read)``."""
        try:
            file = open(self.path, "rb")  # noqa: SIM115  # closed below, whatever happens
        except FileNotFoundError:
            return [], offset, line, False
        with file:
            if offset == 0:
                header = self._header(file)
                if header is None:
                    return [], 0, 0, False
                offset, line = header.end, header.line
            scan = _scan(self.path, file, offset, line, size=READ_CHUNK)
        rows: list[Row] = []
        width = len(self.columns.names)
        for start, cells in scan.records:
            if len(cells) != width:
                raise DatasetError(
                    f"{self.path}: line {start} has {len(cells)} cells, not {width}", path=str(self.path), line=start
                )
            try:
                rows.append(self.columns.decode(cells))
            except ValueError as exc:
                raise DatasetError(f"{self.path}: line {start}: {exc}", path=str(self.path), line=start) from None
        return rows, scan.end, scan.line, scan.more

    def _close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


class CsvDataset(StoredDataset[T]):
    """Items of ``model`` in a CSV file, header first; reopening the file appends below its rows.

    ``mode="overwrite"`` empties an existing file first (``spire run -O``), for a crawl that starts afresh.
    """

    def __init__(self, model: type[T], path: str | Path, *, mode: WriteMode = "append") -> None:
        super().__init__(model, CsvStorage(start_file(path, mode), CsvColumns.of(model)))
