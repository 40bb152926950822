"""The polite whole-site crawl: ``spire.crawl(url)``, an async iterator of kept pages.

    async with spire.crawl("https://docs.example/", limit=500) as pages:
        async for page in pages:
            if isinstance(page, CrawlPage):
                print(page.url, page.meta("description"))
            else:                                   # a URL that failed: the crawl goes on
                print(page.url, page.category)
    print(pages.stats)

It runs on the ordinary engine (``Crawler``, a memory frontier with dedup and retries, ``HostLimits``)
with a worker of its own that applies, for each URL: scope and admission rules, robots.txt and AI-use
preferences, redirects as links, block pages, error statuses and content types, the page's own
robots directives, canonical links and near-duplicate text. Every skip is counted by reason in
``stats.skipped(reason)``; ``docs/site-crawl.md`` lists them.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import re
from collections.abc import AsyncIterator, Mapping
from types import TracebackType
from typing import Any, Literal

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from parsel import Selector

from spire_core import html
from spire_core import url as urls
from spire_core.backend.base import Backend
from spire_core.backend.http import DEFAULT_USER_AGENT, HttpBackend
from spire_core.blocks import BlockRules
from spire_core.context import Context
from spire_core.crawler import Crawler
from spire_core.errors import ConfigError, HttpStatusError, SpireError
from spire_core.frontier.memory import MemoryFrontier
from spire_core.limits import HostLimits
from spire_core.outcome import Done, Outcome, Stop
from spire_core.response import Headers, Response
from spire_core.robots import Purpose, Robots, RobotsCache
from spire_core.seed import Seed
from spire_core.sitemaps import SitemapReader, discover
from spire_core.sniff import sniffs_as_html
from spire_core.stats import CrawlStats

__all__ = ["CrawlError", "CrawlPage", "Scope", "SiteCrawl", "SkipReason", "crawl"]

Scope = Literal["host", "domain", "prefix"]
Respect = Literal["robots", "ai-training"]

MAX_URL_BYTES = 2048
MAX_DEPTH = 64
MAX_REDIRECTS = 5
MIN_WORDS_FOR_DUPLICATE = 20
_TRANSIENT = frozenset({408, 425, 429, 500, 502, 503, 504})
_WORD = re.compile(r"\w+")


class SkipReason(enum.StrEnum):
    """Why the site crawl left a URL or a page out. ``stats.skipped(reason)`` counts each."""

    SCHEME = "scheme"  #: not http or https
    SCOPE = "scope"  #: outside the crawl's scope (a redirect out of scope too)
    DUPLICATE = "duplicate"  #: queued before (canonical URL comparison)
    ROBOTS = "robots"  #: robots.txt disallows it
    ROBOTS_UNREACHABLE = "robots_unreachable"  #: the site's robots.txt could not be read after retries
    AI = "ai"  #: the site or page refuses AI training (with respect="ai-training")
    REDIRECTS = "redirects"  #: a redirect chain longer than five hops
    BLOCKED = "blocked"  #: a block page (challenge, captcha, block)
    STATUS = "status"  #: an error status
    CONTENT_TYPE = "content_type"  #: not HTML
    NOINDEX = "noindex"  #: the page asks not to be indexed
    NOFOLLOW = "nofollow"  #: a link marked rel="nofollow"
    CANONICAL = "canonical"  #: the page's canonical page was kept instead
    NEAR_DUPLICATE = "near_duplicate"  #: the same text, word for word, as a kept page


@dataclasses.dataclass(frozen=True, slots=True)
class CrawlPage:
    """A kept page: its URL after redirects, depth, status, HTML and readable text."""

    url: str
    depth: int
    status: int
    html: str
    text: str
    headers: Headers
    metas: Mapping[str, str]
    title: str | None

    def meta(self, name: str) -> str | None:
        """The content of ``<meta name=…>`` (or ``property=``), compared without case."""
        return self.metas.get(name.lower())

    def to_json(self) -> dict[str, Any]:
        """The JSON line ``spire crawl`` writes for this page."""
        return {
            "url": self.url,
            "depth": self.depth,
            "status": self.status,
            "title": self.title,
            "text": self.text,
            "meta": dict(self.metas),
        }


@dataclasses.dataclass(frozen=True, slots=True)
class CrawlError:
    """A URL that failed for good; the crawl goes on."""

    url: str
    error: BaseException

    @property
    def category(self) -> str:
        return self.error.category if isinstance(self.error, SpireError) else "error"


@dataclasses.dataclass(slots=True)
class _Held:
    """A page waiting for its canonical page to be kept or given up."""

    page: CrawlPage
    canonical_key: str


class _Scope:
    """Which URLs belong to the crawl: the seed's host (and port), its registrable domain, or a path prefix."""

    def __init__(self, seed_url: str, kind: Scope) -> None:
        self.kind = kind
        self._hosts: set[str] = set()
        self._domains: set[str] = set()
        self._prefixes: list[str] = []
        self.add(seed_url)

    @staticmethod
    def _site(url: str) -> str:
        """host:port, where http and https on their default ports count as one host."""
        origin = urls.origin(url)
        return origin.partition("//")[2]

    def add(self, url: str) -> None:
        """Widen the scope to ``url``'s host (a seed redirected to another host of the same site)."""
        self._hosts.add(self._site(url))
        self._domains.add(urls.registrable_domain(urls.host_of(url)))
        if self.kind == "prefix":
            canonical = urls.canonicalize(url)
            path_start = canonical.index("/", canonical.index("//") + 2)
            prefix = canonical[: canonical.rindex("/") + 1] if "/" in canonical[path_start:] else canonical
            self._prefixes.append(prefix.partition("//")[2])

    def same_site(self, url: str) -> bool:
        """Whether ``url`` is on a host of this site (its registrable domain)."""
        return urls.registrable_domain(urls.host_of(url)) in self._domains

    def __contains__(self, url: str) -> bool:
        if self.kind == "domain":
            return self.same_site(url)
        if self._site(url) not in self._hosts:
            return False
        if self.kind == "prefix":
            rest = urls.canonicalize(url).partition("//")[2]
            return any(rest.startswith(prefix) for prefix in self._prefixes)
        return True


