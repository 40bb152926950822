"""The site crawl as an ordinary ``Router`` program: page, sitemap and sitemap-discovery handlers.

The engine does robots.txt, redirects (each hop admitted against the ``SiteScope``), dedup, host
limits and retries; these handlers decide what a page is worth: which links it queues (``Links``
with the scope as strategy and nofollow honoured), whether it is kept (status, type, directives,
AI-use), and which canonical page it waits for (the ``Keeper``).
"""

from __future__ import annotations

import dataclasses

import anyio
from parsel import Selector

from spire.extract import Html, resolve
from spire.links import Links
from spire.router import Router
from spire.site.keeping import KeeperSink, Verdict
from spire.site.limits import MAX_DEPTH
from spire.site.page import CrawlPage
from spire.site.scope import SiteScope, same_authority
from spire_core import html
from spire_core import url as urls
from spire_core.admission import SkipReason
from spire_core.context import Context
from spire_core.errors import Blocked, HttpStatusError, SpireError
from spire_core.outcome import Fail, Outcome
from spire_core.response import Headers, Response
from spire_core.robots import Purpose, Robots
from spire_core.seed import Seed
from spire_core.sitemaps import MAX_SITEMAP_FILES, discover, read_sitemap
from spire_core.sniff import is_html

__all__ = ["DISCOVER", "SITEMAP", "SiteRules", "discovery_seed", "site_router"]

DISCOVER = "spire:discover"  # one per origin in scope: read the sitemaps its robots.txt lists
SITEMAP = "spire:sitemap"  # one sitemap file
#: What the ledger calls the files a site crawl reads for their links (``Fate.READ``), not pages.
ROBOTS, SITEMAP_FILE = "robots.txt", "sitemap"


@dataclasses.dataclass(slots=True)
class SiteRules:
    """What the site crawl's handlers share: its options, scope and keeper, and the sitemap budget.

    With ``processes=N`` each worker process has its own copy: the keeper's verdicts are staged on
    ``sink`` and applied by the crawl's process; the sitemap handler runs in the crawl's process
    (``local=True``), so the sitemap budget and the count of URLs queued are the crawl's, exact.
    """

    scope: SiteScope
    sink: KeeperSink
    respect: str
    ignore_robots: bool
    agent: str
    limit: int | None
    #: Sitemap files opened: the sitemap handler runs in the crawl's process (``local=True``), so this
    #: is the crawl's count with ``processes=N`` too.
    sitemap_files: int = 0
    shut_down: list[str] = dataclasses.field(default_factory=list)
    shutting_down: bool = False
    #: Origins whose sitemaps were queued for discovery (once each).
    discovered: set[str] = dataclasses.field(default_factory=set)
    #: Discovery seeds that found their site unreachable: they did nothing, so they are not ``finished``
    #: (the discovery handler runs in the crawl's process, ``local=True``, so this is the crawl's count).
    unreachable: int = 0
    #: With a ``limit``, sitemaps are read one at a time: each opens only if those before it did not
    #: queue the limit already, at any concurrency.
    sitemap_turn: anyio.Lock = dataclasses.field(default_factory=anyio.Lock)

    def discovery(self, origin: str) -> list[Seed]:
        """The discovery seed of ``origin`` the first time it is asked for; then nothing."""
        if origin in self.discovered:
            return []
        self.discovered.add(origin)
        return [discovery_seed(origin)]


def discovery_seed(origin: str) -> Seed:
    """The seed that reads ``origin``'s sitemaps once its robots.txt is known (it fetches nothing)."""
    return Seed(origin + "/robots.txt", tag=DISCOVER, priority=2, unique_key=f"discover {origin}")


def sitemap_seed(url: str, parent: Seed | None = None) -> Seed | None:
    try:
        key = urls.canonicalize(url)
    except SpireError:
        return None
    depth = parent.depth if parent is not None else 0
    return Seed(url, tag=SITEMAP, priority=1, depth=depth, unique_key=f"sitemap {key}")


