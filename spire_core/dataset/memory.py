"""``MemoryDataset``: items kept in a list."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, TypeVar

from pydantic import BaseModel

from spire_core.dataset.base import StoredDataset

__all__ = ["MemoryDataset", "MemoryStorage"]

T = TypeVar("T", bound=BaseModel)


class MemoryStorage:
    """Rows in a list."""

    def __init__(self) -> None:
        self.rows_: list[dict[str, Any]] = []

    async def append(self, rows: list[dict[str, Any]]) -> None:
        self.rows_.extend(rows)

    async def rows(self) -> AsyncIterator[dict[str, Any]]:
        for row in list(self.rows_):
            yield row

    async def aclose(self) -> None:
        """Nothing to close."""


class MemoryDataset(StoredDataset[T]):
    """Items kept in memory for the life of the process: the default when none is configured."""

    def __init__(self, model: type[T]) -> None:
        super().__init__(model, MemoryStorage())
