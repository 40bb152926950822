"""A crawl's seen set in Redis: exact (one ``SET``) or Bloom bitmaps, the same kind for every worker."""

from __future__ import annotations

from collections.abc import Sequence

from spire_core.errors import ConfigError
from spire_core.frontier.bloom import Bloom
from spire_core.frontier.redis.connection import Connection
from spire_core.frontier.redis.scripts import Scripts

__all__ = ["SeenSet"]


class SeenSet:
    """The seen set of the crawl ``name`` on ``connection``: which unique keys were pushed."""

    def __init__(self, connection: Connection, scripts: Scripts, name: str) -> None:
        self._connection = connection
        self._scripts = scripts
        self._name = name
        self.bloom: Bloom | None = None
        self._checked = False
        self._used = False

    def use_bloom(self, bloom: Bloom) -> None:
        """Keep the set as ``bloom``'s bitmaps; only before its first use."""
        if self.bloom is not None and self.bloom != bloom:
            raise ConfigError(f"this RedisFrontier already keeps a Bloom seen set of another size: {self.bloom}")
        if self._used and self.bloom is None:
            raise ConfigError("choose a RedisFrontier's Bloom seen set before its first push or seen()")
        self.bloom = bloom
        self._checked = False

    @property
    def mode(self) -> str:
        """What the push script's ``unique`` argument says for this set: ``1`` exact, ``2`` Bloom."""
        return "2" if self.bloom else "1"

    def key(self, key: str) -> str:
        """What the scripts check for ``key``: the key itself, or its Bloom bits ``part offset offset...``."""
        if self.bloom is None:
            return key
        part, offsets = self.bloom.offsets(key)
        return " ".join(map(str, (part, *offsets)))

    async def ready(self) -> None:
        """Before the first use of the set: check it is the kind (exact, or that Bloom filter) the
        crawl keeps, whichever worker started it."""
        if self._checked:
            return
        connection = self._connection
        await connection.open()
        with connection.translated():
            if self.bloom is not None:
                await self.check()
            elif await connection.client.hexists(connection.prefix + "config", "bloom"):
                raise ConfigError(
                    f"the crawl {self._name!r} keeps a Bloom seen set: use .dedup(bloom=...) as its workers do"
                )
        self._used = self._checked = True

    async def check(self) -> None:
        """Record the Bloom filter's size for the crawl, or check it is the one every worker uses
        (nothing to do for an exact set); redis-py's errors are the caller's to translate."""
        if self.bloom is None:
            return
        client, prefix = self._connection.client, self._connection.prefix
        size = f"{self.bloom.capacity} {self.bloom.error_rate!r}"
        config = prefix + "config"
        if await client.exists(prefix + "seen"):
            raise ConfigError(f"the crawl {self._name!r} keeps an exact seen set: use .dedup() as its workers do")
        await client.hsetnx(config, "bloom", size)
        stored = str(await client.hget(config, "bloom"))
        if stored != size:
            raise ConfigError(
                f"the crawl {self._name!r} keeps a Bloom seen set of capacity and error rate {stored}, not {size}: "
                "every worker must use the same filter"
            )
        self._checked = True

    async def seen(self, keys: Sequence[str]) -> list[bool]:
        """Whether each key is in the set."""
        if not keys:
            return []
        await self.ready()
        connection = self._connection
        if self.bloom is not None:
            found = await connection.run(self._scripts.bloom_seen, *map(self.key, keys))
            return [bool(flag) for flag in found]
        found = await connection.call(lambda: connection.client.smismember(connection.prefix + "seen", list(keys)))
        return [bool(flag) for flag in found]

    async def claim(self, keys: Sequence[str]) -> list[bool]:
        """Add each key; whether it was new."""
        if not keys:
            return []
        await self.ready()
        connection = self._connection
        if self.bloom is not None:
            fresh = await connection.run(self._scripts.bloom_claim, *map(self.key, keys))
            return [bool(flag) for flag in fresh]

        async def add() -> list[int]:
            async with connection.client.pipeline(transaction=True) as pipe:
                for key in keys:
                    pipe.sadd(connection.prefix + "seen", key)
                added: list[int] = await pipe.execute()
            return added

        return [bool(flag) for flag in await connection.call(add)]
