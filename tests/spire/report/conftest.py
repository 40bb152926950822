"""A local site with each fate a crawl meets, crawled for real (its ledger is the report's view), a
site recrawled once it changed (the report's changes), and a Chromium."""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from spire import Crawler
from spire.report import report_data
from spire.site import SiteCrawl, polite_limits
from spire_core.backend.browser.chromium import Launch
from spire_core.frontier.sqlite import SqliteFrontier
from spire_core.ledger import LedgerView
from spire_core.ledger_sqlite import SqliteLedgerView
from spire_core.limits import HostLimits
from spire_core.session.retry import RetryPolicy
from tests.sites.changing import ChangingSite
from tests.sites.server import Site
from tests.spire_core.backend.conftest import chrome
from tests.spire_core.backend.local_chrome import LOCAL_HOSTS, LocalChrome
from tests.spire_core.test_recrawl import EXPECTED, build, edit_the_site, site_router

if TYPE_CHECKING:
    from selenium.webdriver.chrome.webdriver import WebDriver

__all__ = [
    "RECRAWLED",
    "Recrawled",
    "chrome",
    "crawl",
    "crawled",
    "fast_limits",
    "fates_site",
    "ledger_of",
    "page_browser",
    "path_of",
    "recrawled",
    "recrawler",
]

#: Every page answers fast; /slow outlasts the crawl's timeout; robots.txt keeps /private out.
PAGES = 12


def fates_site(site: Site) -> str:
    """Serve the site: pages, a 404, a redirect, a timeout, a robots rule, an off-site, a non-page and a
    ``mailto:`` link."""
    links = "".join(f'<a href="/page/{i}">page {i}</a>' for i in range(PAGES))
    site.page(
        "/",
        f"<html><head><title>Home</title></head><body>{links}"
        '<a href="/missing">gone</a><a href="/moved">moved</a><a href="/slow">slow</a>'
        f'<a href="/private/x">private</a><a href="http://localhost:{site.port}/elsewhere">off-site</a>'
        '<a href="/report.pdf">a pdf</a><a href="mailto:me@example.com">mail</a></body></html>',
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


#: What the recrawl of ``recrawled`` finds: the edits of ``edit_the_site``, and /p4 answering 500.
RECRAWLED = {**EXPECTED, "p4": "failed"}


def path_of(url: str) -> str:
    """A ChangingSite URL as ``RECRAWLED`` names it: ``/`` or ``p3``."""
    return url.split("/", 3)[3] or "/"


def recrawler(frontier: SqliteFrontier) -> Crawler:
    """A crawl that keeps page states, one try a page (a 500 fails at once)."""
    return Crawler(
        site_router(),
        frontier=frontier,
        recrawl=True,
        retry=RetryPolicy(attempts=1),
        host_limits=HostLimits(max_in_flight=4),
    )


@dataclasses.dataclass(frozen=True)
class Recrawled:
    site: ChangingSite
    #: The state file, after the recrawl.
    state: Path
    #: The report's data after the first crawl, before the recrawl.
    first: dict[str, Any]


async def _first_then_recrawl(changing: ChangingSite, state: Path) -> dict[str, Any]:
    async with SqliteFrontier(state) as frontier:
        await recrawler(frontier).arun([changing.url("/")])
    async with SqliteLedgerView(state) as view:
        first = await report_data(view, settings={})
    edit_the_site(changing)
    changing.break_page("/p4", 500)
    async with SqliteFrontier(state) as frontier:
        await recrawler(frontier).arun([changing.url("/")])
    return first


@pytest.fixture(scope="module")
def recrawled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recrawled]:
    """A 20-page ChangingSite crawled into a state file, changed, and recrawled (``RECRAWLED``)."""
    with Site() as site:
        changing = build(site, validators=True)
        state = tmp_path_factory.mktemp("recrawled") / "state.db"
        first = anyio.run(_first_then_recrawl, changing, state)
        yield Recrawled(changing, state, first)


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
