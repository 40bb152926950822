"""Politeness in the engine, for every Router crawl: robots.txt, redirects admitted like links, block
pages, credentials that stay with their origin, and options checked when the crawler is built."""

from __future__ import annotations

import itertools
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from pydantic import BaseModel

from spire import (
    ConfigError,
    Crawler,
    CrawlPolicy,
    Dataset,
    Error,
    HostLimits,
    Html,
    JsonlDataset,
    Links,
    Response,
    Router,
    Seed,
    SeedInfo,
    Url,
)
from spire_core.clock import FakeClock
from spire_core.errors import Blocked, DatasetError
from spire_core.robots import RobotsPolicy
from tests.sites.server import Reply, Request, Site

FAST_ROBOTS = RobotsPolicy(retry_delays=(0.01, 0.01, 0.01, 0.01))


class Item(BaseModel):
    url: str


def visiting_router(visited: list[str], *, follow: bool = True) -> Router:
    router = Router()

    @router.default
    async def page(url: Url, html: Html, links: Links) -> None:
        visited.append(url)
        if follow:
            await links.follow(html.css("a::attr(href)").getall())

    return router


def robots_txt(site: Site, body: str, status: int = 200) -> None:
    site.page("/robots.txt", body, status=status, content_type="text/plain")


# -- robots.txt -------------------------------------------------------------------------------------


def test_a_router_crawl_reads_robots_txt_first_and_never_requests_a_disallowed_path(site: Site) -> None:
    robots_txt(site, "User-agent: *\nDisallow: /private\n")
    site.page("/", '<a href="/private/a">p</a> <a href="/public">ok</a>')
    site.page("/public", "public")
    site.page("/private/a", "secret")
    visited: list[str] = []
    stats = Crawler(visiting_router(visited)).run(site.url("/"))
    paths = [request.path for request in site.requests]
    assert paths[0] == "/robots.txt"
    assert "/private/a" not in paths
    assert sorted(visited) == [site.url("/"), site.url("/public")]
    assert stats.skipped("robots") == 1
    assert stats.requests == 3  # robots.txt counts as a request, like any other


def test_robots_rules_are_read_for_the_user_agents_product_token(site: Site) -> None:
    robots_txt(site, "User-agent: examplebot\nDisallow: /\n\nUser-agent: *\nAllow: /\n")
    site.page("/", "home")
    visited: list[str] = []
    from spire import HttpBackend

    Crawler(visiting_router(visited), backend=HttpBackend(user_agent="ExampleBot/2.1 (+https://x)")).run(site.url("/"))
    assert visited == []
    Crawler(visiting_router(visited), robots="otherbot").run(site.url("/"))
    assert visited == [site.url("/")]


def test_crawl_delay_spaces_every_request_to_the_origin(site: Site) -> None:
    robots_txt(site, "User-agent: *\nCrawl-delay: 0.3\n")
    site.page("/", '<a href="/a">a</a> <a href="/b">b</a>')
    site.page("/a", "a")
    site.page("/b", "b")
    Crawler(visiting_router([]), host_limits=HostLimits(max_in_flight=4)).run(site.url("/"))
    times = [request.at for request in site.requests]
    assert len(times) == 4
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert min(gaps) >= 0.27, gaps  # 0.3 s, measured by the server with a little tolerance


def test_a_5xx_robots_txt_holds_the_origin_and_its_pages_are_skipped_as_unreachable(site: Site) -> None:
    robots_txt(site, "down", status=503)
    site.page("/", "home")
    clock = FakeClock()  # each 503 pauses the origin for 5 s (the polite limits): the fake clock steps over them
    stats = Crawler(visiting_router([]), robots=FAST_ROBOTS, clock=clock).run(site.url("/"))
    assert [request.path for request in site.requests] == ["/robots.txt"] * 5  # the first try and four retries
    assert stats.skipped("robots_unreachable") == 1
    assert (stats.finished, stats.failed) == (0, 0)


def test_a_robots_txt_that_recovers_releases_the_seeds_that_waited(site: Site) -> None:
    answers: list[Reply] = [
        (503, {}, b""),
        (503, {}, b""),
        (200, {"Content-Type": "text/plain"}, b"User-agent: *\nDisallow: /x"),
    ]

    def robots(request: Request) -> Reply:
        return answers.pop(0) if len(answers) > 1 else answers[0]

    site.route("/robots.txt", robots)
    site.page("/", '<a href="/x">x</a>')
    site.page("/x", "x")
    visited: list[str] = []
    clock = FakeClock()  # each 503 pauses the origin for 5 s (the polite limits): the fake clock steps over them
    stats = Crawler(visiting_router(visited), robots=FAST_ROBOTS, clock=clock).run(site.url("/"))
    assert visited == [site.url("/")]
    assert stats.skipped("robots") == 1


