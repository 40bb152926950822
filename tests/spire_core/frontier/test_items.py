"""Items kept in the frontier's store are written with their page's report: exactly once, or not at all."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from spire import Crawler, Dataset, Html, Links, Router, Url
from spire_core.dataset.redis import RedisDataset
from spire_core.dataset.sqlite import SqliteDataset
from spire_core.errors import ConfigError
from spire_core.frontier.base import Frontier
from spire_core.frontier.items import ItemStore
from spire_core.frontier.redis import RedisFrontier
from spire_core.frontier.sqlite import SqliteFrontier
from spire_core.outcome import Done, Fail, Retry
from spire_core.seed import Seed
from tests.sites.server import Site, binary_tree
from tests.spire_core.frontier.helpers import lease_seed, lease_when_ready

pytestmark = pytest.mark.anyio

A = "http://a.example"


class Page(BaseModel):
    url: str
    title: str


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # redis-py's client runs on asyncio only


@pytest.fixture(params=["sqlite", "redis"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SqliteFrontier | RedisFrontier]:
    """Each store that commits items with its reports, empty."""
    if request.param == "sqlite":
        frontier: SqliteFrontier | RedisFrontier = SqliteFrontier(tmp_path / "crawl.db")
    else:
        redis_url = request.getfixturevalue("redis_url")
        frontier = RedisFrontier(redis_url, name="items")
    try:
        yield frontier
    finally:
        await frontier.aclose()


def page_router() -> Router:
    router = Router()

    @router.default
    async def page(html: Html, url: Url, pages: Dataset[Page]) -> None:
        await pages.push(Page(url=url, title=html.css("title::text").get() or ""))

    return router


async def stored(frontier: SqliteFrontier | RedisFrontier) -> list[str]:
    return [page.url async for page in frontier.dataset(Page)]


async def test_a_crawl_writes_the_items_of_the_stores_datasets_with_each_report(
    store: SqliteFrontier | RedisFrontier, site: Site, tmp_path: Path
) -> None:
    root = binary_tree(site, 30)
    router = page_router()

    @router.handler("tree")
    async def tree(html: Html, url: Url, links: Links, pages: Dataset[Page]) -> None:
        await links.follow(html.css("a::attr(href)").getall(), tag="tree")
        await pages.push(Page(url=url, title=html.css("title::text").get() or ""))

    frontier: Frontier = store.dedup()
    crawler = Crawler(router, frontier=frontier, datasets=store.dataset)
    assert isinstance(store, ItemStore)
    stats = await crawler.arun([Seed(root, tag="tree")])
    assert stats.items == 30
    urls = await stored(store)
    assert sorted(urls) == sorted(site.url(f"/page/{i}") for i in range(30))
    # Exported like any dataset: JSON Lines and CSV.
    assert await store.dataset(Page).export(tmp_path / "pages.jsonl") == 30
    lines = (tmp_path / "pages.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["url"] for line in lines) == sorted(urls)
    assert await store.dataset(Page).export(tmp_path / "pages.csv", "csv") == 30
    assert (tmp_path / "pages.csv").read_text().splitlines()[0] == "url,title"


async def test_staged_items_are_written_only_when_the_lease_is_reported_done(
    store: SqliteFrontier | RedisFrontier,
) -> None:
    pages = store.dataset(Page)
    await store.push([Seed(f"{A}/{n}") for n in range(4)])
    outcomes: list[Any] = [Done(), Retry(error=None), Fail(ValueError("boom")), None]
    for n, outcome in enumerate(outcomes):
        lease = await lease_seed(store)
        store.stage(lease, [(pages, [Page(url=lease.seed.url, title=str(n))])])
        if outcome is None:
            await store.release(lease)
        else:
            await store.report(lease, outcome)
    assert len(await stored(store)) == 1


async def test_staging_again_for_a_lease_replaces_what_was_staged(store: SqliteFrontier | RedisFrontier) -> None:
    pages = store.dataset(Page)
    await store.push([Seed(f"{A}/x")])
    lease = await lease_seed(store)
    store.stage(lease, [(pages, [Page(url="first", title="")])])
    store.stage(lease, [(pages, [Page(url="second", title=""), Page(url="third", title="")])])
    await store.report(lease, Done())
    assert await stored(store) == ["second", "third"]


async def test_a_store_holds_only_its_own_datasets(store: SqliteFrontier | RedisFrontier, tmp_path: Path) -> None:
    assert store.holds(store.dataset(Page))
    assert not store.holds(SqliteDataset(Page, tmp_path / "other.db"))
    with pytest.raises(ConfigError):
        store.dataset(Page, **{"table" if isinstance(store, SqliteFrontier) else "stream": ""})


async def test_pushed_outside_a_crawl_items_are_appended_at_once(store: SqliteFrontier | RedisFrontier) -> None:
    pages = store.dataset(Page)
    assert await pages.push([Page(url=f"{A}/{n}", title="") for n in range(2500)]) == 2500
    assert await stored(store) == [f"{A}/{n}" for n in range(2500)]  # read back in order, page by page


async def test_on_redis_a_late_ack_of_an_expired_lease_writes_none_of_its_items(redis_url: str) -> None:
    first = RedisFrontier(redis_url, name="late", lease_ttl=0.2)
    second = RedisFrontier(redis_url, name="late", lease_ttl=30)
    try:
        await first.push([Seed(f"{A}/slow")])
        lease = await lease_seed(first)
        again = await lease_when_ready(second)  # once the first lease expired, on the server's clock
        first.stage(lease, [(first.dataset(Page), [Page(url="late", title="")])])
        await first.report(lease, Done())
        second.stage(again, [(second.dataset(Page), [Page(url="on time", title="")])])
        await second.report(again, Done())
        assert [page.url async for page in RedisDataset(Page, first)] == ["on time"]
    finally:
        await first.aclose()
        await second.aclose()


async def test_after_the_crawl_a_sqlite_dataset_reads_the_frontier_files_table(site: Site, tmp_path: Path) -> None:
    root = binary_tree(site, 5)
    async with SqliteFrontier(tmp_path / "crawl.db") as frontier:
        await Crawler(page_router(), frontier=frontier.dedup(), datasets=frontier.dataset).arun([root])
    async with SqliteDataset(Page, tmp_path / "crawl.db") as pages:
        assert [page.url for page in await pages.items()] == [root]


async def test_a_page_whose_report_never_came_leaves_no_item_and_is_queued_again(tmp_path: Path) -> None:
    # The process dies between the handler's end and the report: the connection goes, nothing commits.
    path = tmp_path / "crawl.db"
    dead = SqliteFrontier(path)
    await dead.push([Seed(f"{A}/x")])
    lease = await lease_seed(dead)
    dead.stage(lease, [(dead.dataset(Page), [Page(url=lease.seed.url, title="")])])
    await dead.aclose()  # what a kill leaves: the lease recorded, the staged items nowhere
    async with SqliteFrontier(path) as reopened:
        assert await stored(reopened) == []
        again = await lease_seed(reopened)
        assert again.seed.url == f"{A}/x"
        reopened.stage(again, [(reopened.dataset(Page), [Page(url=again.seed.url, title="")])])
        await reopened.report(again, Done())
        assert await stored(reopened) == [f"{A}/x"]
