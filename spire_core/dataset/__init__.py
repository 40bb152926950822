"""Datasets: typed, validated storage for what handlers extract. The SQLite ones are imported on first use."""

import typing as _typing

from spire_core import lazy as _lazy
from spire_core.dataset.base import Dataset, ExportFormat, Storage, StoredDataset
from spire_core.dataset.csv import CsvDataset, CsvStorage
from spire_core.dataset.jsonl import JsonlDataset, JsonlStorage
from spire_core.dataset.memory import MemoryDataset, MemoryStorage

if _typing.TYPE_CHECKING:
    from spire_core.dataset.output import JsonArrayStorage, StreamStorage, output_dataset
    from spire_core.dataset.sqlite import SqliteDataset, SqliteStorage
else:
    __getattr__, __dir__ = _lazy.exports(
        __name__,
        {
            "JsonArrayStorage": "spire_core.dataset.output",
            "SqliteDataset": "spire_core.dataset.sqlite",
            "SqliteStorage": "spire_core.dataset.sqlite",
            "StreamStorage": "spire_core.dataset.output",
            "output_dataset": "spire_core.dataset.output",
        },
    )

__all__ = [
    "CsvDataset",
    "CsvStorage",
    "Dataset",
    "ExportFormat",
    "JsonArrayStorage",
    "JsonlDataset",
    "JsonlStorage",
    "MemoryDataset",
    "MemoryStorage",
    "SqliteDataset",
    "SqliteStorage",
    "Storage",
    "StoredDataset",
    "StreamStorage",
    "output_dataset",
]