def test_robots_false_fetches_everything_and_never_asks_for_robots_txt(site: Site) -> None:
    robots_txt(site, "User-agent: *\nDisallow: /\n")
    site.page("/", '<a href="/a">a</a>')
    site.page("/a", "a")
    visited: list[str] = []
    Crawler(visiting_router(visited), robots=False).run(site.url("/"))
    assert sorted(visited) == [site.url("/"), site.url("/a")]
    assert "/robots.txt" not in site.hits(robots=True)


# -- redirects ------------------------------------------------------------------------------------


def test_a_redirect_to_a_page_also_linked_is_handled_once(site: Site) -> None:
    site.page("/", '<a href="/a">a</a> <a href="/b">b</a>')
    site.page("/a", "", status=301, headers={"Location": "/b"})
    site.page("/b", "b")
    visited: list[str] = []
    router = Router()

    @router.default
    async def page(response: Response, html: Html, links: Links) -> None:
        visited.append(response.url)
        await links.follow(html.css("a::attr(href)").getall())

    stats = Crawler(router, concurrency=1).run(site.url("/"))
    assert visited.count(site.url("/b")) == 1
    assert site.hits()["/b"] == 1
    assert stats.skipped("duplicate") >= 1


def test_a_link_redirected_off_the_strategy_is_a_counted_skip(site: Site, other_site: Site) -> None:
    other_site.page("/there", "elsewhere")
    site.page("/", '<a href="/away">away</a>')
    site.page("/away", "", status=302, headers={"Location": other_site.url("/there").replace("127.0.0.1", "localhost")})
    visited: list[str] = []
    stats = Crawler(visiting_router(visited), policy=CrawlPolicy(strategy="same_hostname")).run(site.url("/"))
    assert visited == [site.url("/")]
    assert stats.skipped("strategy") == 1
    assert other_site.requests == []


def test_a_start_seed_follows_its_redirect_anywhere(site: Site, other_site: Site) -> None:
    other_site.page("/new", "moved")
    site.page("/", "", status=301, headers={"Location": other_site.url("/new").replace("127.0.0.1", "localhost")})
    visited: list[str] = []
    router = Router()

    @router.default
    async def page(response: Response) -> None:
        visited.append(response.url)

    Crawler(router).run(site.url("/"))
    assert visited == [other_site.url("/new").replace("127.0.0.1", "localhost")]


def test_a_redirect_into_a_disallowed_path_is_skipped_as_robots(site: Site) -> None:
    robots_txt(site, "User-agent: *\nDisallow: /private\n")
    site.page("/", "", status=302, headers={"Location": "/private/x"})
    site.page("/private/x", "secret")
    stats = Crawler(visiting_router([])).run(site.url("/"))
    assert "/private/x" not in site.hits()
    assert stats.skipped("robots") == 1


def test_credentials_stay_with_their_origin_across_a_redirect(site: Site, other_site: Site) -> None:
    site.page("/", "", status=302, headers={"Location": other_site.url("/landing")})
    other_site.page("/landing", "hi")
    router = Router()

    @router.default
    async def page(response: Response) -> None:
        pass

    seed = Seed(site.url("/"), headers={"Authorization": "Bearer secret", "X-Trace": "1"})
    Crawler(router).run(seed)
    (landing,) = other_site.page_requests()
    sent = {name.lower(): value for name, value in landing.headers.items()}
    assert "authorization" not in sent
    assert sent["x-trace"] == "1"


def test_credentials_given_by_origin_go_to_that_origin_only(site: Site, other_site: Site) -> None:
    site.page("/", f'<a href="{other_site.url("/x")}">x</a>')
    other_site.page("/x", "x")
    Crawler(
        visiting_router([]), policy=CrawlPolicy(strategy="all"), credentials={site.url("/"): {"Cookie": "s=1"}}
    ).run(site.url("/"))
    assert all(request.headers.get("Cookie") == "s=1" for request in site.requests)
    assert all("Cookie" not in request.headers for request in other_site.requests)


# -- block pages ----------------------------------------------------------------------------------

CHALLENGE = "<html><head><title>Just a moment...</title></head><body>cf-chl</body></html>"


