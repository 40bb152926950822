"""``SiteCrawl``, the polite crawl of one site, and ``crawl(url)`` that builds one.

A ``SiteCrawl`` owns the engine it runs on (``Crawler``, a memory frontier, ``HostLimits``), the
stream of items its reader iterates, and which URLs it admits, each once. Its parts: ``worker.py``
applies the rules to each seed, ``origins.py`` holds each origin's robots.txt, ``keeping.py``
decides which fetched pages come out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import timedelta
from types import TracebackType
from typing import Any, Literal

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from spire.site.keeping import _Keeper
from spire.site.limits import (
    _PAUSE_ON,
    MAX_DEPTH,
    MAX_URL_BYTES,
    PAGE_ATTEMPTS,
    ROBOTS_REFRESH_AFTER,
    ROBOTS_RETRY_DELAYS,
    polite_limits,
)
from spire.site.origins import _Origins
from spire.site.page import CrawlError, CrawlPage, SkipReason
from spire.site.scope import Scope, _Scope
from spire.site.worker import _SITEMAP, _SiteWorker
from spire_core import url as urls
from spire_core.backend.base import Backend
from spire_core.backend.http import DEFAULT_USER_AGENT, HttpBackend
from spire_core.blocks import BlockRules
from spire_core.crawler import Crawler
from spire_core.errors import ConfigError, ShutDown, SpireError
from spire_core.frontier.memory import MemoryFrontier
from spire_core.limits import HostLimits
from spire_core.outcome import seconds
from spire_core.seed import Seed
from spire_core.session.timeouts import Timeouts
from spire_core.sitemaps import MAX_SITEMAP_FILES
from spire_core.stats import CrawlStats

__all__ = ["Respect", "SiteCrawl", "crawl"]

Respect = Literal["robots", "ai-training"]

_CREDENTIALS = frozenset({"authorization", "cookie"})


class SiteCrawl:
    """A polite crawl of one site; use it as ``async with crawl: async for item in crawl``.

    Items are ``CrawlPage`` (a kept page) and ``CrawlError`` (a URL that failed; the crawl goes on).
    ``stats`` counts requests, kept ``pages``, ``errors`` and ``skipped(reason)``. Build one with
    ``spire.crawl(url, ...)``; see that function for the options.
    """

    def __init__(
        self,
        url: str,
        *,
        scope: Scope = "host",
        limit: int | None = None,
        respect: Respect = "robots",
        ignore_robots: bool = False,
        host_limits: HostLimits | None = None,
        agent: str = "*",
        user_agent: str = DEFAULT_USER_AGENT,
        headers: Mapping[str, str] | None = None,
        backend: Backend | None = None,
        block_rules: BlockRules | None = None,
        concurrency: int = 16,
        robots_refresh_after: float | timedelta = ROBOTS_REFRESH_AFTER,
        robots_retry_delays: Sequence[float | timedelta] = ROBOTS_RETRY_DELAYS,
        buffer: int = 64,
        timeouts: float | timedelta | Timeouts | None = None,
    ) -> None:
        urls.check(url)
        if scope not in ("host", "domain", "prefix"):
            raise ConfigError(f"scope is host, domain or prefix, not {scope!r}")
        if respect not in ("robots", "ai-training"):
            raise ConfigError(f"respect is robots or ai-training, not {respect!r}")
        if limit is not None and limit < 1:
            raise ConfigError(f"limit must be at least 1, not {limit}")
        if buffer < 0:
            raise ConfigError(f"buffer must be 0 or more, not {buffer}")
        self.seed_url = url
        self.limit = limit
        self.respect = respect
        self.ignore_robots = ignore_robots
        self.agent = agent
        self._scope = _Scope(url, scope)
        self._seed_origin = urls.origin(url)
        # Credentials go to the seed's origin only; every other default header goes everywhere.
        given = dict(headers or {})
        self._credentials = {name: value for name, value in given.items() if name.lower() in _CREDENTIALS}
        others = {name: value for name, value in given.items() if name.lower() not in _CREDENTIALS}
        self.backend = (
            backend if backend is not None else HttpBackend(user_agent=user_agent, headers=others, timeout=timeouts)
        )
        self.blocks = block_rules if block_rules is not None else BlockRules.builtin()
        refresh_after = seconds(robots_refresh_after) or 0.0
        retry_delays = tuple(seconds(delay) or 0.0 for delay in robots_retry_delays)
        limits = host_limits if host_limits is not None else polite_limits()
        # 429 and 503 always pause the host: the crawl's own politeness, whatever the limits say.
        limits = dataclasses.replace(limits, pause_on=limits.pause_on | _PAUSE_ON)
        attempts = max(PAGE_ATTEMPTS, len(retry_delays) + 1)
        self.crawler = Crawler(
            _SiteWorker(self),
            concurrency=concurrency,
            host_limits=limits,
            frontier=MemoryFrontier().dedup().retry(attempts),
            backend=self.backend,
            follow_redirects=False,
            raise_for_status=False,
            timeouts=timeouts,
        )
        self.crawler.counts_pages = False
        self.origins = _Origins(self, self._scope, refresh_after=refresh_after, retry_delays=retry_delays)
        self._queued: set[str] = set()  # canonical URLs of pages admitted
        self._sitemaps_queued: set[str] = set()
        self._sitemap_files = 0
        self.keeper = _Keeper(self)
        self._in_flight_at_shutdown: list[str] = []
        self._send: MemoryObjectSendStream[CrawlPage | CrawlError]
        self._receive: MemoryObjectReceiveStream[CrawlPage | CrawlError]
        self._send, self._receive = anyio.create_memory_object_stream[CrawlPage | CrawlError](buffer)
        self._tg: anyio.abc.TaskGroup | None = None
        self._entered = False
        self._finished = False
        self._shut_down = False

    # -- public face ------------------------------------------------------------------------------

    @property
    def stats(self) -> CrawlStats:
        """The crawl's counters: ``pages`` counts kept pages, ``requests`` every request sent
        (robots.txt and sitemaps included), ``errors`` failed URLs, ``skipped(reason)`` each skip."""
        return self.crawler.stats

    def in_scope(self, url: str) -> bool:
        """Whether ``url`` is inside the crawl's scope (as it stands: a redirected seed widens it)."""
        try:
            return url.startswith(("http://", "https://")) and url in self._scope
        except SpireError:
            return False

    async def pending(self) -> int:
        """URLs queued, waiting for their robots.txt, or in flight: the work not yet done."""
        return await self.crawler.frontier.pending() + self.origins.waiting()

    def shutdown(self) -> None:
        """End the crawl: requests in flight fail as shut down, nothing new starts.

        Safe to call from a handler, another task, another thread or a signal handler. Pages held
        for their canonical page still come out; then iteration ends.
        """
        self._shut_down = True
        self.crawler.shutdown()

    async def __aenter__(self) -> SiteCrawl:
        if self._entered:
            raise ConfigError("a SiteCrawl runs once: call spire.crawl() again for another crawl")
        self._entered = True
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        tg.start_soon(self._run)
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        tg, self._tg = self._tg, None
        if tg is None:
            return None
        if not self._finished:
            self.shutdown()  # left early: nobody reads the rest
        self._receive.close()
        return await tg.__aexit__(kind, error, tb)

    def __aiter__(self) -> MemoryObjectReceiveStream[CrawlPage | CrawlError]:
        if self._tg is None:
            # Iterating without the context would leave the crawl's tasks running on an early break.
            raise ConfigError("iterate a site crawl inside `async with`: async with spire.crawl(url) as pages: ...")
        return self._receive

    async def _run(self) -> None:
        try:
            with self._send:
                if not self._shut_down:
                    seed = Seed(self.seed_url, user_data={"seed": True}, headers=self._credentials or None)
                    self._queued.add(seed.unique_key)
                    await self.crawler.arun(self.origins.route([seed]))
                await self._wind_up()
        finally:
            self._finished = True

    async def _wind_up(self) -> None:
        """The crawl ended: pages still held for a canonical page are kept; in-flight URLs fail as shut down."""
        for url in self._in_flight_at_shutdown:
            await self.emit(CrawlError(url, ShutDown(url=url)))
        self._in_flight_at_shutdown.clear()
        await self.keeper.keep_all_held()

    async def emit(self, item: CrawlPage | CrawlError) -> None:
        """Hand ``item`` to the reader; a reader that left stops the crawl."""
        try:
            await self._send.send(item)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            self.shutdown()

    def note_shut_down(self, url: str) -> None:
        """``url`` was in flight when the crawl shut down: it comes out as a ``ShutDown`` error."""
        if self._shut_down:
            self._in_flight_at_shutdown.append(url)

    def skip(self, reason: SkipReason, count: int = 1) -> None:
        self.crawler.stats.skip(reason.value, count)

    # -- admission --------------------------------------------------------------------------------

    def credentials_for(self, url: str) -> Mapping[str, str] | None:
        """The crawl's Authorization and Cookie headers for a request to the seed's origin; else none."""
        if self._credentials and urls.origin(url) == self._seed_origin:
            return self._credentials
        return None

    def admit(
        self,
        candidate: str,
        parent: Seed,
        *,
        redirects: int = 0,
        anywhere: bool = False,
        count_duplicate: bool = True,
    ) -> Seed | None:
        """A page seed for ``candidate`` when it passes the URL rules, else ``None`` (counted when it should be).

        ``anywhere`` lifts the scope rule (a seed redirected to another site). A redirect target keeps
        its parent's depth: a redirect is not a link.
        """
        depth = parent.depth if redirects else parent.depth + 1
        if len(candidate.encode()) > MAX_URL_BYTES or depth > MAX_DEPTH:
            return None  # dropped without a count, as the policy says
        if not candidate.startswith(("http://", "https://")):
            self.skip(SkipReason.SCHEME)
            return None
        try:
            key = urls.canonicalize(candidate)
            if not anywhere and candidate not in self._scope:
                self.skip(SkipReason.SCOPE)
                return None
        except SpireError:
            self.skip(SkipReason.SCHEME)  # an http(s) URL that does not parse: not a URL we can fetch
            return None
        if key in self._queued:
            if count_duplicate:
                self.skip(SkipReason.DUPLICATE)
            return None
        self._queued.add(key)
        user_data: dict[str, Any] = {}
        if redirects:
            user_data["redirects"] = redirects
            if (parent.user_data or {}).get("seed"):
                user_data["seed"] = True  # still the seed, one hop later
        if anywhere:
            user_data["only_page"] = True
        return Seed(
            candidate,
            depth=depth,
            user_data=user_data or None,
            headers=self.credentials_for(candidate),
            unique_key=key,
        )

    def was_queued(self, url: str) -> bool:
        try:
            return urls.canonicalize(url) in self._queued
        except SpireError:
            return False

    def sitemap_seed(self, url: str, parent: Seed | None = None, hops: int = 0) -> Seed | None:
        """A request for a sitemap file, once per file; ``None`` when it is not a URL or was queued."""
        try:
            key = urls.canonicalize(url)
        except SpireError:
            return None
        if key in self._sitemaps_queued:
            return None
        self._sitemaps_queued.add(key)
        return Seed(
            url,
            tag=_SITEMAP,
            priority=1,
            depth=parent.depth if parent is not None else 0,
            user_data={"hops": hops},
            headers=self.credentials_for(url),
            unique_key=f"sitemap {key}",
        )

    def same_site(self, url: str) -> bool:
        """Whether ``url`` is on the crawl's site: the seed's registrable domain, on the seed's port."""
        return self._scope.same_site(url)

    def widen_scope(self, url: str) -> None:
        """Add ``url``'s host (and, for scope prefix, its path directory) to the scope."""
        self._scope.add(url)

    def sitemap_budget_spent(self) -> bool:
        """No new sitemap file opens past the file cap, or once ``limit`` URLs are queued."""
        if self._sitemap_files >= MAX_SITEMAP_FILES:
            return True
        return self.limit is not None and len(self._queued) >= self.limit

    def opened_sitemap(self) -> None:
        self._sitemap_files += 1


