"""``AvoidTraps``: seeds admitted per path prefix are capped; over the cap a push rejects them as ``"trap"``."""

from __future__ import annotations

import datetime
from pathlib import Path

import anyio
import pytest

from spire import Crawler, HostLimits, Html, Links, MemoryFrontier, Router, SeedInfo
from spire_core.errors import ConfigError
from spire_core.frontier.facades import AvoidTraps, path_prefix
from spire_core.frontier.sqlite import SqliteFrontier
from spire_core.seed import Seed
from tests.sites.server import Site

A = "http://a.example"
B = "http://b.example"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def urls_of(seeds: list[Seed]) -> list[str]:
    return [seed.url for seed in seeds]


# -- prefixes ------------------------------------------------------------------------------------------


def test_a_prefix_is_the_origin_and_the_first_depth_path_segments() -> None:
    assert path_prefix("https://Host.example/calendar/2024/05/01", 2) == "https://host.example/calendar/2024/"
    assert path_prefix("https://host.example/calendar/2024/05/01", 1) == "https://host.example/calendar/"
    assert path_prefix("https://host.example/calendar/2024/05/01", 0) == "https://host.example/"


def test_the_last_segment_counts_and_the_query_and_empty_segments_do_not() -> None:
    assert path_prefix("https://host.example/search?colour=red&size=9", 2) == "https://host.example/search/"
    assert path_prefix("https://host.example/search/?colour=red", 2) == "https://host.example/search/"
    assert path_prefix("https://host.example//a//b/c", 2) == "https://host.example/a/b/"
    assert path_prefix("https://host.example", 2) == "https://host.example/"
    assert path_prefix("https://host.example:8443/a", 1) == "https://host.example:8443/a/"


# -- the facade ----------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_seeds_over_the_cap_of_one_prefix_are_rejected_as_traps() -> None:
    traps = MemoryFrontier().avoid_traps(max_per_prefix=3, depth=2)
    days = [Seed(f"{A}/calendar/2024/05/{day:02}") for day in range(1, 6)]
    result = await traps.push(days)
    assert urls_of(result.added) == urls_of(days[:3])
    assert result.rejected == [(days[3], "trap"), (days[4], "trap")]
    assert await traps.pending() == 3
    later = await traps.push([Seed(f"{A}/calendar/2024/06/01")])  # a later push finds the prefix full too
    assert later.rejected == [(later.rejected[0][0], "trap")]
    assert traps.admitted(f"{A}/calendar/2024/") == 3


@pytest.mark.anyio
async def test_each_prefix_and_each_origin_has_its_own_cap() -> None:
    traps = MemoryFrontier().avoid_traps(max_per_prefix=2, depth=2)
    seeds = [
        Seed(f"{A}/calendar/2024/01"),
        Seed(f"{A}/calendar/2024/02"),
        Seed(f"{A}/calendar/2025/01"),  # another year: another prefix
        Seed(f"{B}/calendar/2024/01"),  # another origin
        Seed(f"{A}/about"),
        Seed(f"{A}/calendar/2024/03"),  # the third of its prefix
    ]
    result = await traps.push(seeds)
    assert urls_of(result.added) == urls_of(seeds[:5])
    assert [(seed.url, reason) for seed, reason in result.rejected] == [(f"{A}/calendar/2024/03", "trap")]


@pytest.mark.anyio
async def test_query_variants_of_one_path_share_its_cap() -> None:
    traps = MemoryFrontier().avoid_traps(max_per_prefix=2, depth=2)
    facets = [Seed(f"{A}/search?colour={colour}") for colour in ("red", "green", "blue")]
    result = await traps.push(facets)
    assert urls_of(result.added) == urls_of(facets[:2])
    assert [seed.url for seed, _ in result.rejected] == [f"{A}/search?colour=blue"]


@pytest.mark.anyio
async def test_depth_zero_caps_a_whole_origin() -> None:
    traps = MemoryFrontier().avoid_traps(max_per_prefix=2, depth=0)
    result = await traps.push([Seed(f"{A}/x"), Seed(f"{A}/y/z"), Seed(f"{A}/"), Seed(f"{B}/x")])
    assert urls_of(result.added) == [f"{A}/x", f"{A}/y/z", f"{B}/x"]
    assert [seed.url for seed, _ in result.rejected] == [f"{A}/"]


@pytest.mark.anyio
async def test_duplicates_do_not_count_against_the_cap() -> None:
    traps = MemoryFrontier().dedup().avoid_traps(max_per_prefix=2, depth=1)
    first = await traps.push([Seed(f"{A}/cal/1")])
    assert len(first.added) == 1
    again = await traps.push([Seed(f"{A}/cal/1"), Seed(f"{A}/cal/1#top")])  # the same unique key twice
    assert again.added == []
    assert len(again.duplicates) == 2
    assert again.rejected == []
    assert traps.admitted(f"{A}/cal/") == 1
    second = await traps.push([Seed(f"{A}/cal/2")])
    assert urls_of(second.added) == [f"{A}/cal/2"]
    third = await traps.push([Seed(f"{A}/cal/3"), Seed(f"{A}/cal/2")])
    assert [(seed.url, reason) for seed, reason in third.rejected] == [(f"{A}/cal/3", "trap")]
    assert urls_of(third.duplicates) == [f"{A}/cal/2"]  # over the cap, a seen seed is still a duplicate


