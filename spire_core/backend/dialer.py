"""The httpx path's connects: a host name resolved once, each address judged, and the judged one connected to.

``guarded_transport`` is httpx's own transport whose connection pool opens its connections through
``GuardedDialer``: it resolves the host itself, hands every address to the crawl's address policy
(``check_resolved``) and connects to those addresses, so no second DNS lookup is made and the
addresses judged are the ones connected to (a name rebound between the two cannot slip past). The
aiohttp path does the same with ``GuardedResolver``, and the QUIC connect of ``http3`` with its own
lookup. Imported when the httpx path makes its transport: httpcore costs start-up time.
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
from collections.abc import Iterable

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
    judged by the crawl's address policy, and those addresses connected to in turn."""

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
                return await self._inner.connect_tcp(address, port, timeout, local_address, socket_options)
            except httpcore.ConnectError as exc:  # refused or unreachable there: the next address
                failed = exc
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
