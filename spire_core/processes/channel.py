"""``Channel``: pickled messages both ways over one stream socket, with calls that await a reply.

    channel = Channel(stream, on_message=..., on_call=...)
    channel.send(Sending(3))                    # fire and forget, in order
    new = await channel.call(Claim(["k1"]))     # the other side's on_call answers it

A message is a 4-byte length and a pickle. One writer task sends what is queued in one write, so
many small messages cost one system call (and one wake-up of the other process); one reader task
reads what has arrived in one go and hands each message in it to ``on_message``, except a
``Call``, which goes to ``on_call``, and a ``Reply``, which wakes the ``call`` that waits for it.
``send_later`` queues a message that may wait up to ``LATER`` seconds for company; every message,
sent or queued for later, arrives in the order it was queued. When the other
side goes away, every waiting call raises ``ChannelClosed`` and ``run`` returns.
"""

from __future__ import annotations

import itertools
import math
import pickle
import struct
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

import anyio
import anyio.abc

__all__ = ["Call", "Channel", "ChannelClosed", "Reply", "WorkerError", "pickled_by_fields", "portable"]

_LENGTH = struct.Struct("!I")
#: How long a message sent with ``send_later`` may wait for another to go out with, in seconds.
LATER = 0.002
#: The most the reader asks the socket for at once.
READ_SIZE = 1 << 18


class Call(NamedTuple):
    """A question for the other side's ``on_call``; its answer comes back as the ``Reply`` of ``call_id``."""

    call_id: int
    request: Any


class Reply(NamedTuple):
    """The answer to call ``call_id``: ``value``, or the exception raised when ``ok`` is false."""

    call_id: int
    ok: bool
    value: Any


def _by_fields(message: tuple[Any, ...]) -> tuple[type[tuple[Any, ...]], tuple[Any, ...]]:
    return type(message), tuple(message)


def pickled_by_fields(*kinds: type[tuple[Any, ...]]) -> None:
    """Have each ``NamedTuple`` class in ``kinds`` pickle as its class and its fields: copyreg's
    generic path, which a ``NamedTuple`` takes otherwise, costs about three times as much."""
    for kind in kinds:
        kind.__reduce__ = _by_fields  # type: ignore[assignment,method-assign]


pickled_by_fields(Call, Reply)


class ChannelClosed(Exception):
    """The process at the other end of the channel went away."""


