"""The site crawl's rules for each seed, on the engine's worker contract (``handle``, ``handle_failed``).

Three kinds of seed, told apart by tag: robots (``/robots.txt`` of one origin), sitemap (one sitemap
file) and page (no tag).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
from parsel import Selector

from spire.site.limits import MAX_REDIRECTS, MAX_ROBOTS_REDIRECTS, PAGE_ATTEMPTS
from spire.site.page import CrawlPage, SkipReason
from spire.site.scope import _same_authority
from spire_core import html
from spire_core import url as urls
from spire_core.context import Context
from spire_core.errors import TRANSIENT_STATUSES, HttpStatusError, SpireError
from spire_core.limits import parse_retry_after
from spire_core.outcome import Fail, Outcome, Retry
from spire_core.response import Headers, Response
from spire_core.robots import Purpose, Robots, robots_answer
from spire_core.seed import Seed
from spire_core.sitemaps import read_sitemap
from spire_core.sniff import sniffs_as_html

if TYPE_CHECKING:
    from spire.site.site_crawl import SiteCrawl

_ROBOTS = "spire:robots"  # seed tags of the crawl's own requests; pages have none
_SITEMAP = "spire:sitemap"
_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})


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

    def check_tag(self, tag: str | None) -> None:
        """Every seed of a site crawl is its own: robots, sitemap or page."""

    def describe(self, seed: Seed) -> str:
        return {_ROBOTS: "site robots.txt", _SITEMAP: "site sitemap"}.get(seed.tag or "", "site page")

    async def handle_failed(self, ctx: Context, error: BaseException) -> None:
        if ctx.seed.tag == _ROBOTS:
            # Not reached through the usual path (robots tries end in Done); never leave pages waiting.
            origin = str((ctx.seed.user_data or {}).get("robots_for", ctx.seed.origin))
            await self.crawl.crawler.push(self.crawl.origins.robots_read(origin, Robots.unreachable(self.crawl.agent)))
        else:
            await self.crawl.keeper.failed(ctx.seed.url, error)

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

    def _retry_status(self, seed: Seed, response: Response) -> Outcome:
        """A 429 or a 5xx: try again after its Retry-After (up to three tries), else fail."""
        retry_after = parse_retry_after(response.headers.get("retry-after"))
        error = HttpStatusError(response.status, url=response.url, retry_after=retry_after)
        return self._retry_or_fail(seed, error, error.retry_after)

    # -- robots.txt -------------------------------------------------------------------------------

    async def _robots(self, ctx: Context) -> Outcome | None:
        crawl, seed = self.crawl, ctx.seed
        data = seed.user_data or {}
        origin = str(data["robots_for"])
        hops = int(data.get("hops", 0))
        failure: SpireError | None = None
        try:
            response: Response | None = await ctx.response()
        except SpireError as exc:
            response, failure = None, exc  # no connection: tried again, like a 5xx
        answer = robots_answer(response)
        if answer.retry:
            delay = crawl.origins.robots_retry_delay(seed.attempt)
            if delay is not None:
                if failure is None and response is not None:
                    failure = HttpStatusError(response.status, url=response.url)
                return Retry(after=delay, error=failure)  # the error is logged and counted by kind
        elif answer.redirect is not None and hops < MAX_ROBOTS_REDIRECTS:
            hop = crawl.origins.robots_seed(origin, crawl.origins.robots_generation(origin), answer.redirect, hops + 1)
            ctx.enqueue([hop], forefront=True)
            return None
        # Read, missing (a 4xx, too many redirects) or, its tries used up, unreachable.
        ctx.enqueue(crawl.origins.robots_read(origin, answer.rules(crawl.agent)))
        return None

    # -- sitemaps ---------------------------------------------------------------------------------

    async def _sitemap(self, ctx: Context) -> Outcome | None:
        crawl, seed = self.crawl, ctx.seed
        if seed.attempt == 0:
            if crawl.sitemap_budget_spent():
                return None
            if not crawl.ignore_robots:
                reason = await crawl.origins.robots_reason(seed, page=False)
                if reason is not None:
                    crawl.skip(reason)
                    return None
            crawl.opened_sitemap()
        response = await self._fetch(ctx)
        if not isinstance(response, Response):
            return response
        if response.status in (404, 410):
            return None  # a missing sitemap is not an error
        if response.status in TRANSIENT_STATUSES:
            return self._retry_status(seed, response)
        if response.is_redirect:
            hops = int((seed.user_data or {}).get("hops", 0)) + 1
            target = urls.join(response.url, response.headers["location"])
            if target is None or hops > MAX_REDIRECTS or not crawl.same_site(target):
                return None
            moved = crawl.sitemap_seed(target, seed, hops)
            if moved is not None:
                ctx.enqueue(crawl.origins.route([moved]))
            return None
        if not 200 <= response.status < 300:
            return Fail(HttpStatusError(response.status, url=response.url))
        sitemap = await read_sitemap(response.body)
        children = [
            child
            for url in sitemap.sitemaps
            if _same_authority(url, response.url) and (child := crawl.sitemap_seed(url, seed)) is not None
        ]
        pages = [page for url in sitemap.urls if (page := crawl.admit(url, seed)) is not None]
        ctx.enqueue(crawl.origins.route([*children, *pages]))
        return None

    # -- pages ------------------------------------------------------------------------------------

    async def _page(self, ctx: Context) -> Outcome | None:
        crawl, seed = self.crawl, ctx.seed
        keeper = crawl.keeper
        reason = await crawl.origins.robots_reason(seed)
        if reason is not None:
            crawl.skip(reason)
            return await keeper.give_up(seed.url)
        response = await self._fetch(ctx)
        if not isinstance(response, Response):
            return response
        if crawl.blocks.check(response) is not None:
            crawl.skip(SkipReason.BLOCKED)
            return await keeper.give_up(seed.url)
        if response.is_redirect:
            return await self._redirect(ctx, response)
        if response.status in TRANSIENT_STATUSES:
            return self._retry_status(seed, response)
        reason = _unkeepable(response)
        if reason is not None:
            crawl.skip(reason)
            return await keeper.give_up(seed.url)
        document = html.selector(response.body, response.encoding, response.url)
        directives = html.Directives.read(document, response.headers, crawl.agent)
        only_page = bool((seed.user_data or {}).get("only_page"))
        if not only_page and (crawl.ignore_robots or directives.follow):
            self._queue_links(ctx, document, response.url)
        if not crawl.ignore_robots and not directives.index:
            crawl.skip(SkipReason.NOINDEX)
            return await keeper.give_up(seed.url)
        if crawl.respect == "ai-training" and (
            not directives.ai or _refuses_ai_training(response.headers, response.url)
        ):
            crawl.skip(SkipReason.AI)
            return await keeper.give_up(seed.url)
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
        return await keeper.keep_or_hold(page, canonical)

    async def _redirect(self, ctx: Context, response: Response) -> Outcome | None:
        crawl, seed = self.crawl, ctx.seed
        data = seed.user_data or {}
        hops = int(data.get("redirects", 0)) + 1
        if hops > MAX_REDIRECTS:
            crawl.skip(SkipReason.REDIRECTS)
            return await crawl.keeper.give_up(seed.url)
        target = urls.join(response.url, response.headers["location"])
        if target is None:
            crawl.skip(SkipReason.SCHEME)
            return await crawl.keeper.give_up(seed.url)
        anywhere = bool(data.get("only_page"))
        if data.get("seed") and not crawl.in_scope(target) and target.startswith(("http://", "https://")):
            if crawl.same_site(target):
                crawl.widen_scope(target)  # a seed redirected to another host of the same site
            else:
                anywhere = True  # a seed redirected to another site yields only that page
        child = crawl.admit(target, seed, redirects=hops, anywhere=anywhere)
        if child is not None:
            ctx.enqueue(crawl.origins.route([child]))
        return await crawl.keeper.redirected(seed.url, target)

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
        ctx.enqueue(crawl.origins.route(children))

    def _canonical(self, ctx: Context, document: Selector, page_url: str) -> str | None:
        """The canonical key of the in-scope page this one names as canonical, queued if nobody has yet."""
        href = html.canonical(document)
        joined = urls.join(page_url, href) if href else None
        if joined is None or not self.crawl.in_scope(joined):
            return None
        key = urls.canonicalize(joined)
        child = self.crawl.admit(joined, ctx.seed, count_duplicate=False)
        if child is not None:
            ctx.enqueue(self.crawl.origins.route([child]))
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


def _refuses_ai_training(headers: Headers, url: str) -> bool:
    """Whether a ``Content-Usage`` response header refuses AI training (read as a robots.txt line is)."""
    for value in headers.get_list("content-usage"):
        rules = Robots.parse(f"User-agent: *\nContent-Usage: {value}")
        if not rules.allows_use(url, Purpose.AI_TRAIN):
            return True
    return False
