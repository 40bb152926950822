"""``RedisFrontier`` against a real redis-server holding bad data: poisoned queue records, stale origins."""

from __future__ import annotations

import logging

import anyio
import pytest
import redis

from spire import Crawler, HostLimits, Response, Router
from spire_core.frontier.redis import RedisFrontier
from spire_core.seed import Seed
from tests.sites.server import Site

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # redis-py's client runs on asyncio only


def router() -> Router:
    routes = Router()

    @routes.default
    async def page(response: Response) -> None:
        pass

    return routes


def poison(redis_url: str, key: str, members: list[str]) -> None:
    """Write queue members by hand, as a buggy program or a person with redis-cli would."""
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        for n, member in enumerate(members):
            client.zadd(key, {f"{n:016d}{member}": -5})  # priority 5: ahead of every good seed
    finally:
        client.close()


async def crawl_with_workers(redis_url: str, seeds: list[str], workers: int = 2) -> list[object]:
    """``workers`` crawlers on one Redis crawl, each with its own frontier; their stats."""
    frontiers = [RedisFrontier(redis_url, name="bad", poll=0.05) for _ in range(workers)]
    stats: list[object] = [None] * workers

    async def run(i: int) -> None:
        crawler = Crawler(router(), concurrency=2, host_limits=HostLimits(max_in_flight=1), frontier=frontiers[i])
        stats[i] = await crawler.arun(seeds if i == 0 else [])

    try:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for i in range(workers):
                    tg.start_soon(run, i)
    finally:
        for frontier in frontiers:
            await frontier.aclose()
    return stats


async def test_malformed_queue_records_are_moved_aside_and_the_crawl_goes_on(
    site: Site, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    for n in range(6):
        site.page(f"/p{n}", "ok")
    origin = site.origin
    frontier = RedisFrontier(redis_url, name="bad")
    await frontier.push([Seed(site.url(f"/p{n}")) for n in range(6)])
    await frontier.aclose()
    bad = [
        f"0\t{origin}\tthis is not JSON",  # JSONDecodeError
        f"0\t{origin}\t{{}}",  # KeyError: no "u"
        f'high\t{origin}\t{{"u":"{origin}/x"}}',  # ValueError: a priority that is no number
        f"0\t{origin}\t[1, 2]",  # JSON that is no object
        f'0\t{origin}\t{{"u":"{origin}/y","b":"%%% not base64"}}',  # a body that is no base64
        "no tabs at all",
    ]
    poison(redis_url, f"bad:q:{origin}", bad)
    caplog.set_level(logging.WARNING, logger="spire.frontier")

    stats = await crawl_with_workers(redis_url, [])

    assert site.hits() == {f"/p{n}": 1 for n in range(6)}  # every good seed was crawled, once
    assert sum(s.pages for s in stats) == 6  # type: ignore[attr-defined]
    check = RedisFrontier(redis_url, name="bad")
    try:
        dead = await check.dead_letters()
    finally:
        await check.aclose()
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:  # nothing is left leased, nor holding a slot of its origin
        assert (client.zcard("bad:leases"), client.hlen("bad:leased"), client.hlen("bad:inflight")) == (0, 0, 0)
    finally:
        client.close()
    assert sorted(record for record, _ in dead) == sorted(bad)
    assert all("no seed" in why for _, why in dead)
    warnings = [r.getMessage() for r in caplog.records if r.name == "spire.frontier" and "bad:dead" in r.getMessage()]
    assert len(warnings) == len(bad)  # each named, once
    assert any("this is not JSON" in line for line in warnings)


async def test_a_stale_origin_with_no_queue_does_not_keep_the_workers_polling(site: Site, redis_url: str) -> None:
    site.page("/", "ok")
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        client.zadd("bad:origins", {"http://127.0.0.1:1": 0, "http://ghost.example": float("inf")})
    finally:
        client.close()

    stats = await crawl_with_workers(redis_url, [site.url("/")])  # within fail_after: the workers end

    assert sum(s.pages for s in stats) == 1  # type: ignore[attr-defined]
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        assert client.zcard("bad:origins") == 0  # the stale members were dropped
    finally:
        client.close()


async def test_a_malformed_retry_or_expired_lease_is_moved_aside_when_it_comes_back(
    site: Site, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    for n in range(3):
        site.page(f"/p{n}", "ok")
    origin = site.origin
    frontier = RedisFrontier(redis_url, name="bad")
    await frontier.push([Seed(site.url(f"/p{n}")) for n in range(3)])
    await frontier.aclose()
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        client.zadd("bad:delayed", {f"{0:016d}no header here": 0, f"{1:016d}soon\t{origin}\tnot JSON": 0})
        client.hset("bad:leased", "999", "a lease nobody can read")  # its worker died holding it
        client.zadd("bad:leases", {"999": 0})
    finally:
        client.close()
    caplog.set_level(logging.WARNING, logger="spire.frontier")

    stats = await crawl_with_workers(redis_url, [])

    assert sum(s.pages for s in stats) == 3  # type: ignore[attr-defined]
    check = RedisFrontier(redis_url, name="bad")
    try:
        dead = sorted(record for record, _ in await check.dead_letters())
    finally:
        await check.aclose()
    assert dead == sorted(["no header here", f"soon\t{origin}\tnot JSON", "a lease nobody can read"])
