"""``RedisFrontier`` against a real redis-server: memory-frontier semantics, shared by many workers."""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from spire import Crawler, Dataset, HostLimits, Html, Links, Router, Url
from spire_core.errors import ConfigError, ConnectError, SpireError
from spire_core.frontier.base import Lease, Ready, Wait
from spire_core.frontier.redis import RedisFrontier
from spire_core.outcome import Done, Fail, Retry
from spire_core.revisit import Revisit
from spire_core.seed import Seed
from tests.redis_server import RedisServer
from tests.sites.server import Site, binary_tree
from tests.spire_core.frontier.helpers import drain, lease_seed, lease_when_ready

pytestmark = pytest.mark.anyio

Make = Callable[..., RedisFrontier]

A = "http://a.example"
B = "http://b.example"
C = "http://c.example"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # redis-py's client runs on asyncio only


@pytest.fixture
async def make(redis_url: str) -> AsyncIterator[Make]:
    """Makes frontiers on the test's Redis (crawl ``"test"`` unless named) and closes them after."""
    made: list[RedisFrontier] = []

    def factory(**options: Any) -> RedisFrontier:
        options.setdefault("name", "test")
        frontier = RedisFrontier(redis_url, **options)
        made.append(frontier)
        return frontier

    yield factory
    for frontier in made:
        await frontier.aclose()


# -- the memory frontier's semantics ---------------------------------------------------------------


async def test_seeds_of_one_origin_come_out_by_priority_then_in_push_order(make: Make) -> None:
    frontier = make()
    await frontier.push([Seed(f"{A}/low"), Seed(f"{A}/high", priority=5), Seed(f"{A}/mid", priority=1)])
    await frontier.push([Seed(f"{A}/low2"), Seed(f"{A}/high2", priority=5)])
    assert await drain(frontier) == [f"{A}/high", f"{A}/high2", f"{A}/mid", f"{A}/low", f"{A}/low2"]


async def test_the_best_priority_among_ready_origins_is_leased_first(make: Make) -> None:
    frontier = make()
    await frontier.push([Seed(f"{A}/0"), Seed(f"{B}/3", priority=3), Seed(f"{C}/1", priority=1)])
    assert [(await lease_seed(frontier)).seed.url for _ in range(3)] == [f"{B}/3", f"{C}/1", f"{A}/0"]


async def test_forefront_seeds_go_ahead_of_the_queue_newest_first(make: Make) -> None:
    frontier = make()
    await frontier.push([Seed(f"{A}/a"), Seed(f"{A}/b")])
    await frontier.push([Seed(f"{A}/c"), Seed(f"{A}/d")], forefront=True)
    assert await drain(frontier) == [f"{A}/d", f"{A}/c", f"{A}/a", f"{A}/b"]


async def test_unique_pushes_report_duplicates_and_seen_tells_without_changing_anything(make: Make) -> None:
    frontier = make()
    result = await frontier.push([Seed(f"{A}/x"), Seed(f"{A}/x#frag"), Seed(f"{A}/y")], unique=True)
    assert [s.url for s in result.added] == [f"{A}/x", f"{A}/y"]
    assert [s.url for s in result.duplicates] == [f"{A}/x#frag"]
    assert await frontier.seen([f"{A}/x", f"{A}/z", f"{A}/y"]) == [True, False, True]
    assert await frontier.seen([f"{A}/z"]) == [False]
    # A plain push neither consults nor fills the seen set.
    plain = await frontier.push([Seed(f"{A}/x"), Seed(f"{A}/z")])
    assert len(plain.added) == 2
    assert await frontier.seen([f"{A}/z"]) == [False]
    assert await frontier.pending() == 4


async def test_every_seed_field_round_trips(make: Make) -> None:
    frontier = make()
    seed = Seed(
        f"{A}/form?q=ß",
        tag="form",
        method="post",
        depth=3,
        priority=-2,
        attempt=1,
        user_data={"nested": {"list": [1, 2.5, None, True]}, "text": "naïve\ttab"},
        headers={"X-Token": "abc", "Accept-Language": "fr"},
        body=b"\x00\xffbinary",
        unique_key="my key",
        revisit=Revisit(etag='W/"7"', hash="ff00", lastmod="2026-12-01", changed_at=1.5, streak=4),
    )
    bare = Seed(f"{B}/plain", tag="", headers={}, body=b"", user_data={})
    await frontier.push([seed, bare])
    by_url = {lease.seed.url: lease.seed for lease in [await lease_seed(frontier), await lease_seed(frontier)]}
    assert by_url[seed.url] == seed
    assert by_url[bare.url] == bare
    assert by_url[bare.url].unique_key == Seed(f"{B}/plain").unique_key