def site_router(rules: SiteRules) -> Router:
    """The site crawl's router over ``rules``."""
    router = Router()
    scope = rules.scope

    @router.handler(DISCOVER, local=True, page=False)
    async def discover_sitemaps(ctx: Context) -> None:
        origin = ctx.seed.origin
        known = ctx.robots.rules(ctx.seed.url) if ctx.robots is not None else None
        if known is not None and not known.reachable:
            ctx.admission.read(ctx.seed, ROBOTS, "unreachable: the site's pages are skipped")
            rules.unreachable += 1
            return  # an unreachable site: its pages are skipped, its sitemaps never read
        ctx.admission.read(ctx.seed, ROBOTS, None if known is not None else "not read (robots.txt ignored)")
        listed = known.sitemaps() if known is not None else []
        found = discover(origin + "/", listed, keep=scope.same_site)
        ctx.enqueue(seed for url in found if (seed := sitemap_seed(url)) is not None)

    @router.handler(SITEMAP, local=True, page=False)
    async def sitemap(ctx: Context, links: Links) -> Outcome | None:
        if rules.limit is None:
            return await _read_sitemap(ctx, links, rules)
        async with rules.sitemap_turn:
            return await _read_sitemap(ctx, links, rules)

    @router.default
    async def page(ctx: Context, links: Links) -> Outcome | None:
        try:
            return await _page(ctx, links, rules)
        except anyio.get_cancelled_exc_class():
            if rules.shutting_down:
                rules.shut_down.append(ctx.seed.url)
            raise

    @router.failed
    async def failed(ctx: Context) -> None:
        if ctx.seed.tag != DISCOVER and ctx.error is not None:
            await rules.sink.failed(ctx.seed.url, ctx.error)  # hooks run in the crawl's process

    return router


async def _read_sitemap(ctx: Context, links: Links, rules: SiteRules) -> Outcome | None:
    """Read one sitemap file, within the crawl's budget of sitemap files and its page ``limit``."""
    seed = ctx.seed
    if seed.attempt == 0:
        queued = rules.sink.pages_queued
        if rules.sitemap_files >= MAX_SITEMAP_FILES or (rules.limit is not None and queued >= rules.limit):
            full = rules.sitemap_files >= MAX_SITEMAP_FILES
            spent = f"{MAX_SITEMAP_FILES} sitemap files read already" if full else "enough pages queued for the limit"
            ctx.admission.read(seed, SITEMAP_FILE, f"not opened ({spent})")
            return None
        rules.sitemap_files += 1
    try:
        response = await ctx.response()
    except HttpStatusError as error:
        if error.status in (404, 410):
            ctx.admission.read(seed, SITEMAP_FILE, "no sitemap there")
            return None  # a missing sitemap is not an error
        raise  # the crawl's retry policy tries a 429 or a 5xx again; another status fails the sitemap
    if not 200 <= response.status < 300:
        return Fail(HttpStatusError(response.status, url=response.url))
    found = await read_sitemap(response.body)
    ctx.admission.read(seed, SITEMAP_FILE)
    if ctx.revisits is not None:
        for url, lastmod in found.lastmods.items():
            ctx.revisits.lastmod(url, lastmod)  # this handler runs in the crawl's process: a recrawl reads them
    ctx.enqueue(
        child
        for url in found.sitemaps
        if same_authority(url, response.url) and (child := sitemap_seed(url, seed)) is not None
    )
    result = await links.enqueue(raw_urls=found.urls, base_url=response.url, strategy=rules.scope)
    rules.sink.pages_queued += len(result.added)  # this handler runs in the crawl's process
    return None


def _why_not_kept(reason: SkipReason, response: Response) -> str | None:
    """The ledger's detail of a page not kept: its status, or its content type."""
    if reason is SkipReason.STATUS:
        return f"HTTP {response.status}"
    if reason is SkipReason.CONTENT_TYPE:
        found = response.headers.get("content-type")
        return None if found is None else str(found)
    return None


