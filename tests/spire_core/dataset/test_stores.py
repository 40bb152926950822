"""What every file-backed store does the same: round trips, validation, reopening, closing, streaming."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import anyio
import pytest
from pydantic import BaseModel

from spire_core.dataset import Dataset
from spire_core.errors import ConfigError, InvalidItem, SpireError
from tests.spire_core.dataset.conftest import STORES, Author, Book, Make

pytestmark = pytest.mark.anyio


def files(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


def snapshot(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir())}


def open_descriptors(directory: Path) -> int:
    """The descriptors this process holds open on files in ``directory``.

    Only those: the process's other descriptors (a socket a finished test left to the garbage
    collector, an event loop's pipe) may close at any moment, and would move a count of them all.
    """
    opened = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the descriptor that listed the folder is closed already
            if os.readlink(f"/proc/self/fd/{fd}").startswith(f"{directory}/"):
                opened += 1
    return opened


async def test_pushed_models_and_dicts_read_back_equal_and_in_order(make: Make, tmp_path: Path) -> None:
    books = make(Book, tmp_path)
    dune = Book(title="Dune", price=9.5, tags=["sf", "classic"], author=Author(name="Frank Herbert", born=1920))
    assert await books.push(dune) == 1
    assert await books.push([{"title": "Emma", "price": "7"}, Book(title="Ulysses", price=12, note="a, b")]) == 2
    assert await books.push([]) == 0
    assert await books.items() == [
        dune,
        Book(title="Emma", price=7.0),
        Book(title="Ulysses", price=12.0, note="a, b"),
    ]
    assert isinstance(books, Dataset)
    await books.aclose()


async def test_an_invalid_item_fails_its_whole_batch_and_writes_nothing(make: Make, tmp_path: Path) -> None:
    books = make(Book, tmp_path)
    await books.push(Book(title="Dune", price=9.5))
    before = snapshot(tmp_path)
    with pytest.raises(InvalidItem):
        await books.push([Book(title="Emma", price=7), {"title": "No price"}])
    with pytest.raises(InvalidItem):
        await books.push({"title": "Bad price", "price": "cheap"})
    assert snapshot(tmp_path) == before
    assert await books.items() == [Book(title="Dune", price=9.5)]
    await books.aclose()


async def test_an_invalid_item_is_a_spire_error_keeping_pydantic_field_messages(make: Make, tmp_path: Path) -> None:
    books = make(Book, tmp_path)
    with pytest.raises(InvalidItem) as raised:
        await books.push({"title": None, "price": "cheap"})
    error = raised.value
    assert isinstance(error, SpireError)
    assert error.category == "invalid_item"
    assert str(error).startswith("invalid Book: 2 field problems")
    assert "title: Input should be a valid string (got None)" in str(error)
    assert "price: Input should be a valid number" in str(error)
    assert [detail["loc"] for detail in error.errors] == [(0, "title"), (0, "price")]
    await books.aclose()


async def test_an_invalid_first_push_creates_no_file(make: Make, tmp_path: Path) -> None:
    books = make(Book, tmp_path)
    with pytest.raises(InvalidItem):
        await books.push({"title": "No price"})
    assert files(tmp_path) == []


async def test_reading_a_store_never_written_yields_nothing_and_creates_no_file(make: Make, tmp_path: Path) -> None:
    assert await make(Book, tmp_path).items() == []
    assert files(tmp_path) == []


async def test_reopening_a_store_appends_after_the_items_it_holds(make: Make, tmp_path: Path) -> None:
    async with make(Book, tmp_path) as first:
        await first.push([Book(title="Dune", price=9.5), Book(title="Emma", price=7)])
    async with make(Book, tmp_path) as second:
        assert [book.title for book in await second.items()] == ["Dune", "Emma"]
        await second.push(Book(title="Ulysses", price=12))
    async with make(Book, tmp_path) as third:
        assert [book.title for book in await third.items()] == ["Dune", "Emma", "Ulysses"]


async def test_the_context_manager_closes_the_file_and_aclose_is_idempotent(make: Make, tmp_path: Path) -> None:
    before = open_descriptors(tmp_path)
    async with make(Book, tmp_path) as books:
        await books.push(Book(title="Dune", price=9.5))
        assert open_descriptors(tmp_path) > before
    assert open_descriptors(tmp_path) == before
    await books.aclose()
    await books.aclose()
    assert open_descriptors(tmp_path) == before


async def test_a_closed_dataset_reopens_on_the_next_push_and_read(make: Make, tmp_path: Path) -> None:
    books = make(Book, tmp_path)
    await books.push(Book(title="Dune", price=9.5))
    await books.aclose()
    await books.push(Book(title="Emma", price=7))
    await books.aclose()
    assert [book.title for book in await books.items()] == ["Dune", "Emma"]
    await books.aclose()


async def test_concurrent_pushes_keep_every_batch_whole_and_contiguous(make: Make, tmp_path: Path) -> None:
    books = make(Book, tmp_path)

    async def push_batch(batch: int) -> None:
        await books.push([Book(title=f"{batch}-{i}", price=i) for i in range(25)])

    async with anyio.create_task_group() as tg:
        for batch in range(40):
            tg.start_soon(push_batch, batch)
    titles = [book.title for book in await books.items()]
    assert len(titles) == 40 * 25
    runs = [titles[start : start + 25] for start in range(0, len(titles), 25)]
    for run in runs:
        batch = run[0].split("-")[0]
        assert run == [f"{batch}-{i}" for i in range(25)]
    assert sorted(run[0] for run in runs) == sorted(f"{batch}-0" for batch in range(40))
    await books.aclose()


async def test_many_items_stream_back_across_read_chunks(make: Make, tmp_path: Path) -> None:
    # ~1.5 MB of rows: several trips to the worker thread for every store.
    books = make(Book, tmp_path)
    for start in range(0, 6000, 1000):
        await books.push([Book(title=f"book {n} " + "x" * 200, price=n) for n in range(start, start + 1000)])
    prices = [book.price async for book in books]
    assert prices == [float(n) for n in range(6000)]
    await books.aclose()


def test_a_dataset_made_outside_any_event_loop_serves_two_runs_on_two_backends(make: Make, tmp_path: Path) -> None:
    books = make(Book, tmp_path)

    async def push_and_count(title: str) -> int:
        await books.push(Book(title=title, price=1))
        count = len(await books.items())
        await books.aclose()
        return count

    assert anyio.run(push_and_count, "on asyncio", backend="asyncio") == 1
    assert anyio.run(push_and_count, "on trio", backend="trio") == 2


def test_a_dataset_holds_pydantic_models_only(tmp_path: Path) -> None:
    class NotAModel:
        pass

    for make in STORES.values():
        with pytest.raises(ConfigError, match="pydantic models"):
            make(NotAModel, tmp_path)  # type: ignore[arg-type]


async def test_items_round_trip_through_validators_and_defaults(make: Make, tmp_path: Path) -> None:
    class Page(BaseModel):
        url: str
        links: list[str] = []
        status: int = 200
        headers: dict[str, str] = {}
        flags: list[bool] = []

    pages = make(Page, tmp_path)
    page = Page(url="http://a/", links=["http://b/"], headers={"content-type": "text/html"}, flags=[True, False])
    await pages.push([page, Page(url="http://c/", status=404)])
    assert await pages.items() == [page, Page(url="http://c/", status=404)]
    await pages.aclose()
