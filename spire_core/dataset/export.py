"""Writing a dataset's rows to a file: JSON Lines, a JSON array, or CSV."""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio

from spire_core.errors import ConfigError

__all__ = ["export_rows"]


def _cell(value: Any) -> Any:
    """A CSV cell: nested values are written as JSON."""
    return json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list) else value


async def export_rows(rows: AsyncIterator[dict[str, Any]], path: Path, format: str, *, fields: list[str]) -> int:
    """Write ``rows`` to ``path`` through a temporary file renamed into place; return how many.

    The rename means ``path`` never holds a partial export, even if the process dies midway.
    """
    if format not in ("jsonl", "json", "csv"):
        raise ConfigError(f"export format is jsonl, json or csv, not {format!r}")
    buffer = io.StringIO()
    count = 0
    writer = csv.DictWriter(buffer, fieldnames=fields, extrasaction="ignore") if format == "csv" else None
    if writer is not None:
        writer.writeheader()
    if format == "json":
        buffer.write("[")
    async for row in rows:
        if writer is not None:
            writer.writerow({key: _cell(value) for key, value in row.items()})
        elif format == "json":
            buffer.write(("," if count else "") + "\n" + json.dumps(row, ensure_ascii=False))
        else:
            buffer.write(json.dumps(row, ensure_ascii=False) + "\n")
        count += 1
    if format == "json":
        buffer.write("\n]\n")
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    await anyio.Path(temporary).write_text(buffer.getvalue(), encoding="utf-8")
    os.replace(temporary, path)
    return count
