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

The modules: ``site_crawl`` (``SiteCrawl`` and ``crawl``), ``worker`` (the rules for each kind of
seed), ``origins`` (each origin's robots.txt), ``keeping`` (which fetched pages come out), ``scope``,
``page`` (what the crawl yields and why it skips) and ``limits`` (its fixed numbers).
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
from spire.site.page import CrawlError, CrawlPage, SkipReason
from spire.site.scope import Scope
from spire.site.site_crawl import Respect, SiteCrawl, crawl

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
