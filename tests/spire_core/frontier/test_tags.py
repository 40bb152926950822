"""``TagControl``: a paused tag's seeds wait out the pause on the facade's clock; a skipped tag's are dropped."""

from __future__ import annotations

import pytest

from spire_core.clock import FakeClock
from spire_core.frontier.base import Lease, Wait
from spire_core.frontier.facades import TagControl
from spire_core.frontier.memory import MemoryFrontier
from spire_core.outcome import Done, PauseTag, SkipTag
from spire_core.seed import Seed
from tests.spire_core.frontier.helpers import lease_seed

pytestmark = pytest.mark.anyio

A = "http://a.example"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_paused_tag_is_held_until_its_pause_ends_on_the_clock() -> None:
    clock = FakeClock()
    frontier = TagControl(MemoryFrontier(), clock=clock)
    await frontier.push([Seed(f"{A}/b1", tag="b"), Seed(f"{A}/b2", tag="b"), Seed(f"{A}/c1", tag="c")])
    first = await lease_seed(frontier)
    assert first.seed.url == f"{A}/b1"
    await frontier.report(first, PauseTag("b", 30.0))
    assert frontier.is_paused("b")

    # While the pause lasts only the other tag comes out, and the frontier says how long to wait.
    other = await lease_seed(frontier)
    assert other.seed.url == f"{A}/c1"
    await frontier.report(other, Done())
    clock.advance(10.0)
    waiting = await frontier.lease()
    assert isinstance(waiting, Wait)
    assert waiting.seconds == pytest.approx(20.0)

    clock.advance(20.0)
    assert not frontier.is_paused("b")
    resumed = [await lease_seed(frontier), await lease_seed(frontier)]
    assert sorted(lease.seed.url for lease in resumed) == [f"{A}/b1", f"{A}/b2"]
    for lease in resumed:
        await frontier.report(lease, Done())
    assert await frontier.lease() == Wait(None)
    await frontier.aclose()


async def test_a_longer_pause_of_a_paused_tag_extends_it_and_a_shorter_one_does_not() -> None:
    clock = FakeClock()
    frontier = TagControl(MemoryFrontier(), clock=clock)
    frontier.pause("b", 10.0)
    frontier.pause("b", 5.0)
    clock.advance(9.0)
    assert frontier.is_paused("b")
    frontier.pause("b", 10.0)
    clock.advance(9.0)
    assert frontier.is_paused("b")
    clock.advance(1.0)
    assert not frontier.is_paused("b")
    await frontier.aclose()


async def test_a_skipped_tag_drops_its_queued_seeds_and_reports_them() -> None:
    frontier = TagControl(MemoryFrontier())
    dropped: list[str] = []
    frontier.on_skip = lambda seed: dropped.append(seed.url)
    await frontier.push([Seed(f"{A}/b1", tag="b"), Seed(f"{A}/b2", tag="b")])
    first = await lease_seed(frontier)
    await frontier.report(first, SkipTag("b"))
    result = await frontier.lease()
    assert not isinstance(result, Lease)
    assert dropped == [f"{A}/b2"]
    await frontier.aclose()
