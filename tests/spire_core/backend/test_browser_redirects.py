"""A browser crawl admits each redirect hop as an HTTP crawl does: the same pages handled, the same skips.

Each test runs the same local site twice, over ``HttpBackend`` and over a real headless Chromium
(``BrowserBackend``): robots.txt, a seen page, another host under a same-hostname strategy, a loop,
chains of five hops (followed) and six (one too many), a self-redirect that sets a cookie; and
once more through a pool of proxies that ask for a login.
"""

from __future__ import annotations

import base64
import logging
import threading
from collections import Counter
from collections.abc import Iterator

import anyio
import pytest

from spire import BrowserBackend, Crawler, HostLimits, Html, Links, Response, Router
from spire.testing.site import Request
from spire_core.backend.base import Backend
from spire_core.backend.http import HttpBackend
from spire_core.session.proxies import ProxyPool
from spire_core.session.retry import RetryPolicy
from spire_core.session.timeouts import Timeouts
from tests.sites.proxies import ForwardProxy
from tests.sites.server import Reply, Site
from tests.spire_core.backend.local_chrome import LocalChrome

USER = "crawler:s3cret"
LOGIN = "Basic " + base64.b64encode(USER.encode()).decode()
#: Every skip reason a redirect can end in here.
REASONS = ("robots", "duplicate", "strategy", "redirects")


#: The page-load bound of ``one_driver``, in seconds.
PAGE_LOAD = 2.0


@pytest.fixture(scope="module")
def one_driver(chrome: LocalChrome) -> Iterator[BrowserBackend]:
    """A backend of one browser that gives a page ``PAGE_LOAD`` seconds to load."""
    backend = BrowserBackend(drivers=1, page_load_timeout=PAGE_LOAD, **chrome)
    yield backend
    anyio.run(backend.aclose)


def start_page(site: Site, links: list[str]) -> None:
    site.page("/", "".join(f'<a href="{path}">{path}</a>' for path in links))


def redirect_site(site: Site, other: Site) -> None:
    """The issue's site: redirects to a disallowed path, to a linked page, to another host, in a
    loop, in chains of 5 and 6 hops, and to itself with a cookie."""
    site.page("/robots.txt", "User-agent: *\nDisallow: /private\n", content_type="text/plain")
    links = ["/to-private", "/to-a", "/a", "/to-off", "/loop1", "/c0", "/d0", "/login"]
    start_page(site, links)
    site.page("/to-private", "", status=302, headers={"Location": "/private"})
    site.page("/private", "<p>private</p>")
    site.page("/to-a", "", status=302, headers={"Location": "/a"})
    site.page("/a", "<p>a</p>")
    site.page("/to-off", "", status=302, headers={"Location": f"http://localhost:{other.port}/off"})
    other.page("/off", "<p>off</p>")
    site.page("/loop1", "", status=302, headers={"Location": "/loop2"})
    site.page("/loop2", "", status=301, headers={"Location": "/loop1"})
    for chain, hops in (("c", 6), ("d", 5)):
        for hop in range(hops):
            target = f"/{chain}{hop + 1}" if hop + 1 < hops else f"/{chain}-end"
            site.page(f"/{chain}{hop}", "", status=307 if hop % 2 else 302, headers={"Location": target})
        site.page(f"/{chain}-end", f"<p>{chain} end</p>")

    def login(request: Request) -> Reply:
        if "session=1" in (request.headers.get("cookie") or ""):
            return 200, {"Content-Type": "text/html"}, b"<p>welcome</p>"
        return 302, {"Location": "/login", "Set-Cookie": "session=1; Path=/"}, b""

    site.route("/login", login)


def crawl(site: Site, backend: Backend | None = None) -> tuple[Crawler, dict[str, tuple[str, ...]]]:
    """Crawl ``site`` from ``/``, following its links with a same-hostname strategy; what each handled
    page's URL was, with its redirect chain."""
    handled: dict[str, tuple[str, ...]] = {}
    router = Router()

    @router.default
    async def page(response: Response, html: Html, links: Links) -> None:
        handled[response.url] = response.redirects
        if response.url == site.url("/"):
            await links.same_hostname()

    crawler = Crawler(router, backend=backend, host_limits=HostLimits(max_in_flight=2), retry=RetryPolicy.never())
    crawler.run([site.url("/")])
    return crawler, handled


