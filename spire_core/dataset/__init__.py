"""Datasets: typed, validated storage for what handlers extract."""

from spire_core.dataset.base import Dataset, ExportFormat, Storage, StoredDataset
from spire_core.dataset.memory import MemoryDataset, MemoryStorage

__all__ = ["Dataset", "ExportFormat", "MemoryDataset", "MemoryStorage", "Storage", "StoredDataset"]
