"""The report and the dashboard in real headless Chromium: no request off this machine, the right
counts in the per-host table, charts that draw, live numbers that move while a crawl runs, and a
recrawl's changes (counts, sample pages, the URL table by change) in the file and live."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import anyio
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from spire import Crawler, Response, Router
from spire.report import Dashboard, Sampler, write_report
from spire.site import SiteCrawl
from spire_core.frontier.sqlite import SqliteFrontier
from spire_core.ledger import LedgerView
from spire_core.ledger_sqlite import SqliteLedgerView
from tests.sites.server import Site, held_tree
from tests.spire.report.conftest import RECRAWLED, Recrawled, fast_limits, ledger_of, path_of, recrawler
from tests.spire.report.png import pixels
from tests.spire_core.test_recrawl import build, edit_the_site

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
    driver.get("about:blank")  # a live page open before stops polling
    _requested(driver)  # forget what came before
    driver.get_log("browser")
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


def _change_counts(driver: WebDriver) -> dict[str, str]:
    """The changes section's counts by change, read in one script call (a live page redraws them)."""
    found = driver.execute_script(
        "return Array.from(document.querySelectorAll('#change-counts .card'))"
        ".map(function (card) { return [card.getAttribute('data-change'), card.querySelector('b').textContent]; })"
    )
    return {str(change): str(count) for change, count in found}


def _samples(driver: WebDriver, change: str) -> list[str]:
    """The text of each sample of ``change`` in the changes section, read in one script call."""
    found = driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0])).map(function (li) { return li.innerText; })",
        f'#changes details[data-change="{change}"] li',
    )
    return [str(text) for text in found]


def _url_rows(driver: WebDriver) -> list[dict[str, str]]:
    """The URL table's rows, by column, read in one script call."""
    found = driver.execute_script(
        "var table = document.getElementById('url-table');"
        "var heads = Array.from(table.querySelectorAll('thead th')).map(function (th) { return th.textContent; });"
        "return Array.from(table.querySelectorAll('tbody tr')).map(function (tr) {"
        "  var row = {}; Array.from(tr.children).forEach(function (td, i) { row[heads[i]] = td.textContent; });"
        "  return row; });"
    )
    return [{str(name): str(value) for name, value in row.items()} for row in found]


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
    # Each URL once, unlike the stats line's skipped= (each link met): the card says which it counts.
    skipped = page_browser.find_element(By.CSS_SELECTOR, '#totals [data-total="skipped"]')
    assert skipped.find_element(By.TAG_NAME, "span").text == "skipped URLs"
    assert "skipped=" in str(skipped.get_attribute("title"))
    failures = page_browser.find_element(By.ID, "failures").text
    assert "timeout" in failures
    assert site.url("/slow") in failures
    skips = page_browser.find_element(By.ID, "skips").text
    assert f"{site.url('/private/x')} found on {site.url('/')}" in skips
    assert "Disallow: /private/" in skips
    folded = _host_cells(page_browser, "not crawled: 1 host met as links only")
    assert (folded["requests"], folded["skips"]) == ("0", "scope: 1")
    assert _host_cells(page_browser, site.origin)["pages kept"] == str(site_crawl.stats.pages)
    assert totals["read"] == "2"  # robots.txt and the missing sitemap.xml: not pages kept
    assert totals["kept"] == str(site_crawl.stats.pages)
    # A first crawl: no changes section, no change column.
    assert not page_browser.find_element(By.ID, "changes-section").is_displayed()
    assert "change" not in _url_rows(page_browser)[0]

    for chart in ("timeline", "latency"):
        canvas = page_browser.find_element(By.CSS_SELECTOR, f"#{chart} canvas")
        assert _colored(canvas.screenshot_as_png) > 200, f"the {chart} chart drew no series"
    screenshot = os.environ.get("SPIRE_REPORT_SCREENSHOT")  # docs/images/report.png is made this way
    if screenshot:
        page_browser.save_screenshot(screenshot)


