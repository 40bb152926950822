"""Datasets: typed, validated storage for what handlers extract."""

from spire_core.dataset.base import Dataset, ExportFormat, Storage, StoredDataset
from spire_core.dataset.csv import CsvDataset, CsvStorage
from spire_core.dataset.jsonl import JsonlDataset, JsonlStorage
from spire_core.dataset.memory import MemoryDataset, MemoryStorage
from spire_core.dataset.output import JsonArrayStorage, StreamStorage, output_dataset
from spire_core.dataset.sqlite import SqliteDataset, SqliteStorage

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
