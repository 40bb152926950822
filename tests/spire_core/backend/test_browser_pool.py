"""A healthy pool: crashed or hung tabs replaced and their seeds retried, drivers recycled, RSS bounded."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anyio
import httpx
import pytest

from spire import BrowserBackend, Crawler, Driver, HostLimits, Html, Links, Response, Router, Seed, SeedInfo
from spire_core.errors import ConfigError
from tests.sites.server import Site
from tests.spire_core.backend.local_chrome import LocalChrome

ENDLESS = "<html><body><p>spinning</p><script>while (true) {}</script></body></html>"
#: A page whose links and text are written by its script: an HTTP client sees neither.
JS_LINKS = """<html><head><title>js</title></head><body><main></main><script>
const n = {number}, main = document.querySelector("main");
main.innerHTML = "<h1>page " + n + "</h1>" + "<p>" + "text ".repeat(200) + "</p>";
for (const next of [2 * n + 1, 2 * n + 2]) if (next < {pages}) {{
  const a = document.createElement("a"); a.href = "/js/" + next; a.textContent = next; main.appendChild(a);
}}
</script></body></html>"""


def js_tree(site: Site, pages: int) -> None:
    """``pages`` JavaScript-built pages ``/js/0`` .. linked as a binary tree."""
    for number in range(pages):
        site.page(f"/js/{number}", JS_LINKS.replace("{number}", str(number)).replace("{pages}", str(pages)))


def test_a_page_whose_script_never_ends_is_retried_on_a_fresh_driver(site: Site, chrome: LocalChrome) -> None:
    site.sequence(
        "/spin",
        [(200, {"Content-Type": "text/html"}, ENDLESS.encode()), (200, {"Content-Type": "text/html"}, b"<p>ok</p>")],
    )
    seen: list[str | None] = []
    router = Router()

    @router.default
    async def page(html: Html) -> None:
        seen.append(html.css("p::text").get())

    backend = BrowserBackend(drivers=1, page_load_timeout=1.5, **chrome)
    stats = Crawler(router, backend=backend).run([site.url("/spin")])
    assert seen == ["ok"]
    assert (stats.retries, stats.finished, stats.failed) == (1, 1, 0)
    assert backend.pool.stats.recycled["broken"] == 1
    assert backend.pool.stats.started == 2


def test_a_tab_that_crashes_is_replaced_and_its_seed_retried(site: Site, chrome: LocalChrome) -> None:
    site.page("/panel", "<p>panel</p>")
    attempts: list[int] = []
    router = Router()

    @router.default
    async def page(driver: Driver, seed: SeedInfo) -> None:
        attempts.append(seed.attempt)
        if seed.attempt == 0:
            await driver.run(lambda webdriver: webdriver.get("chrome://crash"))

    backend = BrowserBackend(drivers=1, page_load_timeout=5, **chrome)
    stats = Crawler(router, backend=backend).run([site.url("/panel")])
    assert attempts == [0, 1]
    assert (stats.retries, stats.finished, stats.failed) == (1, 1, 0)
    assert backend.pool.stats.recycled["broken"] == 1
    assert site.hits()["/panel"] == 2


def test_drivers_are_recycled_after_a_number_of_pages(site: Site, chrome: LocalChrome) -> None:
    js_tree(site, 12)
    backend = BrowserBackend(drivers=1, recycle_after=5, **chrome)
    router = Router()

    @router.default
    async def page(html: Html) -> None:
        pass

    stats = Crawler(router, backend=backend).run([site.url(f"/js/{n}") for n in range(12)])
    assert stats.finished == 12
    assert backend.pool.stats.recycled["pages"] == 2  # after pages 5 and 10; the last one is closed at the end
    assert backend.pool.stats.started == 3


def test_a_driver_over_its_memory_bound_is_recycled(site: Site, chrome: LocalChrome) -> None:
    site.page("/a", "<p>a</p>")
    site.page("/b", "<p>b</p>")
    backend = BrowserBackend(drivers=1, max_rss=1 << 20, **chrome)

    async def main() -> None:
        try:
            for path in ("/a", "/b"):
                assert (await backend.fetch(Seed(site.url(path)))).status == 200
        finally:
            await backend.aclose()

    anyio.run(main)
    assert backend.pool.stats.recycled == {"memory": 2}  # no Chromium fits in 1 MiB
    assert backend.pool.stats.started == 2
    assert backend.pool.stats.peak_rss > 1 << 20


def test_pool_options_are_checked(chrome: LocalChrome) -> None:
    wrong: list[dict[str, object]] = [
        {"drivers": 0},
        {"recycle_after": 0},
        {"max_rss": -1},
        {"page_load_timeout": 0},
        {"wait_timeout": -1.0},
        {"proxy": "127.0.0.1:3128"},
    ]
    for options in wrong:
        with pytest.raises(ConfigError):
            BrowserBackend(**chrome, **options)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="SOCKS"):
        BrowserBackend(proxy="socks5://user:pw@127.0.0.1:1080", **chrome)


@pytest.mark.slow
def test_a_long_crawl_with_recycling_keeps_the_pools_memory_bounded(site: Site, chrome: LocalChrome) -> None:
    """300 JavaScript pages, found only by running their scripts, recycled every 50: RSS stays flat."""
    pages = 300
    js_tree(site, pages)
    backend = BrowserBackend(drivers=2, recycle_after=50, max_rss=4 << 30, **chrome)
    samples: list[int] = []
    handled = 0
    router = Router()

    @router.default
    async def page(html: Html, links: Links) -> None:
        nonlocal handled
        await links.same_origin()
        handled += 1
        if handled % 5 == 0:  # reading /proc for every page would cost more than the page
            samples.append(await backend.pool.rss())

    crawler = Crawler(router, backend=backend, concurrency=2, host_limits=HostLimits(max_in_flight=2))
    stats = crawler.run([Seed(site.url("/js/0"))])
    assert stats.finished == pages
    assert backend.pool.stats.recycled["pages"] >= pages // 50 - 2
    first, last = samples[:10], samples[-10:]  # the first and the last 50 pages
    print(
        f"pool RSS: first 50 pages peak {max(first) >> 20} MiB, last 50 peak {max(last) >> 20} MiB, "
        f"overall peak {max(samples) >> 20} MiB, per-driver peak {backend.pool.stats.peak_rss >> 20} MiB"
    )
    assert max(last) < 1.5 * max(first)


class _ForwardProxy:
    """A plain-HTTP forward proxy on 127.0.0.1 that records the absolute URLs it is asked for."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                proxy.seen.append((self.path, self.headers.get("User-Agent", "")))
                upstream = httpx.get(self.path, headers={"User-Agent": self.headers.get("User-Agent", "")})
                body = upstream.content
                self.send_response(upstream.status_code)
                self.send_header("Content-Type", upstream.headers.get("content-type", "text/html"))
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_every_driver_goes_through_its_proxy_with_its_user_agent(site: Site, chrome: LocalChrome) -> None:
    site.page("/via", "<p>via the proxy</p>")
    proxy = _ForwardProxy()
    backend = BrowserBackend(drivers=1, proxy=proxy.url, user_agent="spire-test/1.0", **chrome)

    async def main() -> Response:
        try:
            return await backend.fetch(Seed(site.url("/via")))
        finally:
            await backend.aclose()

    try:
        response = anyio.run(main)
    finally:
        proxy.close()
    assert (response.status, "via the proxy" in response.text) == (200, True)
    assert (site.url("/via"), "spire-test/1.0") in proxy.seen
    assert site.requests[-1].headers["user-agent"] == "spire-test/1.0"