def _words_digest(text: str) -> bytes | None:
    words = _WORD.findall(text.lower())
    if len(words) < MIN_WORDS_FOR_DUPLICATE:
        return None
    return hashlib.blake2b(" ".join(words).encode(), digest_size=16).digest()


class SiteCrawl:
    """A running (or ready to run) polite crawl of one site; iterate it for pages, read ``stats`` after."""

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
        robots_retry_delays: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0),
        buffer: int = 64,
    ) -> None:
        urls.check(url)
        if scope not in ("host", "domain", "prefix"):
            raise ConfigError(f"scope is host, domain or prefix, not {scope!r}")
        if respect not in ("robots", "ai-training"):
            raise ConfigError(f"respect is robots or ai-training, not {respect!r}")
        if limit is not None and limit < 1:
            raise ConfigError(f"limit must be at least 1, not {limit}")
        self.seed_url = url
        self.limit = limit
        self.respect = respect
        self.ignore_robots = ignore_robots
        self.agent = agent
        self.scope = _Scope(url, scope)
        self._seed_origin = urls.origin(url)
        self._credentials = {
            name: value for name, value in (headers or {}).items() if name.lower() in ("authorization", "cookie")
        }
        other_headers = {
            name: value for name, value in (headers or {}).items() if name.lower() not in ("authorization", "cookie")
        }
        self.backend = backend if backend is not None else HttpBackend(user_agent=user_agent, headers=other_headers)
        self.blocks = block_rules if block_rules is not None else BlockRules.builtin()
        self.robots = RobotsCache(self.backend, agent=agent, retry_delays=robots_retry_delays)
        limits = host_limits if host_limits is not None else polite_limits()
        self.crawler = Crawler(
            _SiteWorker(self),
            concurrency=concurrency,
            host_limits=limits,
            frontier=MemoryFrontier().dedup().retry(3),
            backend=self.backend,
            follow_redirects=False,
            raise_for_status=False,
        )
        self.crawler.counts_pages = False
        self._sites_started: set[str] = set()
        self._sites_lock: dict[str, anyio.Lock] = {}
        self._kept_digests: set[bytes] = set()
        self._kept_keys: set[str] = set()
        self._given_up: set[str] = set()
        self._held: dict[str, list[_Held]] = {}
        self._queued_from_sitemaps = 0
        self._buffer = buffer
        self._send: MemoryObjectSendStream[CrawlPage | CrawlError] | None = None
        self._receive: MemoryObjectReceiveStream[CrawlPage | CrawlError] | None = None
        self._tg: anyio.abc.TaskGroup | None = None

    # -- public face ------------------------------------------------------------------------------

    @property
    def stats(self) -> CrawlStats:
        """The crawl's counters: ``pages`` counts kept pages; ``skipped(reason)`` each skip."""
        return self.crawler.stats

    def shutdown(self) -> None:
        """Stop the crawl: requests in flight fail as shut down, nothing new starts."""
        self.crawler.shutdown()

    async def __aenter__(self) -> SiteCrawl:
        self._send, self._receive = anyio.create_memory_object_stream[CrawlPage | CrawlError](self._buffer)
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._run)
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        if self._tg is None:
            return None
        if kind is not None or (self._receive is not None and not self._finished):
            self.crawler.shutdown()
        if self._receive is not None:
            await self._receive.aclose()
        tg, self._tg = self._tg, None
        return await tg.__aexit__(kind, error, tb)

    _finished = False

    async def _run(self) -> None:
        assert self._send is not None
        async with self._send:
            try:
                await self.crawler.arun([Seed(self.seed_url, headers=self._credentials or None)])
            finally:
                with anyio.CancelScope(shield=True):
                    for held in [held for pages in self._held.values() for held in pages]:
                        await self._keep(held.page)
                    self._held.clear()
                    self._finished = True

    def __aiter__(self) -> AsyncIterator[CrawlPage | CrawlError]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[CrawlPage | CrawlError]:
        if self._tg is None:
            async with self:
                async for item in self._iterate():
                    yield item
            return
        assert self._receive is not None
        async for item in self._receive:
            yield item

    # -- the per-URL rules ------------------------------------------------------------------------

    def skip(self, reason: SkipReason, count: int = 1) -> None:
        self.crawler.stats.skip(reason.value, count)

    def admit(self, candidate: str, parent: Seed, *, redirects: int = 0, anywhere: bool = False) -> Seed | None:
        """A child seed for ``candidate`` when it passes the URL rules, else ``None`` (counted when it should be)."""
        if len(candidate.encode()) > MAX_URL_BYTES or parent.depth + 1 > MAX_DEPTH:
            return None  # dropped without a count, as the policy says
        if not candidate.startswith(("http://", "https://")):
            self.skip(SkipReason.SCHEME)
            return None
        if not anywhere and candidate not in self.scope:
            self.skip(SkipReason.SCOPE)
            return None
        user_data: dict[str, Any] = {"redirects": redirects} if redirects else {}
        if anywhere:
            user_data["only_page"] = True
        credentials = self._credentials if urls.origin(candidate) == self._seed_origin else None
        try:
            return parent.child(
                candidate,
                depth=parent.depth if redirects else parent.depth + 1,
                user_data=user_data or None,
                headers=credentials or None,
            )
        except SpireError:
            self.skip(SkipReason.SCHEME)
            return None

    async def robots_for(self, seed: Seed) -> Robots | None:
        """The site's robots rules, read before any of its pages; ``None`` when it is unreachable."""
        rules = await self.robots.get(seed.url)
        return rules if rules.reachable else None

    async def start_site(self, ctx: Context, robots: Robots | None) -> None:
        """Once per origin, before its first page: apply Crawl-delay and queue its sitemaps' URLs."""
        origin = ctx.seed.origin
        if origin in self._sites_started:
            return
        self._sites_started.add(origin)
        if robots is not None and not self.ignore_robots:
            delay = robots.crawl_delay()
            if delay:
                self.crawler.gate.space(origin, delay)
        listed = robots.sitemaps() if robots is not None and not self.ignore_robots else []
        sitemap_urls = discover(ctx.seed.url, listed, keep=self.scope.same_site)
        budget = None if self.limit is None else max(0, self.limit - self._queued_from_sitemaps)
        reader = SitemapReader(self.backend, allows=None if self.ignore_robots else self._sitemap_allowed)
        admitted: list[Seed] = []
        async for found in reader.read(sitemap_urls, budget=budget):
            child = self.admit(found, ctx.seed)
            if child is not None:
                admitted.append(child)
        self.crawler.stats.requests += reader.stats.files
        self._queued_from_sitemaps += len(admitted)
        ctx.enqueue(admitted)

    async def _sitemap_allowed(self, sitemap: str) -> bool:
        """A sitemap is opened only when its own site's robots.txt allows it."""
        rules = await self.robots.get(sitemap)
        return rules.reachable and rules.allows(sitemap)

    async def keep_or_hold(self, page: CrawlPage, canonical: str | None) -> Outcome | None:
        """Keep ``page`` unless its text repeats a kept page, or it waits for its canonical page."""
        key = urls.canonicalize(page.url)
        if canonical is not None and canonical != key and canonical not in self._given_up:
            if canonical in self._kept_keys:
                self.skip(SkipReason.CANONICAL)
                return None
            self._held.setdefault(canonical, []).append(_Held(page, canonical))
            if self._room_left() <= 0:
                return await self._flush_held_for_limit()
            return None
        return await self._keep(page)

    def _room_left(self) -> int:
        if self.limit is None:
            return 1 << 62
        held = sum(len(pages) for pages in self._held.values())
        return self.limit - self.crawler.stats.pages - held

    async def _flush_held_for_limit(self) -> Outcome | None:
        """The limit leaves no room to fetch canonical pages: keep the held pages instead."""
        outcome: Outcome | None = None
        for pages in list(self._held.values()):
            for held in pages:
                outcome = await self._keep(held.page) or outcome
        self._held.clear()
        return outcome

    async def _keep(self, page: CrawlPage) -> Outcome | None:
        digest = _words_digest(page.text)
        if digest is not None:
            if digest in self._kept_digests:
                self.skip(SkipReason.NEAR_DUPLICATE)
                return None
            self._kept_digests.add(digest)
        if self.limit is not None and self.crawler.stats.pages >= self.limit:
            return Stop()
        key = urls.canonicalize(page.url)
        self._kept_keys.add(key)
        self.crawler.stats.pages += 1
        assert self._send is not None
        await self._send.send(page)
        for held in self._held.pop(key, ()):
            self.skip(SkipReason.CANONICAL)
            del held
        if self.limit is not None and self.crawler.stats.pages >= self.limit:
            return Stop()
        return None

    async def give_up(self, url: str) -> None:
        """``url`` was skipped or failed: pages holding for it as their canonical page are kept."""
        key = urls.canonicalize(url)
        self._given_up.add(key)
        for held in self._held.pop(key, ()):
            await self._keep(held.page)

    async def failed(self, url: str, error: BaseException) -> None:
        assert self._send is not None
        await self._send.send(CrawlError(url, error))
        await self.give_up(url)


