"""HTTP/3 over QUIC (aioquic) for ``HttpBackend(http3=...)``: an httpx transport that picks QUIC or TCP per origin.

    HttpBackend(http3=True)       # HTTP/3 where the origin offers it (Alt-Svc: h3=":443"), else TCP
    HttpBackend(http3="prefer")   # HTTP/3 first for every https:// origin, TCP when QUIC gets no answer
    HttpBackend(http3="only")     # HTTP/3 or nothing: no fallback

``Http3Transport`` wraps the backend's TCP transport (httpx, HTTP/1.1 or HTTP/2). An origin's
``Alt-Svc`` header is remembered with its ``max-age`` (RFC 7838: each header replaces what the origin
said before; ``clear`` forgets it), and a QUIC handshake that fails within the connect timeout sends
that request over TCP and keeps the origin on TCP for ``broken_for`` seconds. One QUIC connection per
host and port carries every request to it (HTTP/3 multiplexes). aioquic's failures become spire's
errors here (``_terminated``, ``error_received``): callers never see an aioquic exception. The mode and
the Alt-Svc memory live in ``altsvc``, which needs no aioquic.

QUIC has no back-pressure of its own: aioquic widens a receive window whenever half of it has
arrived, so a body its reader has not read would pile up in memory. ``_PacedQuic`` widens each
stream's window only as its reader reads (``STREAM_WINDOW`` past what it has read) and the
connection's as all of them do (``CONNECTION_WINDOW``): a slow reader holds at most a window of its
body, as the kernel's socket buffer bounds it over TCP.

A host has one name here, its A-label by UTS 46 as ``spire_core.url`` reads every URL (``faß.de``
is ``xn--fa-hia.de``): it is what is resolved, what the address policy judges, the TLS server name,
and the key of the connections and of the Alt-Svc memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import socket
import ssl
from collections import deque
from collections.abc import AsyncIterator

import anyio
import anyio.lowlevel
import httpx
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, ErrorCode, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.h3.exceptions import H3Error
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection, QuicConnectionError
from aioquic.quic.events import ConnectionTerminated, HandshakeCompleted, QuicEvent, StreamReset
from aioquic.quic.packet import QuicErrorCode
from aioquic.quic.packet_builder import QuicPacketBuilder
from aioquic.quic.recovery import QuicPacketSpace
from aioquic.quic.stream import QuicStream, StreamFinishedError

from spire_core import errors
from spire_core import url as urls
from spire_core.backend.altsvc import AltSvcMemory, Http3Mode
from spire_core.session.addresses import check_resolved
from spire_core.session.decoding import PIECE
from spire_core.session.timeouts import deadline

__all__ = ["CONNECTION_WINDOW", "STREAM_WINDOW", "Http3Transport"]

#: How far past what its reader has read a response's stream may receive: the most of a body held unread.
STREAM_WINDOW = 1024 * 1024
#: How far past what every reader has read one QUIC connection may receive, over all its streams.
CONNECTION_WINDOW = 8 * STREAM_WINDOW

#: Headers HTTP/3 forbids (RFC 9114, section 4.2): the connection's own, and Host (``:authority`` says it).
_HOP_BY_HOP = frozenset({b"connection", b"keep-alive", b"proxy-connection", b"transfer-encoding", b"upgrade", b"host"})


class Http3Transport(httpx.AsyncBaseTransport):
    """An httpx transport that sends each request over QUIC when its origin's mode and memory choose
    HTTP/3, and over ``tcp`` otherwise (or when QUIC gets no answer within the connect timeout)."""

    def __init__(
        self,
        tcp: httpx.AsyncBaseTransport,
        *,
        mode: Http3Mode,
        verify: bool | str = True,
        memory: AltSvcMemory | None = None,
    ) -> None:
        self.tcp = tcp
        self.mode: Http3Mode = mode
        #: The Alt-Svc and failure memory, per origin.
        self.memory = memory if memory is not None else AltSvcMemory()
        self._verify = verify
        self._connections: dict[tuple[str, int], _H3Protocol] = {}
        self._opening: dict[tuple[str, int], anyio.Lock] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        host = urls.host_of(str(url))  # the A-label, by UTS 46 (httpx's url.host is the Unicode form)
        origin = f"{url.scheme}://{host}:{url.port or 443}"
        port = self._quic_port(request, origin)
        if port is not None:
            connection = await self._connection(request, host, origin, port)
            if connection is not None:
                response = await connection.send(request)
                self._heard(origin, host, response)
                return response
        response = await self.tcp.handle_async_request(request)
        self._heard(origin, host, response)
        return response

    def _quic_port(self, request: httpx.Request, origin: str) -> int | None:
        """The UDP port to send ``request`` to over QUIC, or ``None`` for TCP."""
        url = request.url
        if url.scheme != "https":
            if self.mode == "only":
                raise errors.InvalidUrl(
                    f'{url} is plain http, which has no HTTP/3: http3="only" fetches https:// URLs only '
                    "(use http3=True to send plain http over TCP)",
                    url=str(url),
                )
            return None
        if self.mode == "only":
            return url.port or 443
        if self.mode == "prefer":
            return None if self.memory.broken(origin) else url.port or 443
        return self.memory.port(origin)

    def _heard(self, origin: str, host: str, response: httpx.Response) -> None:
        value = response.headers.get("alt-svc")
        if value is not None and origin.startswith("https:"):
            self.memory.heard(origin, host, value)

    async def _connection(self, request: httpx.Request, host: str, origin: str, port: int) -> _H3Protocol | None:
        """The open QUIC connection to ``host`` (the request's) and ``port``, made now if there is none;
        ``None`` (the request goes over TCP) when the handshake fails, unless the mode is ``only``."""
        key = (host, port)
        found = self._connections.get(key)
        if found is not None and found.alive:
            return found
        if found is not None:  # closed by the server, or idle too long
            found.abort()
        lock = self._opening.setdefault(key, anyio.Lock())
        async with lock:
            found = self._connections.get(key)
            if found is not None and found.alive:
                return found
            if self.mode != "only" and self.memory.broken(origin):  # it failed while this request waited
                return None
            try:
                found = await self._connect(request, host, port)
            except (errors.ConnectError, errors.FetchTimeout, errors.TlsError, errors.ProtocolError):
                if self.mode == "only":
                    raise
                self.memory.failed(origin)
                return None
            self._connections[key] = found  # before the lock goes: the next waiter takes this one
        self.memory.worked(origin)
        return found

    async def _connect(self, request: httpx.Request, host: str, port: int) -> _H3Protocol:
        """A QUIC connection to ``host`` (an A-label or an address) with its TLS handshake done, within the
        request's connect timeout."""
        url = str(request.url)
        name = host.strip("[]")  # an IPv6 address as the resolver and TLS take it
        timeouts = request.extensions.get("timeout", {})
        loop = asyncio.get_running_loop()
        with deadline(timeouts.get("connect"), url=url, what="QUIC connect"):
            try:
                # ASCII: Python's own "idna" codec (IDNA 2003, which makes faß.de fass.de) is never asked
                infos = await loop.getaddrinfo(name, port, type=socket.SOCK_DGRAM)
            except OSError as exc:
                raise errors.ConnectError(f"cannot resolve {host}: {exc}", url=url) from exc
            check_resolved(host, [str(info[4][0]) for info in infos])  # the crawl's address policy, as over TCP
            family, _, _, _, address = infos[0]
            remote = (str(address[0]), int(address[1]))
            configuration = self._configuration(name)
            try:
                # a connected socket, so the kernel's "port unreachable" ends the handshake at once
                transport, protocol = await loop.create_datagram_endpoint(
                    lambda: _H3Protocol(_PacedQuic(configuration), url),
                    remote_addr=remote,
                    family=family,
                )
            except OSError as exc:
                raise errors.ConnectError(f"QUIC to {host}:{port}: {exc}", url=url) from exc
            try:
                protocol.connect(transport.get_extra_info("peername"))
                await protocol.handshake()
            except BaseException:
                protocol.abort()
                raise
        return protocol

    def _configuration(self, host: str) -> QuicConfiguration:
        configuration = QuicConfiguration(
            is_client=True,
            alpn_protocols=H3_ALPN,
            server_name=host,
            max_data=CONNECTION_WINDOW,  # the windows the connection opens with, then widened as readers read
            max_stream_data=STREAM_WINDOW,
        )
        if self._verify is False:
            configuration.verify_mode = ssl.CERT_NONE
        elif isinstance(self._verify, str):  # a CA bundle: trust it (and only it)
            configuration.load_verify_locations(self._verify)
        return configuration

    async def aclose(self) -> None:
        connections, self._connections = self._connections, {}
        for each in connections.values():
            await each.aclose()
        if connections:
            await anyio.lowlevel.checkpoint()  # the sockets close on the loop's next turn: let it come first
        await self.tcp.aclose()


class _H3Protocol(QuicConnectionProtocol):
    """One QUIC connection carrying HTTP/3 requests, each on its own stream."""

    _quic: _PacedQuic

    def __init__(self, quic: _PacedQuic, url: str) -> None:
        super().__init__(quic)
        self._http = H3Connection(quic)
        self._url = url
        self._ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._streams: dict[int, _Stream] = {}
        self.alive = True

    async def handshake(self) -> None:
        """Wait for the TLS handshake (the caller's deadline bounds it)."""
        await self._ready

    def error_received(self, exc: Exception) -> None:  # asyncio's DatagramProtocol
        """The kernel said the UDP port is closed (ICMP port unreachable): nothing answers QUIC there."""
        self._fail(errors.ConnectError(f"no QUIC server there: {exc}", url=self._url))

    def quic_event_received(self, event: QuicEvent) -> None:
        if isinstance(event, HandshakeCompleted):
            if not self._ready.done():
                self._ready.set_result(None)
        elif isinstance(event, ConnectionTerminated):
            self._fail(_terminated(event, self._url))
        elif isinstance(event, StreamReset) and event.stream_id in self._streams:
            self._streams.pop(event.stream_id).fail(
                errors.ConnectError(f"the server reset the stream (error {event.error_code:#x})", url=self._url)
            )
        for h3_event in self._http.handle_event(event):
            if not isinstance(h3_event, HeadersReceived | DataReceived):
                continue  # a push or a datagram: spire asks for neither
            stream = self._streams.get(h3_event.stream_id)
            if stream is None:
                continue
            if isinstance(h3_event, HeadersReceived):
                if stream.headers is None:  # later headers are trailers, which spire does not read
                    stream.headers = h3_event.headers
            elif h3_event.data:
                stream.chunks.append(h3_event.data)
                self._quic.arrived(stream.stream_id, len(h3_event.data))
            if h3_event.stream_ended:
                stream.ended = True
                self._streams.pop(stream.stream_id, None)
            stream.wake.set()

    def _fail(self, error: errors.SpireError) -> None:
        """The connection is over: the handshake and every open stream fail with ``error``."""
        self.alive = False
        if not self._ready.done():
            self._ready.set_exception(error)
            self._ready.exception()  # retrieved: a handshake nobody awaits any more is no warning
        streams, self._streams = self._streams, {}
        for stream in streams.values():
            stream.fail(error)

    async def send(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` on a new stream and wait for its response's headers (within the read timeout)."""
        url = request.url
        body = await request.aread()
        stream = _Stream(self._quic.get_next_available_stream_id(), str(url))
        self._streams[stream.stream_id] = stream
        headers = [
            (b":method", request.method.encode()),
            (b":scheme", url.scheme.encode()),
            (b":authority", url.netloc),
            (b":path", url.raw_path),
            *((name.lower(), value) for name, value in request.headers.raw if name.lower() not in _HOP_BY_HOP),
        ]
        try:
            self._http.send_headers(stream.stream_id, headers, end_stream=not body)
            if body:
                self._http.send_data(stream.stream_id, body, end_stream=True)
        except (H3Error, QuicConnectionError, StreamFinishedError) as exc:  # a connection closing under us
            self._streams.pop(stream.stream_id, None)
            raise errors.ConnectError(f"the QUIC connection cannot take the request: {exc}", url=str(url)) from exc
        self.transmit()
        read = request.extensions.get("timeout", {}).get("read")
        try:
            with deadline(read, url=str(url), what="read"):
                while stream.headers is None:
                    await stream.next_event()
        except BaseException:
            self.cancel(stream)
            raise
        status = next((value for name, value in stream.headers if name == b":status"), b"")
        if not status.isdigit():
            self.cancel(stream)
            raise errors.ProtocolError(f"malformed response: HTTP/3 :status {status!r}", url=str(url))
        return httpx.Response(
            int(status),
            headers=[(name, value) for name, value in stream.headers if not name.startswith(b":")],
            stream=_Body(self, stream, read),
            extensions={"http_version": b"HTTP/3"},
            request=request,
        )

    def read(self, stream: _Stream) -> bytes:
        """The next piece of ``stream``'s body that has arrived (at most 64 KiB), its window widened by it."""
        piece = stream.take(PIECE)
        self._quic.read(stream.stream_id, len(piece))
        if self.alive:
            self.transmit()  # a MAX_STREAM_DATA or MAX_DATA, when the read made enough room to announce
        return piece

    def cancel(self, stream: _Stream) -> None:
        """Stop a stream whose body is no longer wanted (the cap, a deadline, an error)."""
        stream.chunks.clear()
        self._quic.forget(stream.stream_id)  # what it left unread no longer holds the connection's window
        if stream.ended or stream.failed is not None or self._streams.pop(stream.stream_id, None) is None:
            return
        stream.ended = True
        if self.alive:
            with contextlib.suppress(Exception):  # aioquic refuses a stream it already closed: nothing to stop
                self._quic.stop_stream(stream.stream_id, ErrorCode.H3_REQUEST_CANCELLED)
                self._quic.reset_stream(stream.stream_id, ErrorCode.H3_REQUEST_CANCELLED)
            self.transmit()

    def abort(self) -> None:
        """Drop a connection whose handshake did not finish, at once."""
        self.alive = False
        if self._transport is not None:
            self._transport.close()

    async def aclose(self) -> None:
        """Close the connection politely (CONNECTION_CLOSE), waiting a moment for it to be sent."""
        if self.alive:
            self.alive = False
            self.close()
            with anyio.move_on_after(1):
                await self.wait_closed()
        if self._transport is not None:
            self._transport.close()


class _PacedQuic(QuicConnection):
    """aioquic's client connection, its receive windows widened as readers read rather than as data arrives.

    A stream may receive ``max_stream_data`` past what its reader has read, the connection
    ``max_data`` past what all of them have; a window is announced once it can grow by a quarter.
    aioquic's own rule (double a window once half of it has arrived) is kept from firing by hiding
    what arrived while its limit writers run: they still write and resend the frames.
    """

    def __init__(self, configuration: QuicConfiguration) -> None:
        super().__init__(configuration=configuration)
        #: Body bytes that arrived and wait for their reader, per stream, and over all streams.
        self._unread: dict[int, int] = {}
        self._unread_total = 0

    def arrived(self, stream_id: int, size: int) -> None:
        """``size`` bytes of ``stream_id``'s body arrived, for its reader."""
        self._unread[stream_id] = self._unread.get(stream_id, 0) + size
        self._unread_total += size

    def read(self, stream_id: int, size: int) -> None:
        """``stream_id``'s reader took ``size`` bytes: as much more may come."""
        left = self._unread.get(stream_id, 0) - size
        self._unread_total -= size
        if left > 0:
            self._unread[stream_id] = left
        else:
            self._unread.pop(stream_id, None)

    def forget(self, stream_id: int) -> None:
        """``stream_id``'s reader is gone: what it left unread is dropped."""
        self._unread_total -= self._unread.pop(stream_id, 0)

    def _write_connection_limits(self, builder: QuicPacketBuilder, space: QuicPacketSpace) -> None:
        limit = self._local_max_data
        window = self._configuration.max_data
        wanted = limit.used - self._unread_total + window
        if wanted - limit.value >= window // 4:
            limit.value = wanted
        used, limit.used = limit.used, 0  # none used, as aioquic sees it: it does not double the limit
        try:
            super()._write_connection_limits(builder, space)
        finally:
            limit.used = used

    def _write_stream_limits(self, builder: QuicPacketBuilder, space: QuicPacketSpace, stream: QuicStream) -> None:
        receiver = stream.receiver
        window = self._configuration.max_stream_data
        # zero: a stream of ours that receives nothing; finished: all of it has arrived, nothing to allow
        if stream.stream_id is not None and stream.max_stream_data_local and not receiver.is_finished:
            wanted = receiver.starting_offset() - self._unread.get(stream.stream_id, 0) + window
            if wanted - stream.max_stream_data_local >= window // 4:
                stream.max_stream_data_local = wanted
        highest, receiver.highest_offset = receiver.highest_offset, 0  # as above: nothing arrived, no doubling
        try:
            super()._write_stream_limits(builder, space, stream)
        finally:
            receiver.highest_offset = highest


@dataclasses.dataclass(slots=True, eq=False)
class _Stream:
    """One request's stream: its response headers, the body chunks not yet read, and how it ended."""

    stream_id: int
    url: str
    headers: list[tuple[bytes, bytes]] | None = None
    chunks: deque[bytes] = dataclasses.field(default_factory=deque)
    ended: bool = False
    failed: errors.SpireError | None = None
    wake: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)

    async def next_event(self) -> None:
        """Wait until something arrives on the stream; raise the connection's error if it failed."""
        if self.failed is not None:
            raise self.failed
        if self.ended:
            raise errors.ConnectError("the HTTP/3 stream ended before its response", url=self.url)
        self.wake.clear()
        await self.wake.wait()
        if self.failed is not None:
            raise self.failed

    def fail(self, error: errors.SpireError) -> None:
        self.failed = error
        self.wake.set()

    def take(self, most: int) -> bytes:
        """Up to ``most`` bytes of the body that arrived and is not read yet, joined from its packets' data."""
        pieces: list[bytes] = []
        size = 0
        while self.chunks and size < most:
            chunk = self.chunks.popleft()
            if size + len(chunk) > most:  # the rest stays for the next read
                self.chunks.appendleft(chunk[most - size :])
                chunk = chunk[: most - size]
            pieces.append(chunk)
            size += len(chunk)
        return b"".join(pieces)


class _Body(httpx.AsyncByteStream):
    """A response body as it arrives on its stream, each wait within the read timeout."""

    def __init__(self, connection: _H3Protocol, stream: _Stream, read: float | None) -> None:
        self._connection = connection
        self._stream = stream
        self._read = read

    async def __aiter__(self) -> AsyncIterator[bytes]:
        stream = self._stream
        while True:
            while stream.chunks:
                yield self._connection.read(stream)
            if stream.ended and stream.failed is None:
                return
            with deadline(self._read, url=stream.url, what="read"):
                await stream.next_event()

    async def aclose(self) -> None:
        self._connection.cancel(self._stream)


def _terminated(event: ConnectionTerminated, url: str) -> errors.SpireError:
    """The spire error for a QUIC connection the peer or aioquic closed (the one place they are mapped)."""
    reason = event.reason_phrase or f"error {event.error_code:#x}"
    if QuicErrorCode.CRYPTO_ERROR <= event.error_code < QuicErrorCode.CRYPTO_ERROR + 0x100:
        return errors.TlsError(f"QUIC TLS handshake failed: {reason}", url=url)
    if event.error_code == QuicErrorCode.NO_ERROR:
        return errors.ConnectError(f"the server closed the QUIC connection: {reason}", url=url)
    return errors.ProtocolError(f"the QUIC connection failed: {reason}", url=url)
