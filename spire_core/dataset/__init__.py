"""Datasets: typed, validated storage for what handlers extract."""

from spire_core.dataset.base import Dataset, ExportFormat, Storage, StoredDataset
from spire_core.dataset.csv import CsvDataset, CsvStorage
from spire_core.dataset.jsonl import JsonlDataset, JsonlStorage
from spire_core.dataset.memory import MemoryDataset, MemoryStorage
from spire_core.dataset.sqlite import SqliteDataset, SqliteStorage

__all__ = [
    "CsvDataset",
    "CsvStorage",
    "Dataset",
    "ExportFormat",
    "JsonlDataset",
    "JsonlStorage",
    "MemoryDataset",
    "MemoryStorage",
    "SqliteDataset",
    "SqliteStorage",
    "Storage",
    "StoredDataset",
]
