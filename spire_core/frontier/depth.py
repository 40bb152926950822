"""``DepthLimit``: keep the crawl within a number of links from its first seeds."""

from __future__ import annotations

from collections.abc import Iterable

from spire_core import checks
from spire_core.frontier.base import Frontier, PushResult
from spire_core.frontier.facade import Facade
from spire_core.seed import Seed
from spire_core.skips import SkipReason

__all__ = ["DepthLimit"]


class DepthLimit(Facade):
    """Rejects seeds whose ``depth`` is over ``max_depth``, with the reason ``"depth"``."""

    def __init__(self, inner: Frontier, max_depth: int) -> None:
        checks.count("max_depth", max_depth, minimum=0)
        super().__init__(inner)
        self.limit = max_depth

    async def push(self, seeds: Iterable[Seed], *, forefront: bool = False, unique: bool = False) -> PushResult:
        kept: list[Seed] = []
        result = PushResult()
        for seed in seeds:
            if seed.depth > self.limit:
                result.rejected.append((seed, SkipReason.DEPTH))
            else:
                kept.append(seed)
        if kept:
            result.merge(await self.inner.push(kept, forefront=forefront, unique=unique))
        return result
