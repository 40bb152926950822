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

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel

from spire_core.dataset.base import Dataset, StoredDataset
from spire_core.dataset.store import RowStore, StoreStorage, dump  # the first two re-exported
from spire_core.frontier.base import Lease
from spire_core.frontier.facades import store_of  # re-exported: where the engine finds the store

__all__ = ["ItemStore", "RowStore", "StagedItems", "StoreStorage", "documents", "place_in", "store_of"]

#: A page's items, grouped by the dataset they go to.
StagedItems = Sequence[tuple[Dataset[Any], Sequence[BaseModel]]]


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
            found.extend((place, dump(item.model_dump(mode="json"))) for item in batch)
    return found
