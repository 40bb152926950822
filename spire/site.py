"""The polite whole-site crawl: ``spire.crawl(url)``, an async iterator of kept pages.

    async with spire.crawl("https://docs.example/", limit=500) as pages:
        async for page in pages:
            if isinstance(page, CrawlPage):
                print(page.url, page.meta("description"))
            else:                                   # a URL that failed: the crawl goes on
                print(page.url, page.category)
    print(pages.stats)

It runs on the ordinary engine (``Crawler``, a memory frontier, ``HostLimits``) with a worker of its
own. Every request the crawl makes is a seed of that engine, so robots.txt files and sitemaps wait
for the same host limits as pages and count in ``stats.requests``. Three kinds of seed:

- robots: ``/robots.txt`` of one origin. The pages and sitemaps of an origin wait outside the
  frontier until its robots.txt has been read (or forever ignored, with ``ignore_robots``).
- sitemap: one sitemap file; its ``<loc>`` URLs pass the same checks as links.
- page: a URL to fetch and maybe keep, after scope and admission rules, robots.txt and AI-use
  preferences, redirects as links, block pages, error statuses and content types, the page's own
  robots directives, canonical links and near-duplicate text.

Every skip is counted by reason in ``stats.skipped(reason)``; ``docs/site-crawl.md`` lists them.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
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
from spire_core.errors import TRANSIENT_STATUSES, ConfigError, HttpStatusError, ShutDown, SpireError
from spire_core.frontier.memory import MemoryFrontier
from spire_core.limits import HostLimits, parse_retry_after
from spire_core.outcome import Fail, Outcome, Retry, Stop, seconds
from spire_core.response import Headers, Response
from spire_core.robots import Purpose, Robots
from spire_core.seed import Seed
from spire_core.sitemaps import MAX_SITEMAP_FILES, Sitemap, discover, parse_sitemap
from spire_core.sniff import sniffs_as_html
from spire_core.stats import CrawlStats

__all__ = ["CrawlError", "CrawlPage", "Respect", "Scope", "SiteCrawl", "SkipReason", "crawl", "polite_limits"]

Scope = Literal["host", "domain", "prefix"]
Respect = Literal["robots", "ai-training"]

#: A longer URL is dropped without a count.
MAX_URL_BYTES = 2048
#: A URL more links than this from the seed is dropped without a count.
MAX_DEPTH = 64
#: A longer redirect chain is skipped (``SkipReason.REDIRECTS``).
MAX_REDIRECTS = 5
#: robots.txt redirects followed before the file counts as missing (everything allowed).
MAX_ROBOTS_REDIRECTS = 5
#: Tries of a page or a sitemap that fails in a way worth retrying (a transient error, 429, 5xx).
PAGE_ATTEMPTS = 3
#: A page with fewer words is never dropped as a near-duplicate.
MIN_WORDS_FOR_DUPLICATE = 20
#: How long robots.txt rules are trusted before the file is read again.
ROBOTS_REFRESH_AFTER = timedelta(hours=24)
#: Waits before each new try of a robots.txt that answers 5xx or 429 or cannot be reached.
ROBOTS_RETRY_DELAYS = (1.0, 2.0, 4.0, 8.0)

_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_PAUSE_ON = frozenset({429, 503})
_CREDENTIALS = frozenset({"authorization", "cookie"})
_ROBOTS = "spire:robots"  # seed tags of the crawl's own requests; pages have none
_SITEMAP = "spire:sitemap"
_THREAD_ABOVE = 1024 * 1024  # sitemaps this large are parsed off the event loop


class SkipReason(enum.StrEnum):
    """Why the site crawl left a URL or a page out. ``stats.skipped(reason)`` counts each."""

    SCHEME = "scheme"  #: not an http or https URL
    SCOPE = "scope"  #: outside the crawl's scope (a redirect out of scope too)
    DUPLICATE = "duplicate"  #: queued before (canonical URL comparison)
    ROBOTS = "robots"  #: robots.txt disallows it
    ROBOTS_UNREACHABLE = "robots_unreachable"  #: its site's robots.txt could not be read after retries
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
        return self.metas.get(name.strip().lower())

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
    """A URL that failed for good (or was in flight at shutdown); the crawl goes on."""

    url: str
    error: BaseException

    @property
    def category(self) -> str:
        """The error's category (``"timeout"``, ``"status"``, ``"shut_down"``…); ``"error"`` for others."""
        return self.error.category if isinstance(self.error, SpireError) else "error"


