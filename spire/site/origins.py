"""Each origin's robots.txt in a site crawl: read before anything else, obeyed, re-read when old.

The pages and sitemaps of an origin wait outside the frontier until its robots.txt has been read (or
forever ignored, with ``ignore_robots``). Reading it applies its Crawl-delay, releases what waited and
queues the sitemaps the origin starts with; rules older than ``robots_refresh_after`` are read again.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from spire.site.page import SkipReason
from spire.site.scope import _Scope
from spire.site.worker import _ROBOTS
from spire_core.robots import Purpose, Robots
from spire_core.seed import Seed
from spire_core.sitemaps import discover

if TYPE_CHECKING:
    from spire.site.site_crawl import SiteCrawl


@dataclasses.dataclass(slots=True)
class _Origin:
    """One origin's robots.txt rules, and the seeds that wait for them."""

    robots: Robots | None = None  # None until robots.txt has been read
    read_at: float = 0.0
    reading: bool = False  # a robots seed is queued or in flight
    generation: int = 0  # bumped on each (re-)read, so its seeds have fresh unique keys
    waiting: list[Seed] = dataclasses.field(default_factory=list)
    started: bool = False  # its sitemaps were queued


class _Origins:
    """The robots.txt state of every origin the crawl reaches, and the seeds waiting for it."""

    def __init__(
        self, crawl: SiteCrawl, scope: _Scope, *, refresh_after: float, retry_delays: tuple[float, ...]
    ) -> None:
        self.crawl = crawl
        self._scope = scope
        self._refresh_after = refresh_after
        self._retry_delays = retry_delays
        self._origins: dict[str, _Origin] = {}

    def waiting(self) -> int:
        """Seeds waiting for their origin's robots.txt."""
        return sum(len(origin.waiting) for origin in self._origins.values())

    def route(self, seeds: Iterable[Seed]) -> list[Seed]:
        """The seeds to queue now; the rest wait for their origin's robots.txt, whose read is queued."""
        ready: list[Seed] = []
        for seed in seeds:
            origin = self._origin(seed.origin)
            if self.crawl.ignore_robots:
                ready.extend(self._start_site(seed.origin, origin, None))
                ready.append(seed)
            elif origin.robots is not None:
                ready.append(seed)
            else:
                if not origin.reading:
                    origin.reading = True
                    ready.append(self.robots_seed(seed.origin, origin.generation))
                origin.waiting.append(seed)
        return ready

    def _origin(self, origin: str) -> _Origin:
        found = self._origins.get(origin)
        if found is None:
            found = self._origins[origin] = _Origin()
        return found

    def robots_seed(self, origin: str, generation: int, url: str | None = None, hops: int = 0) -> Seed:
        """The request for ``origin``'s robots.txt (or a redirect hop of it): ahead of everything else."""
        target = url if url is not None else origin + "/robots.txt"
        return Seed(
            target,
            tag=_ROBOTS,
            priority=2,
            user_data={"robots_for": origin, "hops": hops},
            headers=self.crawl.credentials_for(target),
            unique_key=f"robots {origin} {generation} {hops}",
        )

    def _start_site(self, origin_url: str, origin: _Origin, robots: Robots | None) -> list[Seed]:
        """Once per origin in scope: the sitemaps its robots.txt lists on this site, else /sitemap.xml."""
        if origin.started or not self._scope.covers_host(origin_url + "/"):
            return []
        origin.started = True
        listed = robots.sitemaps() if robots is not None else []
        found = discover(origin_url + "/", listed, keep=self._scope.same_site)
        seeds = [seed for url in found if (seed := self.crawl.sitemap_seed(url)) is not None]
        return seeds if self.crawl.ignore_robots else self.route(seeds)

    def robots_read(self, origin_url: str, rules: Robots) -> list[Seed]:
        """``origin_url``'s robots.txt is read: apply its Crawl-delay, release what waited, queue its sitemaps."""
        origin = self._origin(origin_url)
        if not rules.reachable and origin.robots is not None and origin.robots.reachable:
            rules = origin.robots  # RFC 9309: keep the rules read before while the file is unreachable
        origin.robots = rules
        origin.read_at = time.monotonic()
        origin.reading = False
        delay = rules.crawl_delay()
        if delay:
            gate = self.crawl.crawler.gate
            gate.space(origin_url, delay)
            gate.pause(origin_url, delay)  # spaces the first page from the robots.txt request too
        released, origin.waiting = origin.waiting, []
        if not rules.reachable:
            return released  # each is skipped as robots_unreachable; no sitemap of the site is read
        return [*self._start_site(origin_url, origin, rules), *released]

    async def robots_reason(self, seed: Seed, *, page: bool = True) -> SkipReason | None:
        """Why robots.txt keeps ``seed`` out, if it does. Queues a re-read of rules that are too old.

        AI-use preferences apply to pages (``page``), not to the sitemaps that list them.
        """
        if self.crawl.ignore_robots:
            return None
        origin = self._origin(seed.origin)
        rules = origin.robots
        if rules is None:
            return SkipReason.ROBOTS_UNREACHABLE  # not reached: seeds wait in route() until the rules are read
        if not origin.reading and time.monotonic() - origin.read_at >= self._refresh_after:
            # Seeds in flight finish under the old rules; the re-read goes ahead of the origin's queue.
            # Pushed now, not staged: the re-read must happen whatever becomes of this seed.
            origin.reading = True
            origin.generation += 1
            await self.crawl.crawler.push([self.robots_seed(seed.origin, origin.generation)], forefront=True)
        if not rules.reachable:
            return SkipReason.ROBOTS_UNREACHABLE
        if not rules.allows(seed.url):
            return SkipReason.ROBOTS
        if page and self.crawl.respect == "ai-training" and not rules.allows_use(seed.url, Purpose.AI_TRAIN):
            return SkipReason.AI
        return None

    def robots_retry_delay(self, attempt: int) -> float | None:
        """The wait before robots.txt try ``attempt + 1``; ``None`` when the tries are used up."""
        delays = self._retry_delays
        return delays[attempt] if attempt < len(delays) else None

    def robots_generation(self, origin_url: str) -> int:
        return self._origin(origin_url).generation
