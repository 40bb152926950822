"""A dataset for an output path: the format follows the extension; an existing file is added to or replaced.

    books = output_dataset(Book, "out/books.csv")                       # creates out/, adds to a file there
    books = output_dataset(Book, "out/books.jsonl", mode="overwrite")   # starts the file empty
    books = output_dataset(Book, "-")                                   # JSON Lines on stdout

``.jsonl``, ``.csv`` and ``.sqlite`` are the appendable stores; ``.json`` streams one JSON array,
complete when the dataset is closed, and cannot be appended to.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import IO, Any, TypeVar

import anyio
from pydantic import BaseModel

from spire_core.dataset._files import WriteMode, check_writable, dump_row
from spire_core.dataset.base import StoredDataset
from spire_core.dataset.csv import CsvDataset
from spire_core.dataset.jsonl import JsonlDataset
from spire_core.dataset.sqlite import SqliteDataset
from spire_core.errors import ConfigError
from spire_core.threads import SerialThread

__all__ = ["OUTPUT_FORMATS", "JsonArrayStorage", "StreamStorage", "check_output", "output_dataset"]

T = TypeVar("T", bound=BaseModel)
Row = dict[str, Any]

#: The extensions an output path may have, and whether a file of that kind can be appended to.
OUTPUT_FORMATS = {".jsonl": True, ".csv": True, ".sqlite": True, ".json": False}

_STORES: dict[str, Callable[..., StoredDataset[Any]]] = {
    ".jsonl": JsonlDataset,
    ".csv": CsvDataset,
    ".sqlite": SqliteDataset,
}


class StreamStorage:
    """Rows written as JSON lines to a text stream (stdout), flushed per append; nothing to read back.

    A closed stream (``| head`` exited) raises ``BrokenPipeError`` from ``append``: the caller stops.
    """

    def __init__(self, stream: IO[str] | None = None) -> None:
        self._stream = stream

    async def append(self, rows: list[Row]) -> None:
        stream = self._stream if self._stream is not None else sys.stdout
        stream.write("".join(dump_row(row) + "\n" for row in rows))
        stream.flush()

    async def rows(self) -> AsyncIterator[Row]:
        return
        yield  # an async generator that yields nothing: a stream keeps no rows

    async def aclose(self) -> None:
        pass


class JsonArrayStorage:
    """Rows streamed to one JSON array file; the closing bracket is written by ``aclose``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._blocking = SerialThread()
        self._file: IO[str] | None = None
        self._count = 0

    async def append(self, rows: list[Row]) -> None:
        text = "".join((",\n" if self._count + i else "[\n") + dump_row(row) for i, row in enumerate(rows))
        self._count += len(rows)
        if self._file is None:
            self._file = await self._blocking.run(_create, self.path)
        await self._blocking.run(_write, self._file, text)

    async def rows(self) -> AsyncIterator[Row]:
        if not self.path.exists():
            return
        text = await anyio.Path(self.path).read_text(encoding="utf-8")
        for row in json.loads(text if self._file is None else text + "\n]"):
            yield row

    async def check(self) -> None:
        await self._blocking.run(check_writable, self.path)

    async def aclose(self) -> None:
        if self._file is None and self._count == 0:
            self._file = await self._blocking.run(_create, self.path)
            await self._blocking.run(_write, self._file, "[")
        if self._file is not None:
            file, self._file = self._file, None
            await self._blocking.run(_close, file, "\n]\n")


def _create(path: Path) -> IO[str]:
    return open(path, "x", encoding="utf-8")  # closed by _close


def _write(file: IO[str], text: str) -> None:
    file.write(text)
    file.flush()


def _close(file: IO[str], text: str) -> None:
    with file:
        file.write(text)


def check_output(path: str | Path, *, mode: WriteMode = "append") -> str:
    """Raise ``ConfigError`` unless ``path`` may be written as an output; return its (lower-case) extension."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in OUTPUT_FORMATS:
        known = ", ".join(OUTPUT_FORMATS)
        raise ConfigError(f"cannot tell the format of {str(path)!r}: give it one of the extensions {known}")
    if mode == "append" and not OUTPUT_FORMATS[suffix] and path.exists():
        raise ConfigError(
            f"a JSON array ({path}) cannot be appended to: overwrite it, or write JSON Lines (.jsonl) instead"
        )
    return suffix


def output_dataset(model: type[T], path: str | Path, *, mode: WriteMode = "append") -> StoredDataset[T]:
    """A dataset of ``model`` writing to ``path`` in the format its extension names; ``"-"`` is stdout.

    Missing parent folders are created. An existing file is added to (which a ``.json`` array cannot
    be), or with ``mode="overwrite"`` replaced; an unknown extension is a ``ConfigError`` naming the
    known ones.
    """
    if str(path) == "-":
        return StoredDataset(model, StreamStorage())
    path = Path(path)
    suffix = check_output(path, mode=mode)
    path.parent.mkdir(parents=True, exist_ok=True)
    if suffix in (".jsonl", ".csv"):
        return _STORES[suffix](model, path, mode=mode)
    if mode == "overwrite":
        _remove(path)  # a JSON array or a SQLite file: a new one replaces it
    if suffix == ".json":
        return StoredDataset(model, JsonArrayStorage(path))
    return _STORES[suffix](model, path)


def _remove(path: Path) -> None:
    for stale in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        stale.unlink(missing_ok=True)