def test_a_browser_crawl_admits_redirect_hops_as_an_http_crawl_does(
    site: Site, other_site: Site, chrome: LocalChrome, caplog: pytest.LogCaptureFixture
) -> None:
    redirect_site(site, other_site)
    caplog.set_level(logging.INFO, logger="spire.trace")
    seen: dict[str, tuple[dict[str, tuple[str, ...]], dict[str, int], Counter[str], Counter[str], int, int]] = {}
    for name, backend in (("http", None), ("browser", BrowserBackend(drivers=2, page_load_timeout=10, **chrome))):
        site.requests.clear()
        other_site.requests.clear()
        caplog.clear()
        crawler, handled = crawl(site, backend)
        stats = crawler.stats
        skips = {reason: stats.skipped(reason) for reason in REASONS}
        lines = sum(1 for record in caplog.records if record.name == "spire.trace")
        seen[name] = (handled, skips, site.hits(robots=True), other_site.hits(robots=True), stats.requests, lines)
    handled, skips, hits, other_hits, requests, lines = seen["browser"]
    chain = tuple(site.url(f"/d{hop}") for hop in range(5))
    assert handled == {
        site.url("/"): (),
        site.url("/a"): (),
        site.url("/d-end"): chain,
        site.url("/login"): (site.url("/login"),),
    }
    assert skips == {"robots": 1, "duplicate": 2, "strategy": 1, "redirects": 1}
    assert (hits["/private"], hits["/a"], hits["/c-end"], other_hits["/off"]) == (0, 1, 0, 0)
    assert (hits["/loop1"], hits["/loop2"], hits["/c5"], hits["/login"]) == (1, 1, 1, 2)
    assert requests == lines == sum(hits.values())  # one request and one trace line per page load and hop
    assert seen["browser"] == seen["http"]


def test_a_redirect_to_a_path_robots_txt_disallows_is_a_robots_skip(
    site: Site, other_site: Site, browser: BrowserBackend
) -> None:
    redirect_site(site, other_site)
    start_page(site, ["/to-private"])
    crawler, handled = crawl(site, browser)
    assert list(handled) == [site.url("/")]
    assert crawler.stats.skipped("robots") == 1
    assert site.hits()["/private"] == 0


def test_a_redirect_to_a_page_also_linked_is_a_duplicate_handled_once(
    site: Site, other_site: Site, browser: BrowserBackend
) -> None:
    redirect_site(site, other_site)
    start_page(site, ["/to-a", "/a"])
    crawler, handled = crawl(site, browser)
    assert handled == {site.url("/"): (), site.url("/a"): ()}
    assert crawler.stats.skipped("duplicate") == 1
    assert site.hits()["/a"] == 1


def test_a_redirect_off_the_links_host_name_is_a_strategy_skip(
    site: Site, other_site: Site, browser: BrowserBackend
) -> None:
    redirect_site(site, other_site)
    start_page(site, ["/to-off"])
    crawler, handled = crawl(site, browser)
    assert list(handled) == [site.url("/")]
    assert crawler.stats.skipped("strategy") == 1
    assert other_site.hits() == Counter()


def test_a_redirect_loop_fetches_each_url_once_and_ends_as_a_duplicate(
    site: Site, other_site: Site, browser: BrowserBackend
) -> None:
    redirect_site(site, other_site)
    start_page(site, ["/loop1"])
    crawler, handled = crawl(site, browser)
    assert list(handled) == [site.url("/")]
    assert crawler.stats.skipped("duplicate") == 1
    assert (site.hits()["/loop1"], site.hits()["/loop2"]) == (1, 1)


def test_five_hops_are_followed_and_a_sixth_is_refused(site: Site, other_site: Site, browser: BrowserBackend) -> None:
    redirect_site(site, other_site)
    start_page(site, ["/c0", "/d0"])
    crawler, handled = crawl(site, browser)
    assert handled == {site.url("/"): (), site.url("/d-end"): tuple(site.url(f"/d{hop}") for hop in range(5))}
    assert crawler.stats.skipped("redirects") == 1
    assert [site.hits()[f"/c{hop}"] for hop in range(6)] == [1] * 6
    assert site.hits()["/c-end"] == 0


def test_a_self_redirect_that_sets_a_cookie_is_followed_once_with_the_cookie(
    site: Site, other_site: Site, browser: BrowserBackend
) -> None:
    redirect_site(site, other_site)
    start_page(site, ["/login"])
    crawler, handled = crawl(site, browser)
    assert handled == {site.url("/"): (), site.url("/login"): (site.url("/login"),)}
    assert site.hits()["/login"] == 2
    assert crawler.stats.failed == 0


