"""``SqliteFrontier``: what a file adds to the contract: persistence, reclaimed leases, and its guards."""

from __future__ import annotations

import math
import random
import sqlite3
import threading
from pathlib import Path

import anyio
import pytest

from spire_core.errors import ConfigError, SpireError
from spire_core.frontier import sqlite as sqlite_frontier
from spire_core.frontier.base import Lease, Wait
from spire_core.frontier.facades import Dedup, Retrying
from spire_core.frontier.memory import MemoryFrontier
from spire_core.frontier.sqlite import SCHEMA_VERSION, SqliteFrontier
from spire_core.outcome import Done, Fail, Outcome, Retry
from spire_core.seed import Seed

pytestmark = pytest.mark.anyio

A = "http://a.example"
B = "http://b.example"
ORIGINS = [A, B, "http://c.example:8080"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "crawl.db"


async def lease_seed(frontier: SqliteFrontier) -> Lease:
    result = await frontier.lease()
    assert isinstance(result, Lease), result
    return result


async def test_queued_delayed_seen_and_failed_seeds_survive_a_reopen(path: Path) -> None:
    async with SqliteFrontier(path) as frontier:
        await frontier.push([Seed(f"{A}/{name}", priority=p) for name, p in [("fail", 3), ("retry", 2), ("q", 0)]])
        await frontier.push([Seed(f"{B}/unique", user_data={"k": [1, 2]})], unique=True)
        await frontier.report(await lease_seed(frontier), Fail(RuntimeError("gone")))
        await frontier.report(await lease_seed(frontier), Retry(after=60))
    async with SqliteFrontier(path) as frontier:
        assert await frontier.pending() == 3
        assert await frontier.seen([f"{B}/unique", f"{A}/q"]) == [True, False]
        assert [(seed.url, error) for seed, error in await frontier.failures()] == [(f"{A}/fail", "RuntimeError: gone")]
        assert (await frontier.push([Seed(f"{B}/unique")], unique=True)).duplicates
        queued = {lease.seed.url: lease.seed for lease in [await lease_seed(frontier), await lease_seed(frontier)]}
        assert queued == {f"{A}/q": Seed(f"{A}/q"), f"{B}/unique": Seed(f"{B}/unique", user_data={"k": [1, 2]})}
        waiting = await frontier.lease()
        assert isinstance(waiting, Wait)
        assert waiting.seconds is not None
        assert 55 < waiting.seconds <= 60  # the retry's due time is kept on the wall clock


async def test_a_retry_delay_runs_on_across_a_reopen(path: Path) -> None:
    async with SqliteFrontier(path) as frontier:
        await frontier.push([Seed(f"{A}/flaky")])
        await frontier.report(await lease_seed(frontier), Retry(after=0.2))
    async with SqliteFrontier(path) as frontier:
        with anyio.fail_after(5):
            while isinstance(result := await frontier.lease(), Wait):
                # Still due later: it must say when (at most the delay), not wait for a push.
                assert result.seconds is not None
                assert result.seconds <= 0.2
                await anyio.sleep(result.seconds)
        assert (result.seed.url, result.seed.attempt) == (f"{A}/flaky", 1)


async def test_leases_a_dead_crawl_left_are_queued_again_ahead_on_open(path: Path) -> None:
    frontier = SqliteFrontier(path)
    await frontier.push([Seed(f"{A}/{i}") for i in range(5)])
    in_flight = [await lease_seed(frontier), await lease_seed(frontier)]
    await frontier.report(in_flight[0], Done())
    await frontier.push([Seed(f"{A}/front")], forefront=True)
    orphan = await lease_seed(frontier)  # the forefront seed
    # The process "dies": no report, no release; the next open reclaims both leases at once.
    await frontier.aclose()
    async with SqliteFrontier(path) as reopened:
        assert await reopened.pending() == 5
        order = []
        while isinstance(result := await reopened.lease(), Lease):
            order.append(result.seed.url)
            await reopened.report(result, Done())
        assert order == [orphan.seed.url, in_flight[1].seed.url, f"{A}/2", f"{A}/3", f"{A}/4"]
        assert await reopened.pending() == 0


async def test_fresh_starts_over(path: Path) -> None:
    async with SqliteFrontier(path) as frontier:
        await frontier.push([Seed(f"{A}/1"), Seed(f"{A}/2")], unique=True)
        await frontier.report(await lease_seed(frontier), Fail(ValueError("x")))
    async with SqliteFrontier(path, fresh=True) as frontier:
        assert await frontier.pending() == 0
        assert await frontier.seen([f"{A}/1", f"{A}/2"]) == [False, False]
        assert await frontier.failures() == []
        assert (await frontier.push([Seed(f"{A}/1")], unique=True)).added
    async with SqliteFrontier(path) as frontier:
        assert await frontier.pending() == 1


async def test_a_file_that_is_not_sqlite_is_a_config_error(path: Path) -> None:
    await anyio.Path(path).write_bytes(b"this is a text file, not a database\n" * 100)
    with pytest.raises(ConfigError, match="not a spire frontier"):
        await SqliteFrontier(path).pending()


async def test_another_sqlite_database_is_a_config_error_and_left_untouched(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE orders (id INTEGER)")
        db.execute("INSERT INTO orders VALUES (42)")
    db.close()
    for fresh in (False, True):
        with pytest.raises(ConfigError, match="not a spire frontier"):
            await SqliteFrontier(path, fresh=fresh).push([Seed(f"{A}/1")])
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT id FROM orders").fetchall() == [(42,)]
    db.close()


async def test_a_frontier_from_a_newer_spire_is_a_config_error(path: Path) -> None:
    async with SqliteFrontier(path) as frontier:
        await frontier.push([Seed(f"{A}/1")])
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(ConfigError, match="newer spire"):
        await SqliteFrontier(path).pending()
    async with SqliteFrontier(path, fresh=True) as frontier:
        assert await frontier.pending() == 0


async def test_a_path_that_cannot_be_opened_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot open"):
        await SqliteFrontier(tmp_path / "missing" / "crawl.db").pending()


async def test_a_second_crawl_cannot_open_a_file_in_use(path: Path) -> None:
    async with SqliteFrontier(path) as frontier:
        await frontier.push([Seed(f"{A}/1")])
        await lease_seed(frontier)
        with pytest.raises(ConfigError, match="in use"):
            await SqliteFrontier(path).pending()
        assert await frontier.pending() == 1  # the owner's lease was not reclaimed


async def test_aclose_is_idempotent_and_a_closed_frontier_refuses_work(path: Path) -> None:
    frontier = SqliteFrontier(path)
    await frontier.push([Seed(f"{A}/1")])
    await frontier.aclose()
    await frontier.aclose()
    with pytest.raises(SpireError, match="closed"):
        await frontier.lease()
    await SqliteFrontier(path).aclose()  # never opened: nothing to close


async def test_user_data_that_is_not_json_is_rejected_and_not_recorded_as_seen(path: Path) -> None:
    async with SqliteFrontier(path) as frontier:
        odd = Seed(f"{A}/odd", user_data={"when": object()})
        result = await frontier.push([odd, Seed(f"{A}/ok")], unique=True)
        assert result.rejected == [(odd, "unserializable")]
        assert [seed.url for seed in result.added] == [f"{A}/ok"]
        assert await frontier.seen([f"{A}/odd"]) == [False]
        assert await frontier.pending() == 1


async def test_a_large_unique_push_is_one_batch_and_dedups_exactly(path: Path) -> None:
    async with SqliteFrontier(path) as frontier:
        first = await frontier.push([Seed(f"{A}/{i}") for i in range(0, 10_000, 2)], unique=True)
        assert len(first.added) == 5_000
        second = await frontier.push([Seed(f"{A}/{i}") for i in range(10_000)], unique=True)
        assert len(second.added) == len(second.duplicates) == 5_000
        assert all(int(seed.url.rsplit("/", 1)[1]) % 2 == 1 for seed in second.added)
        assert await frontier.pending() == 10_000
        assert await frontier.seen([f"{A}/{i}" for i in range(10_001)]) == [True] * 10_000 + [False]


async def wal_bytes_after_a_crawl(path: Path, pages: int) -> int:
    """The size of ``path``'s write-ahead log after ``pages`` seeds pushed, leased and reported, one
    at a time as a crawl does, the file still open (closing checkpoints it anyway)."""
    async with SqliteFrontier(path) as frontier:
        for i in range(pages):
            await frontier.push([Seed(f"{A}/{i}", user_data={"page": "x" * 200})], unique=True)
            await frontier.report(await lease_seed(frontier), Done())
        return (await anyio.Path(f"{path}-wal").stat()).st_size


async def test_the_write_ahead_log_is_checkpointed_as_the_crawl_goes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite's own checkpoints are off (they would run on the event loop, inside whichever small
    commit crossed the log's size): the frontier's own run in its worker thread, and keep the log short."""
    monkeypatch.setattr(sqlite_frontier, "_CHECKPOINT_EVERY", 10**9)
    never = await wal_bytes_after_a_crawl(tmp_path / "never.db", 600)
    monkeypatch.setattr(sqlite_frontier, "_CHECKPOINT_EVERY", 100)
    checkpointed = await wal_bytes_after_a_crawl(tmp_path / "checkpointed.db", 600)
    assert checkpointed * 3 < never


async def test_ready_is_asked_on_the_event_loop_thread(path: Path) -> None:
    asked_from: set[int] = set()

    def ready(origin: str) -> float:
        asked_from.add(threading.get_ident())
        return 0.0

    async with SqliteFrontier(path) as frontier:
        await frontier.push([Seed(f"{A}/1"), Seed(f"{B}/1")])
        await frontier.lease(ready)
        assert asked_from == {threading.get_ident()}


async def test_facades_compose_fluently_on_a_file(path: Path) -> None:
    store = SqliteFrontier(path)
    frontier = store.dedup().retry(2, backoff=0)
    assert isinstance(frontier, Retrying)
    assert isinstance(frontier.inner, Dedup)
    await frontier.push([Seed(f"{A}/1"), Seed(f"{A}/1#dup")])
    lease = await frontier.lease()
    assert isinstance(lease, Lease)
    assert await frontier.report(lease, Retry()) == Retry(after=0.0)
    lease = await frontier.lease()
    assert isinstance(lease, Lease)
    assert isinstance(await frontier.report(lease, Retry()), Fail)
    assert [seed.attempt for seed, _ in await store.failures()] == [1]
    await frontier.aclose()


async def test_it_hands_out_seeds_exactly_as_the_memory_frontier_does(path: Path) -> None:
    """A random run of pushes, leases, reports, releases and reopens, mirrored on both stores."""
    rng = random.Random(20240611)
    memory = MemoryFrontier()
    sqlite = SqliteFrontier(path)
    leases: list[tuple[Lease, Lease]] = []
    for step in range(600):
        roll = rng.random()
        if roll < 0.3:
            batch = [
                Seed(f"{rng.choice(ORIGINS)}/p{rng.randrange(80)}", priority=rng.randrange(3))
                for _ in range(rng.randrange(1, 6))
            ]
            forefront, unique = rng.random() < 0.3, rng.random() < 0.6
            ours = await sqlite.push(batch, forefront=forefront, unique=unique)
            theirs = await memory.push(batch, forefront=forefront, unique=unique)
            assert (ours.added, ours.duplicates) == (theirs.added, theirs.duplicates), step
        elif roll < 0.65:
            refused = set(rng.sample(ORIGINS, rng.randrange(3)))

            def ready(origin: str, refused: set[str] = refused) -> float:
                return math.inf if origin in refused else 0.0

            ours_lease, theirs_lease = await sqlite.lease(ready), await memory.lease(ready)
            if isinstance(theirs_lease, Lease):
                assert isinstance(ours_lease, Lease), step
                assert ours_lease.seed == theirs_lease.seed, step
                leases.append((ours_lease, theirs_lease))
            else:
                assert ours_lease == theirs_lease, step
        elif roll < 0.9 and leases:
            ours_lease, theirs_lease = leases.pop(rng.randrange(len(leases)))
            outcome: Outcome = rng.choice([Done(), Retry(after=0), Fail(ValueError("no"))])
            assert await sqlite.report(ours_lease, outcome) == await memory.report(theirs_lease, outcome)
        elif roll < 0.97 and leases:
            ours_lease, theirs_lease = leases.pop(rng.randrange(len(leases)))
            await sqlite.release(ours_lease)
            await memory.release(theirs_lease)
        elif roll >= 0.97:
            # Reopen: hand back what is leased (a reopen would reclaim it), then resume from the file.
            for ours_lease, theirs_lease in leases:
                await sqlite.release(ours_lease)
                await memory.release(theirs_lease)
            leases.clear()
            await sqlite.aclose()
            sqlite = SqliteFrontier(path)
        assert await sqlite.pending() == await memory.pending(), step
    assert [(s.url, e) for s, e in await sqlite.failures()] == [(s.url, f"ValueError: {e}") for s, e in memory.failed]
    await sqlite.aclose()


async def test_a_lease_asks_ready_only_about_the_origins_ahead_of_the_one_it_hands_out(path: Path) -> None:
    # Pushed worst first: a scan of every origin would ask each one in turn.
    async with SqliteFrontier(path) as frontier:
        await frontier.push(Seed(f"http://host-{i}.example/", priority=i) for i in range(2_000))
        asked: list[str] = []

        def ready(origin: str) -> float:
            asked.append(origin)
            return math.inf if origin == "http://host-1999.example" else 0.0

        lease = await frontier.lease(ready)
        assert isinstance(lease, Lease)
        assert lease.origin == "http://host-1998.example"
        assert asked == ["http://host-1999.example", "http://host-1998.example"]
        second = await frontier.lease(ready)  # the refused origin is still first in line
        assert isinstance(second, Lease)
        assert second.origin == "http://host-1997.example"
        assert asked[2:] == ["http://host-1999.example", "http://host-1997.example"]
