"""Writing a dataset's rows to a file: JSON Lines, a JSON array, CSV or Parquet, streamed.

The rows go to a temporary file beside ``path`` a chunk at a time, which is then flushed to disk and
renamed over ``path``: a reader of ``path`` sees the old file or the whole new one, never a part,
even if the process dies midway, and a dataset of any size is exported in bounded memory.
"""

from __future__ import annotations

import csv
import io
import os
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import IO, Any

import anyio
from pydantic import BaseModel

from spire_core.dataset._files import READ_CHUNK, dump_row, make_parent
from spire_core.dataset.columns import CsvColumns
from spire_core.errors import ConfigError
from spire_core.threads import SerialThread

__all__ = ["FORMATS", "export_rows", "format_of"]

FORMATS = ("jsonl", "json", "csv", "parquet")
_EXTENSIONS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv", ".parquet": "parquet"}


def format_of(path: str | Path) -> str:
    """The export format a file name asks for by its extension (``.parquet`` is Parquet); ``ConfigError`` if none."""
    found = _EXTENSIONS.get(Path(path).suffix.lower())
    if found is None:
        raise ConfigError(f"cannot tell the format of {str(path)!r}: name it .jsonl, .json, .csv or .parquet")
    return found


def _encoder(format: str, model: type[BaseModel]) -> tuple[str, Callable[[dict[str, Any], bool], str], str]:
    """``(head, encode(row, first), tail)`` for a format; a CSV cell is what ``CsvDataset`` writes."""
    if format == "jsonl":
        return "", lambda row, first: dump_row(row) + "\n", ""
    if format == "json":
        return "[", lambda row, first: ("\n" if first else ",\n") + dump_row(row), "\n]\n"
    columns = CsvColumns.of(model)
    buffer = io.StringIO()
    writer = csv.writer(buffer)

    def record(cells: list[str] | tuple[str, ...]) -> str:
        buffer.seek(0)
        buffer.truncate()
        writer.writerow(cells)
        return buffer.getvalue()

    return record(columns.names), lambda row, first: record(columns.encode(row)), ""


async def export_rows(rows: AsyncIterator[dict[str, Any]], path: Path, format: str, *, model: type[BaseModel]) -> int:
    """Write ``rows`` of ``model`` to ``path`` in ``format`` through a temporary file; return how many."""
    if format not in FORMATS:
        raise ConfigError(f"export format is jsonl, json or csv (or parquet, with its extra), not {format!r}")
    if format == "parquet":  # a binary, columnar file: its own writer, behind the parquet extra
        # Imported here on purpose: pyarrow is an optional extra, and a heavy import for every other export.
        from spire_core.dataset.parquet import export_parquet

        return await export_parquet(rows, path, model=model)
    head, encode, tail = _encoder(format, model)
    blocking = SerialThread()
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.tmp")
    file = await blocking.run(_create, temporary)
    try:
        pending = [head]
        size = count = 0
        async for row in rows:
            text = encode(row, count == 0)
            pending.append(text)
            size += len(text)
            count += 1
            if size >= READ_CHUNK:
                await blocking.run(file.write, "".join(pending))
                pending.clear()
                size = 0
        pending.append(tail)
        await blocking.run(_finish, file, "".join(pending), temporary, path)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await blocking.run(_discard, file, temporary)
        raise
    return count


def _create(temporary: Path) -> IO[str]:
    make_parent(temporary)
    return open(temporary, "x", encoding="utf-8", newline="")  # closed by _finish or _discard


def _finish(file: IO[str], text: str, temporary: Path, path: Path) -> None:
    with file:
        file.write(text)
        file.flush()
        os.fsync(file.fileno())  # on disk before the rename, so a crash never leaves an empty file at path
    os.replace(temporary, path)


def _discard(file: IO[str], temporary: Path) -> None:
    file.close()
    temporary.unlink(missing_ok=True)
