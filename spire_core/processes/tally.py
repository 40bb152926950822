"""``Tally``: a worker's running totals of requests and pages, in a file the crawl's process reads.

A worker's counts reach the crawl's process with its messages (``Finished``, ``Counts``); what it
counted since its last message would die with it. So it also keeps its totals in a small file it
maps into memory, updated before each request goes out and after each page arrives: a store to
memory, no system call. Its pages survive the process, SIGKILL included, and the crawl's process
adds what the file holds beyond what the messages told (``Tally.read``), so ``stats.requests``
and ``stats.pages`` stay what the servers saw.

    tally = Tally.create(directory / f"{os.getpid()}.tally")   # in the worker
    tally.requests += 1
    Tally.read(path)                                            # in the crawl's process: (requests, pages)
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

__all__ = ["Tally"]

#: The counters, in order: requests sent, pages received.
_FIELDS = 2
_SIZE = 8 * _FIELDS


class Tally:
    """Two counters in a shared memory map: ``requests`` and ``pages``."""

    def __init__(self, memory: mmap.mmap) -> None:
        self._memory = memory
        self._counts = memoryview(memory).cast("q")

    @classmethod
    def create(cls, path: Path) -> Tally:
        """A tally at ``path`` (a new file), both counters zero."""
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.ftruncate(fd, _SIZE)
            memory = mmap.mmap(fd, _SIZE)
        finally:
            os.close(fd)
        return cls(memory)

    @staticmethod
    def read(path: Path) -> tuple[int, int]:
        """The totals ``(requests, pages)`` a worker left at ``path``; zeros when it made none."""
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return 0, 0
        if len(data) < _SIZE:
            return 0, 0
        counts = memoryview(data).cast("q")
        return counts[0], counts[1]

    @property
    def requests(self) -> int:
        return self._counts[0]

    @requests.setter
    def requests(self, value: int) -> None:
        self._counts[0] = value

    @property
    def pages(self) -> int:
        return self._counts[1]

    @pages.setter
    def pages(self, value: int) -> None:
        self._counts[1] = value