async def test_seeds_whose_user_data_is_not_json_are_refused_with_a_config_error(make: Make) -> None:
    frontier = make()
    with pytest.raises(ConfigError, match="JSON"):
        await frontier.push([Seed(f"{A}/x", user_data={"when": object()})])


async def test_ready_skips_origins_this_process_cannot_take_and_wait_says_when(make: Make) -> None:
    frontier = make(poll=10.0)
    await frontier.push([Seed(f"{A}/1"), Seed(f"{B}/1", priority=-1)])
    busy_a: Ready = lambda origin: 0.4 if origin == A else 0.0  # noqa: E731
    assert (await lease_seed(frontier, busy_a)).seed.url == f"{B}/1"
    waited = await frontier.lease(lambda origin: 0.4)
    assert isinstance(waited, Wait)
    assert waited.seconds == pytest.approx(0.4)
    # Nothing says when a full origin frees up: the frontier polls rather than ending the crawl.
    assert await frontier.lease(lambda origin: math.inf) == Wait(10.0)


async def test_a_retry_waits_its_delay_then_comes_back_on_its_next_attempt(make: Make) -> None:
    frontier = make(poll=10.0)
    await frontier.push([Seed(f"{A}/flaky")])
    lease = await lease_seed(frontier)
    assert await frontier.report(lease, Retry(after=0.3)) == Retry(after=0.3)
    started = time.monotonic()
    waited = await frontier.lease()
    assert isinstance(waited, Wait)
    assert waited.seconds is not None
    assert 0.2 < waited.seconds <= 0.3
    assert await frontier.pending() == 1
    again = await lease_when_ready(frontier)
    assert time.monotonic() - started >= 0.25
    assert (again.seed.url, again.seed.attempt) == (f"{A}/flaky", 1)


async def test_a_released_seed_goes_back_first_without_counting_an_attempt(make: Make) -> None:
    frontier = make()
    await frontier.push([Seed(f"{A}/1"), Seed(f"{A}/2"), Seed(f"{A}/3")])
    lease = await lease_seed(frontier)
    await frontier.release(lease)
    again = await lease_seed(frontier)
    assert (again.seed.url, again.seed.attempt) == (f"{A}/1", 0)
    assert again.token != lease.token
    # The old token is settled: reporting it changes nothing.
    await frontier.report(lease, Done())
    assert await frontier.pending() == 3


async def test_pending_counts_queued_delayed_and_leased_seeds(make: Make) -> None:
    frontier = make()
    await frontier.push([Seed(f"{A}/{i}") for i in range(4)])
    assert await frontier.pending() == 4
    done, retried, held = await lease_seed(frontier), await lease_seed(frontier), await lease_seed(frontier)
    assert await frontier.pending() == 4
    await frontier.report(done, Done())
    await frontier.report(retried, Retry(after=60))
    assert await frontier.pending() == 3
    await frontier.report(held, Done())
    assert await frontier.pending() == 2


async def test_failed_seeds_are_kept_with_their_error_text_and_settled(make: Make) -> None:
    frontier = make()
    await frontier.push([Seed(f"{A}/bad", tag="t", user_data={"n": 1})])
    lease = await lease_seed(frontier)
    await frontier.report(lease, Fail(ValueError("boom")))
    assert await frontier.failures() == [(lease.seed, "ValueError: boom")]
    assert await frontier.pending() == 0
    assert await frontier.lease() == Wait(None)


async def test_fluent_facades_compose_on_top(make: Make) -> None:
    frontier = make().dedup().retry(2, backoff=0.01)
    await frontier.push([Seed(f"{A}/x"), Seed(f"{A}/x")])
    assert await frontier.pending() == 1
    first = await lease_when_ready(frontier)
    await frontier.report(first, Retry())
    second = await lease_when_ready(frontier)
    assert second.seed.attempt == 1
    applied = await frontier.report(second, Retry())
    assert isinstance(applied, Fail)
    store = frontier.inner.inner  # type: ignore[attr-defined]
    assert [seed.url for seed, _ in await store.failures()] == [f"{A}/x"]


# -- many workers ----------------------------------------------------------------------------------


async def test_wait_none_only_when_nothing_is_queued_delayed_or_leased_by_any_worker(make: Make) -> None:
    one, two = make(poll=0.2), make(poll=0.2)
    assert await one.lease() == Wait(None)
    await one.push([Seed(f"{A}/only")])
    lease = await lease_seed(one)
    waiting = await two.lease()
    assert isinstance(waiting, Wait)
    assert waiting.seconds is not None
    assert waiting.seconds <= 0.2
    await one.report(lease, Done())
    assert await two.lease() == Wait(None)


