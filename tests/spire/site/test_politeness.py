"""Politeness and lifecycle of the site crawl: rates, pauses, retries, credentials, cookies, shutdown."""

from __future__ import annotations

import threading
import time

import anyio
import pytest

import spire
from spire.site import CrawlPage, SiteCrawl, polite_limits
from spire_core.errors import ConfigError
from spire_core.limits import HostLimits
from tests.sites.server import Reply, Request, Site
from tests.spire.site.helpers import (
    FAST,
    VirtualHosts,
    collect,
    gaps,
    header,
    page,
    page_paths,
    paths,
    redirect,
    urls_of,
)

pytestmark = pytest.mark.anyio


async def test_by_default_one_request_at_a_time_and_at_most_one_a_second(site: Site) -> None:
    site.page("/", page("home", "/a", "/b"), delay=0.05)
    site.page("/a", page("a"), delay=0.05)
    site.page("/b", page("b"), delay=0.05)
    crawl = spire.crawl(site.url("/"))
    pages, _ = await collect(crawl, within=15)
    assert len(pages) == 3
    assert paths(site)[:2] == ["/robots.txt", "/sitemap.xml"]  # every request counts, these too
    assert len(site.requests) == 5
    assert site.peak == 1
    # Requests are spaced when they are admitted: the first one also opens the connection, so the
    # server may see it a little late, and the gap after it a little short.
    spacing = gaps(site.requests)
    assert min(spacing) >= 0.8
    assert min(spacing[1:]) >= 0.9
    assert site.requests[-1].at - site.requests[0].at >= 3.8
    assert crawl.stats.requests == 5


def test_the_polite_defaults() -> None:
    limits = polite_limits()
    assert (limits.max_in_flight, limits.per_second, limits.max_total_in_flight) == (1, 1.0, 16)
    assert limits.pause_on == frozenset({429, 503})


async def test_at_most_16_requests_are_in_flight_overall(site: Site) -> None:
    links = [f"/p{number}" for number in range(40)]
    site.page("/", page("home", *links))
    for link in links:
        site.page(link, page(link), delay=0.2)
    crawl = spire.crawl(site.url("/"), host_limits=HostLimits(max_in_flight=64))
    pages, _ = await collect(crawl)
    assert len(pages) == 41
    assert site.peak == 16


async def test_429_and_503_pause_the_host_and_the_page_is_tried_up_to_three_times(site: Site) -> None:
    busy = (503, {"Retry-After": "1", "Content-Type": "text/html"}, b"busy")
    limited = (429, {"Retry-After": "1", "Content-Type": "text/html"}, b"slow down")
    site.sequence("/busy", [busy, limited, (200, {"Content-Type": "text/html"}, page("finally").encode())])
    site.page("/", page("home", "/busy", "/a", "/b", "/c"))
    for name in "abc":
        site.page(f"/{name}", page(name), delay=0.01)
    # One request at a time, so every request after a refusal was admitted after its answer.
    crawl = spire.crawl(site.url("/"), host_limits=HostLimits(max_in_flight=1))
    pages, _ = await collect(crawl)
    assert site.url("/busy") in urls_of(pages)
    assert page_paths(site).count("/busy") == 3
    # Nothing went to the host while it was paused: the next request after each refusal waited its Retry-After.
    times = [request.at for request in site.requests]
    refusals = [request.at for request in site.requests if request.path == "/busy"][:2]
    for refused_at in refusals:
        following = [at for at in times if at > refused_at]
        assert following
        assert following[0] - refused_at >= 0.95


async def test_a_page_failing_three_times_comes_out_as_an_error_and_the_crawl_goes_on(site: Site) -> None:
    site.page("/", page("home", "/down", "/up"))
    site.page("/down", "boom", status=500, headers={"Retry-After": "0"})
    site.page("/up", page("up"))
    crawl = spire.crawl(site.url("/"), host_limits=FAST)
    pages, errors = await collect(crawl)
    assert urls_of(pages) == {site.url("/"), site.url("/up")}
    assert [(error.url, error.category) for error in errors] == [(site.url("/down"), "status")]
    assert page_paths(site).count("/down") == 3
    assert crawl.stats.errors == 1


# -- credentials and cookies -------------------------------------------------------------------------


async def test_authorization_and_cookie_headers_go_only_to_the_seed_origin(site: Site, other_site: Site) -> None:
    site.route("/", lambda request: redirect(other_site.url("/landing")))
    other_site.page("/landing", page("landing"))
    headers = {"Authorization": "Bearer secret", "Cookie": "token=abc", "X-Team": "docs"}
    pages, _ = await collect(spire.crawl(site.url("/"), host_limits=FAST, headers=headers))
    assert urls_of(pages) == {other_site.url("/landing")}
    for request in site.requests:
        assert header(request, "authorization") == "Bearer secret"
        assert header(request, "cookie") == "token=abc"
    assert other_site.requests  # its robots.txt, its sitemap-free landing page
    for request in other_site.requests:
        assert header(request, "authorization") is None
        assert header(request, "cookie") is None
        assert header(request, "x-team") == "docs"  # other default headers go everywhere


async def test_credentials_never_reach_another_host_of_the_same_site(site: Site, other_site: Site) -> None:
    site.page("/", page("www", "http://blog.shop.test/"))
    other_site.page("/", page("blog"))
    with VirtualHosts({"www.shop.test": site, "blog.shop.test": other_site}) as proxy:
        crawl = spire.crawl(
            "http://www.shop.test/",
            scope="domain",
            host_limits=FAST,
            backend=proxy.backend(),
            headers={"Authorization": "Basic dXNlcjpwYXNz"},
        )
        pages, _ = await collect(crawl)
    assert len(pages) == 2
    assert all(header(request, "authorization") for request in site.requests)
    assert not any(header(request, "authorization") for request in other_site.requests)


