"""The ``Frontier`` contract, proved the same way on every store: memory and SQLite."""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from spire_core.frontier.base import Frontier, Wait
from spire_core.frontier.memory import MemoryFrontier
from spire_core.frontier.sqlite import SqliteFrontier
from spire_core.outcome import Done, Fail, Retry, SkipTag, Stop
from spire_core.revisit import Revisit
from spire_core.seed import Seed
from tests.spire_core.frontier.helpers import drain, lease_seed, lease_when_ready

pytestmark = pytest.mark.anyio

A = "http://a.example"
B = "http://b.example"
C = "http://c.example"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["memory", "sqlite"])
async def frontier(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[MemoryFrontier | SqliteFrontier]:
    made = MemoryFrontier() if request.param == "memory" else SqliteFrontier(tmp_path / "frontier.db")
    yield made
    await made.aclose()


async def failures(frontier: MemoryFrontier | SqliteFrontier) -> list[tuple[str, str]]:
    """(url, error text) of every seed settled as failed, from either store."""
    if isinstance(frontier, MemoryFrontier):
        return [(seed.url, f"{type(error).__name__}: {error}") for seed, error in frontier.failed]
    return [(seed.url, text) for seed, text in await frontier.failures()]


async def test_higher_priority_goes_first_then_older(frontier: Frontier) -> None:
    await frontier.push([Seed(f"{A}/low"), Seed(f"{A}/high", priority=5), Seed(f"{A}/mid", priority=1)])
    await frontier.push([Seed(f"{A}/high2", priority=5), Seed(f"{A}/low2")])
    assert await drain(frontier) == [f"{A}/high", f"{A}/high2", f"{A}/mid", f"{A}/low", f"{A}/low2"]


async def test_the_best_seed_of_all_ready_origins_goes_first(frontier: Frontier) -> None:
    await frontier.push([Seed(f"{A}/1"), Seed(f"{B}/1", priority=2), Seed(f"{C}/1", priority=1), Seed(f"{A}/2")])
    assert await drain(frontier) == [f"{B}/1", f"{C}/1", f"{A}/1", f"{A}/2"]


async def test_forefront_pushes_go_ahead_newest_first(frontier: Frontier) -> None:
    await frontier.push([Seed(f"{A}/a"), Seed(f"{A}/b")])
    await frontier.push([Seed(f"{A}/c"), Seed(f"{A}/d")], forefront=True)
    await frontier.push([Seed(f"{A}/e")], forefront=True)
    await frontier.push([Seed(f"{A}/f")])
    assert await drain(frontier) == [f"{A}/{name}" for name in "edcabf"]


async def test_forefront_does_not_beat_a_higher_priority(frontier: Frontier) -> None:
    await frontier.push([Seed(f"{A}/urgent", priority=3)])
    await frontier.push([Seed(f"{A}/front")], forefront=True)
    assert await drain(frontier) == [f"{A}/urgent", f"{A}/front"]


async def test_unique_push_reports_keys_pushed_before_as_duplicates(frontier: Frontier) -> None:
    first = await frontier.push([Seed(f"{A}/x?b=2&a=1"), Seed(f"{A}/x?a=1&b=2#top"), Seed(f"{A}/y")], unique=True)
    assert [seed.url for seed in first.added] == [f"{A}/x?b=2&a=1", f"{A}/y"]
    assert [seed.url for seed in first.duplicates] == [f"{A}/x?a=1&b=2#top"]
    again = await frontier.push([Seed(f"{A}/y"), Seed(f"{A}/z")], unique=True)
    assert ([s.url for s in again.added], [s.url for s in again.duplicates]) == ([f"{A}/z"], [f"{A}/y"])
    assert await frontier.pending() == 3


async def test_a_plain_push_neither_checks_nor_records_keys(frontier: Frontier) -> None:
    await frontier.push([Seed(f"{A}/seen")], unique=True)
    plain = await frontier.push([Seed(f"{A}/seen"), Seed(f"{A}/plain")])
    assert len(plain.added) == 2
    assert not plain.duplicates
    assert await frontier.seen([f"{A}/seen", f"{A}/plain", f"{A}/never"]) == [True, False, False]
    later = await frontier.push([Seed(f"{A}/plain")], unique=True)
    assert len(later.added) == 1


async def test_seen_answers_for_settled_seeds_too(frontier: Frontier) -> None:
    await frontier.push([Seed(f"{A}/done")], unique=True)
    await frontier.report(await lease_seed(frontier), Done())
    assert await frontier.seen([f"{A}/done"]) == [True]
    assert (await frontier.push([Seed(f"{A}/done")], unique=True)).duplicates


async def test_lease_skips_an_origin_that_ready_refuses(frontier: Frontier) -> None:
    await frontier.push([Seed(f"{A}/best", priority=9), Seed(f"{B}/other")])
    lease = await lease_seed(frontier, lambda origin: math.inf if origin == A else 0.0)
    assert lease.seed.url == f"{B}/other"
    assert lease.origin == B


async def test_lease_waits_for_the_soonest_origin_ready_says(frontier: Frontier) -> None:
    await frontier.push([Seed(f"{A}/1"), Seed(f"{B}/1"), Seed(f"{C}/1")])
    spacing = {A: 2.5, B: 0.75, C: math.inf}
    assert await frontier.lease(spacing.__getitem__) == Wait(0.75)
    assert await frontier.lease(lambda origin: math.inf) == Wait(None)
    assert await frontier.pending() == 3


async def test_lease_on_an_empty_frontier_waits_for_nothing(frontier: Frontier) -> None:
    assert await frontier.lease() == Wait(None)
    assert await frontier.pending() == 0


async def test_retry_comes_back_after_its_delay_with_the_next_attempt(frontier: Frontier) -> None:
    await frontier.push([Seed(f"{A}/flaky", tag="page", user_data={"n": 1})])
    lease = await lease_seed(frontier)
    reported_at = time.monotonic()
    assert await frontier.report(lease, Retry(after=0.3)) == Retry(after=0.3)
    waiting = await frontier.lease()
    assert isinstance(waiting, Wait)
    assert waiting.seconds is not None
    assert 0.2 < waiting.seconds <= 0.3
    assert await frontier.pending() == 1
    again = await lease_when_ready(frontier)
    assert time.monotonic() - reported_at >= 0.25
    assert again.seed == Seed(f"{A}/flaky", tag="page", user_data={"n": 1}, attempt=1)


async def test_a_delayed_retry_does_not_hold_up_other_seeds(frontier: Frontier) -> None:
    await frontier.push([Seed(f"{A}/flaky"), Seed(f"{A}/next")])
    await frontier.report(await lease_seed(frontier), Retry(after=60))
    assert (await lease_seed(frontier)).seed.url == f"{A}/next"
    result = await frontier.lease()
    assert isinstance(result, Wait)
    assert result.seconds is not None
    assert 59 < result.seconds <= 60


async def test_a_retry_without_delay_is_leased_again_at_once(frontier: Frontier) -> None:
    await frontier.push([Seed(f"{A}/flaky")])
    await frontier.report(await lease_seed(frontier), Retry())
    again = await lease_seed(frontier)
    assert (again.seed.url, again.seed.attempt) == (f"{A}/flaky", 1)
    await frontier.report(again, Retry())
    assert (await lease_seed(frontier)).seed.attempt == 2


async def test_release_queues_the_seed_again_ahead_without_an_attempt(frontier: Frontier) -> None:
    await frontier.push([Seed(f"{A}/1"), Seed(f"{A}/2"), Seed(f"{A}/3")])
    first = await lease_seed(frontier)
    second = await lease_seed(frontier)
    await frontier.release(first)
    await frontier.release(second)
    assert await frontier.pending() == 3
    again = await lease_seed(frontier)
    assert again.seed == Seed(f"{A}/2")
    assert await drain(frontier) == [f"{A}/1", f"{A}/3"]
    await frontier.report(again, Done())
    assert await frontier.pending() == 0


async def test_pending_counts_queued_delayed_and_leased_but_not_settled(frontier: Frontier) -> None:
    await frontier.push([Seed(f"{A}/{i}") for i in range(5)])
    assert await frontier.pending() == 5
    done, retried, failed, stopped, leased = [await lease_seed(frontier) for _ in range(5)]
    assert await frontier.pending() == 5
    await frontier.report(done, Done())
    await frontier.report(retried, Retry(after=60))
    await frontier.report(failed, Fail(ValueError("bad page")))
    await frontier.report(stopped, Stop())
    assert await frontier.pending() == 2  # the delayed retry and the seed still leased
    await frontier.report(leased, SkipTag("page"))
    assert await frontier.pending() == 1


async def test_fail_is_recorded_with_its_error(frontier: MemoryFrontier | SqliteFrontier) -> None:
    await frontier.push([Seed(f"{A}/ok"), Seed(f"{A}/broken")])
    await frontier.report(await lease_seed(frontier), Done())
    broken = await lease_seed(frontier)
    error = ValueError("no title")
    assert await frontier.report(broken, Fail(error)) == Fail(error)
    assert await failures(frontier) == [(f"{A}/broken", "ValueError: no title")]
    assert await frontier.pending() == 0


async def test_a_lease_is_settled_once(frontier: Frontier) -> None:
    await frontier.push([Seed(f"{A}/once"), Seed(f"{A}/after")])
    lease = await lease_seed(frontier)
    await frontier.report(lease, Done())
    assert await frontier.report(lease, Retry()) == Retry()
    await frontier.release(lease)
    assert await frontier.pending() == 1
    assert await drain(frontier) == [f"{A}/after"]


async def test_every_seed_field_comes_back_as_pushed(frontier: Frontier) -> None:
    full = Seed(
        f"{A}/form?q=1",
        tag="search",
        method="post",
        depth=3,
        priority=-2,
        attempt=2,
        user_data={"page": 2, "path": ["a", "b"], "nested": {"ok": True, "none": None}, "ratio": 0.5},
        headers={"Content-Type": "application/x-www-form-urlencoded", "X-Token": "é"},
        body=b"q=1&\x00\xff",
        unique_key="search:1",
        revisit=Revisit(etag='"v1"', last_modified="Tue, 01 Dec 2026 10:00:00 GMT", hash="ab12", streak=2),
    )
    bare = Seed(f"{B}/bare", body=b"")
    await frontier.push([full, bare])
    leased = {lease.seed.url: lease.seed for lease in [await lease_seed(frontier), await lease_seed(frontier)]}
    assert leased == {full.url: full, bare.url: bare}
    assert leased[full.url].method == "POST"
    assert leased[bare.url].body == b""
