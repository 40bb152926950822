"""``BrowserBackend`` against local sites, in a real headless Chromium."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import pytest
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By

from spire import BrowserBackend, Context, Crawler, Driver, Error, HostLimits, Html, Response, Router, Seed, Url
from spire_core.backend.base import request_scope
from spire_core.backend.http import HttpBackend
from spire_core.errors import ConfigError, ConnectError, FetchError, FetchTimeout, HttpStatusError, RobotsDisallowed
from tests.sites.server import Reply, Request, Site
from tests.spire_core.backend.local_chrome import LocalChrome

JS_PAGE = """<html><head><title>shell</title></head><body><ul id="items"></ul>
<script>
  for (const name of ["alpha", "beta"]) {
    const li = document.createElement("li");
    li.textContent = name;
    document.getElementById("items").appendChild(li);
  }
</script></body></html>"""

BUTTON_PAGE = """<html><body><p id="state">closed</p>
<button id="open" onclick="document.getElementById('state').textContent = 'opened'">open</button>
</body></html>"""


async def fetch(backend: BrowserBackend, url: str, **fields: object) -> Response:
    seed = Seed(url, **fields)  # type: ignore[arg-type]
    return await backend.fetch(seed)


def test_javascript_built_content_reaches_html_through_the_browser_only(site: Site, browser: BrowserBackend) -> None:
    site.page("/app", JS_PAGE)
    seen: dict[str, list[str]] = {}
    router = Router()

    @router.default
    async def page(html: Html, url: Url) -> None:
        seen[url] = html.css("#items li::text").getall()

    Crawler(router, backend=browser).run([site.url("/app")])
    assert seen == {site.url("/app"): ["alpha", "beta"]}
    Crawler(router, backend=HttpBackend()).run([site.url("/app")])
    assert seen == {site.url("/app"): []}


def test_a_404_keeps_its_status_so_raise_for_status_fails_the_seed(site: Site, browser: BrowserBackend) -> None:
    site.page("/gone", "<p>no such page</p>", status=404)
    failures: list[BaseException | None] = []
    router = Router()

    @router.default
    async def page(html: Html) -> None:
        raise AssertionError("a 404 never reaches the handler")

    @router.failed
    async def failed(error: Error) -> None:
        failures.append(error)

    stats = Crawler(router, backend=browser).run([site.url("/gone")])
    assert (stats.failed, stats.errors_by_category["status"]) == (1, 1)
    (error,) = failures
    assert isinstance(error, HttpStatusError)
    assert error.status == 404
    assert error.response is not None
    assert b"no such page" in error.response.body


def test_a_redirect_is_one_hop_the_browser_does_not_follow(site: Site, browser: BrowserBackend) -> None:
    """The load stops before the target is requested: the crawl admits each hop, as over HTTP."""
    site.route("/old", lambda request: (301, {"Location": "/moved", "X-Hop": "old"}, b""))
    site.page("/moved", "<p>moved</p>")
    response = anyio.run(fetch, browser, site.url("/old"))
    assert (response.status, response.url, response.body) == (301, site.url("/old"), b"")
    assert (response.headers["location"], response.headers["x-hop"]) == (site.url("/moved"), "old")
    assert site.hits()["/moved"] == 0


def test_a_redirect_chain_ends_at_the_final_url_and_records_its_hops(site: Site, browser: BrowserBackend) -> None:
    site.route("/old", lambda request: (301, {"Location": "/moved"}, b""))
    site.route("/moved", lambda request: (302, {"Location": "/app"}, b""))
    site.page("/app", JS_PAGE, headers={"X-Served-By": "app"})
    seen: list[Response] = []
    router = Router()

    @router.default
    async def app(response: Response) -> None:
        seen.append(response)

    Crawler(router, backend=browser, robots=False).run([site.url("/old")])
    [response] = seen
    assert (response.status, response.url) == (200, site.url("/app"))
    assert response.redirects == (site.url("/old"), site.url("/moved"))
    assert response.headers["x-served-by"] == "app"
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert "<li>alpha</li>" in response.text
    assert [site.hits()[path] for path in ("/old", "/moved", "/app")] == [1, 1, 1]


def test_a_json_document_keeps_its_bytes_and_seed_headers_are_sent(site: Site, browser: BrowserBackend) -> None:
    site.page("/api", '{"name": "caf\u00e9"}', content_type="application/json; charset=utf-8")
    response = anyio.run(lambda: fetch(browser, site.url("/api"), headers={"X-Token": "t1"}))
    assert response.body == '{"name": "caf\u00e9"}'.encode()
    assert response.content_type == "application/json"
    assert site.requests[-1].headers["X-Token"] == "t1"


def test_only_get_can_be_loaded(site: Site, browser: BrowserBackend) -> None:
    with pytest.raises(ConfigError, match="GET only"):
        anyio.run(lambda: fetch(browser, site.url("/form"), method="POST", body=b"a=1"))
    assert site.requests == []


def test_a_refused_connection_is_a_connect_error(dead_port: int, browser: BrowserBackend) -> None:
    with pytest.raises(ConnectError, match="ERR_CONNECTION_REFUSED"):
        anyio.run(fetch, browser, f"http://127.0.0.1:{dead_port}/")


def test_driver_clicks_a_button_and_the_handler_reads_the_changed_dom(site: Site, browser: BrowserBackend) -> None:
    """The handler's driver is the tab its page was loaded in: one fetch, no second load."""
    site.page("/panel", BUTTON_PAGE)
    seen: list[tuple[str, str | None]] = []
    router = Router()

    @router.default
    async def panel(html: Html, driver: Driver) -> None:
        before = html.css("#state::text").get()
        await driver.click("#open")
        after = (await driver.selector()).css("#state::text").get()
        seen.append((before or "", after))

    # What the crawler does for a seed: the request's scope keeps the tab until the handler ends.
    crawler = Crawler(router, backend=browser)
    seed = Seed(site.url("/panel"))

    async def handle() -> None:
        async with request_scope():
            ctx = Context(
                seed,
                lambda ctx: browser.fetch(seed),
                admission=crawler.admission,
                datasets=crawler.dataset,
                backend=browser,
            )
            await router.handle(ctx)

    anyio.run(handle)
    assert seen == [("closed", "opened")]
    assert site.hits() == {"/panel": 1}