def polite_limits() -> HostLimits:
    """The site crawl's defaults: one request at a time per host, one a second, 16 overall, pause on 429/503."""
    return HostLimits(max_in_flight=1, per_second=1.0, max_total_in_flight=16, pause_on=_PAUSE_ON)


# -- scope -----------------------------------------------------------------------------------------


def _authority(url: str) -> str:
    """host[:port] of ``url``: http and https on their default ports give the same authority."""
    return urls.origin(url).partition("//")[2]


def _site_key(url: str) -> tuple[str, str]:
    """(registrable domain, port): a site is a registrable domain on one port."""
    host = urls.host_of(url)
    authority = _authority(url)
    port = authority[len(host) :] if authority.startswith(host) else ""
    return urls.registrable_domain(host), port


def _path_prefix(url: str) -> str:
    """host[:port] and the directory of ``url``'s path: what scope ``prefix`` keeps."""
    canonical = urls.canonicalize(url).partition("?")[0]
    rest = canonical.partition("//")[2]
    return rest[: rest.rindex("/") + 1]


class _Scope:
    """Which URLs belong to the crawl: the seed's host and port, its registrable domain, or a path prefix."""

    def __init__(self, seed_url: str, kind: Scope) -> None:
        self.kind = kind
        self._authorities: set[str] = set()
        self._sites: set[tuple[str, str]] = set()
        self._prefixes: list[str] = []
        self.add(seed_url)

    def add(self, url: str) -> None:
        """Widen the scope by ``url``'s host (a seed redirected to another host of the same site)."""
        self._authorities.add(_authority(url))
        self._sites.add(_site_key(url))
        if self.kind == "prefix":
            self._prefixes.append(_path_prefix(url))

    def same_site(self, url: str) -> bool:
        """Whether ``url`` is on this site: the same registrable domain, on the same port."""
        try:
            return _site_key(url) in self._sites
        except SpireError:
            return False

    def covers_host(self, url: str) -> bool:
        """Whether some URLs of ``url``'s host are in scope (its sitemaps are worth reading)."""
        if self.kind == "domain":
            return self.same_site(url)
        try:
            return _authority(url) in self._authorities
        except SpireError:
            return False

    def __contains__(self, url: str) -> bool:
        if not self.covers_host(url):
            return False
        if self.kind == "prefix":
            rest = urls.canonicalize(url).partition("//")[2]
            return any(rest.startswith(prefix) for prefix in self._prefixes)
        return True


# -- per-origin robots state -------------------------------------------------------------------------


@dataclasses.dataclass(slots=True)
class _Origin:
    """One origin's robots.txt rules, and the seeds that wait for them."""

    robots: Robots | None = None  # None until robots.txt has been read
    read_at: float = 0.0
    reading: bool = False  # a robots seed is queued or in flight
    generation: int = 0  # bumped on each (re-)read, so its seeds have fresh unique keys
    waiting: list[Seed] = dataclasses.field(default_factory=list)
    started: bool = False  # its sitemaps were queued


def _words_digest(text: str) -> bytes | None:
    """A digest of the text's words, for a page long enough to be compared; else ``None``."""
    words = text.split()
    if len(words) < MIN_WORDS_FOR_DUPLICATE:
        return None
    return hashlib.blake2b("\n".join(words).encode(), digest_size=16).digest()


