"""``Dedup``: queue each logical request once."""

from __future__ import annotations

from collections.abc import Iterable

from spire_core.frontier.base import PushResult
from spire_core.frontier.facade import Facade
from spire_core.seed import Seed

__all__ = ["Dedup"]


class Dedup(Facade):
    """Every push becomes unique: a seed whose ``unique_key`` was queued before is a duplicate.

    The seen set lives in the store underneath (in memory, in the SQLite file, in Redis), so it is
    written in the same step as the queue and survives with it.
    """

    async def push(self, seeds: Iterable[Seed], *, forefront: bool = False, unique: bool = True) -> PushResult:
        return await self.inner.push(seeds, forefront=forefront, unique=True)