def test_driver_works_through_the_crawler(site: Site, browser: BrowserBackend) -> None:
    site.page("/panel", BUTTON_PAGE)
    seen: list[str | None] = []
    router = Router()

    @router.default
    async def panel(driver: Driver) -> None:
        await driver.click("#open")
        seen.append((await driver.selector()).css("#state::text").get())

    stats = Crawler(router, backend=browser).run([site.url("/panel")])
    assert seen == ["opened"]
    assert stats.failed == 0


def test_a_redirected_page_reaches_the_handler_with_its_chain(site: Site, browser: BrowserBackend) -> None:
    site.route("/old", lambda request: (301, {"Location": "/new"}, b""))
    site.page("/new", "<title>new</title>")
    seen: list[tuple[str, tuple[str, ...]]] = []
    router = Router()

    @router.default
    async def page(response: Response) -> None:
        seen.append((response.url, response.redirects))

    Crawler(router, backend=browser).run([site.url("/old")])
    assert seen == [(site.url("/new"), (site.url("/old"),))]


def test_driver_with_the_http_backend_is_a_config_error_before_any_fetch(site: Site) -> None:
    site.page("/panel", BUTTON_PAGE)
    router = Router()

    @router.default
    async def panel(driver: Driver) -> None:
        raise AssertionError("never reached")

    crawler = Crawler(router)
    with pytest.raises(ConfigError, match="BrowserBackend"):  # a mistake in the crawl's code stops it
        crawler.run([site.url("/panel")])
    assert (crawler.stats.failed, site.hits()) == (0, {})


def test_a_page_that_never_finishes_loading_is_a_timeout(site: Site, chrome: LocalChrome) -> None:
    released = threading.Event()

    def stall(request: Request) -> Reply:
        released.wait(10)  # holds the page's image, so the page never finishes loading
        return 200, {"Content-Type": "image/png"}, b""

    site.page("/stuck", '<html><body><img src="/stall"></body></html>')
    site.route("/stall", stall)
    # Long enough for a loaded machine's Chromium to reach the image it then waits on.
    backend = BrowserBackend(drivers=1, page_load_timeout=3.0, **chrome)

    async def main() -> FetchTimeout:
        try:
            with pytest.raises(FetchTimeout) as caught:
                await fetch(backend, site.url("/stuck"))
            return caught.value
        finally:
            released.set()
            await backend.aclose()

    error = anyio.run(main)
    assert error.transient
    assert error.url == site.url("/stuck")
    assert site.hits()["/stall"] == 1


def test_a_driver_that_died_is_replaced_by_a_fresh_one(site: Site, browser: BrowserBackend) -> None:
    site.page("/a", "<title>a</title>")

    async def main() -> tuple[int, int]:
        seed = Seed(site.url("/a"))
        async with request_scope():
            driver = browser.driver_for(await browser.fetch(seed))
            dead = await driver.run(lambda webdriver: webdriver.service.process.pid)
            await driver.run(lambda webdriver: webdriver.quit())
            with pytest.raises(ConnectError, match="lost the browser"):
                await driver.run(lambda webdriver: webdriver.current_url)
        async with request_scope():
            response = await browser.fetch(seed)
            assert response.status == 200
            return dead, await browser.driver_for(response).run(lambda webdriver: webdriver.service.process.pid)

    dead, fresh = anyio.run(main)
    assert dead != fresh


def test_selenium_errors_in_handler_code_are_spire_errors_and_keep_the_driver(
    site: Site, browser: BrowserBackend
) -> None:
    site.page("/panel", BUTTON_PAGE)

    async def main() -> tuple[int, int]:
        seed = Seed(site.url("/panel"))
        async with request_scope():
            driver = browser.driver_for(await browser.fetch(seed))
            before = await driver.run(lambda webdriver: webdriver.service.process.pid)
            with pytest.raises(FetchError, match="no such element"):
                await driver.run(lambda webdriver: webdriver.find_element(By.CSS_SELECTOR, "#missing"))
            with pytest.raises(FetchTimeout, match=r"waited 0\.2 s"):
                await driver.click("#missing", within=0.2)
            assert "closed" in await driver.html()
            after = await driver.run(lambda webdriver: webdriver.service.process.pid)
        with pytest.raises(ConfigError, match="went back to the pool"):
            await driver.html()
        return before, after

    before, after = anyio.run(main)
    assert before == after


