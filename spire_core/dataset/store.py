"""A dataset's rows kept inside a frontier store: a Redis stream, or a table of the SQLite file.

The store (``RowStore``) appends and reads JSON rows at a named place; ``StoreStorage`` is the
dataset ``Storage`` over it. A store that also writes a page's items with its report is an
``ItemStore`` (``spire_core.frontier.items``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, Protocol

__all__ = ["RowStore", "StoreStorage", "dump"]

#: Rows per read of a store.
_READ_BATCH = 1000


class RowStore(Protocol):
    """What ``StoreStorage`` needs from a store: appending and reading JSON rows at a named place."""

    def check_place(self, place: str) -> None:
        """Raise ``ConfigError`` when ``place`` cannot name where rows go in this store."""
        ...

    async def append_rows(self, place: str, documents: list[str]) -> None:
        """Append JSON documents at ``place`` in one atomic step."""
        ...

    async def read_rows(self, place: str, after: str | None, count: int) -> list[tuple[str, str]]:
        """Up to ``count`` ``(position, document)`` pairs at ``place`` after ``after``, in order."""
        ...


class StoreStorage:
    """A dataset's rows kept at ``place`` inside a frontier store (a Redis stream, a table of the SQLite file)."""

    def __init__(self, store: RowStore, place: str) -> None:
        store.check_place(place)
        self.store = store
        self.place = place

    def __repr__(self) -> str:
        return f"StoreStorage({self.store!r}, {self.place!r})"

    async def append(self, rows: list[dict[str, Any]]) -> None:
        await self.store.append_rows(self.place, [dump(row) for row in rows])

    async def rows(self) -> AsyncIterator[dict[str, Any]]:
        after: str | None = None
        while True:
            batch = await self.store.read_rows(self.place, after, _READ_BATCH)
            for _, document in batch:
                yield json.loads(document)
            if len(batch) < _READ_BATCH:
                return
            after = batch[-1][0]

    async def aclose(self) -> None:
        """Nothing of its own to close: the store closes with its frontier."""


def dump(row: dict[str, Any]) -> str:
    """One row as a store keeps it: compact JSON."""
    # ASCII escapes: any string, a lone surrogate too, survives every store's text encoding.
    return json.dumps(row, separators=(",", ":"))
