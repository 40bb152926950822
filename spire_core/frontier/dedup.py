"""``Dedup``: queue each logical request once."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from spire_core.frontier.base import Frontier, PushResult
from spire_core.frontier.bloom import Bloom, BloomStore
from spire_core.frontier.facade import Facade
from spire_core.frontier.items import store_of
from spire_core.seed import Seed

__all__ = ["Dedup"]


class Dedup(Facade):
    """Every push becomes unique: a seed whose ``unique_key`` was queued before is a duplicate.

    The seen set lives in the store underneath (in memory, in the SQLite file, in Redis), so it is
    written in the same step as the queue and survives with it. It is exact, unless ``bloom`` gives
    a capacity: then it is a Bloom filter of that many keys at ``error_rate`` false positives (see
    ``spire_core.frontier.bloom``), kept by the store when it can (Redis, SQLite), else by this facade
    in this process's memory.
    """

    def __init__(self, inner: Frontier, *, bloom: int | Bloom | None = None, error_rate: float = 0.01) -> None:
        super().__init__(inner)
        self.bloom = Bloom(bloom, error_rate) if isinstance(bloom, int) else bloom
        self._filter = None
        if self.bloom is not None:
            store = store_of(inner)
            if isinstance(store, BloomStore):
                store.use_bloom(self.bloom)
            else:
                self._filter = self.bloom.in_memory()

    async def push(self, seeds: Iterable[Seed], *, forefront: bool = False, unique: bool = True) -> PushResult:
        seen = self._filter
        if seen is None:
            return await self.inner.push(seeds, forefront=forefront, unique=True)
        result = PushResult()
        fresh: list[Seed] = []
        for seed in seeds:
            key = seed.unique_key
            if key in seen:
                result.duplicates.append(seed)
            else:
                seen.add(key)
                fresh.append(seed)
        return result.merge(await self.inner.push(fresh, forefront=forefront))

    async def seen(self, keys: Sequence[str]) -> list[bool]:
        if self._filter is None:
            return await self.inner.seen(keys)
        return [key in self._filter for key in keys]

    async def claim(self, keys: Sequence[str]) -> list[bool]:
        seen = self._filter
        if seen is None:
            return await self.inner.claim(keys)
        new: list[bool] = []
        for key in keys:
            new.append(key not in seen)
            seen.add(key)
        return new