def test_the_timeline_draws_when_a_clock_once_said_1970(page_browser: WebDriver, tmp_path: Path) -> None:
    router = Router()

    @router.default
    async def page(response: Response) -> None:
        pass

    state = tmp_path / "crawl.db"
    with Site() as site:
        for n in range(5):
            site.page(f"/p{n}", "ok")

        async def crawl() -> None:
            async with SqliteFrontier(state) as frontier:
                await Crawler(router, frontier=frontier, robots=False).arun([site.url(f"/p{n}") for n in range(5)])

        anyio.run(crawl)
    with sqlite3.connect(state) as db:  # one request stamped by a clock at the epoch: 56 years of range
        db.execute("UPDATE ledger_attempts SET at = 1.0 WHERE rowid = (SELECT min(rowid) FROM ledger_attempts)")

    async def write(path: Path) -> None:
        async with SqliteLedgerView(state) as view:
            await write_report(view, path, settings={})

    report = tmp_path / "report.html"
    anyio.run(write, report)
    _open(page_browser, report.as_uri())  # the page draws (it once built a point a second, 1.7e9 of them)
    canvas = page_browser.find_element(By.CSS_SELECTOR, "#timeline canvas")
    assert _colored(canvas.screenshot_as_png) > 200


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

        with _in_thread(crawl_with_dashboard, wake=(served, reached), release=(released, closing)) as failure:
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


def test_a_recrawls_report_shows_each_change_with_its_sample_pages_offline(
    recrawled: Recrawled, page_browser: WebDriver, tmp_path: Path
) -> None:
    path = tmp_path / "recrawl.html"

    async def write() -> dict[str, str]:
        """Write the report; return each changed page's hashes as the page should show them."""
        async with SqliteLedgerView(recrawled.state) as view:
            await write_report(view, path, settings=SETTINGS, title=f"spire crawl {recrawled.site.url('/')}")
            changed = await view.entries(change="changed")
        return {entry.url: f"{(entry.previous_hash or '')[:8]} \u2192 {(entry.hash or '')[:8]}" for entry in changed}

    hashes = anyio.run(write)
    _open(page_browser, path.as_uri())

    assert _requested(page_browser) == [path.as_uri()]
    assert not [e for e in page_browser.get_log("browser") if e["level"] == "SEVERE"]
    assert page_browser.find_element(By.ID, "changes-section").is_displayed()
    assert _change_counts(page_browser) == {"new": "1", "changed": "3", "unchanged": "15", "gone": "1", "failed": "1"}
    url = recrawled.site.url
    assert _samples(page_browser, "new") == [url("/p20")]
    assert _samples(page_browser, "changed") == [f"{url(path)} {hashes[url(path)]}" for path in ("/", "/p3", "/p7")]
    assert _samples(page_browser, "gone") == [f"{url('/p5')}\nHTTP 404"]
    (failed,) = _samples(page_browser, "failed")
    assert failed.startswith(url("/p4") + "\n")
    assert "500" in failed
    assert not page_browser.find_elements(By.CSS_SELECTOR, '#changes details[data-change="unchanged"]')

    # A page an earlier crawl kept was found on no page of this one: it is no start URL.
    assert f"{url('/p5')} found on (an earlier crawl)" in page_browser.find_element(By.ID, "skips").text
    assert f"{url('/p4')} found on (an earlier crawl)" in page_browser.find_element(By.ID, "failures").text
    rows = _url_rows(page_browser)
    assert {path_of(row["URL"]): row["change"] for row in rows if row["change"] != "-"} == RECRAWLED
    Select(page_browser.find_element(By.ID, "url-filter")).select_by_value("change:gone")
    assert _url_rows(page_browser) == [
        {
            "URL": url("/p5"),
            "fate": "skipped: status",
            "change": "gone",
            "status": "404",
            "found on": "(an earlier crawl)",
            "depth": "1",
            "attempts": "1",
        }
    ]
    Select(page_browser.find_element(By.ID, "url-filter")).select_by_value("change:unchanged")
    assert len(_url_rows(page_browser)) == 15
    assert page_browser.find_element(By.ID, "url-page").text == "1-15 of 15"
    screenshot = os.environ.get("SPIRE_REPORT_CHANGES_SCREENSHOT")  # docs/images/report-changes.png
    if screenshot:
        Select(page_browser.find_element(By.ID, "url-filter")).select_by_value("all")
        page_browser.find_element(By.ID, "changes-section").screenshot(screenshot)