async def test_two_frontiers_share_the_work_and_never_hand_out_a_seed_twice(make: Make) -> None:
    one, two = make(), make()
    urls = [f"http://{host}.example/{i}" for host in "abcde" for i in range(40)]
    await one.push([Seed(url) for url in urls])
    leased: dict[str, list[str]] = {"one": [], "two": []}

    async def work(frontier: RedisFrontier, who: str) -> None:
        while True:
            result = await frontier.lease()
            if isinstance(result, Wait):
                if result.seconds is None:
                    return
                await anyio.sleep(min(result.seconds, 0.01))
                continue
            leased[who].append(result.seed.url)
            await frontier.report(result, Done())

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for _ in range(16):
                tg.start_soon(work, one, "one")
                tg.start_soon(work, two, "two")
    everything = leased["one"] + leased["two"]
    assert sorted(everything) == sorted(urls)
    assert leased["one"]
    assert leased["two"]
    assert await one.pending() == 0


async def test_an_expired_lease_goes_to_another_worker_and_the_late_report_is_ignored(make: Make) -> None:
    dead = make(lease_ttl=0.2)
    alive = make(poll=10.0)
    await dead.push([Seed(f"{A}/1"), Seed(f"{A}/2"), Seed(f"{A}/3")])
    lost = await lease_seed(dead)
    assert (await lease_seed(alive)).seed.url == f"{A}/2"
    waited = await alive.lease(lambda origin: math.inf)  # too busy to take /3: told when the lease expires
    assert isinstance(waited, Wait)
    assert waited.seconds is not None
    assert waited.seconds <= 0.2
    await anyio.sleep(waited.seconds)
    again = await lease_seed(alive)
    assert again.seed == lost.seed  # first in its origin's queue again, ahead of /3, on the same attempt
    await dead.report(lost, Done())
    assert await alive.pending() == 3  # the late report did not settle the seed the live worker holds
    await alive.report(again, Done())
    assert await alive.pending() == 2


async def test_a_worker_that_keeps_talking_to_the_frontier_keeps_its_leases(make: Make) -> None:
    busy, other = make(lease_ttl=0.3), make()
    await busy.push([Seed(f"{A}/long"), Seed(f"{B}/other")])
    held = await lease_seed(busy)
    with anyio.move_on_after(1.0):
        while True:
            await busy.lease(lambda origin: math.inf)  # any call renews what this worker holds
            result = await other.lease()
            assert not (isinstance(result, Lease) and result.seed == held.seed), "a live worker's lease expired"
            if isinstance(result, Lease):
                await other.report(result, Done())
            await anyio.sleep(0.05)
    assert await busy.renew() == 1


async def test_keep_alive_renews_leases_while_no_call_is_made(make: Make) -> None:
    slow, other = make(lease_ttl=0.3), make(poll=0.05)
    await slow.push([Seed(f"{A}/slow")])
    held = await lease_seed(slow)
    async with slow.keep_alive():
        with anyio.move_on_after(1.0):
            while True:
                result = await other.lease()
                assert isinstance(result, Wait), "a kept-alive lease expired"
                await anyio.sleep(0.05)
    again = await lease_when_ready(other)  # no longer renewed: it expires and goes to the other worker
    assert again.seed == held.seed
    assert await slow.renew() == 0


async def test_the_per_origin_in_flight_cap_is_shared_by_every_worker(make: Make) -> None:
    one = make(per_origin_in_flight=2, poll=10.0)
    two = make()  # stores no limits: honours the ones the crawl has
    await one.push([Seed(f"{A}/{i}") for i in range(5)] + [Seed(f"{B}/0")])
    first, second = await lease_seed(one), await lease_seed(two)
    assert {first.origin, second.origin} == {A}
    third = await lease_seed(two)
    assert third.origin == B  # A is at its cap for every worker
    capped = await one.lease()
    assert isinstance(capped, Wait)
    assert capped.seconds == 10.0  # nothing says when a slot frees: poll
    await two.report(second, Done())
    assert (await lease_seed(one)).origin == A
    assert isinstance(await two.lease(), Wait)


async def test_a_lowered_cap_applies_at_once_to_origins_already_in_line(make: Make) -> None:
    roomy = make(per_origin_in_flight=3)
    await roomy.push([Seed(f"{A}/{i}") for i in range(4)])
    await lease_seed(roomy)
    await lease_seed(roomy)
    strict = make(per_origin_in_flight=1, poll=10.0)
    assert await strict.lease() == Wait(10.0)
    assert await roomy.lease() == Wait(0.5)


async def test_the_per_origin_interval_spaces_leases_across_workers(make: Make) -> None:
    one = make(per_origin_interval=0.3, poll=10.0)
    two = make(poll=10.0)
    await one.push([Seed(f"{A}/{i}") for i in range(2)])
    started = time.monotonic()
    await lease_seed(one)
    waited = await two.lease()
    assert isinstance(waited, Wait)
    assert waited.seconds is not None
    assert 0.2 < waited.seconds <= 0.3
    await lease_when_ready(two)
    assert time.monotonic() - started >= 0.25


