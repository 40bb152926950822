"""``BodyStream``: a response body read as it arrives, one decoded chunk at a time.

    @router.default
    async def save(body: BodyStream) -> None:       # spire's extractor
        await body.copy_decoded_to("catalog.csv")   # one chunk in memory, whatever the size

A streamed request keeps its host slot until its body ends, fails or is dropped (closed before its
end, or left unread when the handler returns). While it streams, the body cap counts decoded bytes
and the body deadline runs from the first read, as for a body read whole; a body ends at its first
error. Its end is logged as its own ``spire.trace`` event, with the id of the request's line.

Only a 2xx answer streams: a redirect, a block page or an error status is read whole, so the crawl
judges it as any other response. Requests ask for a stream inside ``streamed()``; a backend that
cannot stream (a cache, a function) answers with its body read whole, which ``BodyStream.of`` serves
from memory, so a handler reads a stream the same way whatever the backend.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextvars import ContextVar
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import anyio
import anyio.to_thread

from spire_core.errors import BodyLimitError, FetchTimeout, LocalFileError
from spire_core.response import Response
from spire_core.session.decoding import ContentDecoder
from spire_core.session.timeouts import deadline

if TYPE_CHECKING:
    from spire_core.response import Headers

__all__ = ["BodyStream", "StreamEnd", "StreamedResponse", "stream_wanted", "streamed"]

#: What a stream's end hooks get: the error it ended with (``None``: it ended, or was dropped),
#: the decoded bytes read, and whether it was dropped before its end.
StreamEnd = Callable[[BaseException | None, int, bool], None]

_wanted: ContextVar[bool] = ContextVar("spire_stream_wanted", default=False)


@contextlib.contextmanager
def streamed() -> Iterator[None]:
    """Requests sent by the code inside (in this task) may leave a 2xx body unread, as a ``BodyStream``."""
    token = _wanted.set(True)
    try:
        yield
    finally:
        _wanted.reset(token)


def stream_wanted() -> bool:
    """Whether the request being sent asked for its body as a stream (``streamed()``)."""
    return _wanted.get()


class StreamedResponse(Response):
    """A response whose body is not read yet: ``body`` is empty and ``stream`` reads it.

    It pickles as its head (``head_of``): a body being read cannot cross to another process, so a
    worker process of ``processes=N`` hands its crawl a failed page's head, as one process has it.
    """

    __slots__ = ("stream",)

    stream: BodyStream

    def __reduce__(self) -> tuple[Any, ...]:
        return head_of, (head_of(self),)  # a plain Response pickles as any other


def head_of(response: Response) -> Response:
    """``response``'s head as a plain ``Response`` with an empty body: URL, status, headers, its seed,
    redirects, timing, protocol, proxy and identity."""
    head = Response(
        url=response.url,
        status=response.status,
        headers=response.headers,
        seed=response.seed,
        elapsed=response.elapsed,
        redirects=response.redirects,
        http_version=response.http_version,
    )
    head.proxy = response.proxy
    head.identity = response.identity
    return head


class BodyStream:
    """A body read as it arrives: ``async for chunk in stream``, ``read()``, or ``copy_decoded_to(path)``.

    It is an async context manager; ``aclose()`` drops what is left (and gives its host slot back).
    """

    def __init__(
        self,
        response: Response,
        raw: AsyncIterator[bytes],
        *,
        cap: int,
        body_seconds: float | None,
        close: Callable[[bool], Awaitable[None]] | None = None,
    ) -> None:
        #: The response's head: URL, status, headers, HTTP version (its ``body`` is empty).
        self.response = response
        self._raw = raw
        self._decoder = ContentDecoder(response.headers.get("content-encoding"), url=response.url)
        self._pending: Iterator[bytes] = iter(())
        self._cap = cap
        self._body_seconds = body_seconds
        self._until: float | None = None
        self._close = close
        self._hooks: list[StreamEnd] = []
        #: Decoded bytes read so far.
        self.size = 0
        #: Whether the body has ended (read to its end, failed or dropped).
        self.ended = False

    @classmethod
    def of(cls, response: Response) -> BodyStream:
        """A stream over a body already read whole (a backend that cannot stream, a cached page)."""

        async def chunks() -> AsyncIterator[bytes]:
            body = response.body
            for start in range(0, len(body), _CHUNK):
                yield body[start : start + _CHUNK]

        # the body is decoded already: its coding is not undone twice
        stream = cls(head_of(response), chunks(), cap=len(response.body), body_seconds=None)
        stream._decoder = ContentDecoder(None, url=response.url)
        return stream

    @property
    def url(self) -> str:
        return self.response.url

    @property
    def status(self) -> int:
        return self.response.status

    @property
    def headers(self) -> Headers:
        return self.response.headers

    def on_end(self, hook: StreamEnd) -> None:
        """Call ``hook`` once when the body ends, fails or is dropped (at once, if it has)."""
        self._hooks.append(hook)

    async def read(self) -> bytes:
        """The next decoded chunk (at most 64 KiB), or ``b""`` at the end of the body."""
        if self.ended:
            return b""
        try:
            piece = await self._next()
        except BaseException as exc:
            await self._end(exc if isinstance(exc, Exception) else None, dropped=not isinstance(exc, Exception))
            raise
        if not piece:
            await self._end(None, dropped=False)
        return piece

    async def _next(self) -> bytes:
        if self._until is None:
            if self._body_seconds is not None:
                self._until = anyio.current_time() + self._body_seconds  # the body deadline runs from the first read
        elif anyio.current_time() >= self._until:
            # Checked on every read, not only while one waits: a chunk already buffered (aiohttp) is
            # returned without a checkpoint, so a handler slower than the server never meets the scope.
            raise FetchTimeout(f"the body took longer than its {self._body_seconds:g} s deadline", url=self.url)
        for piece in self._pending:
            return self._counted(piece)
        while True:
            left = None if self._until is None else max(self._until - anyio.current_time(), 0.0)
            with deadline(left, url=self.url, what="body"):
                chunk = await anext(self._raw, b"")
            if not chunk:
                return b""
            self._pending = self._decoder.feed(chunk)
            for piece in self._pending:
                return self._counted(piece)

    def _counted(self, piece: bytes) -> bytes:
        self.size += len(piece)
        if self.size > self._cap:
            raise BodyLimitError(f"body passed the {self._cap}-byte cap", url=self.url)
        return piece

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[bytes]:
        while piece := await self.read():
            yield piece

    async def copy_decoded_to(self, path: str | os.PathLike[str]) -> int:
        """Write the rest of the decoded body to ``path``, one chunk in memory; return the bytes written.

        It goes to a temporary file beside ``path``, renamed to ``path`` when the body is complete;
        an error or a cancel removes it, so ``path`` never holds a partial body.
        """
        target = os.fspath(path)
        with _local(target, self.url):
            temp = await anyio.to_thread.run_sync(_temp_file, target)
        written = 0
        try:
            with _local(target, self.url):
                async with await anyio.open_file(temp, "wb") as file:
                    while piece := await self.read():
                        await file.write(piece)
                        written += len(piece)
                await anyio.to_thread.run_sync(os.replace, temp, target)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.aclose()
                await anyio.to_thread.run_sync(_remove, temp)
            raise
        return written

    async def aclose(self) -> None:
        """Drop what is left of the body; its connection closes and its host slot is given back."""
        if not self.ended:
            await self._end(None, dropped=True)

    async def _end(self, error: BaseException | None, *, dropped: bool) -> None:
        if self.ended:
            return
        self.ended = True
        try:
            if self._close is not None:
                with anyio.CancelScope(shield=True):
                    await self._close(error is None and not dropped)
        finally:
            hooks, self._hooks = self._hooks, []
            for hook in hooks:
                hook(error, self.size, dropped)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        state = "ended" if self.ended else "open"
        return f"<BodyStream {self.status} {self.url} {self.size} bytes read, {state}>"


_CHUNK = 64 * 1024


@contextlib.contextmanager
def _local(path: str, url: str) -> Iterator[None]:
    """An ``OSError`` of this machine's disk as ``LocalFileError``: not the network's, never retried."""
    try:
        yield
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise LocalFileError(
            f"cannot write the body of {url} to {path} ({reason}): free some space or choose another path",
            url=url,
            path=path,
        ) from exc


def _temp_file(path: str) -> str:
    folder, name = os.path.split(os.path.abspath(path))
    handle, temp = tempfile.mkstemp(prefix=f".{name}.", suffix=".part", dir=folder)
    os.close(handle)
    return temp


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
