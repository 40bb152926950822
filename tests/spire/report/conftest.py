"""A local site with each fate a crawl meets, crawled for real (its ledger is the report's view), and a Chromium."""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Iterator
from typing import TYPE_CHECKING

import anyio
import pytest

from spire.site import SiteCrawl, polite_limits
from spire_core.backend.browser.chromium import Launch
from spire_core.ledger import LedgerView
from spire_core.limits import HostLimits
from tests.sites.server import Site
from tests.spire_core.backend.conftest import chrome
from tests.spire_core.backend.local_chrome import LOCAL_HOSTS, LocalChrome

if TYPE_CHECKING:
    from selenium.webdriver.chrome.webdriver import WebDriver

__all__ = ["chrome", "crawl", "crawled", "fast_limits", "fates_site", "ledger_of", "page_browser"]

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


def fast_limits() -> HostLimits:
    """The site crawl's politeness without its 1 request a second: a test crawls in well under one."""
    return dataclasses.replace(polite_limits(), max_in_flight=4, per_second=None)


async def crawl(url: str) -> SiteCrawl:
    """Crawl the site at ``url`` to its end: its ledger is ``crawl.crawler.ledger``."""
    site_crawl = SiteCrawl(url, host_limits=fast_limits(), timeouts=0.5)
    async with site_crawl:
        async for _ in site_crawl:
            pass
    return site_crawl


def ledger_of(site_crawl: SiteCrawl) -> LedgerView:
    ledger = site_crawl.crawler.ledger
    assert ledger is not None  # a site crawl keeps one by default
    return ledger


@pytest.fixture(scope="module")
def crawled() -> Iterator[tuple[Site, LedgerView, SiteCrawl]]:
    """The fates site, crawled once for the module: the site (its request log), the ledger, the crawl."""
    with Site() as site:
        site_crawl = anyio.run(crawl, fates_site(site))
        yield site, ledger_of(site_crawl), site_crawl


@pytest.fixture(scope="module")
def page_browser(chrome: LocalChrome) -> Iterator[WebDriver]:
    """One headless Chromium for the module, resolving 127.0.0.1 and localhost only, logging its requests."""
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.chrome.webdriver import WebDriver

    launch = Launch(chromium=chrome["chromium"], chromedriver=chrome["chromedriver"], resolve_only=LOCAL_HOSTS)
    with tempfile.TemporaryDirectory(prefix="spire-report-chromium-") as profile:
        options = launch.chrome_options(profile)
        options.add_argument("--window-size=1280,2000")
        options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
        driver = WebDriver(options=options, service=Service(executable_path=chrome["chromedriver"]))
        try:
            yield driver
        finally:
            driver.quit()
