"""Items kept inside a frontier store and committed in the same atomic step as their page's report.

    frontier = SqliteFrontier("crawl.db")            # or RedisFrontier(url, name="shop")
    crawler = Crawler(router, frontier=frontier.dedup(), datasets=frontier.dataset)

A store that can do it (``SqliteFrontier``: the same transaction; ``RedisFrontier``: the same Lua
script) is an ``ItemStore``. After a handler succeeds, the crawler hands the items meant for a
dataset the store holds to ``stage(lease, ...)`` instead of pushing them; the store writes them
when that lease is reported done, and drops them when it is retried, failed or released. A worker
killed at any instant so leaves each page either done with its items stored once, or still queued.

Every other dataset (memory, JSON Lines, CSV, a ``SqliteDataset`` on another file) is written
before the report: at least once, since a crash between the write and the report re-runs the page.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel

from spire_core.dataset.base import Dataset, StoredDataset
from spire_core.frontier.base import Lease
from spire_core.frontier.facades import store_of  # re-exported: where the engine finds the store

__all__ = ["ItemStore", "RowStore", "StagedItems", "StoreStorage", "documents", "place_in", "store_of"]

#: A page's items, grouped by the dataset they go to.
StagedItems = Sequence[tuple[Dataset[Any], Sequence[BaseModel]]]

#: Rows per read of a store.
_READ_BATCH = 1000


@runtime_checkable
class ItemStore(Protocol):
    """A frontier store that writes a page's items with the page's report, atomically."""

    def holds(self, dataset: Dataset[Any]) -> bool:
        """Whether ``dataset`` is kept in this store, so its items can ride on a report."""
        ...

    def stage(self, lease: Lease, items: StagedItems) -> None:
        """Hold ``items`` (of datasets this store holds) until ``lease`` is settled: written if it
        is done, dropped otherwise. Staging again for the same lease replaces what was staged."""
        ...


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
        await self.store.append_rows(self.place, [_dump(row) for row in rows])

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


def place_in(store: object, dataset: Dataset[Any]) -> str | None:
    """Where ``store`` keeps ``dataset``'s rows, or ``None`` when the dataset lives elsewhere."""
    storage = dataset.storage if isinstance(dataset, StoredDataset) else None
    if isinstance(storage, StoreStorage) and storage.store is store:
        return storage.place
    return None


def documents(store: object, items: StagedItems) -> list[tuple[str, str]]:
    """``(place, JSON document)`` for each staged item of a dataset ``store`` holds, in order."""
    found: list[tuple[str, str]] = []
    for dataset, batch in items:
        place = place_in(store, dataset)
        if place is not None:
            found.extend((place, _dump(item.model_dump(mode="json"))) for item in batch)
    return found


def _dump(row: dict[str, Any]) -> str:
    # ASCII escapes: any string, a lone surrogate too, survives every store's text encoding.
    return json.dumps(row, separators=(",", ":"))