class Channel:
    """One end of a message channel over ``stream``; ``on_message`` gets every message but replies,
    and ``on_call`` answers every call (its return value, or its exception, goes back)."""

    def __init__(
        self,
        stream: anyio.abc.ByteStream,
        *,
        on_message: Callable[[Any], None],
        on_call: Callable[[Any], Awaitable[Any]] | None = None,
    ) -> None:
        self._stream = stream
        self._on_message = on_message
        self._on_call = on_call
        self._outbox, self._to_write = anyio.create_memory_object_stream[bytes](math.inf)
        self._ids = itertools.count()
        self._waiting: dict[int, tuple[anyio.Event, list[Reply]]] = {}
        self._finishing = False
        self._later: list[bytes] = []
        self._later_due = anyio.Event()
        self.closed = False

    def send(self, message: Any) -> None:
        """Queue ``message`` for the writer; never blocks. Dropped once the channel is closed or finishing."""
        self.send_pickled(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))

    def send_pickled(self, data: bytes) -> None:
        """Queue a message already pickled (to handle a pickling error first)."""
        if self.closed or self._finishing:
            return
        if self._later:  # queued before this one: they go ahead of it, in order
            for waited in self._later:
                self._outbox.send_nowait(waited)
            self._later = []
        self._outbox.send_nowait(_LENGTH.pack(len(data)) + data)

    def send_later(self, message: Any) -> None:
        """Queue ``message`` to go out with the next one sent, or within ``LATER`` seconds: for news
        that may wait a moment, so that it costs no wake-up of its own."""
        self.send_pickled_later(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))

    def send_pickled_later(self, data: bytes) -> None:
        """``send_later`` for a message already pickled."""
        if self.closed or self._finishing:
            return
        self._later.append(_LENGTH.pack(len(data)) + data)
        self._later_due.set()

    async def call(self, request: Any) -> Any:
        """Ask the other side's ``on_call`` about ``request`` and wait for its answer."""
        if self.closed:
            raise ChannelClosed
        call_id = next(self._ids)
        done = anyio.Event()
        box: list[Reply] = []
        self._waiting[call_id] = (done, box)
        try:
            self.send(Call(call_id, request))
            await done.wait()
        finally:
            self._waiting.pop(call_id, None)
        if not box:
            raise ChannelClosed
        (reply,) = box
        if not reply.ok:
            raise reply.value
        return reply.value

    async def run(self) -> None:
        """Read and write until the other side closes the stream (or this task is cancelled)."""
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._write)
                tg.start_soon(self._flush_later)
                await self._read(tg)
                tg.cancel_scope.cancel()
        finally:
            self._close()

    def _close(self) -> None:
        self.closed = True
        self._outbox.close()
        for done, _ in self._waiting.values():
            done.set()  # an empty box: ChannelClosed

    def finish(self) -> None:
        """Send what is queued, then close the stream: the other side reads to the end, then closes too."""
        if self._later:
            self._outbox.send_nowait(b"")  # wakes the writer, which sends them
        self._finishing = True
        self._outbox.close()

    async def aclose(self) -> None:
        self._close()
        with anyio.CancelScope(shield=True):
            await self._stream.aclose()

    async def _flush_later(self) -> None:
        """Wake the writer ``LATER`` seconds after a message was sent with ``send_later``."""
        while True:
            await self._later_due.wait()
            await anyio.sleep(LATER)
            self._later_due = anyio.Event()
            if self._later and not self.closed and not self._finishing:
                self._outbox.send_nowait(b"")  # nothing of its own: the writer sends what waits

    async def _write(self) -> None:
        try:
            async for first in self._to_write:
                chunks = [first]
                while True:
                    try:
                        chunks.append(self._to_write.receive_nowait())
                    except (anyio.WouldBlock, anyio.EndOfStream):
                        break
                # What waited was queued after all of the above (``send`` moves it ahead of itself):
                # it goes last, so every message arrives in the order it was queued.
                chunks += self._later
                self._later = []
                await self._stream.send(b"".join(chunks))
            if self._finishing:
                await self._stream.aclose()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass  # the reader sees the end too

    async def _read(self, tg: anyio.abc.TaskGroup) -> None:
        """Read what has arrived, then hand on every whole message in it before reading again."""
        stream = self._stream
        buffer = bytearray()
        while True:
            try:
                buffer += await stream.receive(READ_SIZE)
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                return
            offset, end = 0, len(buffer)
            while end - offset >= _LENGTH.size:
                (length,) = _LENGTH.unpack_from(buffer, offset)
                if end - offset - _LENGTH.size < length:
                    break
                start = offset + _LENGTH.size
                offset = start + length
                self._dispatch(pickle.loads(buffer[start:offset]), tg)
            del buffer[:offset]

    def _dispatch(self, message: Any, tg: anyio.abc.TaskGroup) -> None:
        match message:
            case Reply(call_id=call_id):
                waiting = self._waiting.get(call_id)
                if waiting is not None:
                    waiting[1].append(message)
                    waiting[0].set()
            case Call(call_id=call_id, request=request) if self._on_call is not None:
                tg.start_soon(self._answer, call_id, request)
            case _:
                self._on_message(message)

    async def _answer(self, call_id: int, request: Any) -> None:
        assert self._on_call is not None  # only called with a handler for calls
        try:
            value = await self._on_call(request)
        except (anyio.get_cancelled_exc_class(), KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # control flow such as a refused redirect hop crosses too
            self.send(Reply(call_id, False, portable(exc)))
        else:
            self.send(Reply(call_id, True, value))


class WorkerError(Exception):
    """An exception raised in a worker process that cannot be pickled, as its type name and message."""


def portable(error: BaseException) -> BaseException:
    """``error`` when it survives pickling, else a ``WorkerError`` that names it (its notes kept)."""
    try:
        pickle.loads(pickle.dumps(error, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception:
        surrogate = WorkerError(f"{type(error).__module__}.{type(error).__qualname__}: {error}")
        for note in getattr(error, "__notes__", ()):
            surrogate.add_note(note)
        return surrogate
    return error
