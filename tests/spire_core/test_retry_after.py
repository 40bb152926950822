"""A server-asked wait (Retry-After) is capped, and no due time is ever infinite."""

from __future__ import annotations

import math
import time
from datetime import timedelta
from pathlib import Path

import anyio
import pytest

from spire import Crawler, CrawlStats, HostLimits, MemoryFrontier, Response, Retry, Router
from spire_core.errors import ConfigError
from spire_core.frontier.base import Frontier
from spire_core.frontier.redis import RedisFrontier
from spire_core.frontier.sqlite import SqliteFrontier
from spire_core.limits import MAX_RETRY_AFTER, parse_retry_after
from tests.redis_server import redis_server, redis_url
from tests.sites.server import Site

__all__ = ["redis_server", "redis_url"]  # fixtures

HUGE = ["9" * 400, "99999", "Fri, 01 Jan 2100 00:00:00 GMT"]


@pytest.mark.parametrize("value", HUGE)
def test_a_huge_retry_after_is_cut_to_the_cap(value: str) -> None:
    assert parse_retry_after(value) == MAX_RETRY_AFTER
    assert parse_retry_after(value, max_wait=timedelta(seconds=2)) == 2.0


def test_an_ordinary_retry_after_is_kept_and_nonsense_is_none() -> None:
    assert parse_retry_after("120") == 120.0
    assert parse_retry_after("Fri, 01 Jan 2100 00:00:00 GMT", now=4102444790.0) == 10.0
    assert parse_retry_after("-5") is None
    assert parse_retry_after("١٢") is None  # Arabic-Indic digits are not delay-seconds
    assert parse_retry_after("Sat, 99 Foo 99999999 99:99:99 GMT") is None


@pytest.mark.parametrize("after", [math.inf, -1.0, math.nan, 1e300, timedelta(days=30)])
def test_a_retry_with_no_finite_due_time_is_refused(after: float | timedelta) -> None:
    with pytest.raises(ConfigError, match="Retry"):
        Retry(after=after)


def frontier(store: str, tmp_path: Path, request: pytest.FixtureRequest) -> Frontier:
    if store == "memory":
        return MemoryFrontier().dedup().retry(3, backoff=0.01)
    if store == "sqlite":
        return SqliteFrontier(tmp_path / "f.db").dedup().retry(3, backoff=0.01)
    return RedisFrontier(request.getfixturevalue("redis_url"), name="later", poll=0.05).dedup().retry(3, backoff=0.01)


def quiet_router() -> Router:
    router = Router()

    @router.default
    async def page(response: Response) -> None:
        pass

    return router


@pytest.mark.parametrize("store", ["memory", "sqlite", "redis"])
@pytest.mark.parametrize("value", HUGE)
def test_a_seed_told_to_come_back_much_later_fails_at_once_with_retry_wait(
    site: Site, tmp_path: Path, request: pytest.FixtureRequest, store: str, value: str
) -> None:
    # Past the retry policy's max_wait (five minutes by default) the seed fails with a clear category
    # instead of sleeping for a day or a century; the host itself is paused for max_pause at most.
    site.sequence("/later", [(503, {"Retry-After": value}, b""), (200, {"Content-Type": "text/html"}, b"ok")])
    limits = HostLimits(pause_on=frozenset({503}), max_pause=0.2)
    started = time.monotonic()
    stats = Crawler(quiet_router(), host_limits=limits, frontier=frontier(store, tmp_path, request)).run(
        [site.url("/later")]
    )
    assert (stats.finished, stats.failed, stats.retries) == (0, 1, 0)
    assert stats.errors_by_category["retry_wait"] == 1
    assert [request.path for request in site.requests if request.path != "/robots.txt"] == ["/later"]
    assert time.monotonic() - started < 20  # nothing pending, no hang


@pytest.mark.parametrize("store", ["memory", "sqlite", "redis"])
def test_a_server_always_asking_for_a_century_fails_the_seed(
    site: Site, tmp_path: Path, request: pytest.FixtureRequest, store: str
) -> None:
    site.page("/never", "", status=429, headers={"Retry-After": "9" * 400})
    limits = HostLimits(pause_on=frozenset({429}), max_pause=0.05)
    stats = Crawler(quiet_router(), host_limits=limits, frontier=frontier(store, tmp_path, request)).run(
        [site.url("/never")]
    )
    assert (stats.finished, stats.failed) == (0, 1)
    assert stats.errors_by_category["retry_wait"] == 1  # past max_wait: failed at once, not slept on
    assert [request.path for request in site.requests if request.path != "/robots.txt"] == ["/never"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the HTTP backend's default transport is aiohttp


async def crawl_within(crawler: Crawler, seeds: list[str], *, seconds: float) -> CrawlStats:
    with anyio.fail_after(seconds):  # before: five minutes a try of robots.txt, 25 minutes in all
        return await crawler.arun(seeds)


@pytest.mark.anyio
async def test_a_robots_txt_asking_for_a_day_ends_its_hosts_seeds_at_once_as_retry_wait(site: Site) -> None:
    site.page("/robots.txt", "", status=429, headers={"Retry-After": "99999"})
    for path in ("/a", "/b", "/c"):
        site.page(path, "<p>x</p>")
    # The crawl's defaults: polite host limits (pause on 429 for at most max_pause) and RFC 9309's four retries.
    stats = await crawl_within(Crawler(quiet_router()), [site.url(p) for p in ("/a", "/b", "/c")], seconds=20)
    assert (stats.finished, stats.failed) == (0, 3)
    assert stats.errors_by_category["retry_wait"] == 3
    assert [request.path for request in site.requests] == ["/robots.txt"]  # asked once, not five times


@pytest.mark.anyio
@pytest.mark.parametrize("processes", [1, 2])
async def test_a_page_asking_for_a_day_ends_the_seeds_queued_behind_it_unsent(site: Site, processes: int) -> None:
    site.page("/first", "", status=429, headers={"Retry-After": "99999"})
    for path in ("/second", "/third"):
        site.page(path, "<p>x</p>")
    limits = HostLimits(max_in_flight=1, pause_on=frozenset({429}))
    # With processes=2 the answer crosses from a worker: it must reach the gate before the slot it came on.
    crawler = Crawler(quiet_router(), host_limits=limits, processes=processes)
    stats = await crawl_within(crawler, [site.url(p) for p in ("/first", "/second", "/third")], seconds=20)
    assert (stats.finished, stats.failed) == (0, 3)
    assert stats.errors_by_category["retry_wait"] == 3
    assert [request.path for request in site.page_requests()] == ["/first"]


def test_a_handler_asking_for_an_infinite_retry_stops_the_crawl_with_a_config_error(site: Site) -> None:
    site.page("/p", "<p>x</p>")
    router = Router()

    @router.default
    async def page(response: Response) -> Retry:
        return Retry(after=math.inf)

    # A mistake in the handler's code, not in the page: it stops the crawl, named, at once.
    with pytest.raises(ConfigError, match=r"Retry\(after=\.\.\.\)"):
        Crawler(router, frontier=MemoryFrontier().dedup().retry(3, backoff=0.01)).run([site.url("/p")])
