"""The site crawl's stream to its reader, where a kept page is finished only once its reader is done with it.

    hand_off = HandOff(buffer=64)
    handed = Handed(page)
    await hand_off.send(handed)            # the crawl's side: waits for room in the buffer
    await handed.finished.wait()           # then for the reader: the page's seed is reported after
    async for item in hand_off.reader:     # the reader's side: asking for the next item finishes the last

A kept page's seed is reported done only once the page's reader has finished with it, that is has
asked for the next item (or ended its loop), so a crawl on a frontier that survives a kill never
settles a page its reader has not written yet: killed at any instant, the page is either finished by
its reader, or still queued and handed out again on resume (at least once; a reader that writes a
file skips what the file holds, and so writes each page once). The crawl still gets ``buffer``
pages ahead of its reader; only the seeds' reports wait.
"""

from __future__ import annotations

import dataclasses

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from spire.site.page import CrawlError, CrawlPage

__all__ = ["HandOff", "Handed", "Reader"]


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class Handed:
    """An item on its way to the reader; ``finished`` is set once the reader is done with it (or left)."""

    item: CrawlPage | CrawlError
    finished: anyio.Event = dataclasses.field(default_factory=anyio.Event)


class Reader:
    """The reader's side: an async iterator of items, each finished when the next one is asked for."""

    def __init__(self, receive: MemoryObjectReceiveStream[Handed]) -> None:
        self._receive = receive
        self._last: Handed | None = None

    def __aiter__(self) -> Reader:
        return self

    async def __anext__(self) -> CrawlPage | CrawlError:
        self._finish_last()
        try:
            handed = await self._receive.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None
        self._last = handed
        return handed.item

    def _finish_last(self) -> None:
        if self._last is not None:
            self._last.finished.set()
            self._last = None

    def close(self) -> None:
        """The reader left: what it held and what waits for it are finished (no one will read them)."""
        self._finish_last()
        while True:
            try:
                self._receive.receive_nowait().finished.set()
            except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                break
        self._receive.close()


class HandOff:
    """The crawl's stream of items to its one reader, ``buffer`` items deep."""

    def __init__(self, buffer: int) -> None:
        self._send: MemoryObjectSendStream[Handed]
        self._send, receive = anyio.create_memory_object_stream[Handed](buffer)
        self.reader = Reader(receive)

    async def send(self, handed: Handed) -> bool:
        """Hand ``handed`` on; ``False`` (and ``handed`` finished) when the reader has left."""
        try:
            await self._send.send(handed)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            handed.finished.set()
            return False
        return True

    def close(self) -> None:
        """No more items: the reader's loop ends once it has read those sent."""
        self._send.close()
