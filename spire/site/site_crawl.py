"""``SiteCrawl``, the polite crawl of a site, and ``crawl(url)`` that builds one.

A site crawl is an ordinary ``Crawler`` running the site router (``handlers.py``): the engine obeys
robots.txt, follows redirects hop by hop through the ``SiteScope``, deduplicates and keeps host limits;
the ``Keeper`` decides which fetched pages come out on the stream its reader iterates.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import timedelta
from types import TracebackType
from typing import Literal, TypedDict, Unpack

import anyio
import anyio.abc

from spire.site.handlers import SiteRules, site_router
from spire.site.handoff import Handed, HandOff, Reader
from spire.site.keeping import Keeper, KeeperSink, Verdict
from spire.site.limits import (
    MAX_REDIRECTS,
    MAX_URL_BYTES,
    PAGE_ATTEMPTS,
    PAUSE_ON,
    ROBOTS_REFRESH_AFTER,
    ROBOTS_RETRY_DELAYS,
    polite_limits,
)
from spire.site.page import CrawlError
from spire.site.scope import Scope, SiteScope
from spire_core import url as urls
from spire_core.admission import IGNORED_EXTENSIONS, CrawlPolicy, SkipReason
from spire_core.backend.abilities import DEFAULT_USER_AGENT
from spire_core.backend.base import Backend
from spire_core.backend.http import HttpBackend
from spire_core.blocks import BlockRules
from spire_core.crawler import Crawler
from spire_core.errors import ConfigError, ShutDown
from spire_core.frontier.base import Frontier
from spire_core.frontier.facades import Retrying, store_of
from spire_core.frontier.memory import MemoryFrontier
from spire_core.ledger import Entry
from spire_core.limits import HostLimits
from spire_core.recrawl import Recrawl, Recrawlable
from spire_core.robots import RobotsPolicy
from spire_core.seed import Seed
from spire_core.session.credentials import CREDENTIAL_HEADERS
from spire_core.session.timeouts import Timeouts
from spire_core.stats import CrawlStats

__all__ = ["Respect", "SiteCrawl", "SiteOptions", "crawl"]

Respect = Literal["robots", "ai-training"]


class SiteOptions(TypedDict, total=False):
    """The options of a site crawl, declared once: ``spire.crawl(url, **options)`` and ``SiteCrawl``
    take them; ``crawl`` says what each does, and its defaults."""

    scope: Scope
    limit: int | None
    respect: Respect
    ignore_robots: bool
    host_limits: HostLimits | None
    agent: str
    user_agent: str
    headers: Mapping[str, str] | None
    credentials: Mapping[str, Mapping[str, str]] | None
    backend: Backend | None
    block_rules: BlockRules | None
    concurrency: int
    max_requests: int | None
    frontier: Frontier | None
    robots_refresh_after: float | timedelta
    robots_retry_delays: Sequence[float | timedelta]
    #: Pages the crawl may get ahead of its reader (their seeds are reported done once it has read them).
    buffer: int
    timeouts: float | timedelta | Timeouts | None
    processes: int | Literal["auto"]
    recrawl: bool | Recrawl


_OPTION_NAMES = tuple(SiteOptions.__annotations__)


class SiteCrawl:
    """A polite crawl of a site; use it as ``async with crawl: async for item in crawl``.

    Items are ``CrawlPage`` (a kept page) and ``CrawlError`` (a URL that failed; the crawl goes on).
    ``stats`` counts requests, kept ``pages``, ``errors`` and ``skipped(reason)``. Build one with
    ``spire.crawl(url, ...)``; see that function for the options.
    """

    def __init__(self, url: str | Sequence[str], **options: Unpack[SiteOptions]) -> None:
        scope = options.get("scope", "host")
        limit = options.get("limit")
        respect = options.get("respect", "robots")
        ignore_robots = options.get("ignore_robots", False)
        host_limits = options.get("host_limits")
        agent = options.get("agent", "*")
        user_agent = options.get("user_agent", DEFAULT_USER_AGENT)
        headers = options.get("headers")
        credentials = options.get("credentials")
        backend = options.get("backend")
        block_rules = options.get("block_rules")
        concurrency = options.get("concurrency", 16)
        max_requests = options.get("max_requests")
        frontier = options.get("frontier")
        robots_refresh_after = options.get("robots_refresh_after", ROBOTS_REFRESH_AFTER)
        robots_retry_delays = options.get("robots_retry_delays", ROBOTS_RETRY_DELAYS)
        buffer = options.get("buffer", 64)
        timeouts = options.get("timeouts")
        processes = options.get("processes", 1)
        recrawl = options.get("recrawl", False)
        unknown = sorted(set(options) - set(SiteOptions.__annotations__))
        if unknown:
            raise ConfigError(f"unknown site crawl option {unknown[0]!r}: the options are {', '.join(_OPTION_NAMES)}")
        seed_urls = [url] if isinstance(url, str) else list(url)
        if not seed_urls:
            raise ConfigError("a site crawl needs at least one URL")
        for seed_url in seed_urls:
            urls.check(seed_url)
        if scope not in ("host", "domain", "prefix"):
            raise ConfigError(f"scope is host, domain or prefix, not {scope!r}")
        if respect not in ("robots", "ai-training"):
            raise ConfigError(f"respect is robots or ai-training, not {respect!r}")
        if limit is not None and limit < 1:
            raise ConfigError(f"limit must be at least 1, not {limit}")
        if buffer < 0:
            raise ConfigError(f"buffer must be 0 or more, not {buffer}")
        self.seed_urls = seed_urls
        self.limit = limit
        self._scope = SiteScope(seed_urls, scope)
        # Credentials go to their own origin only: the seeds' for ``headers``, each named one for ``credentials``.
        given = dict(headers or {})
        secret = {name: value for name, value in given.items() if name.lower() in CREDENTIAL_HEADERS}
        others = {name: value for name, value in given.items() if name.lower() not in CREDENTIAL_HEADERS}
        by_origin = {urls.origin(seed_url): secret for seed_url in seed_urls} if secret else {}
        by_origin.update({urls.origin(origin): dict(values) for origin, values in (credentials or {}).items()})
        self.backend = (
            backend if backend is not None else HttpBackend(user_agent=user_agent, headers=others, timeout=timeouts)
        )
        limits = host_limits if host_limits is not None else polite_limits()
        # 429 and 503 always pause the host: the crawl's own politeness, whatever the limits say.
        limits = dataclasses.replace(limits, pause_on=limits.pause_on | PAUSE_ON)
        self._hand_off = HandOff(buffer)
        self.keeper = Keeper(limit=limit, skip=self._dropped, emit=self._hand_on)
        sink = self._sink = KeeperSink(self.keeper, on_stop=lambda: self.crawler.stop())
        self.rules = SiteRules(
            scope=self._scope,
            sink=sink,
            respect=respect,
            ignore_robots=ignore_robots,
            agent=agent,
            limit=limit,
        )
        robots = False if ignore_robots else RobotsPolicy(agent, robots_refresh_after, robots_retry_delays)
        self.crawler = Crawler(
            site_router(self.rules),
            concurrency=concurrency,
            host_limits=limits,
            frontier=Retrying(frontier if frontier is not None else MemoryFrontier(), PAGE_ATTEMPTS),
            backend=self.backend,
            max_redirects=MAX_REDIRECTS,
            policy=CrawlPolicy(
                strategy=self._scope, ignored_extensions=IGNORED_EXTENSIONS, max_url_bytes=MAX_URL_BYTES
            ),
            robots=robots,
            block_rules=block_rules if block_rules is not None else BlockRules.builtin(),
            credentials=by_origin,
            max_requests=max_requests,
            timeouts=timeouts,
            sinks={Verdict: sink},
            processes=processes,
            recrawl=_page_states(recrawl, frontier),
        )
        self._tg: anyio.abc.TaskGroup | None = None
        self._entered = False
        self._finished = False
        self._shut_down = False

    # -- public face ------------------------------------------------------------------------------

    @property
    def stats(self) -> CrawlStats:
        """The crawl's counters: ``pages`` counts kept pages, ``requests`` every request sent
        (robots.txt and sitemaps included), ``errors`` failed URLs, ``skipped(reason)`` each skip;
        ``finished`` the seeds handled, but not the robots.txt of a site that could not be reached."""
        stats = self.crawler.stats
        return dataclasses.replace(stats, pages=self.keeper.kept, finished=stats.finished - self.rules.unreachable)

    async def changes(self) -> AsyncIterator[Entry]:
        """The change feed: each page's ledger entry with its ``change`` (``new``, ``changed``,
        ``unchanged``, ``gone``, ``failed``); read it once the crawl has ended for every page."""
        if self.crawler.recrawl is None:
            raise ConfigError(
                "a site crawl keeps page states only in a frontier it is given: "
                "spire.crawl(url, frontier=SqliteFrontier(path)) (or recrawl=True)"
            )
        async for entry in self.crawler.changes():
            yield entry

    def start_status(self, url: str) -> int | None:
        """The error status start page ``url`` answered, if it was not kept for it; else ``None``."""
        return self._sink.start_statuses.get(url)

    def in_scope(self, url: str) -> bool:
        """Whether ``url`` is inside the crawl's scope (as it stands: a redirected seed widens it)."""
        return url.startswith(("http://", "https://")) and self._scope.admits(url)

    async def pending(self) -> int:
        """URLs queued (some waiting for their robots.txt) or in flight: the work not yet done."""
        return await self.crawler.frontier.pending()

    def shutdown(self) -> None:
        """End the crawl: requests in flight fail as shut down, nothing new starts.

        Safe to call from a handler, another task, another thread or a signal handler. Pages held
        for their canonical page still come out; then iteration ends.
        """
        self._shut_down = self.rules.shutting_down = True
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
        self._hand_off.reader.close()
        return await tg.__aexit__(kind, error, tb)

    def __aiter__(self) -> Reader:
        if self._tg is None:
            # Iterating without the context would leave the crawl's tasks running on an early break.
            raise ConfigError("iterate a site crawl inside `async with`: async with spire.crawl(url) as pages: ...")
        return self._hand_off.reader

    async def _run(self) -> None:
        try:
            if not self._shut_down:
                seeds = [Seed(url, user_data={"seed": True}) for url in self.seed_urls]
                seeds += [found for url in self.seed_urls for found in self.rules.discovery(urls.origin(url))]
                await self.crawler.arun(seeds)
            await self._wind_up()
        finally:
            self._hand_off.close()
            self._finished = True

    async def _wind_up(self) -> None:
        """The crawl ended: pages still held for a canonical page are kept; in-flight URLs fail as shut down."""
        for url in self.rules.shut_down:
            await self._hand_on(Handed(CrawlError(url, ShutDown(url=url))))
        self.rules.shut_down.clear()
        self.keeper.keep_all_held()
        self.keeper.take_decided()  # no seed waits for these
        await self.keeper.flush()

    async def _hand_on(self, handed: Handed) -> None:
        """Hand an item to the reader; a reader that left stops the crawl."""
        if not await self._hand_off.send(handed):
            self.shutdown()

    def _dropped(self, url: str, key: str, reason: SkipReason) -> None:
        """The keeper dropped a fetched page (a near-duplicate, one with a kept canonical page): a skip
        of its seed, in the stats and the ledger (settled by the seed's report when it comes after)."""
        self.crawler.admission.left_out(Seed(url, unique_key=key), reason)

    def skip(self, reason: SkipReason, count: int = 1) -> None:
        self.crawler.stats.skip(reason, count)


