"""The report and the dashboard in real headless Chromium: no request off this machine, the right
counts in the per-host table, charts that draw, and live numbers that move while a crawl runs."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import anyio
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from spire import Crawler, Router
from spire.report import Dashboard, Sampler, write_report
from spire.site import SiteCrawl
from spire_core.ledger import LedgerView
from tests.sites.server import Site, held_tree
from tests.spire.report.conftest import fast_limits, ledger_of
from tests.spire.report.png import pixels

if TYPE_CHECKING:
    from selenium.webdriver.chrome.webdriver import WebDriver

SETTINGS = {"start": "http://127.0.0.1/", "scope": "host", "limits": "4 in flight per host"}


def _requested(driver: WebDriver) -> list[str]:
    """Every URL the browser asked for since the last call (its performance log's network events)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def _colored(png: bytes) -> int:
    """Pixels with a clear hue: a chart's series (the axes and grid are grey, the page white)."""
    _, _, found = pixels(png)
    return sum(1 for pixel in found if max(pixel) - min(pixel) > 60)


def _open(driver: WebDriver, url: str) -> None:
    _requested(driver)  # forget what came before
    driver.get(url)
    WebDriverWait(driver, 20).until(lambda d: d.find_element(By.CSS_SELECTOR, "body[data-drawn]"))


def _host_cells(driver: WebDriver, origin: str) -> dict[str, str]:
    """The per-host table's row for ``origin``, by column."""
    headers = [th.text for th in driver.find_elements(By.CSS_SELECTOR, "#host-table thead th")]
    for row in driver.find_elements(By.CSS_SELECTOR, "#host-table tbody tr"):
        cells = [td.text for td in row.find_elements(By.TAG_NAME, "td")]
        if cells[0] == origin:
            return dict(zip(headers, cells, strict=True))
    raise AssertionError(f"no row for {origin}")


def _requests_shown(driver: WebDriver) -> int:
    """The requests total on the page, read in one script call: the page redraws it on every poll."""
    text = driver.execute_script("return document.querySelector('#totals [data-total=\"requests\"] b').textContent")
    return int(str(text).replace(",", ""))


def test_the_report_file_opens_offline_with_the_crawls_counts_and_drawn_charts(
    crawled: tuple[Site, LedgerView, SiteCrawl], page_browser: WebDriver, tmp_path: Path
) -> None:
    site, ledger, site_crawl = crawled
    path = tmp_path / "report.html"
    anyio.run(lambda: write_report(ledger, path, settings=SETTINGS, title=f"spire crawl {site.url('/')}"))
    _open(page_browser, path.as_uri())

    requested = _requested(page_browser)
    assert requested == [path.as_uri()]  # the file itself, and nothing else: no CDN, no font, no favicon
    assert not [e for e in page_browser.get_log("browser") if e["level"] == "SEVERE"]  # no script error

    cells = _host_cells(page_browser, site.origin)
    assert cells["requests"] == str(sum(site.hits(robots=True).values())) == str(site_crawl.stats.requests)
    assert "404: 2" in cells["statuses"]
    assert cells["errors"] == "timeout: 1"
    totals = {
        card.get_attribute("data-total"): card.find_element(By.TAG_NAME, "b").text
        for card in page_browser.find_elements(By.CSS_SELECTOR, "#totals .card")
    }
    assert totals["requests"] == str(site_crawl.stats.requests)
    failures = page_browser.find_element(By.ID, "failures").text
    assert "timeout" in failures
    assert site.url("/slow") in failures
    skips = page_browser.find_element(By.ID, "skips").text
    assert f"{site.url('/private/x')} found on {site.url('/')}" in skips
    assert "Disallow: /private/" in skips
    assert _host_cells(page_browser, f"http://localhost:{site.port}")["skips"] == "scope: 1"

    for chart in ("timeline", "latency"):
        canvas = page_browser.find_element(By.CSS_SELECTOR, f"#{chart} canvas")
        assert _colored(canvas.screenshot_as_png) > 200, f"the {chart} chart drew no series"
    screenshot = os.environ.get("SPIRE_REPORT_SCREENSHOT")  # docs/images/report.png is made this way
    if screenshot:
        page_browser.save_screenshot(screenshot)


def test_a_blank_chart_is_told_from_a_drawn_one(page_browser: WebDriver, tmp_path: Path) -> None:
    """The pixel check above can fail: a crawl with no requests draws axes only."""
    empty = Crawler(Router()).ledger  # a crawl that has not run: no request yet
    assert empty is not None
    path = tmp_path / "empty.html"
    anyio.run(lambda: write_report(empty, path, settings={}))
    _open(page_browser, path.as_uri())
    canvas = page_browser.find_element(By.CSS_SELECTOR, "#timeline canvas")
    assert _colored(canvas.screenshot_as_png) == 0


def test_the_dashboards_numbers_change_while_the_crawl_runs(page_browser: WebDriver) -> None:
    reached, released, served = threading.Event(), threading.Event(), threading.Event()
    closing = threading.Event()  # the dashboard outlives the crawl until the test has read it
    failure: list[BaseException] = []
    with Site() as site:
        root = held_tree(site, 30, hold_from=8, reached=reached, released=released)
        dashboards: list[Dashboard] = []

        async def crawl_with_dashboard() -> None:
            site_crawl = SiteCrawl(root, host_limits=fast_limits())
            sampler = Sampler(site_crawl.crawler.host_stats, every=0.2)
            ledger = ledger_of(site_crawl)
            async with Dashboard(ledger, settings=SETTINGS, sampler=sampler, refresh=0.2) as dashboard:
                dashboards.append(dashboard)
                served.set()
                async with anyio.create_task_group() as tg:
                    tg.start_soon(sampler.run)
                    async with site_crawl:
                        async for _ in site_crawl:
                            pass
                    tg.cancel_scope.cancel()
                await anyio.to_thread.run_sync(closing.wait, 60)

        def run() -> None:
            try:
                anyio.run(crawl_with_dashboard)
            except BaseException as exc:  # surfaced in the test's thread
                failure.append(exc)
                served.set()

        thread = threading.Thread(target=run)
        thread.start()
        try:
            assert reached.wait(30)
            assert served.wait(30)
            assert not failure
            (dashboard,) = dashboards
            assert urlsplit(dashboard.url).hostname == "127.0.0.1"
            _open(page_browser, dashboard.url)
            held = _requests_shown(page_browser)
            assert 0 < held < 31  # part of the crawl: the rest waits for the held answers
            released.set()
            WebDriverWait(page_browser, 30).until(lambda d: _requests_shown(d) > held)
            assert all(urlsplit(url).hostname == "127.0.0.1" for url in _requested(page_browser))
        finally:
            released.set()
            closing.set()
            thread.join(60)
    assert not failure
    assert not thread.is_alive()
