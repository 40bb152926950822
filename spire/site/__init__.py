"""The polite whole-site crawl: ``spire.crawl(url)``, an async iterator of kept pages.

    async with spire.crawl("https://docs.example/", limit=500) as pages:
        async for page in pages:
            if isinstance(page, CrawlPage):
                print(page.url, page.meta("description"))
            else:                                   # a URL that failed: the crawl goes on
                print(page.url, page.category)
    print(pages.stats)

It is an ordinary ``Router`` program on the ordinary engine (``Crawler``): the engine reads each
origin's robots.txt before its seeds (under the same host limits, counted in ``stats.requests``),
follows redirects hop by hop through the crawl's ``SiteScope``, deduplicates and retries. Three
handlers do the rest: ``discover`` (the sitemaps an origin's robots.txt lists, else /sitemap.xml),
``sitemap`` (one file; its ``<loc>`` URLs pass the same checks as links) and the page handler (status,
content type, the page's robots directives, AI-use preferences, links, canonical pages), with the
``Keeper`` deciding which pages come out (canonical holds, near-duplicates, the limit).

Every skip is counted by reason in ``stats.skipped(reason)`` with the engine's one ``SkipReason``;
``docs/site-crawl.md`` lists them.

The modules: ``site_crawl`` (``SiteCrawl`` and ``crawl``), ``handlers`` (the router), ``keeping``
(which fetched pages come out), ``scope``, ``page`` (what the crawl yields) and ``limits`` (its
fixed numbers).
"""

from spire.site.limits import (
    MAX_DEPTH,
    MAX_REDIRECTS,
    MAX_ROBOTS_REDIRECTS,
    MAX_URL_BYTES,
    MIN_WORDS_FOR_DUPLICATE,
    PAGE_ATTEMPTS,
    ROBOTS_REFRESH_AFTER,
    ROBOTS_RETRY_DELAYS,
    polite_limits,
)
from spire.site.page import CrawlError, CrawlPage
from spire.site.scope import Scope
from spire.site.site_crawl import Respect, SiteCrawl, crawl
from spire_core.admission import SkipReason

__all__ = [
    "CrawlError",
    "CrawlPage",
    "MAX_DEPTH",
    "MAX_REDIRECTS",
    "MAX_ROBOTS_REDIRECTS",
    "MAX_URL_BYTES",
    "MIN_WORDS_FOR_DUPLICATE",
    "PAGE_ATTEMPTS",
    "ROBOTS_REFRESH_AFTER",
    "ROBOTS_RETRY_DELAYS",
    "Respect",
    "Scope",
    "SiteCrawl",
    "SkipReason",
    "crawl",
    "polite_limits",
]