def test_a_block_page_is_not_handed_to_a_handler_unless_it_asks_for_blocks(site: Site) -> None:
    site.page("/", CHALLENGE, status=403, headers={"Server": "cloudflare", "cf-mitigated": "challenge"})
    seen: list[int] = []
    errors: list[BaseException | None] = []
    router = Router()

    @router.default
    async def page(response: Response) -> None:
        seen.append(response.status)

    @router.failed
    async def failed(error: Error) -> None:
        errors.append(error)

    stats = Crawler(router).run(site.url("/"))
    assert seen == []
    assert isinstance(errors[0], Blocked)
    assert stats.errors_by_category["blocked"] == 1

    takes_blocks = Router()

    @takes_blocks.handler("probe", blocks=True)
    async def probe(response: Response) -> None:
        seen.append(response.status)

    Crawler(takes_blocks).run(Seed(site.url("/?again"), tag="probe"))
    assert seen == [403]


# -- options and faults ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "value"),
    [("concurrency", "8"), ("concurrency", 0), ("max_redirects", -1), ("time_budget", -1.0), ("max_requests", 1.5)],
)
def test_bad_crawler_options_are_config_errors_naming_the_value(option: str, value: object) -> None:
    with pytest.raises(ConfigError, match=option):
        Crawler(Router(), **{option: value})  # type: ignore[arg-type]


def test_one_url_string_is_one_seed(site: Site) -> None:
    site.page("/", "home")
    visited: list[str] = []
    Crawler(visiting_router(visited)).run(site.url("/"))
    assert visited == [site.url("/")]


def test_a_dataset_that_cannot_be_written_fails_the_page_and_the_crawl_goes_on(site: Site, tmp_path: Path) -> None:
    site.page("/", '<a href="/a">a</a>')
    site.page("/a", "a")
    # The path passes the check at the start; a folder then takes its place, so every write fails.
    path = tmp_path / "items.jsonl"
    router = Router()
    errors: list[BaseException | None] = []

    @router.default
    async def page(url: Url, items: Dataset[Item], html: Html, links: Links) -> None:
        await links.follow(html.css("a::attr(href)").getall())
        path.mkdir(exist_ok=True)
        await items.push(Item(url=url))

    @router.failed
    async def failed(seed: SeedInfo, error: Error) -> None:
        errors.append(error)

    stats = Crawler(router, datasets={Item: JsonlDataset(Item, path)}).run(site.url("/"))
    assert stats.failed == 2
    assert all(isinstance(error, DatasetError) for error in errors)
    assert "/a" in site.hits()  # the links were pushed before the items failed: the crawl went on


def test_shutdown_from_a_signal_handler_ends_a_crawl_blocked_on_a_slow_server(site: Site) -> None:
    started = threading.Event()

    def slow(request: Request) -> Reply:
        started.set()
        time.sleep(20)
        return 200, {}, b""

    site.route("/slow", slow)
    router = Router()

    @router.default
    async def page(response: Response) -> None:
        pass

    crawler = Crawler(router, robots=False)
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: crawler.shutdown())

    def interrupt() -> None:
        if started.wait(10):
            os.kill(os.getpid(), signal.SIGUSR1)

    threading.Thread(target=interrupt, daemon=True).start()
    try:
        began = time.monotonic()
        stats = crawler.run(site.url("/slow"))
        took = time.monotonic() - began
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert stats.errors_by_category["shut_down"] == 1
    assert took < 5  # the read timeout is 30 s: the signal woke the loop at once


# -- event loops ----------------------------------------------------------------------------------


def test_under_trio_the_default_transport_says_it_needs_asyncio_and_httpx_works(site: Site) -> None:
    import anyio
    import httpx

    from spire import HttpBackend

    site.page("/", "home")
    visited: list[str] = []
    with pytest.raises(ConfigError, match="asyncio only"):
        anyio.run(Crawler(visiting_router(visited)).arun, site.url("/"), backend="trio")
    backend = HttpBackend(transport=httpx.AsyncHTTPTransport())
    stats = anyio.run(Crawler(visiting_router(visited), backend=backend).arun, site.url("/"), backend="trio")
    assert visited == [site.url("/")]
    assert stats.finished == 1


def test_a_handler_that_needs_no_response_uses_no_rate_slot(site: Site) -> None:
    site.page("/", "home")
    router = Router()

    @router.handler("bookkeeping")
    async def bookkeeping(url: Url) -> None:
        pass

    @router.default
    async def page(response: Response) -> None:
        pass

    seeds = [Seed(site.url(f"/?n={n}"), tag="bookkeeping") for n in range(5)] + [Seed(site.url("/"))]
    began = time.monotonic()
    Crawler(router, host_limits=HostLimits(max_in_flight=1, per_second=1.0), robots=False).run(seeds)
    # One request goes out; five seeds that fetched nothing would otherwise have spaced it 5 s later.
    assert time.monotonic() - began < 2.5
    assert site.hits() == {"/": 1}
