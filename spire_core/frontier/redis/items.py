"""A crawl's item streams in Redis: items staged per lease, added by the script that acks the page.

One stream per dataset, ``{name}:items:<place>``, each entry one field ``item`` holding the item's
JSON. Items staged for a lease ride on the ``settle`` script that reports it done, so they are
stored exactly once; a ``push`` made outside a crawl is one ``MULTI`` transaction.
"""

from __future__ import annotations

from spire_core.errors import ConfigError
from spire_core.frontier.redis.connection import Connection

__all__ = ["ItemStreams"]


class ItemStreams:
    """The item streams of the crawl on ``connection``, and the items staged for its leases."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        #: ``(place, JSON)`` pairs staged per lease token, written by the script that acks it.
        self._staged: dict[str, list[tuple[str, str]]] = {}

    def stage(self, token: str, documents: list[tuple[str, str]]) -> None:
        """Hold ``documents`` for the lease ``token`` (replacing what was staged for it)."""
        self._staged[token] = documents

    def take(self, token: str) -> list[tuple[str, str]]:
        """The documents staged for ``token``, no longer held here."""
        return self._staged.pop(token, [])

    def clear(self) -> None:
        """Drop everything staged."""
        self._staged.clear()

    def check_place(self, place: str) -> None:
        if not place:
            raise ConfigError("a RedisDataset needs a non-empty stream name")

    async def append_rows(self, place: str, documents: list[str]) -> None:
        connection = self._connection
        await connection.open()
        key = connection.prefix + "items:" + place
        with connection.translated():
            async with connection.client.pipeline(transaction=True) as pipe:
                for document in documents:
                    pipe.xadd(key, {"item": document})
                await pipe.execute()

    async def read_rows(self, place: str, after: str | None, count: int) -> list[tuple[str, str]]:
        connection = self._connection
        await connection.open()
        with connection.translated():
            entries = await connection.client.xrange(
                connection.prefix + "items:" + place, "-" if after is None else "(" + after, "+", count=count
            )
        return [(str(position), str(fields["item"])) for position, fields in entries or () if fields]