async def test_a_fresh_frontier_starts_empty_and_another_object_resumes_the_crawl(make: Make) -> None:
    first = make()
    await first.push([Seed(f"{A}/1"), Seed(f"{A}/2")], unique=True)
    await first.aclose()
    resumed = make()
    assert await resumed.pending() == 2
    assert await resumed.seen([f"{A}/1"]) == [True]
    other_crawl = make(name="other")
    await other_crawl.push([Seed(f"{B}/1")])
    fresh = make(fresh=True)
    assert await fresh.pending() == 0
    assert await fresh.seen([f"{A}/1"]) == [False]
    assert await fresh.lease() == Wait(None)
    assert await other_crawl.pending() == 1  # another crawl's keys are left alone


async def test_aclose_hands_back_the_leases_still_held(make: Make) -> None:
    quitter, other = make(), make()
    await quitter.push([Seed(f"{A}/1")])
    lease = await lease_seed(quitter)
    await quitter.aclose()
    assert (await lease_seed(other)).seed == lease.seed
    with pytest.raises(SpireError, match="closed"):
        await quitter.pending()


# -- errors ----------------------------------------------------------------------------------------


async def test_an_unreachable_redis_is_a_config_error_naming_the_url_without_its_password(dead_port: int) -> None:
    url = f"redis://:hunter2@127.0.0.1:{dead_port}/0"
    frontier = RedisFrontier(url, connect_timeout=2.0)
    with pytest.raises(ConfigError) as caught:
        await frontier.pending()
    assert f"redis://:***@127.0.0.1:{url.rsplit(':', 1)[1]}" in str(caught.value)
    assert "hunter2" not in str(caught.value)
    await frontier.aclose()


def test_a_url_that_is_not_redis_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="not a Redis URL"):
        RedisFrontier("http://127.0.0.1:6379/0")
    with pytest.raises(ConfigError, match="lease_ttl"):
        RedisFrontier(lease_ttl=0)


async def test_losing_redis_mid_crawl_raises_a_spire_connect_error(redis_server: RedisServer) -> None:
    own = RedisServer(redis_server.binary, redis_server.directory).start()
    frontier = RedisFrontier(own.url, connect_timeout=1.0, reconnect_for=0.2)  # a blip is ridden out; this is no blip
    try:
        await frontier.push([Seed(f"{A}/1")])
        own.stop()
        with pytest.raises(ConnectError) as caught:
            await frontier.lease()
        assert own.url in str(caught.value)
        assert isinstance(caught.value, SpireError)
    finally:
        own.stop()
        await frontier.aclose()


# -- crawls ----------------------------------------------------------------------------------------


class Page(BaseModel):
    url: str


def tree_router() -> Router:
    router = Router()

    @router.default
    async def page(html: Html, links: Links, pages: Dataset[Page], url: Url) -> None:
        await links.follow(html.css("a::attr(href)").getall())
        await pages.push(Page(url=url))

    return router


async def crawl_together(redis_url: str, root: str, **options: Any) -> list[Any]:
    """Two crawlers, each with its own RedisFrontier on one crawl, run at once from the same root."""
    frontiers = [RedisFrontier(redis_url, name="tree", poll=0.05, **options) for _ in range(2)]
    crawlers = [
        Crawler(tree_router(), concurrency=4, host_limits=HostLimits(max_in_flight=4), frontier=f.dedup())
        for f in frontiers
    ]
    stats: list[Any] = [None, None]

    async def run(i: int) -> None:
        stats[i] = await crawlers[i].arun([root])

    try:
        with anyio.fail_after(15):
            async with anyio.create_task_group() as tg:
                tg.start_soon(run, 0)
                tg.start_soon(run, 1)
    finally:
        for frontier in frontiers:
            await frontier.aclose()
    return stats


async def test_two_crawlers_crawl_one_site_together_each_page_once(site: Site, redis_url: str) -> None:
    root = binary_tree(site, 200, delay=0.01)
    stats = await crawl_together(redis_url, root)
    hits = site.hits()
    assert len(hits) == 200
    assert set(hits.values()) == {1}
    assert stats[0].requests > 0
    assert stats[1].requests > 0  # both workers did some of the work, and both returned
    assert stats[0].requests + stats[1].requests == 200 + 2  # each worker reads robots.txt once
    assert stats[0].items + stats[1].items == 200


async def test_two_crawlers_honour_one_shared_in_flight_cap_per_origin(site: Site, redis_url: str) -> None:
    root = binary_tree(site, 40, delay=0.02)
    stats = await crawl_together(redis_url, root, per_origin_in_flight=2)
    assert site.peak <= 2  # each crawler alone would allow 4
    assert set(site.hits().values()) == {1}
    assert stats[0].requests + stats[1].requests == 40 + 2  # each worker reads robots.txt once
