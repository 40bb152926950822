"""``AdaptiveBackend``: HTTP first, the browser only where a page needs it, learned per tag."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator

import pytest

from examples.js_shop.server import JsShopServer
from spire import BrowserBackend, Crawler, CrawlStats, Driver, HostLimits, Html, Links, Router, Seed, Url
from spire_core.backend.adaptive import AdaptiveBackend, missing
from spire_core.backend.base import Backend
from spire_core.backend.http import HttpBackend
from spire_core.errors import ConfigError
from tests.sites.server import Site
from tests.spire_core.backend.local_chrome import LocalChrome


@pytest.fixture
def shop() -> Iterator[JsShopServer]:
    with JsShopServer(categories=5, products=4) as server:
        yield server


def shop_router(found: dict[str, str | None]) -> Router:
    """One router for every backend: home -> categories -> products (links to them built by script)."""
    router = Router()

    @router.default
    async def home(html: Html, links: Links) -> None:
        await links.follow(html.css("a.category::attr(href)").getall(), tag="category")

    @router.handler("category")
    async def category(html: Html, links: Links) -> None:
        await links.follow(html.css("a.product::attr(href)").getall(), tag="product")

    @router.handler("product")
    async def product(html: Html, url: Url) -> None:
        found[url] = html.css("p.price::text").get()

    return router


#: The stats of each crawl() in this module, in order.
crawl_stats: list[CrawlStats] = []


def crawl(shop: JsShopServer, backend: Backend) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    stats = Crawler(shop_router(found), backend=backend, concurrency=1).run([shop.url("/")])
    assert stats.failed == 0
    crawl_stats.append(stats)
    return found


def browser(chrome: LocalChrome) -> BrowserBackend:
    return BrowserBackend(drivers=1, **chrome)


def test_http_finds_no_product_while_browser_and_adaptive_find_them_all(
    shop: JsShopServer, chrome: LocalChrome
) -> None:
    assert crawl(shop, HttpBackend()) == {}
    assert set(crawl(shop, browser(chrome))) == shop.product_urls
    assert sum(shop.browser_hits().values()) == shop.page_count  # the browser rendered every page

    with JsShopServer(categories=5, products=4) as fresh:
        adaptive = AdaptiveBackend(browser(chrome), needs_browser={"category": missing("a.product")}, default="http")
        found = crawl(fresh, adaptive)
        assert set(found) == fresh.product_urls
        assert all(price for price in found.values())
        # Only the category pages were rendered; the first three taught that HTTP never suffices there,
        # so the last two went straight to the browser.
        assert fresh.browser_hits() == {f"/c/{c}": 1 for c in range(5)}
        assert fresh.hits() == {"/robots.txt": 1, "/": 1, **{f"/c/{c}": 2 for c in range(3)}} | {
            **{f"/c/{c}": 1 for c in (3, 4)},
            **{f"/p/{c}-{p}": 1 for c in range(5) for p in range(4)},
        }  # robots.txt once, over HTTP, before the first page
        assert adaptive.stats.decisions == {"http": 21, "rendered": 3, "browser-only": 2}
        assert crawl_stats[-1].rendering == adaptive.stats.decisions  # the crawl's own stats count them too
        assert adaptive.stats.by_tag["category"] == {"rendered": 3, "browser-only": 2}
        assert adaptive.stats.renders == 5
        assert adaptive.verdict("category") == "browser"


def test_probing_learns_which_tags_rendering_changes(shop: JsShopServer, chrome: LocalChrome) -> None:
    adaptive = AdaptiveBackend(browser(chrome), learn_after=2)
    found = crawl(shop, adaptive)
    assert set(found) == shop.product_urls
    assert (adaptive.verdict("category"), adaptive.verdict("product")) == ("browser", "http")
    rendered = shop.browser_hits()
    assert sum(count for path, count in rendered.items() if path.startswith("/p/")) == 2  # the two probes
    assert sum(count for path, count in rendered.items() if path.startswith("/c/")) == 5
    assert adaptive.stats.by_tag["product"] == {"probed": 2, "http": 18}


def test_a_tag_or_a_seed_can_force_a_backend(shop: JsShopServer, chrome: LocalChrome) -> None:
    adaptive = AdaptiveBackend(browser(chrome), force={"category": "browser"}, default="http")
    found: dict[str, str | None] = {}
    router = shop_router(found)
    seeds = [
        Seed(shop.url("/c/0"), tag="category"),
        Seed(shop.url("/c/1"), tag="category", user_data={"browser.render": False}),
    ]
    Crawler(router, backend=adaptive, concurrency=1).run(seeds)
    assert {url.rsplit("/", 1)[-1][0] for url in found} == {"0"}  # /c/1 was kept on HTTP: no products seen
    assert adaptive.stats.decisions == {"forced-browser": 1, "forced-http": 1, "http": 4}
    with pytest.raises(ConfigError, match="'http' or 'browser'"):
        AdaptiveBackend(browser(chrome), force={"x": "chrome"})  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match="not a CSS selector"):
        missing("a[")


def test_a_driver_works_on_rendered_pages_and_says_how_to_render_the_others(
    shop: JsShopServer, chrome: LocalChrome
) -> None:
    adaptive = AdaptiveBackend(browser(chrome), force={"category": "browser"}, default="http")
    seen: list[str] = []
    router = Router()

    @router.handler("category")
    async def category(driver: Driver) -> None:
        seen.append(await driver.execute("return document.querySelectorAll('a.product').length.toString()"))

    @router.handler("product")
    async def product(driver: Driver) -> None:
        raise AssertionError("a product page came over HTTP: it has no tab")

    seeds = [Seed(shop.url("/c/0"), tag="category"), Seed(shop.url("/p/0-0"), tag="product")]
    # A Driver on a page fetched over HTTP is a mistake in the crawl's setup: it stops the crawl, naming the fix.
    with pytest.raises(ConfigError, match=r"force=\{'product': 'browser'\}"):
        Crawler(router, backend=adaptive, concurrency=1).run(seeds)
    assert seen == ["4"]


def test_a_page_fetched_over_http_then_rendered_is_two_requests_and_two_trace_lines(
    site: Site, chrome: LocalChrome, caplog: pytest.LogCaptureFixture
) -> None:
    site.page(
        "/", "<div id=app></div><script>document.getElementById('app').innerHTML = '<p class=late>x</p>'</script>"
    )
    caplog.set_level(logging.INFO, logger="spire.trace")
    router = Router()

    @router.default
    async def page(html: Html) -> None:
        assert html.css("p.late")

    backend = AdaptiveBackend(browser(chrome), default=missing("p.late"))
    stats = Crawler(router, backend=backend, robots=False).run([site.url("/")])
    lines = [record.getMessage() for record in caplog.records if record.name == "spire.trace"]
    assert (stats.finished, stats.failed, backend.stats.decisions["rendered"]) == (1, 0, 1)
    assert stats.requests == len(lines) == len(site.requests) == 2


def bot_site(site: Site) -> None:
    """A robots.txt with a group of its own for mybot, and a start page linking to what each group forbids."""
    site.page(
        "/robots.txt",
        "User-agent: mybot\nDisallow: /private\n\nUser-agent: *\nDisallow: /star-only\n",
        content_type="text/plain",
    )
    site.page("/", '<a href="/private">p</a><a href="/star-only">s</a><a href="/public">o</a>')
    for path in ("/private", "/star-only", "/public"):
        site.page(path, f"<p>{path}</p>")


@pytest.mark.parametrize("kind", ["browser", "adaptive"])
def test_a_browser_user_agent_is_the_crawls_one_identity_and_robots_obeys_its_group(
    site: Site, chrome: LocalChrome, kind: str
) -> None:
    bot_site(site)
    backend: Backend = BrowserBackend(drivers=1, user_agent="MyBot/2.0", **chrome)
    if kind == "adaptive":
        backend = AdaptiveBackend(backend, default="browser")  # every page over HTTP's robots.txt and the browser
    router = Router()

    @router.default
    async def page(links: Links) -> None:
        await links.same_origin()

    stats = Crawler(router, backend=backend, concurrency=1).run([site.url("/")])
    assert site.hits(robots=True) == {"/robots.txt": 1, "/": 1, "/star-only": 1, "/public": 1}
    assert stats.skipped("robots") == 1
    assert {request.headers.get("user-agent") for request in site.requests} == {"MyBot/2.0"}


def test_an_http_side_that_names_another_user_agent_is_a_config_error(chrome: LocalChrome) -> None:
    with pytest.raises(ConfigError, match="one identity"):
        AdaptiveBackend(
            BrowserBackend(drivers=1, user_agent="MyBot/2.0", **chrome), http=HttpBackend(user_agent="Other/1.0")
        )


@pytest.mark.parametrize(
    ("robots", "limits", "processes"),
    [
        pytest.param("User-agent: *\nCrawl-delay: 1\n", HostLimits(max_in_flight=4), 1, id="crawl-delay"),
        pytest.param("", HostLimits(max_in_flight=4, per_second=1.0), 1, id="per-second"),
        pytest.param("User-agent: *\nCrawl-delay: 1\n", HostLimits(max_in_flight=4), 2, id="worker-processes"),
    ],
)
def test_a_render_is_spaced_from_its_fetch_like_any_request_and_spacing_counts_at_send(
    site: Site, chrome: LocalChrome, robots: str, limits: HostLimits, processes: int
) -> None:
    # The first render starts the browser, seconds after the crawl marked it sent: the next request
    # must still come a full second after the render reached the site.
    site.page("/robots.txt", robots, content_type="text/plain")
    site.page("/", '<a href="/a">a</a>')
    site.page("/a", "<p>a</p>")
    adaptive = AdaptiveBackend(BrowserBackend(drivers=1, **chrome), default=lambda response: True, learn_after=None)
    router = Router()

    @router.default
    async def page(links: Links) -> None:
        await links.same_origin()

    stats = Crawler(router, backend=adaptive, host_limits=limits, processes=processes).run([site.url("/")])
    assert (stats.finished, stats.failed) == (2, 0)
    pages = site.page_requests()
    assert [request.path for request in pages] == ["/", "/", "/a", "/a"]  # each fetched, then rendered
    gaps = [later.at - earlier.at for earlier, later in itertools.pairwise(pages)]
    assert min(gaps) >= 0.9, gaps
