"""Bloom-filter seen sets: ``dedup(bloom=capacity)`` on every store, and their measured false positives."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from spire_core.errors import ConfigError
from spire_core.frontier.base import Frontier
from spire_core.frontier.bloom import Bloom
from spire_core.frontier.memory import MemoryFrontier
from spire_core.frontier.redis import RedisFrontier
from spire_core.frontier.sqlite import SqliteFrontier
from spire_core.seed import Seed

pytestmark = pytest.mark.anyio

A = "http://a.example"
MILLION = 1_000_000


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def bloom_frontier(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Frontier]:
    """Each store under ``dedup(bloom=1000)``."""
    if request.param == "memory":
        store: MemoryFrontier | SqliteFrontier | RedisFrontier = MemoryFrontier()
    elif request.param == "sqlite":
        store = SqliteFrontier(tmp_path / "crawl.db")
    else:
        store = RedisFrontier(request.getfixturevalue("redis_url"), name="bloom")
    frontier = store.dedup(bloom=1000, error_rate=0.01)
    try:
        yield frontier
    finally:
        await frontier.aclose()


def test_a_filter_costs_about_one_byte_and_a_quarter_per_key_at_one_percent() -> None:
    bloom = Bloom(MILLION, 0.01)
    assert 1.1 < bloom.bytes_per_key < 1.3
    assert bloom.hashes == 7
    assert bloom.parts == 1
    assert Bloom(1_000_000_000, 0.01).parts == 3  # no Redis string holds more than 2**32 bits
    assert bloom.offsets("http://a.example/") == Bloom(MILLION, 0.01).offsets("http://a.example/")  # stable


@pytest.mark.parametrize(("capacity", "rate"), [(0, 0.01), (10, 0.0), (10, 1.0), (True, 0.5)])
def test_a_filter_of_no_capacity_or_an_impossible_rate_is_a_config_error(capacity: int, rate: float) -> None:
    with pytest.raises(ConfigError):
        Bloom(capacity, rate)


async def test_every_store_takes_a_bloom_seen_set_duplicates_are_reported_seen_answers(
    bloom_frontier: Frontier,
) -> None:
    result = await bloom_frontier.push([Seed(f"{A}/{n}") for n in range(100)] + [Seed(f"{A}/0"), Seed(f"{A}/1#x")])
    assert len(result.added) == 100
    assert [seed.url for seed in result.duplicates] == [f"{A}/0", f"{A}/1#x"]
    again = await bloom_frontier.push([Seed(f"{A}/5"), Seed(f"{A}/new")])
    assert [seed.url for seed in again.added] == [f"{A}/new"]
    assert await bloom_frontier.seen([f"{A}/7", f"{A}/new", f"{A}/never"]) == [True, True, False]
    assert await bloom_frontier.pending() == 101


async def test_a_sqlite_files_bloom_seen_set_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "crawl.db"
    first = SqliteFrontier(path).dedup(bloom=1000)
    await first.push([Seed(f"{A}/{n}") for n in range(50)])
    await first.aclose()
    second = SqliteFrontier(path).dedup(bloom=1000)
    try:
        assert len((await second.push([Seed(f"{A}/{n}") for n in range(60)])).added) == 10
    finally:
        await second.aclose()
    for other in (SqliteFrontier(path).dedup(bloom=5000), SqliteFrontier(path).dedup()):
        try:
            with pytest.raises(ConfigError, match="Bloom"):
                await other.push([Seed(f"{A}/x")])
        finally:
            await other.aclose()


async def test_every_redis_worker_must_use_the_same_filter(redis_url: str) -> None:
    first = RedisFrontier(redis_url, name="shared").dedup(bloom=1000)
    await first.push([Seed(f"{A}/1")])
    other = RedisFrontier(redis_url, name="shared").dedup(bloom=2000)
    try:
        with pytest.raises(ConfigError, match="same filter"):
            await other.push([Seed(f"{A}/2")])
        same = RedisFrontier(redis_url, name="shared").dedup(bloom=1000)
        assert (await same.push([Seed(f"{A}/1")])).duplicates  # shared by the workers
        await same.aclose()
    finally:
        await first.aclose()
        await other.aclose()


def test_at_a_million_urls_the_in_memory_filter_stays_within_its_error_rate() -> None:
    bloom = Bloom(MILLION, 0.01)
    seen = bloom.in_memory()
    for n in range(MILLION):
        seen.add(f"https://docs.example/{n}/page.html")
    false_positives = sum(f"https://docs.example/{n}/other.html" in seen for n in range(MILLION))
    assert false_positives / MILLION <= bloom.error_rate


def test_at_a_million_urls_the_bits_redis_sets_stay_within_the_error_rate() -> None:
    # The bits the Redis scripts set are Bloom.offsets: the same filter, replayed here in a bytearray.
    bloom = Bloom(MILLION, 0.01)
    bits = bytearray(bloom.part_bits // 8 + 1)
    for n in range(MILLION):
        for offset in bloom.offsets(f"https://docs.example/{n}/page.html")[1]:
            bits[offset >> 3] |= 1 << (offset & 7)
    probes = 200_000
    false_positives = 0
    for n in range(probes):
        offsets = bloom.offsets(f"https://docs.example/{n}/other.html")[1]
        false_positives += all(bits[offset >> 3] >> (offset & 7) & 1 for offset in offsets)
    assert false_positives / probes <= bloom.error_rate


async def test_a_bloom_seen_set_may_be_chosen_on_an_open_frontier(tmp_path: Path, redis_url: str) -> None:
    async with SqliteFrontier(tmp_path / "crawl.db") as sqlite, RedisFrontier(redis_url, name="open") as redis:
        for store in (sqlite, redis):
            frontier = store.dedup(bloom=100)
            assert len((await frontier.push([Seed(f"{A}/1"), Seed(f"{A}/1")])).duplicates) == 1


async def test_a_redis_crawl_keeps_one_kind_of_seen_set_whichever_worker_started_it(redis_url: str) -> None:
    exact = RedisFrontier(redis_url, name="kinds").dedup()
    await exact.push([Seed(f"{A}/1")])
    bloom = RedisFrontier(redis_url, name="kinds").dedup(bloom=100)
    other = RedisFrontier(redis_url, name="bloomed").dedup(bloom=100)
    plain = RedisFrontier(redis_url, name="bloomed").dedup()
    try:
        with pytest.raises(ConfigError, match="exact seen set"):
            await bloom.push([Seed(f"{A}/2")])
        await other.push([Seed(f"{A}/1")])
        with pytest.raises(ConfigError, match="Bloom seen set"):
            await plain.push([Seed(f"{A}/2")])
    finally:
        for frontier in (exact, bloom, other, plain):
            await frontier.aclose()


async def test_a_sqlite_file_with_a_bloom_seen_set_reopened_and_given_it_after_opening(tmp_path: Path) -> None:
    path = tmp_path / "crawl.db"
    first = SqliteFrontier(path).dedup(bloom=100)
    await first.push([Seed(f"{A}/1")])
    await first.aclose()
    async with SqliteFrontier(path) as store:
        assert (await store.dedup(bloom=100).push([Seed(f"{A}/1")])).duplicates
