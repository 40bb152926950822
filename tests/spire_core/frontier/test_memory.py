"""``MemoryFrontier`` beyond the shared contract: its exact order under load, and what a seed costs it."""

from __future__ import annotations

import gc
import math
import random
import sys
import tracemalloc

import anyio
import pytest

from spire_core.frontier.base import Lease, Wait
from spire_core.frontier.memory import MemoryFrontier
from spire_core.outcome import Done, Fail, Outcome, Retry
from spire_core.seed import Seed

pytestmark = pytest.mark.anyio

A = "http://a.example"
ORIGINS = [A, "http://b.example", "http://c.example:8080"]
OUTCOMES: list[Outcome] = [Done(), Retry(after=0), Fail(ValueError("no"))]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Model:
    """The frontier's ordering rule, written plainly: every queued seed has an order number
    (pushes count up, forefront pushes and releases count down, a retry takes the next one when it
    is reported), and a lease takes the lowest ``(-priority, order)`` among the admitted origins."""

    def __init__(self) -> None:
        self.queued: list[tuple[int, int, Seed]] = []
        self.order = 0
        self.front = -1

    def next_order(self) -> int:
        self.order += 1
        return self.order - 1

    def next_front(self) -> int:
        self.front -= 1
        return self.front + 1

    def push(self, seeds: list[Seed], *, forefront: bool) -> None:
        for seed in seeds:
            self.queued.append((-seed.priority, self.next_front() if forefront else self.next_order(), seed))

    def lease(self, admitted: set[str]) -> Seed | None:
        candidates = [entry for entry in self.queued if entry[2].origin in admitted]
        if not candidates:
            return None
        best = min(candidates, key=lambda entry: entry[:2])
        self.queued.remove(best)
        return best[2]


@pytest.mark.parametrize("rng_seed", [1, 2, 3])
async def test_it_hands_out_seeds_in_exactly_the_model_order_under_load(rng_seed: int) -> None:
    """Long runs of one origin and priority, forefront bursts, priority changes, retries, releases."""
    rng = random.Random(rng_seed)
    frontier, model = MemoryFrontier(), Model()
    leases: list[tuple[Lease, Seed]] = []
    names = iter(range(10**9))
    for step in range(600):
        roll = rng.random()
        if roll < 0.3:
            origin, priority = rng.choice(ORIGINS), rng.choice([0, 0, 1, 2, 3])
            batch = [
                Seed(f"{origin if rng.random() < 0.9 else rng.choice(ORIGINS)}/{next(names)}", priority=priority)
                for _ in range(rng.choice([1, 3, 40, 120]))
            ]
            forefront = rng.random() < 0.25
            assert (await frontier.push(batch, forefront=forefront)).added == batch
            model.push(batch, forefront=forefront)
        elif roll < 0.65:
            admitted = set(rng.sample(ORIGINS, rng.choice([1, 1, 2, 3])))

            def ready(origin: str, admitted: set[str] = admitted) -> float:
                return 0.0 if origin in admitted else math.inf

            for _ in range(rng.choice([1, 1, 5, 50])):
                expected = model.lease(admitted)
                result = await frontier.lease(ready)
                if expected is None:
                    assert result == Wait(None), step
                    break
                assert isinstance(result, Lease), step
                assert result.seed == expected, step
                leases.append((result, expected))
        else:
            for _ in range(min(len(leases), rng.choice([1, 1, 5, 20]))):
                lease, seed = leases.pop(rng.randrange(len(leases)))
                if roll < 0.93:
                    outcome = rng.choice(OUTCOMES)
                    await frontier.report(lease, outcome)
                    if isinstance(outcome, Retry):
                        model.queued.append((-seed.priority, model.next_order(), seed.retried()))
                else:
                    await frontier.release(lease)
                    model.queued.append((-seed.priority, model.next_front(), seed))
        assert await frontier.pending() == len(model.queued) + len(leases), step


async def test_a_delayed_retry_goes_ahead_of_seeds_pushed_after_its_report() -> None:
    frontier = MemoryFrontier()
    await frontier.push([Seed(f"{A}/1"), Seed(f"{A}/2"), Seed(f"{A}/3")])
    first = await frontier.lease()
    assert isinstance(first, Lease)
    await frontier.report(first, Retry(after=0.05))
    await frontier.push([Seed(f"{A}/4")])
    with anyio.fail_after(5):
        # Hold the origin back until the retry is queued again: behind /3, pushed before its report.
        while True:
            waiting = await frontier.lease(lambda origin: math.inf)
            assert isinstance(waiting, Wait)
            if waiting.seconds is None:
                break
            await anyio.sleep(waiting.seconds)
    handed_out = []
    while isinstance(lease := await frontier.lease(), Lease):
        handed_out.append((lease.seed.url, lease.seed.attempt))
    assert handed_out == [(f"{A}/2", 0), (f"{A}/3", 0), (f"{A}/1", 1), (f"{A}/4", 0)]


async def test_a_settled_seed_is_no_longer_referenced_by_the_frontier() -> None:
    frontier = MemoryFrontier()
    seeds = [Seed(f"{A}/{i}") for i in range(10)]
    before = [sys.getrefcount(seed) for seed in seeds]
    await frontier.push(seeds)
    for _ in range(3):
        lease = await frontier.lease()
        assert isinstance(lease, Lease)
        await frontier.report(lease, Done())
    del lease
    after = [sys.getrefcount(seed) for seed in seeds]
    assert after[:3] == before[:3]
    assert all(now > then for now, then in zip(after[3:], before[3:], strict=True))


async def queue_bytes_per_seed(seeds: list[Seed]) -> float:
    """What the frontier itself allocates per seed it queues (the seeds are built beforehand)."""
    frontier = MemoryFrontier()
    gc.collect()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        for at in range(0, len(seeds), 1000):
            await frontier.push(seeds[at : at + 1000])
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
    assert await frontier.pending() == len(seeds)
    return grown / len(seeds)


async def test_a_queued_seed_costs_the_frontier_a_few_bytes() -> None:
    # A heap entry (-priority, order, seed) cost about 100 bytes; a lane slot and its order about 17.
    seeds = [Seed(f"http://host-{i % 10}.example/page-{i}") for i in range(20_000)]
    assert await queue_bytes_per_seed(seeds) < 32


async def test_an_origin_with_one_seed_stays_small() -> None:
    # With the origin's entry in the frontier's dict and its entry in the origin heap (about 72 bytes,
    # what a lease in O(log origins) costs); a heap entry per seed took about 220 bytes.
    seeds = [Seed(f"http://host-{i}.example/") for i in range(20_000)]
    assert await queue_bytes_per_seed(seeds) < 200


async def test_a_lease_asks_ready_only_about_the_origins_ahead_of_the_one_it_hands_out() -> None:
    # Pushed worst first: a scan of every origin in push order would ask each one in turn.
    frontier = MemoryFrontier()
    await frontier.push(Seed(f"http://host-{i}.example/", priority=i) for i in range(10_000))
    asked: list[str] = []

    def ready(origin: str) -> float:
        asked.append(origin)
        return math.inf if origin == "http://host-9999.example" else 0.0

    lease = await frontier.lease(ready)
    assert isinstance(lease, Lease)
    assert lease.origin == "http://host-9998.example"
    assert asked == ["http://host-9999.example", "http://host-9998.example"]