@pytest.mark.anyio
async def test_room_a_duplicate_was_offered_goes_to_the_next_seed_of_the_same_push() -> None:
    traps = MemoryFrontier().dedup().avoid_traps(max_per_prefix=3, depth=1)
    await traps.push([Seed(f"{A}/cal/1"), Seed(f"{A}/cal/2")])
    # One place left: the duplicate comes first and is offered it, then the store turns it away.
    result = await traps.push([Seed(f"{A}/cal/1"), Seed(f"{A}/cal/3"), Seed(f"{A}/cal/4")])
    assert urls_of(result.duplicates) == [f"{A}/cal/1"]
    assert urls_of(result.added) == [f"{A}/cal/3"]
    assert [(seed.url, reason) for seed, reason in result.rejected] == [(f"{A}/cal/4", "trap")]
    assert traps.admitted(f"{A}/cal/") == 3


@pytest.mark.anyio
async def test_seeds_a_facade_below_rejects_do_not_count() -> None:
    traps = MemoryFrontier().max_depth(1).avoid_traps(max_per_prefix=1, depth=1)
    deep = Seed(f"{A}/cal/deep", depth=5)
    result = await traps.push([deep, Seed(f"{A}/cal/shallow", depth=1)])
    assert result.rejected == [(deep, "depth")]
    assert urls_of(result.added) == [f"{A}/cal/shallow"]


@pytest.mark.anyio
async def test_concurrent_pushes_never_admit_more_than_the_cap(tmp_path: Path) -> None:
    # SQLite pushes run in a worker thread, so concurrent pushes really interleave at their awaits.
    traps = SqliteFrontier(tmp_path / "frontier.db").dedup().avoid_traps(max_per_prefix=7, depth=1)
    results = []

    async def push(batch: int) -> None:
        results.append(await traps.push([Seed(f"{A}/cal/{batch}-{n}") for n in range(3)]))

    try:
        async with anyio.create_task_group() as tg:
            for batch in range(10):
                tg.start_soon(push, batch)
        assert sum(len(result.added) for result in results) == 7
        assert sum(len(result.rejected) for result in results) == 23
        assert await traps.pending() == 7
    finally:
        await traps.aclose()


def test_bad_limits_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="max_per_prefix"):
        MemoryFrontier().avoid_traps(max_per_prefix=0)
    with pytest.raises(ConfigError, match="depth"):
        AvoidTraps(MemoryFrontier(), depth=-1)


def test_the_fluent_method_wraps_the_frontier_it_is_called_on() -> None:
    inner = MemoryFrontier().dedup()
    traps = inner.avoid_traps(max_per_prefix=5, depth=3)
    assert isinstance(traps, AvoidTraps)
    assert traps.inner is inner
    assert (traps.max_per_prefix, traps.depth) == (5, 3)


# -- a crawl -------------------------------------------------------------------------------------------

START = datetime.date(2024, 1, 1)


def day_path(day: datetime.date) -> str:
    return f"/calendar/{day.year}/{day.month:02}/{day.day:02}"


def test_an_endless_next_day_calendar_ends_at_the_cap_and_the_rest_of_the_site_is_crawled(site: Site) -> None:
    # A year of days, each linking to the day before and the day after: far more than the crawl may take.
    for offset in range(366):
        day = START + datetime.timedelta(days=offset)
        before = f'<a href="{day_path(day - datetime.timedelta(days=1))}">prev</a>' if offset else ""
        site.page(day_path(day), f'{before} <a href="{day_path(day + datetime.timedelta(days=1))}">next</a>')
    site.page("/", f'<a href="{day_path(START)}">calendar</a> <a href="/about">about</a> <a href="/blog/1">blog</a>')
    site.page("/about", '<a href="/">home</a>')
    site.page("/blog/1", '<a href="/blog/2">older</a>')
    site.page("/blog/2", "the end")
    handled: list[str] = []
    router = Router()

    @router.default
    async def page(html: Html, links: Links, seed: SeedInfo) -> None:
        handled.append(seed.url)
        await links.follow(html.css("a::attr(href)").getall())

    frontier = MemoryFrontier().dedup().avoid_traps(max_per_prefix=10, depth=2)
    crawler = Crawler(router, frontier=frontier, host_limits=HostLimits(max_in_flight=4))
    stats = crawler.run([site.url("/")])

    calendar = sorted(path for path in site.hits() if path.startswith("/calendar/"))
    # Exactly the cap: the first day over it is rejected, which ends the chain.
    assert calendar == [day_path(START + datetime.timedelta(days=n)) for n in range(10)]
    assert stats.skipped("trap") == 1
    assert {"/", "/about", "/blog/1", "/blog/2"} <= set(site.hits())
    assert set(site.hits().values()) == {1}
    assert stats.finished == len(handled) == 14
    assert stats.failed == 0
