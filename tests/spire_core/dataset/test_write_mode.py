"""The file datasets' ``mode``: ``"append"`` (the default) adds below a file's rows, ``"overwrite"`` empties it.

The same rule as the command line's ``-o`` and ``-O``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spire_core.dataset import CsvDataset, JsonlDataset, output_dataset
from spire_core.errors import ConfigError, DatasetError
from tests.disks import read_only
from tests.spire_core.dataset.conftest import Book

pytestmark = pytest.mark.anyio

FILES: dict[str, Any] = {"jsonl": JsonlDataset, "csv": CsvDataset}


async def titles(dataset: Any) -> list[str]:
    return [book.title async for book in dataset]


@pytest.mark.parametrize("kind", FILES)
async def test_append_adds_to_an_earlier_run_and_overwrite_starts_afresh(kind: str, tmp_path: Path) -> None:
    path = tmp_path / f"books.{kind}"
    for _ in range(2):
        async with FILES[kind](Book, path) as books:
            await books.push(Book(title="Dune", price=9.5))
    async with FILES[kind](Book, path) as books:
        assert await titles(books) == ["Dune", "Dune"]
    async with FILES[kind](Book, path, mode="overwrite") as books:
        assert await titles(books) == []  # emptied when made, before any item
        await books.push(Book(title="Emma", price=7))
        assert await titles(books) == ["Emma"]


async def test_output_dataset_replaces_a_json_array_and_a_sqlite_file(tmp_path: Path) -> None:
    for name in ("books.json", "books.sqlite"):
        path = tmp_path / name
        for title in ("Dune", "Emma"):
            async with output_dataset(Book, path, mode="overwrite") as books:
                await books.push(Book(title=title, price=1))
        if name.endswith(".json"):
            assert [book["title"] for book in json.loads(path.read_text(encoding="utf-8"))] == ["Emma"]
        else:
            async with output_dataset(Book, path) as books:
                assert await titles(books) == ["Emma"]


async def test_an_unknown_mode_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="'append' or 'overwrite', not 'replace'"):
        JsonlDataset(Book, tmp_path / "books.jsonl", mode="replace")  # type: ignore[arg-type]


async def test_a_file_that_cannot_be_emptied_is_a_dataset_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "ro" / "books.jsonl"
    path.parent.mkdir()
    path.write_text("{}\n", encoding="utf-8")
    with read_only(path.parent), pytest.raises(DatasetError, match=f"{path} cannot be written: Read-only file system"):
        JsonlDataset(Book, path, mode="overwrite")
