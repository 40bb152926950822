"""What the file-backed datasets share: one-at-a-time blocking I/O in a thread, and rows as JSON."""

from __future__ import annotations

import abc
import contextlib
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
    "append_whole",
    "check_writable",
    "dump_row",
    "make_parent",
    "start_file",
    "write_all",
    "write_failed",
]

#: What a file dataset does with a file that exists: add below its rows (``-o``), or empty it (``-O``).
WriteMode = Literal["append", "overwrite"]

#: How much a read takes per trip to a worker thread: large enough to amortise the hop, small
#: enough that iterating a huge file never holds much of it in memory.
READ_CHUNK = 256 * 1024


class _Batch:
    """The appends one write carries, and how that write ended."""

    __slots__ = ("error", "parts", "written")

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.written = False
        self.error: Exception | None = None

    def failure(self) -> DatasetError:
        """A fresh error for one waiter of this failed write (one exception raised in many tasks would
        share a traceback); the write's own error is its cause."""
        error = self.error
        if isinstance(error, DatasetError):
            copy = DatasetError(str(error), path=error.path, line=error.line)
            copy.__cause__ = error.__cause__
            return copy
        copy = DatasetError(f"cannot write items: {error}")
        copy.__cause__ = error
        return copy


class GroupWrites:
    """Appends bytes through one blocking writer, merging the appends that queue up behind a write.

    While one write is in a worker thread, later appends wait for it and then go out together in a
    single write: under a busy crawl one thread hop carries many handlers' items. An append returns
    only once its own bytes are written, and raises when the write that carried them failed: every
    append merged into a failed write raises, not only the one that ran it.
    """

    def __init__(self, blocking: SerialThread, write: Callable[[bytes], None]) -> None:
        self._blocking = blocking
        self._write = write
        self._next: _Batch | None = None
        self._lock: anyio.Lock | None = None
        self._loop: object = None

    async def append(self, data: bytes) -> None:
        loop = anyio.lowlevel.current_token()
        if self._lock is None or self._loop != loop:
            self._lock, self._loop, self._next = anyio.Lock(), loop, None
        if self._next is None:
            self._next = _Batch()
        batch = self._next
        batch.parts.append(data)
        try:
            await self._lock.acquire()
        except BaseException:  # cancelled while waiting: these bytes were never promised
            if not batch.written and any(part is data for part in batch.parts):
                batch.parts.remove(data)
            raise
        try:
            if not batch.written:
                await self._run(batch)
            if batch.error is not None:
                raise batch.failure()
        finally:
            self._lock.release()

    async def _run(self, batch: _Batch) -> None:
        """Write ``batch``; later appends start the next one."""
        if self._next is batch:
            self._next = None
        try:
            await self._blocking.run(self._write, b"".join(batch.parts))
        except Exception as exc:  # every append it carried raises, the one that ran it too
            batch.error = exc
        finally:
            batch.written = True


class ChunkedFileStorage(abc.ABC):
    """A storage over one text file of rows, read back a chunk at a time in a worker thread.

    Subclasses say how to read a chunk (``_read``) and how to close the file (``_close``); the async
    face, and the one-at-a-time thread hops, are shared here.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
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

    async def check(self) -> None:
        """Raise ``DatasetError`` when no row can ever be appended to the file (a read-only folder)."""
        await self._blocking.run(check_writable, self.path)

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


def append_whole(fd: int, data: bytes, path: Path) -> None:
    """Append ``data`` to ``fd`` (opened ``O_APPEND``) whole, or leave the file as it was and raise ``DatasetError``.

    A full disk can take part of a write: the part is cut off again, so the file never ends in a
    torn line a later append would be glued to.
    """
    size = os.fstat(fd).st_size
    try:
        write_all(fd, data)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, size)
        raise write_failed(path, exc) from exc


def write_failed(path: Path, exc: OSError) -> DatasetError:
    """``exc``, raised writing items to ``path``, as a ``DatasetError`` that names the file and the fix."""
    reason = exc.strerror or str(exc)
    return DatasetError(
        f"{path}: cannot write items ({reason}); free some space or give the dataset a writable path", path=str(path)
    )


def check_writable(path: Path, folder: bool = False) -> None:
    """Raise ``DatasetError`` when items can never be written to ``path``: a read-only folder or file, a directory.

    Nothing is created. ``folder=True``: the folder must take new files too (SQLite's journal, a
    temporary file renamed over ``path``). A full disk is not found here: it fails each write.
    """
    try:
        places = _places(path, folder)
    except OSError as exc:  # a folder on the way that cannot be searched
        raise write_failed(path, exc) from exc
    for place in places:
        if not os.access(place, os.W_OK):
            reason = "a read-only file system" if _read_only(place) else "not writable"
            raise DatasetError(
                f"{path}: no item can be written there ({place} is {reason}); give the dataset a writable path",
                path=str(path),
            )


def _places(path: Path, folder: bool) -> list[Path]:
    """What must be writable for items to reach ``path``: the file if it exists, else (or also) its nearest folder."""
    if path.is_dir():
        raise DatasetError(f"{path} is a directory, not a file a dataset can write: give a file path", path=str(path))
    places = [path] if path.exists() else []
    if folder or not places:
        ancestor = path.parent
        while not ancestor.exists() and ancestor != ancestor.parent:
            ancestor = ancestor.parent  # the folders below it are made on the first write
        if not ancestor.is_dir():
            message = f"{path}: {ancestor} is a file, not a folder: give the dataset another path"
            raise DatasetError(message, path=str(path))
        places.append(ancestor)
    return places


def _read_only(place: Path) -> bool:
    try:
        return bool(os.statvfs(place).f_flag & os.ST_RDONLY)
    except OSError:
        return False


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