def test_two_drivers_load_pages_at_the_same_time(site: Site, browser: BrowserBackend) -> None:
    # Each page answers only once both requests are in, so one driver alone would break the barrier.
    barrier = threading.Barrier(2, timeout=10)

    def together(request: Request) -> Reply:
        barrier.wait()
        return 200, {"Content-Type": "text/html"}, f"<title>{request.path}</title>".encode()

    site.route("/one", together)
    site.route("/two", together)
    titles: list[str] = []
    router = Router()

    @router.default
    async def page(html: Html) -> None:
        titles.append(html.css("title::text").get(default=""))

    crawler = Crawler(router, backend=browser, concurrency=4, host_limits=HostLimits(max_in_flight=4))
    stats = crawler.run([site.url("/one"), site.url("/two")])
    assert sorted(titles) == ["/one", "/two"]
    assert stats.failed == 0
    assert site.peak >= 2


def test_aclose_quits_every_driver_and_removes_its_profile(site: Site, chrome: LocalChrome) -> None:
    site.page("/a", "<title>a</title>")
    backend = BrowserBackend(drivers=2, **chrome)

    def pid_and_profile(driver: WebDriver) -> tuple[int, Path]:
        return driver.service.process.pid, Path(driver.capabilities["chrome"]["userDataDir"])

    async def load_two() -> list[tuple[int, Path]]:
        async def one() -> None:
            seed = Seed(site.url("/a"))
            async with request_scope():
                driver = backend.driver_for(await backend.fetch(seed))
                started.append(await driver.run(pid_and_profile))
                await barrier.wait()  # both sessions hold a driver at once: two browsers

        started: list[tuple[int, Path]] = []
        barrier = _AsyncBarrier(2)
        async with anyio.create_task_group() as tg:
            tg.start_soon(one)
            tg.start_soon(one)
        return started

    started = anyio.run(load_two)
    pids = [pid for pid, _ in started]
    profiles = {profile for _, profile in started}
    assert all(profile.is_dir() and profile.name.startswith("spire-chromium-") for profile in profiles)
    anyio.run(backend.aclose)  # in another event loop than the one that started the drivers
    anyio.run(backend.aclose)  # idempotent
    assert len(set(pids)) == 2
    assert len(profiles) == 2
    assert not any(profile.exists() for profile in profiles)
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


class _AsyncBarrier:
    def __init__(self, parties: int) -> None:
        self._left = parties
        self._all_in = anyio.Event()

    async def wait(self) -> None:
        self._left -= 1
        if self._left == 0:
            self._all_in.set()
        with anyio.fail_after(10):
            await self._all_in.wait()


def test_spire_imports_without_selenium_and_the_backend_says_what_to_install() -> None:
    script = (
        "import sys; sys.modules['selenium'] = None\n"
        "import spire, spire_core\n"
        "try:\n"
        "    spire.BrowserBackend()\n"
        "except spire.ConfigError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert "spire-crawl[browser]" in done.stdout


def test_a_handler_downloads_over_http_on_the_crawls_request_path(
    site: Site, chrome: LocalChrome, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    site.page("/robots.txt", "User-agent: mybot\nDisallow: /private\n", content_type="text/plain")
    site.page("/", "<p>reports</p>")
    site.page("/report.pdf", b"%PDF-1.7 report", content_type="application/pdf")
    site.page("/private/report.pdf", b"%PDF-1.7 private", content_type="application/pdf")
    caplog.set_level("INFO", logger="spire.trace")
    router = Router()
    crawler = Crawler(router, backend=BrowserBackend(drivers=1, user_agent="MyBot/2.0", **chrome))
    refused: list[Exception] = []

    @router.default
    async def page(response: Response) -> None:
        await crawler.download(site.url("/report.pdf"), tmp_path / "report.pdf", limit=2**20)
        try:
            await crawler.download(site.url("/private/report.pdf"), tmp_path / "private.pdf")
        except RobotsDisallowed as exc:
            refused.append(exc)

    stats = crawler.run([site.url("/")])
    assert (stats.finished, stats.failed) == (1, 0)
    assert (tmp_path / "report.pdf").read_bytes() == b"%PDF-1.7 report"
    assert [type(exc).__name__ for exc in refused] == ["RobotsDisallowed"]
    assert site.hits(robots=True) == {"/robots.txt": 1, "/": 1, "/report.pdf": 1}  # robots.txt read once
    assert {request.headers.get("user-agent") for request in site.requests} == {"MyBot/2.0"}
    lines = [record.getMessage() for record in caplog.records if record.name == "spire.trace"]
    assert stats.requests == len(lines) == 3
