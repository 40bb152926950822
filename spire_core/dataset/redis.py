"""``RedisDataset``: items in a Redis stream of a crawl, added in the same script as their page's ack.

    frontier = RedisFrontier("redis://queue.internal:6379/0", name="shop")
    crawler = Crawler(router, frontier=frontier.dedup(), datasets=frontier.dataset)
    ...
    await RedisDataset(Book, frontier).export("books.jsonl")

One stream per item type, ``{name}:items:<stream>`` (the stream defaults to the model's name in
snake case, ``BookReview`` -> ``book_review``), each entry one field ``item`` holding the item's
JSON. A crawler whose frontier is that ``RedisFrontier`` hands a page's items to the frontier, which
adds them in the Lua script that acks the page: a worker killed at any instant leaves the page
either done with its items stored once, or still queued with none of them stored. A ``push`` made
outside a crawl is one ``MULTI`` transaction. Reading pages through the stream in order.
"""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel

from spire_core.dataset.base import StoredDataset
from spire_core.dataset.sqlite import table_name
from spire_core.dataset.store import RowStore, StoreStorage

__all__ = ["RedisDataset"]

T = TypeVar("T", bound=BaseModel)


class RedisDataset(StoredDataset[T]):
    """Items of ``model`` in the stream ``stream`` (default: the model's name in snake case) of ``frontier``'s crawl.

    ``frontier`` is a ``RedisFrontier`` (typed by the ``RowStore`` part of it this uses, so that the
    frontier can make its datasets without an import cycle).
    """

    def __init__(self, model: type[T], frontier: RowStore, *, stream: str | None = None) -> None:
        super().__init__(model, StoreStorage(frontier, stream if stream is not None else table_name(model)))
