"""``export(path, format)``: every store to JSON Lines, a JSON array or CSV, whole or not at all."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from spire_core.dataset import CsvDataset, JsonlDataset
from spire_core.errors import ConfigError, DatasetError
from tests.spire_core.dataset.conftest import Author, Book, Make

pytestmark = pytest.mark.anyio

ITEMS = [
    Book(title='Dune, "Part One"\nand Two', price=9.5, tags=["sf", "classic"], author=Author(name="Frank")),
    Book(title="Emma", price=7, note="Austen, 1815"),
    Book(title="Ulysses", price=12),
]


def files(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


def read_json_lines(path: Path) -> list[object]:
    return [json.loads(text) for text in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("format", ["jsonl", "json", "csv"])
async def test_every_store_exports_every_format(make: Make, tmp_path: Path, format: str) -> None:
    async with make(Book, tmp_path / "store") as books:
        await books.push(ITEMS)
        target = tmp_path / "out" / f"books.{format}"
        assert await books.export(target, format) == 3  # type: ignore[arg-type]
    expected = [item.model_dump(mode="json") for item in ITEMS]
    if format == "jsonl":
        assert read_json_lines(target) == expected
    elif format == "json":
        assert json.loads(target.read_text(encoding="utf-8")) == expected
    else:
        assert await CsvDataset(Book, target).items() == ITEMS  # the same cells a CsvDataset writes
    assert files(target.parent) == [target.name]


async def test_an_empty_dataset_exports_valid_empty_files(tmp_path: Path) -> None:
    books = JsonlDataset(Book, tmp_path / "books.jsonl")
    for format in ("jsonl", "json", "csv"):
        assert await books.export(tmp_path / f"empty.{format}", format) == 0
    assert (tmp_path / "empty.jsonl").read_bytes() == b""
    assert json.loads((tmp_path / "empty.json").read_bytes()) == []
    assert (tmp_path / "empty.csv").read_bytes() == b"title,price,tags,author,note\r\n"


async def test_export_replaces_an_existing_file(tmp_path: Path) -> None:
    target = tmp_path / "books.jsonl"
    target.write_text("old contents\n")
    async with JsonlDataset(Book, tmp_path / "store.jsonl") as books:
        await books.push(ITEMS[:1])
        await books.export(target)
    assert read_json_lines(target) == [ITEMS[0].model_dump(mode="json")]


async def test_a_failed_export_keeps_the_old_file_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    source = tmp_path / "store" / "books.jsonl"
    source.parent.mkdir()
    good = json.dumps(ITEMS[2].model_dump(mode="json")).encode() + b"\n"
    source.write_bytes(good * 20_000 + b"not json\n" + good)  # the bad line comes after whole chunks were written
    out = tmp_path / "out"
    out.mkdir()
    (out / "books.json").write_text("old contents\n")
    with pytest.raises(DatasetError, match="line 20001"):
        await JsonlDataset(Book, source).export(out / "books.json", "json")
    assert (out / "books.json").read_text() == "old contents\n"
    assert files(out) == ["books.json"]


async def test_an_unknown_format_is_a_config_error_and_writes_nothing(tmp_path: Path) -> None:
    books = JsonlDataset(Book, tmp_path / "books.jsonl")
    await books.push(ITEMS)
    with pytest.raises(ConfigError, match="jsonl, json or csv"):
        await books.export(tmp_path / "books.xml", "xml")  # type: ignore[arg-type]
    assert files(tmp_path) == ["books.jsonl"]
    await books.aclose()


async def test_export_streams_a_large_dataset_in_bounded_memory(tmp_path: Path) -> None:
    source = tmp_path / "books.jsonl"
    row = json.dumps(Book(title="x" * 3000, price=1).model_dump(mode="json")).encode() + b"\n"
    source.write_bytes(row * 4000)  # 12 MB
    books = JsonlDataset(Book, source)
    await JsonlDataset(Book, tmp_path / "none.jsonl").export(tmp_path / "warm.json", "json")  # imports, threads
    tracemalloc.start()
    try:
        assert await books.export(tmp_path / "books.json", "json") == 4000
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (tmp_path / "books.json").stat().st_size > 12_000_000
    assert peak < 4_000_000, f"export peaked at {peak} bytes for a 12 MB dataset"