def polite_limits() -> HostLimits:
    """The site crawl's defaults: one request at a time per host, one a second, 16 overall, pause on 429/503."""
    return HostLimits(max_in_flight=1, per_second=1.0, max_total_in_flight=16, pause_on=frozenset({429, 503}))


class _SiteWorker:
    """Applies the site crawl's rules to each seed, on the engine's worker contract."""

    def __init__(self, crawl: SiteCrawl) -> None:
        self.crawl = crawl

    async def handle(self, ctx: Context) -> Outcome | None:
        crawl = self.crawl
        seed = ctx.seed
        robots: Robots | None = None
        if not crawl.ignore_robots:
            robots = await crawl.robots_for(seed)
            if robots is None:
                crawl.skip(SkipReason.ROBOTS_UNREACHABLE)
                await crawl.give_up(seed.url)
                return None
            if not robots.allows(seed.url):
                crawl.skip(SkipReason.ROBOTS)
                await crawl.give_up(seed.url)
                return None
            if crawl.respect == "ai-training" and not robots.allows_use(seed.url, Purpose.AI_TRAIN):
                crawl.skip(SkipReason.AI)
                await crawl.give_up(seed.url)
                return None
        await crawl.start_site(ctx, robots)
        response = await ctx.response()
        if response.status in _TRANSIENT:
            raise HttpStatusError(response.status, url=response.url)
        if response.is_redirect:
            return await self._redirect(ctx, response)
        reason = self._unkeepable(response)
        if reason is not None:
            crawl.skip(reason)
            await crawl.give_up(seed.url)
            return None
        document = html.selector(response.body, response.encoding, response.url)
        directives = html.Directives.read(document, response.headers, crawl.agent)
        only_page = bool(seed.user_data and seed.user_data.get("only_page"))
        if not only_page and (crawl.ignore_robots or directives.follow):
            self._queue_links(ctx, document, response.url)
        if not crawl.ignore_robots and not directives.index:
            crawl.skip(SkipReason.NOINDEX)
            await crawl.give_up(seed.url)
            return None
        if crawl.respect == "ai-training" and not directives.ai:
            crawl.skip(SkipReason.AI)
            await crawl.give_up(seed.url)
            return None
        page = CrawlPage(
            url=response.url,
            depth=seed.depth,
            status=response.status,
            html=response.text,
            text=html.text(document),
            headers=response.headers,
            metas=html.metas(document),
            title=html.title(document),
        )
        canonical = self._canonical(document, response.url)
        return await crawl.keep_or_hold(page, canonical)

    def _unkeepable(self, response: Response) -> SkipReason | None:
        if self.crawl.blocks.check(response) is not None:
            return SkipReason.BLOCKED
        if response.status >= 400:
            return SkipReason.STATUS
        content_type = response.content_type
        if content_type is None:
            return None if sniffs_as_html(response.body) else SkipReason.CONTENT_TYPE
        if content_type not in ("text/html", "application/xhtml+xml"):
            return SkipReason.CONTENT_TYPE
        return None

    async def _redirect(self, ctx: Context, response: Response) -> Outcome | None:
        crawl = self.crawl
        seed = ctx.seed
        hops = int((seed.user_data or {}).get("redirects", 0)) + 1
        target = urls.join(response.url, response.headers.get("location", ""))
        if hops > MAX_REDIRECTS:
            crawl.skip(SkipReason.REDIRECTS)
            await crawl.give_up(seed.url)
            return None
        if target is None:
            crawl.skip(SkipReason.SCHEME)
            return None
        anywhere = False
        if seed.depth == 0 and target not in crawl.scope:
            if crawl.scope.same_site(target):
                crawl.scope.add(target)  # a seed redirected to another host of the same site
            else:
                anywhere = True  # a seed redirected to another site yields only that page
        child = crawl.admit(target, seed, redirects=hops, anywhere=anywhere)
        if child is not None:
            ctx.enqueue([child])
        return Done()

    def _queue_links(self, ctx: Context, document: Selector, page_url: str) -> None:
        crawl = self.crawl
        base = document.css("base::attr(href)").get()
        base_url = urls.join(page_url, base) if base else page_url
        children: list[Seed] = []
        seen: set[str] = set()
        for anchor in document.css("a[href], area[href]"):
            rel = (anchor.attrib.get("rel") or "").lower().split()
            if "nofollow" in rel and not crawl.ignore_robots:
                crawl.skip(SkipReason.NOFOLLOW)
                continue
            joined = urls.join(base_url or page_url, anchor.attrib["href"])
            if joined is None or joined in seen:
                continue
            seen.add(joined)
            child = crawl.admit(joined, ctx.seed)
            if child is not None:
                children.append(child)
        ctx.enqueue(children)

    def _canonical(self, document: Selector, page_url: str) -> str | None:
        href = html.canonical(document)
        if not href:
            return None
        joined = urls.join(page_url, href)
        if joined is None or joined not in self.crawl.scope:
            return None
        try:
            return urls.canonicalize(joined)
        except SpireError:
            return None

    async def handle_failed(self, ctx: Context, error: BaseException) -> None:
        await self.crawl.failed(ctx.seed.url, error)


def crawl(
    url: str,
    *,
    scope: Scope = "host",
    limit: int | None = None,
    respect: Respect = "robots",
    ignore_robots: bool = False,
    host_limits: HostLimits | None = None,
    agent: str = "*",
    **options: Any,
) -> SiteCrawl:
    """Crawl the site at ``url`` politely; iterate the result for ``CrawlPage`` and ``CrawlError`` values."""
    return SiteCrawl(
        url,
        scope=scope,
        limit=limit,
        respect=respect,
        ignore_robots=ignore_robots,
        host_limits=host_limits,
        agent=agent,
        **options,
    )
