"""``JsonlDataset``: one JSON object per line, a torn last line survived, corruption reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spire_core.dataset import JsonlDataset
from spire_core.errors import DatasetError
from tests.spire_core.dataset.conftest import Author, Book

pytestmark = pytest.mark.anyio

DUNE = {"title": "Dune", "price": 9.5, "tags": [], "author": None, "note": None}
EMMA = {"title": "Emma", "price": 7.0, "tags": [], "author": None, "note": None}


def line(row: dict[str, object]) -> bytes:
    return json.dumps(row).encode() + b"\n"


async def test_each_item_is_one_line_of_json_in_a_created_directory(tmp_path: Path) -> None:
    path = tmp_path / "out" / "books.jsonl"
    async with JsonlDataset(Book, path) as books:
        await books.push(Book(title="Dune — “Part One”", price=9.5, author=Author(name="Frank")))
        await books.push([Book(title="Emma", price=7)])
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(text) for text in lines] == [
        {
            "title": "Dune — “Part One”",
            "price": 9.5,
            "tags": [],
            "author": {"name": "Frank", "born": None},
            "note": None,
        },
        EMMA,
    ]
    assert "“Part One”" in lines[0]  # readable UTF-8, not \u escapes


async def test_a_torn_last_line_is_skipped_and_the_next_append_starts_on_a_fresh_line(tmp_path: Path) -> None:
    path = tmp_path / "books.jsonl"
    whole = line(DUNE) * 3000  # past one read chunk, so the torn line sits in a later chunk
    path.write_bytes(whole + b'{"title": "Em')
    books = JsonlDataset(Book, path)
    assert len(await books.items()) == 3000
    assert path.read_bytes().endswith(b'{"title": "Em')  # reading changes nothing
    await books.push(Book(title="Ulysses", price=12))
    await books.aclose()
    data = path.read_bytes()
    assert data.startswith(whole)
    assert json.loads(data[len(whole) :])["title"] == "Ulysses"
    assert [book.title for book in await books.items()][-2:] == ["Dune", "Ulysses"]


async def test_a_whole_last_object_without_its_newline_is_kept_and_ended(tmp_path: Path) -> None:
    path = tmp_path / "books.jsonl"
    path.write_bytes(line(DUNE) + json.dumps(EMMA).encode())
    books = JsonlDataset(Book, path)
    assert [book.title for book in await books.items()] == ["Dune", "Emma"]
    await books.push(Book(title="Ulysses", price=12))
    await books.aclose()
    assert path.read_bytes().count(b"\n") == 3
    assert [book.title for book in await books.items()] == ["Dune", "Emma", "Ulysses"]


async def test_a_file_that_is_only_a_torn_line_reads_empty_and_is_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "books.jsonl"
    path.write_bytes(b'{"title": "Du')
    books = JsonlDataset(Book, path)
    assert await books.items() == []
    await books.push(Book(title="Emma", price=7))
    await books.aclose()
    assert path.read_bytes() == b'{"title":"Emma","price":7.0,"tags":[],"author":null,"note":null}\n'


@pytest.mark.parametrize(
    ("bad", "problem"),
    [(b'{"title": "Emma", "pri', "is not valid JSON"), (b"[1, 2]", "holds a JSON list, not an object")],
)
async def test_a_malformed_line_before_the_last_raises_naming_its_line(
    tmp_path: Path, bad: bytes, problem: str
) -> None:
    path = tmp_path / "books.jsonl"
    path.write_bytes(line(DUNE) + b"\n" + bad + b"\n" + line(EMMA))
    with pytest.raises(DatasetError, match=f"books.jsonl: line 3 {problem}") as caught:
        await JsonlDataset(Book, path).items()
    assert (caught.value.line, caught.value.path, caught.value.category) == (3, str(path), "dataset")


async def test_blank_lines_and_windows_line_ends_are_read(tmp_path: Path) -> None:
    path = tmp_path / "books.jsonl"
    path.write_bytes(b"\n" + json.dumps(DUNE).encode() + b"\r\n\n" + line(EMMA) + b"  \n")
    assert [book.title for book in await JsonlDataset(Book, path).items()] == ["Dune", "Emma"]


async def test_a_lone_surrogate_is_stored_as_an_escape_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "books.jsonl"
    odd = Book(title="half a pair: \ud800", price=1)
    async with JsonlDataset(Book, path) as books:
        await books.push([odd, Book(title="Émile", price=2)])
        assert await books.items() == [odd, Book(title="Émile", price=2)]
    assert b"\\ud800" in path.read_bytes()
    assert "Émile" in path.read_text(encoding="utf-8")