def crawl(
    url: str,
    *,
    scope: Scope = "host",
    limit: int | None = None,
    respect: Respect = "robots",
    ignore_robots: bool = False,
    host_limits: HostLimits | None = None,
    agent: str = "*",
    user_agent: str = DEFAULT_USER_AGENT,
    headers: Mapping[str, str] | None = None,
    backend: Backend | None = None,
    block_rules: BlockRules | None = None,
    concurrency: int = 16,
    robots_refresh_after: float | timedelta = ROBOTS_REFRESH_AFTER,
    robots_retry_delays: Sequence[float | timedelta] = ROBOTS_RETRY_DELAYS,
    timeouts: float | timedelta | Timeouts | None = None,
) -> SiteCrawl:
    """Crawl the site at ``url`` politely: ``async with crawl(url) as pages: async for item in pages``.

    - ``scope``: ``"host"`` (the seed's host and port), ``"domain"`` (and its subdomains under the
      registrable domain) or ``"prefix"`` (the seed's path directory on its host).
    - ``limit``: stop after this many kept pages.
    - ``respect="ai-training"``: also skip sites and pages that refuse AI training.
    - ``ignore_robots``: never read robots.txt, and ignore each page's robots rules.
    - ``host_limits``: per-host politeness; by default ``polite_limits()``. 429 and 503 always pause a host.
    - ``agent``: the robots.txt product token whose groups (and meta tags) apply; ``"*"`` by default.
    - ``headers``: default request headers; ``Authorization`` and ``Cookie`` go to the seed's origin only.
    - ``block_rules``: what counts as a block page; ``BlockRules.builtin()`` by default.
    - ``timeouts``: connect, read, body and request deadlines (``Timeouts``, or one number of seconds).
    """
    return SiteCrawl(
        url,
        scope=scope,
        limit=limit,
        respect=respect,
        ignore_robots=ignore_robots,
        host_limits=host_limits,
        agent=agent,
        user_agent=user_agent,
        headers=headers,
        backend=backend,
        block_rules=block_rules,
        concurrency=concurrency,
        robots_refresh_after=robots_refresh_after,
        robots_retry_delays=robots_retry_delays,
        timeouts=timeouts,
    )
