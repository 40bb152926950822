"""A dataset that cannot be written, on a real full disk or a read-only folder: every store fails the
page with a ``DatasetError`` and counts only the items its file holds; a path no item can ever reach
stops the crawl before its first request."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from pydantic import BaseModel

from spire import Crawler, Dataset, Html, JsonlDataset, Links, Router, Seed, SqliteDataset, Url
from spire_core.errors import DatasetError
from tests.disks import fill, read_only, remount_read_only, small_disk, writable_until_remounted
from tests.sites.server import Site
from tests.spire_core.dataset.conftest import STORES, Make

PAGES = 8


class Page(BaseModel):
    url: str
    text: str


def eight_pages(site: Site) -> str:
    links = " ".join(f'<a href="/p/{i}">{i}</a>' for i in range(PAGES))
    site.page("/", links)
    for i in range(PAGES):
        site.page(f"/p/{i}", f"<p>page {i} {'x' * 200}</p>")
    return site.url("/")


def pages_router(before_links: object = None) -> Router:
    router = Router()

    @router.handler("listing")
    async def listing(page: Html, links: Links) -> None:
        if callable(before_links):
            before_links()
        await links.follow(page.css("a::attr(href)").getall(), tag="page")

    @router.handler("page")
    async def one(page: Html, url: Url, pages: Dataset[Page]) -> None:
        await pages.push(Page(url=url, text=page.css("p::text").get(default="")))

    return router


def jsonl_lines(path: Path) -> int:
    if not path.exists():
        return 0
    return sum(1 for line in path.read_bytes().splitlines() if line.strip() and json.loads(line))


def test_a_full_disk_fails_every_page_whose_items_it_could_not_hold(site: Site, tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk") as disk:
        fill(disk)
        path = disk / "pages.jsonl"
        stats = Crawler(pages_router(), concurrency=PAGES, datasets={Page: JsonlDataset(Page, path)}).run(
            [Seed(eight_pages(site), tag="listing")]
        )
        assert (stats.failed, stats.finished) == (PAGES, 1)
        assert stats.errors_by_category["dataset"] == PAGES
        assert stats.items == jsonl_lines(path) == 0


def test_a_folder_that_turns_read_only_mid_crawl_fails_every_page_after_it(site: Site, tmp_path: Path) -> None:
    with writable_until_remounted(tmp_path / "out") as folder:
        path = folder / "pages.jsonl"
        router = pages_router(lambda: remount_read_only(folder))
        stats = Crawler(router, concurrency=PAGES, datasets={Page: JsonlDataset(Page, path)}).run(
            [Seed(eight_pages(site), tag="listing")]
        )
        assert (stats.failed, stats.finished) == (PAGES, 1)
        assert stats.items == jsonl_lines(path) == 0


@pytest.mark.parametrize("disk", ["full", "read-only"])
def test_every_push_merged_into_a_failed_write_raises(disk: str, tmp_path: Path, make: Make) -> None:
    async def push_all(dataset: Dataset[Page]) -> list[BaseException | None]:
        raised: list[BaseException | None] = [None] * PAGES

        async def push(i: int) -> None:
            try:
                await dataset.push(Page(url=f"/p/{i}", text="x" * 200))
            except DatasetError as exc:
                raised[i] = exc

        async with anyio.create_task_group() as tg:
            for i in range(PAGES):
                tg.start_soon(push, i)
        await dataset.aclose()
        return raised

    mount = small_disk if disk == "full" else read_only
    with mount(tmp_path / "disk") as folder:
        if disk == "full":
            fill(folder)
        dataset = make(Page, folder)
        raised = anyio.run(push_all, dataset)
    assert all(isinstance(exc, DatasetError) for exc in raised), raised
    assert len({id(exc) for exc in raised}) == PAGES  # one error each, not one object shared by many tasks
    assert all(str(folder) in str(exc) for exc in raised)


def test_a_write_the_disk_took_only_part_of_is_cut_off_so_the_next_one_starts_a_fresh_line(tmp_path: Path) -> None:
    async def scenario(path: Path, disk: Path) -> tuple[int, int, list[Page]]:
        dataset = JsonlDataset(Page, path)
        await dataset.push(Page(url="/first", text="fits"))
        before = (await anyio.Path(path).stat()).st_size
        with pytest.raises(DatasetError, match="No space left"):
            await dataset.push([Page(url=f"/big/{i}", text="y" * 1000) for i in range(20)])
        after = (await anyio.Path(path).stat()).st_size
        await anyio.Path(disk / "filler").unlink()  # room again
        await dataset.push(Page(url="/last", text="fits"))
        await dataset.aclose()
        return before, after, await dataset.items()

    with small_disk(tmp_path / "disk") as disk:
        fill(disk, leave=8192)
        before, after, items = anyio.run(scenario, disk / "pages.jsonl", disk)
    assert after == before  # not a torn half of the batch
    assert [item.url for item in items] == ["/first", "/last"]


def test_a_sqlite_dataset_on_a_full_disk_fails_the_pages_not_the_crawl(site: Site, tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk", size="256k") as disk:
        path = disk / "pages.db"
        anyio.run(SqliteDataset(Page, path).check)
        fill(disk)
        stats = Crawler(pages_router(), concurrency=PAGES, datasets={Page: SqliteDataset(Page, path)}).run(
            [Seed(eight_pages(site), tag="listing")]
        )
        assert stats.failed == PAGES
        assert stats.errors_by_category["dataset"] == PAGES
        assert stats.items == 0


@pytest.mark.parametrize("store", sorted(STORES))
def test_a_read_only_output_folder_stops_the_crawl_before_its_first_request(
    store: str, site: Site, tmp_path: Path
) -> None:
    start = eight_pages(site)
    with read_only(tmp_path / "out") as folder:
        dataset = STORES[store](Page, folder)
        with pytest.raises(DatasetError, match="read-only file system") as raised:
            Crawler(pages_router(), datasets={Page: dataset}).run([Seed(start, tag="listing")])
    assert str(folder) in str(raised.value)
    assert "writable path" in str(raised.value)
    assert not site.hits(robots=True)


def test_an_output_path_that_is_a_directory_stops_the_crawl_at_once(site: Site, tmp_path: Path) -> None:
    (tmp_path / "pages.jsonl").mkdir()
    with pytest.raises(DatasetError, match="is a directory"):
        Crawler(pages_router(), datasets={Page: JsonlDataset(Page, tmp_path / "pages.jsonl")}).run(
            [Seed(eight_pages(site), tag="listing")]
        )
    assert not site.hits(robots=True)


def test_a_missing_output_folder_under_a_writable_one_passes_the_check(tmp_path: Path) -> None:
    anyio.run(JsonlDataset(Page, tmp_path / "new" / "deeper" / "pages.jsonl").check)
    assert not (tmp_path / "new").exists()  # the check creates nothing


def test_an_output_path_under_a_file_stops_the_crawl_at_once(site: Site, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("a file, not a folder")
    dataset = JsonlDataset(Page, tmp_path / "notes.txt" / "out" / "pages.jsonl")
    with pytest.raises(DatasetError, match="is a file, not a folder"):
        Crawler(pages_router(), datasets={Page: dataset}).run([Seed(eight_pages(site), tag="listing")])
    assert not site.hits(robots=True)
