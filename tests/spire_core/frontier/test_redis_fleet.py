"""``RedisFrontier`` for a fleet: each host's ``HostLimits`` shared by every worker, and the crawl's status."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from spire_core.errors import HttpStatusError
from spire_core.frontier.base import Wait
from spire_core.frontier.redis import RedisFrontier
from spire_core.limits import HostLimits
from spire_core.outcome import Done, Fail, Retry
from spire_core.seed import Seed
from tests.spire_core.frontier.helpers import lease_seed

pytestmark = pytest.mark.anyio

Make = Callable[..., RedisFrontier]

A = "http://a.example"
B = "http://api.b.example"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def make(redis_url: str) -> AsyncIterator[Make]:
    made: list[RedisFrontier] = []

    def factory(**options: Any) -> RedisFrontier:
        options.setdefault("name", "fleet")
        frontier = RedisFrontier(redis_url, **options)
        made.append(frontier)
        return frontier

    yield factory
    for frontier in made:
        await frontier.aclose()


LIMITS = HostLimits(max_in_flight=2, hosts={"*.b.example": HostLimits(max_in_flight=1)})


async def test_each_hosts_limits_including_overrides_hold_for_every_worker(make: Make) -> None:
    one = make(host_limits=LIMITS, poll=10.0)
    two = make(host_limits=LIMITS, poll=10.0)
    await one.push([Seed(f"{A}/{i}") for i in range(4)] + [Seed(f"{B}/{i}") for i in range(3)])
    taken = [await lease_seed(worker) for worker in (one, two, one)]
    assert sorted(lease.origin for lease in taken) == [A, A, B]  # A's cap is 2, the override's 1
    assert await two.lease() == Wait(10.0)  # both hosts at their caps for every worker
    await one.report(taken[0], Done())
    assert (await lease_seed(two)).origin == taken[0].origin


async def test_limits_spacing_comes_from_per_second(make: Make) -> None:
    one = make(host_limits=HostLimits(per_second=2.0), poll=10.0)
    await one.push([Seed(f"{A}/{i}") for i in range(2)])
    await lease_seed(one)
    waited = await make(poll=10.0).lease()
    assert isinstance(waited, Wait)
    assert waited.seconds is not None
    assert 0.3 < waited.seconds <= 0.5


async def test_status_counts_queued_in_flight_done_failed_hosts_and_live_workers(make: Make) -> None:
    worker = make(host_limits=HostLimits(max_in_flight=1))
    await worker.push([Seed(f"{A}/{i}") for i in range(3)] + [Seed(f"{B}/0")])
    done, failed = await lease_seed(worker), await lease_seed(worker)
    await worker.report(done, Done())
    await worker.report(failed, Fail(ValueError("boom")))
    held = await lease_seed(worker)
    async with worker.keep_alive():
        status = await make().status()
    assert (status.queued, status.in_flight, status.done, status.failed) == (1, 1, 1, 1)
    assert status.workers == (worker.worker_id,)
    assert [(host.origin, host.queued, host.in_flight) for host in status.hosts] == [(held.origin, 1, 1)]
    assert math.isinf(status.hosts[0].ready_in)  # at its cap of one
    assert status.lines()[0] == "queued=1 delayed=0 in_flight=1 done=1 failed=1 workers=1"
    await worker.aclose()
    assert (await make().status()).workers == ()  # a closed worker leaves the list at once


async def test_a_page_retried_after_a_429_pauses_its_host_for_every_worker(make: Make) -> None:
    limits = HostLimits(pause_on=frozenset({429}), default_pause=30.0)
    one = make(host_limits=limits, poll=60.0)
    two = make(host_limits=limits, poll=60.0)
    await one.push([Seed(f"{A}/1"), Seed(f"{A}/2"), Seed(f"{B}/1")])
    first = await lease_seed(one)
    await one.report(first, Retry(error=HttpStatusError(429, url=first.seed.url, retry_after=2.0)))
    others = await lease_seed(two)
    assert others.origin != first.origin  # the paused host is skipped by the other worker
    waited = await two.lease()
    assert isinstance(waited, Wait)
    assert waited.seconds is not None
    assert 1.0 < waited.seconds <= 2.0  # until the pause the server asked for ends