def _refuses_ai_training(headers: Headers, url: str) -> bool:
    """Whether a ``Content-Usage`` response header refuses AI training (read as a robots.txt line is)."""
    for value in headers.get_list("content-usage"):
        rules = Robots.parse(f"User-agent: *\nContent-Usage: {value}")
        if not rules.allows_use(url, Purpose.AI_TRAIN):
            return True
    return False


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
        self.backend = backend if backend is not None else HttpBackend(user_agent=user_agent, headers=others)
        self.blocks = block_rules if block_rules is not None else BlockRules.builtin()
        self._robots_refresh_after = seconds(robots_refresh_after) or 0.0
        self._robots_retry_delays = tuple(seconds(delay) or 0.0 for delay in robots_retry_delays)
        limits = host_limits if host_limits is not None else polite_limits()
        # 429 and 503 always pause the host: the crawl's own politeness, whatever the limits say.
        limits = dataclasses.replace(limits, pause_on=limits.pause_on | _PAUSE_ON)
        attempts = max(PAGE_ATTEMPTS, len(self._robots_retry_delays) + 1)
        self.crawler = Crawler(
            _SiteWorker(self),
            concurrency=concurrency,
            host_limits=limits,
            frontier=MemoryFrontier().dedup().retry(attempts),
            backend=self.backend,
            follow_redirects=False,
            raise_for_status=False,
        )
        self.crawler.counts_pages = False
        self._origins: dict[str, _Origin] = {}
        self._queued: set[str] = set()  # canonical URLs of pages admitted
        self._sitemaps_queued: set[str] = set()
        self._sitemap_files = 0
        self._kept_digests: set[bytes] = set()
        self._kept: set[str] = set()  # canonical URLs of kept pages, and of pages dropped for them
        self._given_up: set[str] = set()  # canonical URLs skipped or failed
        self._held: dict[str, list[CrawlPage]] = {}  # canonical page key -> pages waiting for it
        self._holding: dict[str, str] = {}  # held page key -> the canonical key it waits for
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
        waiting = sum(len(origin.waiting) for origin in self._origins.values())
        return await self.crawler.frontier.pending() + waiting

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
                    await self.crawler.arun(self.route([seed]))
                await self._wind_up()
        finally:
            self._finished = True

    async def _wind_up(self) -> None:
        """The crawl ended: pages still held for a canonical page are kept; in-flight URLs fail as shut down."""
        for url in self._in_flight_at_shutdown:
            await self.emit(CrawlError(url, ShutDown(url=url)))
        self._in_flight_at_shutdown.clear()
        await self._keep_all_held()

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

    def route(self, seeds: Iterable[Seed]) -> list[Seed]:
        """The seeds to queue now; the rest wait for their origin's robots.txt, whose read is queued."""
        ready: list[Seed] = []
        for seed in seeds:
            origin = self._origin(seed.origin)
            if self.ignore_robots:
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
            headers=self.credentials_for(target),
            unique_key=f"robots {origin} {generation} {hops}",
        )

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

    def _start_site(self, origin_url: str, origin: _Origin, robots: Robots | None) -> list[Seed]:
        """Once per origin in scope: the sitemaps its robots.txt lists on this site, else /sitemap.xml."""
        if origin.started or not self._scope.covers_host(origin_url + "/"):
            return []
        origin.started = True
        listed = robots.sitemaps() if robots is not None else []
        found = discover(origin_url + "/", listed, keep=self._scope.same_site)
        seeds = [seed for url in found if (seed := self.sitemap_seed(url)) is not None]
        return seeds if self.ignore_robots else self.route(seeds)

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
            gate = self.crawler.gate
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
        if self.ignore_robots:
            return None
        origin = self._origin(seed.origin)
        rules = origin.robots
        if rules is None:
            return SkipReason.ROBOTS_UNREACHABLE  # not reached: seeds wait in route() until the rules are read
        if not origin.reading and time.monotonic() - origin.read_at >= self._robots_refresh_after:
            # Seeds in flight finish under the old rules; the re-read goes ahead of the origin's queue.
            # Pushed now, not staged: the re-read must happen whatever becomes of this seed.
            origin.reading = True
            origin.generation += 1
            await self.crawler.push([self.robots_seed(seed.origin, origin.generation)], forefront=True)
        if not rules.reachable:
            return SkipReason.ROBOTS_UNREACHABLE
        if not rules.allows(seed.url):
            return SkipReason.ROBOTS
        if page and self.respect == "ai-training" and not rules.allows_use(seed.url, Purpose.AI_TRAIN):
            return SkipReason.AI
        return None

    def robots_retry_delay(self, attempt: int) -> float | None:
        """The wait before robots.txt try ``attempt + 1``; ``None`` when the tries are used up."""
        delays = self._robots_retry_delays
        return delays[attempt] if attempt < len(delays) else None

    def robots_generation(self, origin_url: str) -> int:
        return self._origin(origin_url).generation

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

    # -- keeping, holding for a canonical page, and limits ----------------------------------------

    async def keep_or_hold(self, page: CrawlPage, canonical: str | None) -> Outcome | None:
        """Keep ``page``, drop it for its kept canonical page, or hold it until that page is settled."""
        key = urls.canonicalize(page.url)
        if canonical is None or canonical == key or canonical in self._given_up:
            return await self._keep(page)
        if canonical in self._kept:
            self._drop_for_canonical(key)
            return None
        # A canonical page that waits (directly or not) for this one: a cycle, broken by keeping this one.
        waits_for = canonical
        while waits_for in self._holding:
            waits_for = self._holding[waits_for]
            if waits_for == key:
                return await self._keep(page)
        self._held.setdefault(canonical, []).append(page)
        self._holding[key] = canonical
        return await self._settle_limit()

    async def _settle_limit(self) -> Outcome | None:
        """Held pages count toward the limit: once kept and held pages fill it, no canonical page can
        be fetched any more, so the held pages are kept (and the crawl stops)."""
        if self.limit is None:
            return None
        if self._holding and self.limit - self.crawler.stats.pages - len(self._holding) <= 0:
            await self._keep_all_held()
        return Stop() if self.crawler.stats.pages >= self.limit else None

    async def _keep_all_held(self) -> None:
        while self._held:
            _, pages = self._held.popitem()
            for page in pages:
                await self._keep(page, settle=False)

    async def _keep(self, page: CrawlPage, *, settle: bool = True) -> Outcome | None:
        key = urls.canonicalize(page.url)
        self._holding.pop(key, None)
        if self.limit is not None and self.crawler.stats.pages >= self.limit:
            return Stop()
        digest = _words_digest(page.text)
        if digest is not None and digest in self._kept_digests:
            self.skip(SkipReason.NEAR_DUPLICATE)
            return await self.give_up(page.url)
        if digest is not None:
            self._kept_digests.add(digest)
        self._kept.add(key)
        self.crawler.stats.pages += 1
        await self.emit(page)
        for held in self._held.pop(key, ()):
            self._drop_for_canonical(urls.canonicalize(held.url))
        return await self._settle_limit() if settle else None

    def _drop_for_canonical(self, key: str) -> None:
        """A page is dropped for its kept canonical page: pages waiting for it are dropped too."""
        self.skip(SkipReason.CANONICAL)
        self._holding.pop(key, None)
        self._kept.add(key)
        for held in self._held.pop(key, ()):
            self._drop_for_canonical(urls.canonicalize(held.url))

    async def give_up(self, url: str) -> Outcome | None:
        """``url`` was skipped or failed: pages held for it as their canonical page are kept."""
        try:
            key = urls.canonicalize(url)
        except SpireError:
            return None
        self._given_up.add(key)
        outcome: Outcome | None = None
        for held in self._held.pop(key, ()):
            outcome = await self._keep(held) or outcome
        return outcome

    async def redirected(self, url: str, target: str | None) -> Outcome | None:
        """``url`` redirected to ``target`` (queued, or queued before): pages held for it wait for the target."""
        try:
            key = urls.canonicalize(url)
            target_key = urls.canonicalize(target) if target is not None else None
        except SpireError:
            target_key = None
        if target_key is None or not self.was_queued(target or ""):
            return await self.give_up(url)
        pages = self._held.pop(key, [])
        outcome: Outcome | None = None
        for page in pages:
            outcome = await self.keep_or_hold(page, target_key) or outcome
        return outcome

    async def failed(self, url: str, error: BaseException) -> None:
        await self.emit(CrawlError(url, error))
        await self.give_up(url)


