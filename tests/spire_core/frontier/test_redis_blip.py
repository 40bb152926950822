"""A Redis blip: the server stops for about a second and comes back on the same port mid-crawl."""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from spire import Crawler, HostLimits, Html, Links, Router, Url
from spire_core.errors import ConnectError
from spire_core.frontier.redis import RedisFrontier
from spire_core.seed import Seed
from tests.redis_server import RedisServer, redis_binary
from tests.sites.server import Site, binary_tree

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # redis-py's client runs on asyncio only


@pytest.fixture
def durable_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server that writes every change to its append-only file, so a restart keeps the crawl."""
    server = RedisServer(redis_binary(), str(tmp_path), aof=True).start()
    try:
        yield server
    finally:
        server.stop()


async def test_a_crawl_rides_out_a_one_second_redis_restart(
    durable_redis: RedisServer, site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    root = binary_tree(site, pages=60, delay=0.01)
    handled: list[str] = []
    enough = anyio.Event()
    router = Router()

    @router.default
    async def page(url: Url, html: Html, links: Links) -> None:
        await links.all()
        handled.append(url)
        if len(handled) == 10:
            enough.set()

    # A command whose reply the outage swallowed may have taken a lease twice; the copy nobody holds
    # comes back when it expires. A short TTL keeps that within the test's bound instead of 60 s.
    frontier = RedisFrontier(durable_redis.url, name="blip", poll=0.05, reconnect_for=20, lease_ttl=3)
    crawler = Crawler(router, concurrency=2, host_limits=HostLimits(max_in_flight=2), frontier=frontier.dedup())
    stats = None

    async def crawl() -> None:
        nonlocal stats
        stats = await crawler.arun([root])

    async def blip() -> None:
        await enough.wait()
        await anyio.to_thread.run_sync(durable_redis.stop)
        await anyio.sleep(1.0)  # the outage itself, not a timing assert
        await anyio.to_thread.run_sync(functools.partial(durable_redis.start, port=durable_redis.port))

    caplog.set_level(logging.WARNING, logger="spire.frontier")
    try:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(crawl)
                tg.start_soon(blip)
        assert stats is not None
        assert stats.failed == 0
        assert {url.rsplit("/", 1)[1] for url in handled} == {str(i) for i in range(60)}  # nothing lost
        assert await frontier.pending() == 0
    finally:
        await frontier.aclose()
    messages = [record.getMessage() for record in caplog.records if record.name == "spire.frontier"]
    assert any("lost the Redis frontier" in message for message in messages)
    assert any("again" in message for message in messages)


async def test_a_redis_that_stays_away_fails_with_a_clear_error_after_the_bound(durable_redis: RedisServer) -> None:
    frontier = RedisFrontier(durable_redis.url, name="gone", reconnect_for=0.5)
    try:
        await frontier.push([Seed("http://a.example/")])
        await anyio.to_thread.run_sync(durable_redis.stop)
        with anyio.fail_after(15), pytest.raises(ConnectError, match=r"could not reach it again within 0.5 s"):
            await frontier.pending()
    finally:
        await frontier.aclose()
