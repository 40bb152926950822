"""``AvoidTraps``: cap the seeds one URL path prefix may admit, so an endless URL space cannot eat a crawl.

    frontier = MemoryFrontier().dedup().avoid_traps(max_per_prefix=500, depth=2)

An infinite calendar (``/calendar/2024/05/01`` links to the next day, forever) or a faceted search
(``/search?colour=red&size=9&sort=...``) has more pages than any crawl can fetch. Counting admitted
seeds per path prefix bounds each such space without knowing its shape.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import anyio

from spire_core import url as urls
from spire_core.errors import ConfigError
from spire_core.frontier.base import Frontier, PushResult
from spire_core.frontier.facade import Facade
from spire_core.seed import Seed
from spire_core.skips import SkipReason

__all__ = ["AvoidTraps", "path_prefix"]


def path_prefix(url: str, depth: int) -> str:
    """The origin of ``url`` and the first ``depth`` segments of its path, ending in ``/``.

    The last segment counts like the others and the query never does, so with ``depth=2``
    ``https://host/calendar/2024/05/01`` gives ``https://host/calendar/2024/``, and with ``depth=1``
    ``https://host/search?q=a`` gives ``https://host/search/``. Empty segments (``//``) are skipped.
    """
    parts = urls.split(url)
    path = parts.rest.partition("?")[0]
    segments = [segment for segment in path.split("/") if segment][:depth]
    return parts.origin + "/" + "".join(segment + "/" for segment in segments)


class AvoidTraps(Facade):
    """Admits at most ``max_per_prefix`` seeds per path prefix; rejects the rest with the reason ``"trap"``.

    A seed's prefix is ``path_prefix(seed.url, depth)``: its origin and the first ``depth`` segments
    of its path. Only seeds the store below added count: a duplicate, or a seed a facade below
    rejected, leaves room for another. Over the cap, a seed whose unique key was seen before is
    still reported as a duplicate, not a trap. ``depth=0`` caps each origin as a whole.

    The counts live in this object, so they are per process: a resumed crawl counts from zero, and
    each worker on a shared ``RedisFrontier`` caps what it admits itself.
    """

    def __init__(self, inner: Frontier, *, max_per_prefix: int = 1000, depth: int = 2) -> None:
        if max_per_prefix < 1:
            raise ConfigError(f"max_per_prefix must be at least 1, not {max_per_prefix}")
        if depth < 0:
            raise ConfigError(f"depth must be 0 or more, not {depth}")
        super().__init__(inner)
        self.max_per_prefix = max_per_prefix
        self.depth = depth
        self._admitted: Counter[str] = Counter()
        # One push at a time: seeds are counted only once the store says it added them, and a
        # concurrent push must not see room that the one in progress is about to fill.
        self._lock = anyio.Lock()

    def admitted(self, prefix: str) -> int:
        """How many seeds under ``prefix`` (as ``path_prefix`` writes it) were admitted so far."""
        return self._admitted[prefix]

    async def push(self, seeds: Iterable[Seed], *, forefront: bool = False, unique: bool = False) -> PushResult:
        result = PushResult()
        waiting = [(seed, path_prefix(seed.url, self.depth)) for seed in seeds]
        async with self._lock:
            # Rounds: offer each prefix as many seeds as it has room for; when the store turns some
            # away as duplicates, their room goes to the seeds held back, in their order.
            while waiting:
                offered: list[Seed] = []
                held: list[tuple[Seed, str]] = []
                room = {prefix: self.max_per_prefix - self._admitted[prefix] for _, prefix in waiting}
                for seed, prefix in waiting:
                    if room[prefix] > 0:
                        room[prefix] -= 1
                        offered.append(seed)
                    else:
                        held.append((seed, prefix))
                if not offered:
                    # A seed queued before is a duplicate, full prefix or not: say so, as the store would.
                    seen = await self.inner.seen([seed.unique_key for seed, _ in held])
                    for (seed, _), was_seen in zip(held, seen, strict=True):
                        if was_seen:
                            result.duplicates.append(seed)
                        else:
                            result.rejected.append((seed, SkipReason.TRAP))
                    break
                pushed = await self.inner.push(offered, forefront=forefront, unique=unique)
                for seed in pushed.added:
                    self._admitted[path_prefix(seed.url, self.depth)] += 1
                result.merge(pushed)
                waiting = held
        return result
