"""``JsonlDataset``: items appended to a JSON Lines file, one object per line.

    books = JsonlDataset(Book, "books.jsonl")
    await books.push(Book(title="Dune", price=9.5))

Each push is one ``write`` of whole lines, so a killed process loses at most the batch it was
writing, and can leave at most one torn line, at the very end. Reading skips that line; reopening
the file for appending cuts it off, so the next item starts on a fresh line. Anything malformed
before the last line is corruption, not a crash, and reading it raises ``DatasetError``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from pydantic import BaseModel

from spire_core.dataset._files import (
    READ_CHUNK,
    ChunkedFileStorage,
    GroupWrites,
    WriteMode,
    append_whole,
    dump_row,
    make_parent,
    start_file,
    write_all,
    write_failed,
)
from spire_core.dataset.base import StoredDataset
from spire_core.errors import DatasetError

__all__ = ["JsonlDataset", "JsonlStorage"]

T = TypeVar("T", bound=BaseModel)
Row = dict[str, Any]

_BACKWARD_BLOCK = 64 * 1024


class JsonlStorage(ChunkedFileStorage):
    """Rows as lines of JSON in one file; the file is opened on the first append, created if missing."""

    def __init__(self, path: str | Path) -> None:
        self._fd: int | None = None
        super().__init__(path)
        self._writes = GroupWrites(self._blocking, self._write)

    def __repr__(self) -> str:
        return f"JsonlStorage({str(self.path)!r})"

    async def append(self, rows: list[Row]) -> None:
        await self._writes.append("".join(dump_row(row) + "\n" for row in rows).encode("utf-8"))

    # -- in a worker thread -----------------------------------------------------------------------

    def _write(self, data: bytes) -> None:
        if self._fd is None:
            try:
                self._fd = self._open()
            except OSError as exc:
                raise write_failed(self.path, exc) from exc
        append_whole(self._fd, data, self.path)  # unbuffered: once this returns, a killed process keeps the batch

    def _open(self) -> int:
        make_parent(self.path)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            self._repair_tail(fd)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _repair_tail(self, fd: int) -> None:
        """Make the file end at a line boundary: end a complete last line, cut off a torn one."""
        size = os.fstat(fd).st_size
        if size == 0:
            return
        with open(self.path, "rb") as file:
            start = _last_line_start(file, size)
            if start == size:
                return
            file.seek(start)
            tail = file.read()
        if _parse(tail) is not None:
            write_all(fd, b"\n")  # a whole object whose newline is missing: keep it
        else:
            os.ftruncate(fd, start)  # a torn write from a killed process: it was never a whole item

    def _read(self, offset: int, line: int) -> tuple[list[Row], int, int, bool]:
        """Rows from ``offset`` on: ``(rows, next offset, lines read, more to read)``."""
        try:
            file = open(self.path, "rb")  # noqa: SIM115  # closed below, whatever happens
        except FileNotFoundError:
            return [], offset, line, False
        with file:
            file.seek(offset)
            data = file.read(READ_CHUNK)
            if data and not data.endswith(b"\n"):
                data += file.readline()  # finish the line the chunk cut
        *whole, tail = data.split(b"\n")
        rows: list[Row] = []
        for raw in whole:
            line += 1
            if not raw.strip():
                continue
            row = _parse(raw)
            if row is None:
                raise self._corrupt(raw, line)
            rows.append(row)
        if tail:
            # No newline before the end of the file: a whole object someone left unterminated, or
            # the torn write of a killed process, which was never an item. Skip only the latter.
            row = _parse(tail)
            if row is not None:
                rows.append(row)
        return rows, offset + len(data), line, bool(data) and not tail

    def _corrupt(self, raw: bytes, line: int) -> DatasetError:
        try:
            value = json.loads(raw)
        except ValueError as exc:
            problem = f"is not valid JSON ({exc})"
        else:
            problem = f"holds a JSON {type(value).__name__}, not an object"
        return DatasetError(f"{self.path}: line {line} {problem}", path=str(self.path), line=line)

    def _close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


def _parse(raw: bytes) -> Row | None:
    """The JSON object on a line, or ``None`` when the line is not one."""
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _last_line_start(file: BinaryIO, size: int) -> int:
    """The offset just past the file's last newline (0 when it has none), read backwards in blocks."""
    end = size
    while end > 0:
        start = max(0, end - _BACKWARD_BLOCK)
        file.seek(start)
        found = file.read(end - start).rfind(b"\n")
        if found >= 0:
            return start + found + 1
        end = start
    return 0


class JsonlDataset(StoredDataset[T]):
    """Items of ``model`` in a JSON Lines file; reopening the file appends, so a resumed crawl keeps its items.

    ``mode="overwrite"`` empties an existing file first (``spire run -O``), for a crawl that starts afresh.
    """

    def __init__(self, model: type[T], path: str | Path, *, mode: WriteMode = "append") -> None:
        super().__init__(model, JsonlStorage(start_file(path, mode)))
