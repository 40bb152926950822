"""The httpx path's connects: a host name resolved once, each address judged, and the judged one connected to.

``guarded_transport`` is httpx's own transport whose connection pool opens its connections through
``GuardedDialer``: it resolves the host itself, hands every address to the crawl's address policy
(``check_resolved``) and connects to those addresses, so no second DNS lookup is made and the
addresses judged are the ones connected to (a name rebound between the two cannot slip past). The
aiohttp path does the same with ``GuardedResolver``, and the QUIC connect of ``http3`` with its own
lookup. Imported when the httpx path makes its transport: httpcore costs start-up time.

Each HTTP/1.1 connection's stream is a ``_HeardStream``: httpcore reports a server that closes before a
whole response head as "Server disconnected without sending a response" whether nothing came or bytes
that are no HTTP (an SSH banner, a line of garbage); the stream tells the second apart, a protocol
error, as aiohttp's parser does.
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
from collections.abc import Iterable
from typing import Any

import anyio
import httpcore
import httpx

from spire_core.session.addresses import check_resolved

__all__ = ["GuardedDialer", "guarded_transport"]

SocketOption = tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]


def guarded_transport(*, http2: bool, limits: httpx.Limits, verify: ssl.SSLContext | bool) -> httpx.AsyncHTTPTransport:
    """httpx's transport, its connections opened by ``GuardedDialer``.

    httpx takes no network backend of its own: its pool (``_pool``, as ``idle_httpx`` reads) is given
    one here, checked by type so an httpx or httpcore that moves it fails loudly, not unguarded.
    """
    transport = httpx.AsyncHTTPTransport(http2=http2, limits=limits, verify=verify)
    pool = getattr(transport, "_pool", None)
    inner = getattr(pool, "_network_backend", None)
    if not isinstance(pool, httpcore.AsyncConnectionPool) or not isinstance(inner, httpcore.AsyncNetworkBackend):
        raise RuntimeError("this httpx keeps its connection pool elsewhere: spire cannot guard its connects")
    pool._network_backend = GuardedDialer(inner)
    return transport


class GuardedDialer(httpcore.AsyncNetworkBackend):
    """httpcore's network backend ``inner``, with a host name resolved here, every address it resolves to
    judged by the crawl's address policy, and those addresses connected to in turn, each connection's
    stream a ``_HeardStream``."""

    def __init__(self, inner: httpcore.AsyncNetworkBackend) -> None:
        self._inner = inner

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109  # httpcore's interface: the request's connect timeout
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = [host] if _is_address(host) else await _resolve(host, port, timeout)
        check_resolved(host, addresses)  # PrivateAddress before any connection is opened
        failed: httpcore.ConnectError | None = None
        for address in addresses:
            try:
                stream = await self._inner.connect_tcp(address, port, timeout, local_address, socket_options)
            except httpcore.ConnectError as exc:  # refused or unreachable there: the next address
                failed = exc
            else:
                return _HeardStream(stream)
        assert failed is not None  # a lookup answers with one address at least
        raise failed

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109  # httpcore's interface
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        return await self._inner.connect_unix_socket(path, timeout, socket_options)

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _HeardStream(httpcore.AsyncNetworkStream):
    """httpcore's stream ``inner``, keeping how the answer to the last request written began: a close
    after bytes that cannot begin an HTTP response is raised as httpcore's ``RemoteProtocolError``
    naming them, not returned as the end of the stream.

    An answer closed that way cannot be a body read to the close (that follows a status line, which
    begins with ``HTTP/``), so the error only replaces httpcore's "disconnected without sending a
    response"; a close with nothing heard, or a head cut short, stays that. HTTP/2, whose frames are
    no text, is not watched: a TLS stream that agreed on ``h2`` is returned as it is.
    """

    def __init__(self, inner: httpcore.AsyncNetworkStream) -> None:
        self._inner = inner
        self._heard = b""  # the first bytes read since the last write, up to _KEPT

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109  # httpcore's interface
        data = await self._inner.read(max_bytes, timeout)
        if data:
            if len(self._heard) < _KEPT:
                self._heard += data[: _KEPT - len(self._heard)]
        elif self._heard and not _begins_http(self._heard):
            raise httpcore.RemoteProtocolError(
                f"the server answered bytes that are not HTTP, then closed: {self._heard!r}"
            )
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109  # httpcore's interface
        self._heard = b""  # a new request: its answer begins with the next bytes read
        await self._inner.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109  # httpcore's interface
    ) -> httpcore.AsyncNetworkStream:
        stream = await self._inner.start_tls(ssl_context, server_hostname, timeout)
        tls = stream.get_extra_info("ssl_object")
        return stream if tls is not None and tls.selected_alpn_protocol() == "h2" else _HeardStream(stream)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


#: How many of an answer's first bytes a ``_HeardStream`` keeps: enough to judge them, and to show them.
_KEPT = 32
_STATUS_LINE_START = b"HTTP/"


def _begins_http(heard: bytes) -> bool:
    """Whether ``heard`` could be the start of an HTTP/1.x response (its status line's ``HTTP/``, or a
    piece of it when fewer bytes came)."""
    return heard[: len(_STATUS_LINE_START)] == _STATUS_LINE_START[: len(heard)]


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


async def _resolve(host: str, port: int, seconds: float | None) -> list[str]:
    """The addresses ``host`` resolves to, in the resolver's order, within the connect timeout (as
    httpcore resolves); a failure is httpcore's connect error, as its own lookup's is."""
    try:
        with anyio.fail_after(seconds):
            found = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except TimeoutError as exc:
        raise httpcore.ConnectTimeout(f"resolving {host} timed out") from exc
    except OSError as exc:
        raise httpcore.ConnectError(str(exc)) from exc
    return list(dict.fromkeys(str(info[4][0]) for info in found))
