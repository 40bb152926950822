"""What the file-backed datasets share: one-at-a-time blocking I/O in a thread, and rows as JSON."""

from __future__ import annotations

import abc
import json
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Literal, get_args

import anyio
import anyio.lowlevel

from spire_core.errors import ConfigError, DatasetError
from spire_core.threads import SerialThread

__all__ = [
    "READ_CHUNK",
    "ChunkedFileStorage",
    "GroupWrites",
    "WriteMode",
    "dump_row",
    "make_parent",
    "start_file",
    "write_all",
]

#: What a file dataset does with a file that exists: add below its rows (``-o``), or empty it (``-O``).
WriteMode = Literal["append", "overwrite"]

#: How much a read takes per trip to a worker thread: large enough to amortise the hop, small
#: enough that iterating a huge file never holds much of it in memory.
READ_CHUNK = 256 * 1024


class GroupWrites:
    """Appends bytes through one blocking writer, merging the appends that queue up behind a write.

    While one write is in a worker thread, later appends wait for it and then go out together in a
    single write: under a busy crawl one thread hop carries many handlers' items. An append still
    returns only once its own bytes are written.
    """

    def __init__(self, blocking: SerialThread, write: Callable[[bytes], None]) -> None:
        self._blocking = blocking
        self._write = write
        self._queued: list[bytes] = []
        self._lock: anyio.Lock | None = None
        self._loop: object = None

    async def append(self, data: bytes) -> None:
        loop = anyio.lowlevel.current_token()
        if self._lock is None or self._loop != loop:
            self._lock, self._loop = anyio.Lock(), loop
        self._queued.append(data)
        try:
            await self._lock.acquire()
        except BaseException:  # cancelled while waiting: these bytes were never promised
            if any(queued is data for queued in self._queued):
                self._queued.remove(data)
            raise
        try:
            if not self._queued:
                return  # the write before this one carried these bytes
            batch = b"".join(self._queued)
            self._queued.clear()
            await self._blocking.run(self._write, batch)
        finally:
            self._lock.release()


class ChunkedFileStorage(abc.ABC):
    """A storage over one text file of rows, read back a chunk at a time in a worker thread.

    Subclasses say how to read a chunk (``_read``) and how to close the file (``_close``); the async
    face, and the one-at-a-time thread hops, are shared here.
    """

    def __init__(self) -> None:
        self._blocking = SerialThread()

    @abc.abstractmethod
    def _read(self, offset: int, line: int) -> tuple[list[dict[str, Any]], int, int, bool]:
        """Rows from byte ``offset`` (the file's line ``line``), the next offset and line, and whether more remain."""

    @abc.abstractmethod
    def _close(self) -> None:
        """Close the file if it is open."""

    async def rows(self) -> AsyncIterator[dict[str, Any]]:
        offset, line, more = 0, 0, True
        while more:
            batch, offset, line, more = await self._blocking.run(self._read, offset, line)
            for row in batch:
                yield row

    async def aclose(self) -> None:
        """Close the file; a later append opens it again."""
        with anyio.CancelScope(shield=True):
            await self._blocking.run(self._close)


def dump_row(row: dict[str, Any]) -> str:
    """A row as one line of compact JSON (no newline); non-ASCII stays readable when it can be encoded."""
    text = json.dumps(row, ensure_ascii=False, separators=(",", ":"))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: only JSON's \\u escapes can carry it
        text = json.dumps(row, separators=(",", ":"))
    return text


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to a raw descriptor: one ``write`` call unless the OS takes it in parts."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def make_parent(path: Path) -> None:
    """Create ``path``'s directory if it is missing, so ``JsonlDataset(Book, "out/books.jsonl")`` just works."""
    path.parent.mkdir(parents=True, exist_ok=True)


def start_file(path: str | Path, mode: WriteMode) -> Path:
    """``path`` for a file dataset opened in ``mode``: with ``"overwrite"`` the file is emptied now.

    Emptied when the dataset is made, not at its first item, so a crawl that keeps nothing leaves
    no rows of an earlier run behind.
    """
    if mode not in get_args(WriteMode):
        raise ConfigError(f"mode is 'append' or 'overwrite', not {mode!r}")
    path = Path(path)
    if mode == "overwrite":
        try:
            make_parent(path)
            with open(path, "wb"):
                pass
        except OSError as exc:
            raise DatasetError(f"{path} cannot be written: {exc.strerror or exc}", path=str(path)) from None
    return path
