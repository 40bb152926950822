"""Models and a store factory shared by the dataset tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from spire_core.dataset import CsvDataset, JsonlDataset, SqliteDataset, StoredDataset

Make = Callable[[type[BaseModel], Path], StoredDataset[Any]]

STORES: dict[str, Make] = {
    "jsonl": lambda model, directory: JsonlDataset(model, directory / "items.jsonl"),
    "csv": lambda model, directory: CsvDataset(model, directory / "items.csv"),
    "sqlite": lambda model, directory: SqliteDataset(model, directory / "items.db"),
}


class Author(BaseModel):
    name: str
    born: int | None = None


class Book(BaseModel):
    title: str
    price: float
    tags: list[str] = []
    author: Author | None = None
    note: str | None = None


@pytest.fixture(params=sorted(STORES))
def make(request: pytest.FixtureRequest) -> Make:
    """Each file-backed store in turn: ``make(Model, directory)``."""
    return STORES[request.param]
