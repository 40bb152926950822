"""``RobotsCache``: each origin's robots.txt fetched once through a ``Backend``, cached and refreshed.

    rules = await robots("https://shop.example/", "examplebot")
    if rules.allows(url) and rules.allows_use(url, Purpose.AI_TRAIN):
        ...

The cache reads each response with ``robots_answer``. It re-reads a file after 24 hours; a file it
cannot get is tried again after 1, 2, 4 and 8 seconds, after which the origin is unreachable
(``Robots.reachable`` is false and nothing is allowed); a failure that asking again cannot mend (a
private address, a host that asked to wait longer than the crawl waits) is not tried again. It
follows up to five redirects itself (RFC 9309); the rules apply to the origin asked about.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import timedelta

import anyio

from spire_core import errors
from spire_core import url as urls
from spire_core.backend.base import Backend
from spire_core.backend.fetcher import Fetcher
from spire_core.clock import MONOTONIC, Clock
from spire_core.outcome import seconds
from spire_core.response import Response
from spire_core.robots.answer import RobotsAnswer, robots_answer
from spire_core.robots.rules import Robots, product_token
from spire_core.session.addresses import PrivateAddress

__all__ = ["REFRESH_AFTER", "RETRY_DELAYS", "CachedRobots", "RobotsCache", "robots"]

#: How long read rules are trusted, and the waits before each new try of a file that cannot be read.
REFRESH_AFTER = timedelta(hours=24)
RETRY_DELAYS = (1.0, 2.0, 4.0, 8.0)
_MAX_REDIRECTS = 5
#: Failures that asking again cannot mend, so the file is not asked for again: an address the crawl
#: may not reach, or a host that asked for a wait longer than the crawl waits (``retry_wait``).
_REFUSED_EVERY_TIME = (PrivateAddress, errors.RetryWaitTooLong)


@dataclasses.dataclass
class CachedRobots:
    """One origin's robots.txt as the cache holds it: the answer read, when, and its rules per agent."""

    answer: RobotsAnswer  # final, or ``retry`` when the tries ran out: unreachable
    fetched_at: float
    by_agent: dict[str, Robots] = dataclasses.field(default_factory=dict)

    @property
    def unreachable(self) -> bool:
        return self.answer.retry

    def robots(self, agent: str) -> Robots:
        """The rules for ``agent``, read once per product token."""
        rules = self.by_agent.get(agent)  # the crawl asks by its product token, which is its own token
        if rules is not None:
            return rules
        token = product_token(agent) or "*"
        rules = self.by_agent.get(token)
        if rules is None:
            rules = self.by_agent[token] = self.answer.rules(token)
        return rules


class RobotsCache(Fetcher):
    """Fetches and caches ``/robots.txt`` per origin, re-reading it after ``refresh_after``.

        cache = RobotsCache(backend)
        rules = await cache.get("https://shop.example/item/1", "examplebot")

    One fetch serves every agent; ``agent`` is the one ``get`` uses when given none. Callers asking
    for the same origin at once share one fetch. ``retry_delays`` are the waits
    before each new try of a robots.txt that answers 5xx or 429, or cannot be reached; after the last,
    the origin is unreachable. When a refresh finds the site unreachable, the rules read before are
    kept, as RFC 9309 allows. Refresh and retry times are read from ``clock`` and the retries wait on
    it. Without a ``backend``, an ``HttpBackend`` is made and closed by ``aclose``.
    """

    def __init__(
        self,
        backend: Backend | None = None,
        *,
        refresh_after: float | timedelta = REFRESH_AFTER,
        retry_delays: Sequence[float | timedelta] = RETRY_DELAYS,
        max_redirects: int = _MAX_REDIRECTS,
        agent: str = "*",
        clock: Clock = MONOTONIC,
    ) -> None:
        super().__init__(backend)
        #: What refresh and retry times are read and waited on (a ``FakeClock`` in tests).
        self.clock = clock
        self._refresh_after = seconds(refresh_after) or 0.0
        self._retry_delays = tuple(seconds(delay) or 0.0 for delay in retry_delays)
        if max_redirects < 0:
            raise errors.ConfigError("max_redirects must be 0 or more")
        self._max_redirects = max_redirects
        #: The agent ``get`` reads the rules for when it is given none.
        self.agent = agent
        self._entries: dict[str, CachedRobots] = {}
        self._pending: dict[str, anyio.Event] = {}
        #: The last error a fetch of each origin's robots.txt failed with (a dead host, say).
        self.errors: dict[str, errors.SpireError] = {}

    async def get(self, url: str, agent: str | None = None) -> Robots:
        """The rules for ``agent`` (by default the cache's) on the origin of ``url``; raises ``InvalidUrl`` only.

        An origin whose robots.txt cannot be read gives rules with ``reachable`` false.
        """
        origin = urls.origin(url)
        entry = await self._entry(origin)
        return entry.robots(self.agent if agent is None else agent)

    def known(self, origin: str) -> CachedRobots | None:
        """``origin``'s entry when it is read and still fresh; else ``None`` (nothing is fetched)."""
        entry = self._entries.get(origin)
        if entry is not None and self.clock() - entry.fetched_at < self._refresh_after:
            return entry
        return None

    def reading(self, origin: str) -> bool:
        """Whether ``origin``'s robots.txt is being fetched now."""
        return origin in self._pending

    async def _entry(self, origin: str) -> CachedRobots:
        while True:
            entry = self._entries.get(origin)
            if entry is not None and self.clock() - entry.fetched_at < self._refresh_after:
                return entry
            pending = self._pending.get(origin)
            if pending is not None:
                # Someone is fetching it; when they are done (or cancelled) look again.
                await pending.wait()
                continue
            done = self._pending[origin] = anyio.Event()
            try:
                fresh = await self._fetch(origin)
                if fresh.unreachable and entry is not None and not entry.unreachable:
                    # RFC 9309 lets a crawler keep the rules it has while robots.txt is unreachable.
                    fresh = dataclasses.replace(entry, fetched_at=fresh.fetched_at)
                self._entries[origin] = fresh
                return fresh
            finally:
                del self._pending[origin]
                done.set()

    async def _fetch(self, origin: str) -> CachedRobots:
        answer = RobotsAnswer(retry=True)
        for delay in (0.0, *self._retry_delays):
            if delay:
                await self.clock.sleep(delay)
            answer, error = await self._try(origin + "/robots.txt")
            if not answer.retry or isinstance(error, _REFUSED_EVERY_TIME):
                break
        return CachedRobots(answer, self.clock())

    async def _try(self, url: str) -> tuple[RobotsAnswer, errors.FetchError | None]:
        """One try, following redirects, and the error it failed with; a redirect still left once they
        are used up means no file."""
        answer = RobotsAnswer()
        for _ in range(self._max_redirects + 1):
            try:
                response: Response | None = await self.fetch_one(url)
            except errors.InvalidUrl:
                return RobotsAnswer(), None
            except errors.FetchError as exc:
                self.errors[urls.origin(url)] = exc
                return robots_answer(None), exc
            answer = robots_answer(response)
            if answer.redirect is None:
                return answer, None
            url = answer.redirect
        return answer, None


async def robots(url: str, agent: str = "*", *, backend: Backend | None = None) -> Robots:
    """Fetch and read the robots.txt of ``url``'s origin for ``agent``; raises ``InvalidUrl`` only.

    For many URLs of many sites, keep a ``RobotsCache`` instead: it fetches each origin once.
    """
    async with RobotsCache(backend) as cache:
        return await cache.get(url, agent)