async def test_the_cookie_jar_matches_cookies_by_path(site: Site) -> None:
    set_cookie = {"Set-Cookie": "area=members; Path=/members", "Content-Type": "text/html"}
    site.route("/", lambda request: (200, set_cookie, page("home", "/members/a", "/public").encode()))
    site.page("/members/a", page("a"), delay=0.01)
    site.page("/public", page("public"), delay=0.01)
    await collect(spire.crawl(site.url("/"), host_limits=FAST))
    cookies = {request.path: header(request, "cookie") for request in site.requests}
    assert cookies["/members/a"] == "area=members"
    assert cookies["/public"] is None


async def test_the_cookie_jar_matches_cookies_by_host_and_domain(site: Site, other_site: Site) -> None:
    cookies = {"Set-Cookie": "host_only=1", "Content-Type": "text/html"}
    site.route("/", lambda request: (200, cookies, page("www", "/next").encode()))
    shared = {"Set-Cookie": "shared=1; Domain=shop.test", "Content-Type": "text/html"}
    site.route("/next", lambda request: (200, shared, page("next", "http://blog.shop.test/").encode()))
    other_site.page("/", page("blog", "/post"))
    other_site.page("/post", page("post"))
    with VirtualHosts({"www.shop.test": site, "blog.shop.test": other_site}) as proxy:
        crawl = spire.crawl("http://www.shop.test/", scope="domain", host_limits=FAST, backend=proxy.backend())
        await collect(crawl)
    sent = {request.path: header(request, "cookie") or "" for request in other_site.requests}
    assert "shared=1" in sent["/post"]
    assert "host_only" not in sent["/post"]


# -- lifecycle ---------------------------------------------------------------------------------------


async def test_shutdown_ends_the_crawl_and_in_flight_requests_fail_as_shut_down(site: Site) -> None:
    links = [f"/p{number}" for number in range(30)]
    site.page("/", page("home", *links))
    for link in links:
        site.page(link, page(link), delay=0.3)
    crawl = spire.crawl(site.url("/"), host_limits=FAST)
    pages: list[CrawlPage] = []
    shut_down: list[str] = []
    stopped_at = 0.0
    with anyio.fail_after(10):
        async with crawl:
            async for item in crawl:
                if isinstance(item, CrawlPage):
                    pages.append(item)
                    if len(pages) == 2:
                        stopped_at = time.monotonic()
                        crawl.shutdown()
                else:
                    assert item.category == "shut_down"
                    shut_down.append(item.url)
    assert time.monotonic() - stopped_at < 1.0
    assert 2 <= len(pages) < 10  # with those kept before the shutdown, still waiting to be read
    assert 1 <= len(shut_down) <= 4  # the requests that were in flight
    # Nothing new started: pages take 0.3 s each, so a request started by the crawl after the
    # shutdown would reach the server well after it; only those already on their way did.
    await anyio.sleep(0.4)
    assert max(request.at for request in site.requests) < stopped_at + 0.1
    assert crawl.stats.errors_by_category["shut_down"] == len(shut_down)


async def test_leaving_the_loop_early_stops_the_crawl(site: Site) -> None:
    links = [f"/p{number}" for number in range(30)]
    site.page("/", page("home", *links))
    released = threading.Event()  # the linked pages answer only once the crawl has been left

    def held(request: Request) -> Reply:
        released.wait(timeout=10)
        return 200, {"Content-Type": "text/html"}, page(request.path).encode()

    for link in links:
        site.route(link, held)
    crawl = spire.crawl(site.url("/"), host_limits=FAST)
    try:
        with anyio.fail_after(5):  # leaving does not wait for the answers in flight
            async with crawl:
                async for _ in crawl:
                    break
        requested = len(site.requests)
    finally:
        released.set()
    await anyio.sleep(0.3)
    assert len(site.requests) == requested  # nothing asked for once it was left
    held_links = [request.path for request in site.requests if request.path in links]
    assert len(held_links) <= (FAST.max_in_flight or 0)  # held in flight: none answered, none followed
    assert {request.path for request in site.requests} - set(held_links) <= {"/robots.txt", "/sitemap.xml", "/"}


async def test_shutdown_before_the_crawl_starts_fetches_nothing(site: Site) -> None:
    site.page("/", page("home"))
    crawl = spire.crawl(site.url("/"), host_limits=FAST)
    crawl.shutdown()
    pages, errors = await collect(crawl)
    assert pages == []
    assert errors == []
    assert site.requests == []


async def test_a_crawl_is_iterated_inside_async_with_and_runs_once(site: Site) -> None:
    site.page("/", page("home"))
    crawl = spire.crawl(site.url("/"), host_limits=FAST)
    with pytest.raises(ConfigError, match="async with"):
        aiter(crawl)
    await collect(crawl)
    with pytest.raises(ConfigError, match="once"):
        await crawl.__aenter__()


def test_bad_options_are_refused_early() -> None:
    with pytest.raises(ConfigError):
        spire.crawl("http://example.com/", scope="site")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        spire.crawl("http://example.com/", respect="nothing")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        spire.crawl("http://example.com/", limit=0)
    with pytest.raises(spire.SpireError):
        spire.crawl("ftp://example.com/")
    assert isinstance(spire.crawl("http://example.com/"), SiteCrawl)
