"""``SqliteDataset``: one JSON row per item, in a table per model, in WAL mode."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import pytest
from pydantic import BaseModel

from spire_core.dataset import SqliteDataset
from spire_core.dataset.sqlite import table_name
from spire_core.errors import ConfigError, DatasetError
from tests.spire_core.dataset.conftest import Author, Book

pytestmark = pytest.mark.anyio


class BookReview(BaseModel):
    book: str
    stars: int


def query(path: Path, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as db:
        return db.execute(sql).fetchall()


async def test_two_datasets_share_one_file_in_separate_tables(tmp_path: Path) -> None:
    path = tmp_path / "crawl.db"
    books, reviews = SqliteDataset(Book, path), SqliteDataset(BookReview, path)

    async def push_books() -> None:
        for n in range(20):
            await books.push(Book(title=f"book {n}", price=n))

    async def push_reviews() -> None:
        for n in range(20):
            await reviews.push([BookReview(book=f"book {n}", stars=n % 5)] * 2)

    async with books, reviews, anyio.create_task_group() as tg:
        tg.start_soon(push_books)
        tg.start_soon(push_reviews)
    assert [book.title for book in await books.items()] == [f"book {n}" for n in range(20)]
    assert len(await reviews.items()) == 40
    assert query(path, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name") == [
        ("book",),
        ("book_review",),
    ]
    await books.aclose()
    await reviews.aclose()


async def test_an_explicit_table_keeps_datasets_of_one_model_apart(tmp_path: Path) -> None:
    path = tmp_path / "crawl.db"
    async with SqliteDataset(Book, path, table="new") as new, SqliteDataset(Book, path, table='odd "name"') as odd:
        await new.push(Book(title="Dune", price=9.5))
        await odd.push(Book(title="Emma", price=7))
        assert [book.title for book in await new.items()] == ["Dune"]
        assert [book.title for book in await odd.items()] == ["Emma"]


async def test_the_file_is_in_wal_mode_and_items_are_json_sql_can_query(tmp_path: Path) -> None:
    path = tmp_path / "crawl.db"
    async with SqliteDataset(Book, path) as books:
        await books.push([Book(title="Dune", price=9.5, author=Author(name="Frank")), Book(title="Emma", price=7)])
        assert query(path, "PRAGMA journal_mode") == [("wal",)]
        assert query(path, "SELECT id, json_extract(item, '$.author.name') FROM book ORDER BY id") == [
            (1, "Frank"),
            (2, None),
        ]


def test_the_default_table_is_the_model_name_in_snake_case() -> None:
    class HTTPPage(BaseModel):
        url: str

    assert [table_name(Book), table_name(BookReview), table_name(HTTPPage)] == ["book", "book_review", "http_page"]


async def test_a_table_with_another_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "crawl.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE book (title TEXT, price REAL)")
    books = SqliteDataset(Book, path)
    with pytest.raises(DatasetError, match=r"table 'book' exists with columns \(price, title\)"):
        await books.push(Book(title="Dune", price=9.5))
    await books.aclose()


async def test_a_row_that_is_not_a_json_object_raises_naming_its_id(tmp_path: Path) -> None:
    path = tmp_path / "crawl.db"
    async with SqliteDataset(Book, path) as books:
        await books.push([Book(title="Dune", price=9.5)] * 2)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE book SET item = '{broken' WHERE id = 2")
    with pytest.raises(DatasetError, match="row 2 of table 'book' is not valid JSON") as caught:
        await SqliteDataset(Book, path).items()
    assert caught.value.line == 2


@pytest.mark.parametrize("table", ["", "sqlite_master", "SQLITE_x"])
def test_empty_and_reserved_table_names_are_a_config_error(tmp_path: Path, table: str) -> None:
    with pytest.raises(ConfigError):
        SqliteDataset(Book, tmp_path / "crawl.db", table=table)