def test_through_a_credentialed_proxy_pool_a_browser_crawl_matches_the_http_crawl(
    site: Site, other_site: Site, chrome: LocalChrome
) -> None:
    redirect_site(site, other_site)
    seen: dict[str, tuple[dict[str, tuple[str, ...]], dict[str, int], Counter[str], list[str]]] = {}
    with (
        ForwardProxy(user="crawler:s3cret", challenge=True) as a,
        ForwardProxy(user="crawler:s3cret", challenge=True) as b,
    ):
        for name in ("http", "browser"):
            pool = ProxyPool([a.url, b.url])
            backend: Backend = (
                HttpBackend(proxies=pool)
                if name == "http"
                else BrowserBackend(drivers=2, page_load_timeout=10, proxies=pool, **chrome)
            )
            site.requests.clear()
            a.log.clear()
            b.log.clear()
            crawler, handled = crawl(site, backend)
            skips = {reason: crawler.stats.skipped(reason) for reason in REASONS}
            forwarded = [(url, login) for action, url, login in [*a.log, *b.log] if action == "forward"]
            assert {login for _, login in forwarded} == {LOGIN}, name
            seen[name] = (handled, skips, site.hits(robots=True), sorted(url for url, _ in forwarded))
    handled, skips, hits, _ = seen["browser"]
    assert {site.url("/"), site.url("/a"), site.url("/d-end")} <= set(handled)
    assert (skips["robots"], skips["strategy"], skips["redirects"]) == (1, 1, 1)
    assert (hits["/private"], hits["/a"], hits["/c-end"], other_site.hits()["/off"]) == (0, 1, 0, 0)
    assert seen["browser"] == seen["http"]


def crawl_one(site: Site, backend: Backend, retry: RetryPolicy) -> tuple[Crawler, dict[str, tuple[str, ...]]]:
    """Crawl ``site``'s ``/`` alone, under a 30 s request deadline: each handled page's URL and redirects."""
    handled: dict[str, tuple[str, ...]] = {}
    router = Router()

    @router.default
    async def page(response: Response) -> None:
        handled[response.url] = response.redirects

    crawler = Crawler(router, backend=backend, retry=retry, timeouts=Timeouts(request=30))
    crawler.run([site.url("/")])
    return crawler, handled


def test_a_redirect_to_another_origin_loads_in_a_backend_of_one_browser(
    site: Site, other_site: Site, one_driver: BrowserBackend
) -> None:
    # The target's robots.txt is read in the middle of the seed's chain: its tab must not stay lent.
    target = f"http://localhost:{other_site.port}/there"
    site.page("/", "", status=302, headers={"Location": target})
    other_site.page("/there", "<p>there</p>")
    crawler, handled = crawl_one(site, one_driver, RetryPolicy.never())
    assert handled == {target: (site.url("/"),)}
    assert (crawler.stats.finished, crawler.stats.failed) == (1, 0)
    assert other_site.hits(robots=True) == Counter({"/robots.txt": 1, "/there": 1})


def test_a_retry_loads_the_other_origin_whose_load_timed_out_and_is_no_duplicate(
    site: Site, other_site: Site, one_driver: BrowserBackend, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="spire.trace")
    target = other_site.url("/there")
    site.page("/", "", status=302, headers={"Location": target})
    released = threading.Event()
    stalled = 0

    def there(request: Request) -> Reply:
        nonlocal stalled
        stalled += 1
        if stalled == 1:
            released.wait(timeout=60)  # the first load outlives the request's 30 s deadline
        return 200, {"Content-Type": "text/html"}, b"<p>there</p>"

    other_site.route("/there", there)
    try:
        crawler, handled = crawl_one(site, one_driver, RetryPolicy.transient(attempts=2, backoff=0.1))
    finally:
        released.set()
    stats = crawler.stats
    assert handled == {target: (site.url("/"),)}
    assert (stats.finished, stats.failed, stats.retries, stats.skipped("duplicate")) == (1, 0, 1, 0)
    assert other_site.hits()["/there"] == 2
    timed_out = [record.getMessage() for record in caplog.records if "outcome=timeout" in record.getMessage()]
    assert len(timed_out) == 1
    assert f"url={target} " in timed_out[0]
    elapsed = float(timed_out[0].split("elapsed_ms=")[1].split()[0]) / 1000
    assert elapsed < 5 * PAGE_LOAD  # given up after the page-load bound, not the request's 30 s