def crawl(url: str | Sequence[str], **options: Unpack[SiteOptions]) -> SiteCrawl:
    """Crawl the site at ``url`` (or several) politely: ``async with crawl(url) as pages: async for item in pages``.

    - ``url``: one start URL or several; the scope is the union of theirs.
    - ``scope``: ``"host"`` (the seed's host and port), ``"domain"`` (and its subdomains under the
      registrable domain) or ``"prefix"`` (the seed's path directory on its host).
    - ``limit``: stop after this many kept pages; ``max_requests``: after this many requests sent
      (robots.txt, sitemaps and redirect hops count).
    - ``respect="ai-training"``: also skip sites and pages that refuse AI training.
    - ``ignore_robots``: never read robots.txt, and ignore each page's robots rules.
    - ``host_limits``: per-host politeness; by default ``polite_limits()``. 429 and 503 always pause a host.
    - ``agent``: the robots.txt product token whose groups (and meta tags) apply; ``"*"`` by default.
    - ``headers``: default request headers; ``Authorization`` and ``Cookie`` go to the seeds' origins only.
    - ``credentials``: more of those by origin, ``{"https://api.example": {"Authorization": "..."}}``.
    - ``block_rules``: what counts as a block page; ``BlockRules.builtin()`` by default.
    - ``frontier``: where the crawl keeps its queue and seen set (a ``SqliteFrontier`` resumes after a crash).
    - ``processes``: worker processes that fetch and read pages (``"auto"``: one a core); the
      scope, the keeper and the limits stay exact in this process.
    - ``recrawl``: crawl again what a finished crawl in ``frontier`` kept (``True``, or a ``Recrawl``
      policy): each page is requested with its validators, unchanged pages are not handed out again,
      ``changes()`` gives the change feed (``docs/recrawl.md``). Page states are kept in any
      ``frontier`` given, so that a later crawl of it can be a recrawl.
    - ``concurrency`` (16), ``user_agent``, ``backend``, ``timeouts``, ``robots_refresh_after``,
      ``robots_retry_delays`` and ``buffer`` (64 pages the crawl may get ahead of its reader; a page's
      seed is reported done once the reader has asked for the next item) as their names say. An
      unknown option is a ``ConfigError`` that lists them all.
    """
    return SiteCrawl(url, **options)


def _page_states(recrawl: bool | Recrawl, frontier: Frontier | None) -> Recrawl | bool:
    """The site crawl's ``recrawl=`` policy: as given; else page states kept (nothing revisited) in a
    frontier the caller passed that can keep them, so that a later crawl of it can be a recrawl. The
    crawl's own ``MemoryFrontier`` ends with it, so keeping them there would only cost (the main
    text's fingerprint of every page)."""
    if recrawl is not False:
        return recrawl
    if frontier is not None and isinstance(store_of(frontier), Recrawlable):
        return Recrawl(start=False)
    return False
