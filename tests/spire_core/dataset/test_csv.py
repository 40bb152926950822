"""``CsvDataset``: a header once, nested values as JSON cells, a torn last row survived."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from spire_core.dataset import CsvDataset
from spire_core.dataset.csv import CsvColumns
from spire_core.errors import DatasetError
from tests.spire_core.dataset.conftest import Author, Book

pytestmark = pytest.mark.anyio

HEADER = b"title,price,tags,author,note\r\n"


class Shelf(StrEnum):
    fiction = "fiction"
    science = "science"


class Record(BaseModel):
    text: str
    code: int | str
    ratio: float | None
    ok: bool
    when: datetime
    shelf: Shelf
    kind: Literal["a", "b"]
    anything: Any = None
    nested: dict[str, list[Author]] = {}
    matrix: list[list[int]] = []


def records(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_bytes().decode("utf-8"), newline="")))


async def test_nested_values_round_trip_as_json_cells(tmp_path: Path) -> None:
    path = tmp_path / "records.csv"
    items = [
        Record(
            text='a "quoted", comma\r\nand a second line',
            code=12,
            ratio=0.25,
            ok=True,
            when=datetime(2024, 5, 1, 12, 30, tzinfo=UTC),
            shelf=Shelf.science,
            kind="b",
            anything={"deep": [1, None, "x"]},
            nested={"authors": [Author(name="Ann", born=1900), Author(name="Bo")]},
            matrix=[[1, 2], [3]],
        ),
        Record(text="", code="12", ratio=None, ok=False, when=datetime(2024, 1, 1), shelf="fiction", kind="a"),
    ]
    async with CsvDataset(Record, path) as dataset:
        await dataset.push(items)
        assert await dataset.items() == items
    header, first, second = records(path)
    assert header == ["text", "code", "ratio", "ok", "when", "shelf", "kind", "anything", "nested", "matrix"]
    assert first[:7] == [
        'a "quoted", comma\r\nand a second line',
        "12",
        "0.25",
        "true",
        "2024-05-01T12:30:00Z",
        "science",
        "b",
    ]
    assert first[8] == '{"authors":[{"name":"Ann","born":1900},{"name":"Bo","born":null}]}'
    assert second[1:4] == ['"12"', "", "false"]  # a string in a field that may also hold a number stays apart


async def test_the_header_is_written_once_with_the_first_row_and_not_on_reopen(tmp_path: Path) -> None:
    path = tmp_path / "books.csv"
    async with CsvDataset(Book, path) as books:
        await books.push(Book(title="Dune", price=9.5, tags=["sf"], author=Author(name="Frank")))
    async with CsvDataset(Book, path) as books:
        await books.push(Book(title="Emma", price=7))
    assert records(path) == [
        ["title", "price", "tags", "author", "note"],
        ["Dune", "9.5", '["sf"]', '{"name":"Frank","born":null}', ""],
        ["Emma", "7.0", "[]", "", ""],
    ]


async def test_an_empty_cell_is_none_in_an_optional_text_field_and_empty_in_a_required_one(tmp_path: Path) -> None:
    # CSV has no null: in a field that may be None, an empty string reads back as None.
    async with CsvDataset(Book, tmp_path / "books.csv") as books:
        await books.push([Book(title="", price=1, note=""), Book(title="x", price=2, note=None)])
        assert [(book.title, book.note) for book in await books.items()] == [("", None), ("x", None)]


async def test_a_file_with_another_header_is_refused_for_reading_and_appending(tmp_path: Path) -> None:
    path = tmp_path / "books.csv"
    path.write_bytes(b"title,price\r\nDune,9.5\r\n")
    books = CsvDataset(Book, path)
    with pytest.raises(DatasetError, match=r"header \(title, price\) is not the model's fields"):
        await books.items()
    with pytest.raises(DatasetError, match="write this model to a new file"):
        await books.push(Book(title="Emma", price=7))
    await books.aclose()
    assert path.read_bytes() == b"title,price\r\nDune,9.5\r\n"


async def test_a_header_saved_with_a_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "books.csv"
    path.write_bytes(b"\xef\xbb\xbf" + HEADER + b"Dune,9.5,[],,\r\n")
    assert await CsvDataset(Book, path).items() == [Book(title="Dune", price=9.5)]


@pytest.mark.parametrize(
    "torn",
    [b"Emma,7.", b'"Emma, a novel",7.0,"[""cl', b'"Emma\r\n', b"Emma,7.0,[],,\r"],
    ids=["mid-cell", "inside-quotes", "after-a-newline-inside-quotes", "before-the-last-newline"],
)
async def test_a_torn_last_row_is_skipped_and_cut_off_on_reopen(tmp_path: Path, torn: bytes) -> None:
    path = tmp_path / "books.csv"
    whole = HEADER + b'"Dune\nPart One",9.5,"[""sf""]",,\r\n' * 3000  # past one read chunk
    path.write_bytes(whole + torn)
    books = CsvDataset(Book, path)
    items = await books.items()
    assert len(items) == 3000
    assert items[0] == Book(title="Dune\nPart One", price=9.5, tags=["sf"])
    await books.push(Book(title="Ulysses", price=12))
    await books.aclose()
    assert path.read_bytes() == whole + b"Ulysses,12.0,[],,\r\n"


async def test_a_torn_header_is_rewritten_with_the_next_rows(tmp_path: Path) -> None:
    path = tmp_path / "books.csv"
    path.write_bytes(b"title,pri")
    books = CsvDataset(Book, path)
    assert await books.items() == []
    await books.push(Book(title="Dune", price=9.5))
    await books.aclose()
    assert path.read_bytes() == HEADER + b"Dune,9.5,[],,\r\n"


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        (b"Emma,7.0\r\n", "line 3 has 2 cells, not 5"),
        (b"Emma,seven,[],,\r\n", "line 3: column 'price' holds 'seven', which is not JSON"),
        (b'"Em"ma,7.0,[],,\r\n', "line 3 is not valid CSV"),
    ],
)
async def test_a_malformed_row_before_the_last_raises_naming_its_line(tmp_path: Path, bad: bytes, problem: str) -> None:
    path = tmp_path / "books.csv"
    path.write_bytes(HEADER + b"Dune,9.5,[],,\r\n" + bad + b"Ulysses,12.0,[],,\r\n")
    with pytest.raises(DatasetError, match=problem) as caught:
        await CsvDataset(Book, path).items()
    assert caught.value.line == 3


def test_columns_keep_text_fields_as_text_and_everything_else_as_json() -> None:
    columns = CsvColumns.of(Record)
    assert columns.text == {"text", "when", "shelf", "kind"}
    assert columns.nullable == {"ratio", "anything"}
