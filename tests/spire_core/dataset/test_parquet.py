"""Parquet: a dataset written in row groups, and every feed format round-tripping its items."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pyarrow.parquet as pq
import pytest

from spire_core.dataset import CsvDataset, JsonlDataset, MemoryDataset, SqliteDataset
from spire_core.dataset.export import format_of
from spire_core.dataset.parquet import ParquetDataset
from spire_core.errors import ConfigError
from tests.spire_core.dataset.conftest import Author, Book

pytestmark = pytest.mark.anyio

ITEMS = [
    Book(title='Dune, "Part One"\nand Two', price=9.5, tags=["sf", "classic"], author=Author(name="Frank", born=1920)),
    Book(title="Emma", price=7, note="Austen, 1815"),
    Book(title="Ulysses", price=12),
    Book(title="Ficciones", price=8.25, tags=[], author=Author(name="Jorge Luis")),
    Book(title="Kokoro", price=6),
]


async def test_a_parquet_dataset_writes_batches_as_row_groups_and_reads_back_every_item(tmp_path: Path) -> None:
    path = tmp_path / "books.parquet"
    async with ParquetDataset(Book, path, batch_size=2) as books:
        for item in ITEMS:
            await books.push(item)
    assert pq.ParquetFile(path).num_row_groups == 3  # 2 + 2 + the last one, written on close
    schema = pq.read_schema(path)
    assert str(schema.field("price").type) == "double"
    assert schema.field("tags").type.value_type == "string"
    assert await ParquetDataset(Book, path).items() == ITEMS


async def test_reading_a_parquet_dataset_midway_then_pushing_more_keeps_everything(tmp_path: Path) -> None:
    path = tmp_path / "books.parquet"
    books = ParquetDataset(Book, path, batch_size=100)
    await books.push(ITEMS[:2])
    assert await books.items() == ITEMS[:2]  # the pending rows were written and the file completed
    await books.push(ITEMS[2:])
    await books.aclose()
    assert await ParquetDataset(Book, path).items() == ITEMS
    assert [p.name async for p in anyio.Path(tmp_path).iterdir()] == ["books.parquet"]  # no temporary file left


@pytest.mark.parametrize("name", ["books.jsonl", "books.json", "books.csv", "books.parquet"])
async def test_every_export_format_chosen_by_extension_round_trips(tmp_path: Path, name: str) -> None:
    source = MemoryDataset(Book)
    await source.push(ITEMS)
    target = tmp_path / name
    format = format_of(target)
    assert await source.export(target, format) == len(ITEMS)  # type: ignore[arg-type]
    if format == "jsonl":
        back = await JsonlDataset(Book, target).items()
    elif format == "json":
        back = [Book.model_validate(row) for row in json.loads(target.read_text(encoding="utf-8"))]
    elif format == "csv":
        back = await CsvDataset(Book, target).items()
    else:
        back = await ParquetDataset(Book, target).items()
    assert back == ITEMS


@pytest.mark.parametrize("name", ["books.jsonl", "books.csv", "books.sqlite", "books.parquet"])
async def test_every_feed_store_round_trips_its_items(tmp_path: Path, name: str) -> None:
    stores = {".jsonl": JsonlDataset, ".csv": CsvDataset, ".sqlite": SqliteDataset, ".parquet": ParquetDataset}
    make = stores[Path(name).suffix]
    async with make(Book, tmp_path / name) as books:
        await books.push(ITEMS)
    async with make(Book, tmp_path / name) as again:
        assert await again.items() == ITEMS


async def test_an_empty_parquet_export_is_a_valid_file_and_replaces_the_old_one(tmp_path: Path) -> None:
    target = tmp_path / "books.parquet"
    full = MemoryDataset(Book)
    await full.push(ITEMS)
    await full.export(target, "parquet")
    assert await MemoryDataset(Book).export(target, "parquet") == 0
    assert pq.read_table(target).num_rows == 0
    assert await ParquetDataset(Book, target).items() == []


def test_an_unknown_extension_names_the_formats_it_could_be() -> None:
    with pytest.raises(ConfigError, match=r"\.parquet"):
        format_of("books.xlsx")