def test_the_dashboard_shows_a_recrawls_changes_as_they_come(page_browser: WebDriver, tmp_path: Path) -> None:
    reached, released, served, closing = threading.Event(), threading.Event(), threading.Event(), threading.Event()
    state = tmp_path / "state.db"
    with Site() as site:
        changing = build(site, validators=True)

        async def first() -> None:
            async with SqliteFrontier(state) as frontier:
                await recrawler(frontier).arun([changing.url("/")])

        anyio.run(first)
        edit_the_site(changing)
        changing.break_page("/p4", 500)
        changing.hold_from(8, reached, released)  # the 8th page request of the recrawl, and the rest, wait
        dashboards: list[Dashboard] = []

        async def recrawl_with_dashboard() -> None:
            async with SqliteFrontier(state) as frontier:
                crawler = recrawler(frontier)
                assert crawler.ledger is not None
                async with Dashboard(crawler.ledger, settings=SETTINGS, refresh=0.2) as dashboard:
                    dashboards.append(dashboard)
                    served.set()
                    await crawler.arun([changing.url("/")])
                    await anyio.to_thread.run_sync(closing.wait, 60)

        with _in_thread(recrawl_with_dashboard, wake=(served, reached), release=(released, closing)) as failure:
            assert reached.wait(30)
            assert served.wait(30)
            assert not failure
            (dashboard,) = dashboards
            _open(page_browser, dashboard.url)
            section = page_browser.find_element(By.ID, "changes-section")
            WebDriverWait(page_browser, 30).until(lambda _: section.is_displayed())
            held = _change_counts(page_browser)
            assert 0 < sum(int(count) for count in held.values()) <= 7  # the pages answered before the hold
            released.set()
            final = {"new": "1", "changed": "3", "unchanged": "15", "gone": "1", "failed": "1"}
            WebDriverWait(page_browser, 30).until(lambda d: _change_counts(d) == final)
            assert _samples(page_browser, "new") == [changing.url("/p20")]
            Select(page_browser.find_element(By.ID, "url-filter")).select_by_value("change:failed")
            WebDriverWait(page_browser, 30).until(
                lambda d: [row["URL"] for row in _url_rows(d)] == [changing.url("/p4")]
            )
            assert _url_rows(page_browser)[0]["change"] == "failed"
            assert all(urlsplit(url).hostname == "127.0.0.1" for url in _requested(page_browser))


@contextlib.contextmanager
def _in_thread(
    main: Callable[[], Awaitable[None]], *, wake: tuple[threading.Event, ...], release: tuple[threading.Event, ...]
) -> Iterator[list[BaseException]]:
    """Run ``main`` on an event loop of its own in a thread, beside the test's browser. Yields the list
    its failure goes to (a failure also sets ``wake``, so the test's waits end at once); on leaving,
    sets ``release``, joins the thread and fails the test if ``main`` failed or is still running."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            anyio.run(main)
        except BaseException as exc:  # surfaced in the test's thread
            failure.append(exc)
            for event in wake:
                event.set()

    thread = threading.Thread(target=run)
    thread.start()
    try:
        yield failure
    finally:
        for event in release:
            event.set()
        thread.join(60)
    assert not failure
    assert not thread.is_alive()
