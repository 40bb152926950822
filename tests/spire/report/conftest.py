"""A local site with each fate a crawl meets, crawled for real, and its requests recorded as a ledger."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import anyio
import pytest

from spire.site import SiteCrawl, polite_limits
from tests.sites.server import Site
from tests.spire.report.recorded_ledger import RecordedLedger

#: Every page answers fast; /slow outlasts the crawl's timeout; robots.txt keeps /private out.
PAGES = 12


def fates_site(site: Site) -> str:
    """Serve the site: pages, a 404, a redirect, a timeout, a robots rule, an off-site and a non-page link."""
    links = "".join(f'<a href="/page/{i}">page {i}</a>' for i in range(PAGES))
    site.page(
        "/",
        f"<html><head><title>Home</title></head><body>{links}"
        '<a href="/missing">gone</a><a href="/moved">moved</a><a href="/slow">slow</a>'
        f'<a href="/private/x">private</a><a href="http://localhost:{site.port}/elsewhere">off-site</a>'
        '<a href="/report.pdf">a pdf</a></body></html>',
    )
    for i in range(PAGES):
        site.page(f"/page/{i}", f"<html><head><title>Page {i}</title></head><body><p>page {i} " + "words " * 30)
    site.page("/robots.txt", "User-agent: *\nDisallow: /private/\n", content_type="text/plain")
    site.page("/moved", "", status=301, headers={"Location": "/page/0"})
    site.page("/slow", "<html><body>late</body></html>", delay=3.0)
    return site.url("/")


def fast_limits() -> object:
    """The site crawl's politeness without its 1 request a second: a test crawls in well under one."""
    return dataclasses.replace(polite_limits(), max_in_flight=4, per_second=None)


async def crawl(url: str, ledger: RecordedLedger) -> SiteCrawl:
    site_crawl = SiteCrawl(url, host_limits=fast_limits(), timeouts=0.5)  # type: ignore[arg-type]
    with ledger.recording():
        async with site_crawl:
            async for _ in site_crawl:
                pass
    return site_crawl


@pytest.fixture(scope="module")
def crawled() -> Iterator[tuple[Site, RecordedLedger, SiteCrawl]]:
    """The fates site, crawled once for the module: the site (its request log), the ledger, the crawl."""
    with Site() as site:
        ledger = RecordedLedger()
        url = fates_site(site)
        site_crawl = anyio.run(crawl, url, ledger)
        yield site, ledger, site_crawl