async def _page(ctx: Context, links: Links, rules: SiteRules) -> Outcome | None:
    seed = ctx.seed
    if rules.respect == "ai-training" and not rules.ignore_robots:
        known = ctx.robots.rules(seed.url) if ctx.robots is not None else None
        if known is not None and not known.allows_use(seed.url, Purpose.AI_TRAIN):
            ctx.admission.left_out(seed, SkipReason.AI)  # the site refuses it: not even fetched
            _give_up(ctx, rules)
            return None
    try:
        response = await ctx.response()
    except Blocked:
        ctx.admission.left_out(seed, SkipReason.BLOCKED)
        _give_up(ctx, rules)
        return None
    except HttpStatusError as error:
        if error.transient:
            raise  # a 429 or a 5xx: the crawl's retry policy tries it again (its Retry-After read)
        ctx.admission.left_out(seed, SkipReason.STATUS, f"HTTP {error.status}")  # an error status: not kept
        _give_up(ctx, rules, start_status=error.status if ctx.seed.depth == 0 else None)
        return None
    reason = _unkeepable(response)
    if reason is not None:
        ctx.admission.left_out(seed, reason, _why_not_kept(reason, response))
        start_status = response.status if reason is SkipReason.STATUS and ctx.seed.depth == 0 else None
        _give_up(ctx, rules, start_status=start_status)
        return None
    document = await _document(ctx)
    directives = html.Directives.read(document, response.headers, rules.agent)
    only_page = not rules.scope.admits(response.url)  # a start seed redirected to another site
    if not only_page and rules.scope.covers_host(response.url):
        ctx.enqueue(rules.discovery(urls.origin(response.url)))
    queued = 0
    if not only_page and (rules.ignore_robots or directives.follow) and seed.depth < MAX_DEPTH:
        result = await links.enqueue(strategy=rules.scope, skip_nofollow=not rules.ignore_robots)
        queued = len(result.added)
    if not rules.ignore_robots and not directives.index:
        ctx.admission.left_out(seed, SkipReason.NOINDEX)
        _give_up(ctx, rules, queued=queued)
        return None
    if rules.respect == "ai-training" and (not directives.ai or _refuses_ai(ctx, response)):
        ctx.admission.left_out(seed, SkipReason.AI)
        _give_up(ctx, rules, queued=queued)
        return None
    kept = CrawlPage(
        url=response.url,
        depth=seed.depth,
        status=response.status,
        html=response.text,
        text=html.text(document),
        headers=response.headers,
        metas=html.metas(document),
        title=html.title(document),
        change="new" if seed.revisit is None else "changed",  # an unchanged revisit never reaches here
    )
    canonical = None if only_page else await _canonical(ctx, links, document, response.url, rules)
    ctx.stage(rules.sink, [Verdict.keep(kept, canonical, asked=seed.unique_key, queued=queued)])
    return None


def _give_up(ctx: Context, rules: SiteRules, *, start_status: int | None = None, queued: int = 0) -> None:
    """The page is not kept: pages held for it as their canonical page go free (a start page's error
    status is kept, for the CLI to say)."""
    ctx.stage(rules.sink, [Verdict.give_up(ctx.seed.url, start_status=start_status, queued=queued)])


async def _document(ctx: Context) -> Selector:
    parsed: Selector = await resolve(ctx, Html)
    return parsed


async def _canonical(ctx: Context, links: Links, document: Selector, page_url: str, rules: SiteRules) -> str | None:
    """The key of the in-scope page this one names as canonical, queued if nobody has yet; else ``None``."""
    href = html.canonical(document)
    joined = urls.join(page_url, href) if href else None
    if joined is None or not joined.startswith(("http://", "https://")) or not rules.scope.admits(joined):
        return None
    try:
        key = urls.canonicalize(joined)
    except SpireError:
        return None
    staged = any(child.unique_key == key for batch, _ in ctx.staged_links for child in batch)
    if staged or (await ctx.admission.seen([key]))[0]:
        return key  # queued already (by this page or another): wait for it
    if ctx.seed.depth >= MAX_DEPTH:
        return None  # it could not be fetched: nothing to wait for
    result = await links.enqueue(raw_urls=[joined], base_url=page_url, strategy=rules.scope)
    return key if result.added else None


def _unkeepable(response: Response) -> SkipReason | None:
    if not 200 <= response.status < 300:  # an error status raised already: a 1xx or a 3xx not followed
        return SkipReason.STATUS
    return None if is_html(response.content_type, response.body) else SkipReason.CONTENT_TYPE


def _refuses_ai(ctx: Context, response: Response) -> bool:
    """Whether a ``Content-Usage`` response header refuses AI training (read as a robots.txt line is)."""
    return _content_usage_refuses(response.headers, response.url)


def _content_usage_refuses(headers: Headers, url: str) -> bool:
    for value in headers.get_list("content-usage"):
        rules = Robots.parse(f"User-agent: *\nContent-Usage: {value}")
        if not rules.allows_use(url, Purpose.AI_TRAIN):
            return True
    return False
