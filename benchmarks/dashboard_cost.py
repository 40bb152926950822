"""What an open dashboard costs a crawl: pages/s of the site crawl of the PostgreSQL manual, with and
without ``--dashboard`` open in headless Chromium (polling ``data.json``).

    .venv/bin/python benchmarks/serve.py start         # nginx serving the manual on 127.0.0.1:8631
    .venv/bin/python benchmarks/dashboard_cost.py [--repeats 3]

Runs alternate (plain, dashboard, plain, ...) so load from elsewhere on the machine hits both alike;
the median of each is printed, with the crawl process's CPU time a page (the browser's is its own).
The crawl is ``SiteCrawl`` at 16 in flight, no rate limit; the page polls every 2 s (the default).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import statistics
import tempfile
import threading
import time

import anyio

from spire.report import Dashboard, Sampler, report_data
from spire.site import SiteCrawl, polite_limits

START = "http://127.0.0.1:8631/postgresql/index.html"


async def crawl(dashboard: bool, opened: threading.Event | None, url_box: list[str]) -> tuple[int, float, float]:
    """``(pages, seconds, CPU seconds of this process)``: the browser's CPU is its own processes'."""
    limits = dataclasses.replace(polite_limits(), max_in_flight=16, per_second=None)
    site = SiteCrawl(START, scope="prefix", host_limits=limits)
    started = time.perf_counter()
    pages = 0
    async with anyio.create_task_group() as tg:
        if dashboard:
            assert site.crawler.ledger is not None
            assert opened is not None
            sampler = Sampler(site.crawler.host_stats)
            board = Dashboard(site.crawler.ledger, settings={"start": START}, sampler=sampler)
            await board.start()
            url_box.append(board.url)
            tg.start_soon(sampler.run)
            await anyio.to_thread.run_sync(opened.wait)  # the page is open before the crawl starts
            started = time.perf_counter()
        cpu = time.process_time()
        async with site:
            async for _ in site:
                pages += 1
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu
        tg.cancel_scope.cancel()
        if dashboard:
            await board.aclose()
    return pages, elapsed, cpu


async def poll_cost() -> str:
    """The event-loop time one ``data.json`` answer takes on the finished crawl's ledger: what a poll costs."""
    limits = dataclasses.replace(polite_limits(), max_in_flight=16, per_second=None)
    site = SiteCrawl(START, scope="prefix", host_limits=limits)
    async with site:
        async for _ in site:
            pass
    assert site.crawler.ledger is not None
    times = []
    for _ in range(21):
        started = time.perf_counter()
        json.dumps(await report_data(site.crawler.ledger, settings={"start": START}, live=True))
        times.append(time.perf_counter() - started)
    summary = await site.crawler.ledger.summary(samples=0)
    urls = sum(summary.fates.values())
    median = statistics.median(times) * 1000
    return f"one data.json read and encoding on a ledger of {urls} URLs: median {median:.1f} ms"


def with_browser(run: int, *, dashboard: bool = True) -> tuple[int, float, float]:
    """A crawl with Chromium running: on the dashboard's page, or (``dashboard=False``) on a blank page
    beside a crawl with no dashboard, to tell the browser's own CPU from the dashboard's."""
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.chrome.webdriver import WebDriver
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from spire_core.backend.browser.chromium import Launch

    chromium = shutil.which("chromium") or "chromium"
    chromedriver = shutil.which("chromedriver") or "chromedriver"
    launch = Launch(chromium=chromium, chromedriver=chromedriver, resolve_only=frozenset({"127.0.0.1"}))
    opened = threading.Event()
    url_box: list[str] = []
    result: list[tuple[int, float, float]] = []
    thread = threading.Thread(target=lambda: result.append(anyio.run(crawl, dashboard, opened, url_box)))
    with tempfile.TemporaryDirectory() as profile:
        driver = WebDriver(options=launch.chrome_options(profile), service=Service(executable_path=chromedriver))
        try:
            if not dashboard:
                driver.get("about:blank")
                thread.start()
                thread.join()
                return result[0]
            thread.start()
            while not url_box:
                time.sleep(0.05)
            driver.get(url_box[0])
            WebDriverWait(driver, 30).until(lambda d: d.find_element(By.CSS_SELECTOR, "body[data-drawn]"))
            opened.set()
            thread.join()
            polls = driver.execute_script("return performance.getEntriesByType('resource').length")
            print(f"  run {run}: the page fetched data.json {polls} times")
        finally:
            driver.quit()
    return result[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    runs = {
        "plain": lambda run: anyio.run(crawl, False, None, []),
        "browser open, no dashboard": lambda run: with_browser(run, dashboard=False),
        "dashboard open": with_browser,
    }
    rates: dict[str, list[float]] = {name: [] for name in runs}
    cpu_per_page: dict[str, list[float]] = {name: [] for name in runs}
    for run in range(args.repeats):
        for name, crawled in runs.items():
            pages, elapsed, cpu = crawled(run)
            rates[name].append(pages / elapsed)
            cpu_per_page[name].append(cpu / pages * 1000)
            rate, per_page = pages / elapsed, cpu / pages * 1000
            print(f"{name}: {pages} pages in {elapsed:.2f} s = {rate:.1f} pages/s, {per_page:.2f} ms CPU a page")
    for name, found in rates.items():
        shown = [round(rate, 1) for rate in found]
        cpu = statistics.median(cpu_per_page[name])
        rate = statistics.median(found)
        print(f"{name}: median {rate:.1f} pages/s over {len(found)} runs {shown}; {cpu:.2f} ms CPU a page")
    print(anyio.run(poll_cost))


if __name__ == "__main__":
    main()