class _SiteWorker:
    """Applies the site crawl's rules to each seed, on the engine's worker contract."""

    def __init__(self, crawl: SiteCrawl) -> None:
        self.crawl = crawl

    async def handle(self, ctx: Context) -> Outcome | None:
        try:
            if ctx.seed.tag == _ROBOTS:
                return await self._robots(ctx)
            if ctx.seed.tag == _SITEMAP:
                return await self._sitemap(ctx)
            return await self._page(ctx)
        except anyio.get_cancelled_exc_class():
            if ctx.seed.tag is None:
                self.crawl.note_shut_down(ctx.seed.url)
            raise

    async def handle_failed(self, ctx: Context, error: BaseException) -> None:
        if ctx.seed.tag == _ROBOTS:
            # Not reached through the usual path (robots tries end in Done); never leave pages waiting.
            origin = str((ctx.seed.user_data or {}).get("robots_for", ctx.seed.origin))
            await self.crawl.crawler.push(self.crawl.robots_read(origin, Robots.unreachable(self.crawl.agent)))
        else:
            await self.crawl.failed(ctx.seed.url, error)

    # -- shared -----------------------------------------------------------------------------------

    @staticmethod
    def _retry_or_fail(seed: Seed, error: SpireError, after: float | None = None) -> Outcome:
        """Try a page or a sitemap again (up to three tries) when the error is worth it; else fail it."""
        if error.transient and seed.attempt + 1 < PAGE_ATTEMPTS:
            return Retry(after=after, error=error)
        return Fail(error)

    async def _fetch(self, ctx: Context) -> Response | Outcome:
        """The response, or the outcome of a fetch that failed."""
        try:
            return await ctx.response()
        except SpireError as exc:
            return self._retry_or_fail(ctx.seed, exc)

    @staticmethod
    def _transient_status(response: Response) -> HttpStatusError:
        retry_after = parse_retry_after(response.headers.get("retry-after"))
        return HttpStatusError(response.status, url=response.url, retry_after=retry_after)

    # -- robots.txt -------------------------------------------------------------------------------

    async def _robots(self, ctx: Context) -> Outcome | None:
        crawl, seed = self.crawl, ctx.seed
        data = seed.user_data or {}
        origin = str(data["robots_for"])
        hops = int(data.get("hops", 0))
        try:
            response: Response | None = await ctx.response()
        except SpireError:
            response = None  # no connection: tried again, like a 5xx
        if response is not None and 200 <= response.status < 300:
            rules = Robots.parse(response.body, crawl.agent)
        elif response is None or response.status >= 500 or response.status == 429:
            delay = crawl.robots_retry_delay(seed.attempt)
            if delay is not None:
                return Retry(after=delay)
            rules = Robots.unreachable(crawl.agent)
        elif response.is_redirect:
            target = urls.join(response.url, response.headers["location"])
            if target is not None and target.startswith(("http://", "https://")) and hops < MAX_ROBOTS_REDIRECTS:
                hop = crawl.robots_seed(origin, crawl.robots_generation(origin), target, hops + 1)
                ctx.enqueue([hop], forefront=True)
                return None
            rules = Robots.allow_all(crawl.agent)  # too many redirects, or to nowhere: no robots.txt
        else:
            rules = Robots.allow_all(crawl.agent)  # 4xx: no robots.txt, everything allowed
        ctx.enqueue(crawl.robots_read(origin, rules))
        return None

    # -- sitemaps ---------------------------------------------------------------------------------

    async def _sitemap(self, ctx: Context) -> Outcome | None:
        crawl, seed = self.crawl, ctx.seed
        if seed.attempt == 0:
            if crawl.sitemap_budget_spent():
                return None
            if not crawl.ignore_robots:
                reason = await crawl.robots_reason(seed, page=False)
                if reason is not None:
                    crawl.skip(reason)
                    return None
            crawl.opened_sitemap()
        fetched = await self._fetch(ctx)
        if not isinstance(fetched, Response):
            return fetched
        response = fetched
        if response.status in (404, 410):
            return None  # a missing sitemap is not an error
        if response.status in TRANSIENT_STATUSES:
            error = self._transient_status(response)
            return self._retry_or_fail(seed, error, error.retry_after)
        if response.is_redirect:
            hops = int((seed.user_data or {}).get("hops", 0)) + 1
            target = urls.join(response.url, response.headers["location"])
            if target is None or hops > MAX_REDIRECTS or not crawl.same_site(target):
                return None
            moved = crawl.sitemap_seed(target, seed, hops)
            if moved is not None:
                ctx.enqueue(crawl.route([moved]))
            return None
        if not 200 <= response.status < 300:
            return Fail(HttpStatusError(response.status, url=response.url))
        sitemap = await _parse(response.body)
        children = [
            child
            for url in sitemap.sitemaps
            if _same_authority(url, response.url) and (child := crawl.sitemap_seed(url, seed)) is not None
        ]
        pages = [page for url in sitemap.urls if (page := crawl.admit(url, seed)) is not None]
        ctx.enqueue(crawl.route([*children, *pages]))
        return None

    # -- pages ------------------------------------------------------------------------------------

    async def _page(self, ctx: Context) -> Outcome | None:
        crawl, seed = self.crawl, ctx.seed
        reason = await crawl.robots_reason(seed)
        if reason is not None:
            crawl.skip(reason)
            return await crawl.give_up(seed.url)
        fetched = await self._fetch(ctx)
        if not isinstance(fetched, Response):
            return fetched
        response = fetched
        if crawl.blocks.check(response) is not None:
            crawl.skip(SkipReason.BLOCKED)
            return await crawl.give_up(seed.url)
        if response.is_redirect:
            return await self._redirect(ctx, response)
        if response.status in TRANSIENT_STATUSES:
            error = self._transient_status(response)
            return self._retry_or_fail(seed, error, error.retry_after)
        reason = _unkeepable(response)
        if reason is not None:
            crawl.skip(reason)
            return await crawl.give_up(seed.url)
        document = html.selector(response.body, response.encoding, response.url)
        directives = html.Directives.read(document, response.headers, crawl.agent)
        only_page = bool((seed.user_data or {}).get("only_page"))
        if not only_page and (crawl.ignore_robots or directives.follow):
            self._queue_links(ctx, document, response.url)
        if not crawl.ignore_robots and not directives.index:
            crawl.skip(SkipReason.NOINDEX)
            return await crawl.give_up(seed.url)
        if crawl.respect == "ai-training" and (
            not directives.ai or _refuses_ai_training(response.headers, response.url)
        ):
            crawl.skip(SkipReason.AI)
            return await crawl.give_up(seed.url)
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
        canonical = None if only_page else self._canonical(ctx, document, response.url)
        return await crawl.keep_or_hold(page, canonical)

    async def _redirect(self, ctx: Context, response: Response) -> Outcome | None:
        crawl, seed = self.crawl, ctx.seed
        data = seed.user_data or {}
        hops = int(data.get("redirects", 0)) + 1
        if hops > MAX_REDIRECTS:
            crawl.skip(SkipReason.REDIRECTS)
            return await crawl.give_up(seed.url)
        target = urls.join(response.url, response.headers["location"])
        if target is None:
            crawl.skip(SkipReason.SCHEME)
            return await crawl.give_up(seed.url)
        anywhere = bool(data.get("only_page"))
        if data.get("seed") and not crawl.in_scope(target) and target.startswith(("http://", "https://")):
            if crawl.same_site(target):
                crawl.widen_scope(target)  # a seed redirected to another host of the same site
            else:
                anywhere = True  # a seed redirected to another site yields only that page
        child = crawl.admit(target, seed, redirects=hops, anywhere=anywhere)
        if child is not None:
            ctx.enqueue(crawl.route([child]))
        return await crawl.redirected(seed.url, target)

    def _queue_links(self, ctx: Context, document: Selector, page_url: str) -> None:
        crawl = self.crawl
        base = document.css("base::attr(href)").get()
        base_url = (urls.join(page_url, base) if base else None) or page_url
        children: list[Seed] = []
        seen: set[str] = set()
        for anchor in document.css("a[href], area[href]"):
            rel = (anchor.attrib.get("rel") or "").lower().split()
            if "nofollow" in rel and not crawl.ignore_robots:
                crawl.skip(SkipReason.NOFOLLOW)
                continue
            joined = urls.join(base_url, anchor.attrib["href"])
            if joined is None or joined in seen:
                continue
            seen.add(joined)
            child = crawl.admit(joined, ctx.seed)
            if child is not None:
                children.append(child)
        ctx.enqueue(crawl.route(children))

    def _canonical(self, ctx: Context, document: Selector, page_url: str) -> str | None:
        """The canonical key of the in-scope page this one names as canonical, queued if nobody has yet."""
        href = html.canonical(document)
        joined = urls.join(page_url, href) if href else None
        if joined is None or not self.crawl.in_scope(joined):
            return None
        key = urls.canonicalize(joined)
        child = self.crawl.admit(joined, ctx.seed, count_duplicate=False)
        if child is not None:
            ctx.enqueue(self.crawl.route([child]))
        elif not self.crawl.was_queued(joined):
            return None  # it cannot be fetched (too deep, say): nothing to wait for
        return key


def _unkeepable(response: Response) -> SkipReason | None:
    if response.status >= 400 or response.status < 200 or 300 <= response.status < 400:
        return SkipReason.STATUS
    content_type = response.content_type
    if content_type is None:
        return None if sniffs_as_html(response.body) else SkipReason.CONTENT_TYPE
    return None if content_type in _HTML_TYPES else SkipReason.CONTENT_TYPE


def _same_authority(url: str, other: str) -> bool:
    try:
        return _authority(url) == _authority(other)
    except SpireError:
        return False


_parse_limiter: anyio.CapacityLimiter | None = None


async def _parse(body: bytes) -> Sitemap:
    """Parse a sitemap file; a large one off the event loop, one at a time."""
    global _parse_limiter
    if len(body) <= _THREAD_ABOVE:
        return parse_sitemap(body)
    if _parse_limiter is None:
        _parse_limiter = anyio.CapacityLimiter(1)
    return await anyio.to_thread.run_sync(parse_sitemap, body, limiter=_parse_limiter)


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
    )
