"""The connections of ``HttpBackend``: one lane per identity, the caps, and idle counts.

Each identity a backend sends as (its own, or each proxy's of ``ProxyPool.identified``) travels in a
``Lane`` of its own: its headers, its cookie jars and its connections (an aiohttp connector, httpx
transports), so no identity sends another's cookies or reuses another's connection. ``HostCap`` is
the httpx path's per-host connection cap (aiohttp's connector has ``limit_per_host``);
``BoundedConnector`` is aiohttp's connector with ``limit`` bounding the connections it holds open,
idle ones included (httpcore's pool already does); ``idle_aiohttp`` and ``idle_httpx`` count the open
connections no request holds, which neither library reports.
"""

from __future__ import annotations

import asyncio
import dataclasses

import aiohttp
import anyio
import httpx
from aiohttp.client_proto import ResponseHandler
from aiohttp.client_reqrep import ClientRequest
from aiohttp.tracing import Trace

from spire_core.session.identity import Identity

__all__ = ["BoundedConnector", "CapKey", "Hold", "HostCap", "Lane", "idle_aiohttp", "idle_httpx"]


@dataclasses.dataclass(eq=False, slots=True)
class Lane:
    """One identity's side of the backend: the headers it sends, its cookie jars and its connections.

    The backend's own lane carries direct requests and those through proxies without an identity;
    each proxy of ``ProxyPool.identified`` has a lane of its own, so an identity never sends another's
    cookies nor reuses another's connection.
    """

    identity: Identity | None
    headers: httpx.Headers
    #: The httpx path's cookie jar.
    cookies: httpx.Cookies = dataclasses.field(default_factory=httpx.Cookies)
    #: The aiohttp path: its connector (the connections) and its cookie jar; made on first use.
    session: aiohttp.ClientSession | None = None
    #: The httpx path through proxies: one transport (pool) per proxy.
    transports: dict[str, httpx.AsyncHTTPTransport] = dataclasses.field(default_factory=dict)

    async def aclose(self) -> None:
        session, self.session = self.session, None
        if session is not None:
            await session.close()
        transports, self.transports = self.transports, {}
        for each in transports.values():
            await each.aclose()


CapKey = tuple[int, str | None, str]


class HostCap:
    """The httpx path's per-host connection cap: one HTTP/1.1 exchange per connection, at most ``cap``
    at once per lane, proxy and origin (aiohttp's connector applies its own ``limit_per_host``)."""

    def __init__(self, cap: int | None) -> None:
        self._cap = cap
        self._slots: dict[CapKey, anyio.Semaphore] = {}
        #: Origins that answered over HTTP/2: one connection carries every request, no cap applies.
        self.multiplexed: set[CapKey] = set()

    async def take(self, key: CapKey) -> Hold:
        if self._cap is None or key in self.multiplexed:
            return Hold(self, key, None)
        slots = self._slots.get(key)
        if slots is None:
            slots = self._slots[key] = anyio.Semaphore(self._cap)
        await slots.acquire()
        return Hold(self, key, slots)


class Hold:
    """One exchange's place under the per-host cap, given back once."""

    __slots__ = ("_cap", "_key", "_slots")

    def __init__(self, cap: HostCap, key: CapKey, slots: anyio.Semaphore | None) -> None:
        self._cap = cap
        self._key = key
        self._slots = slots

    def multiplexed(self) -> None:
        """The origin answered over HTTP/2: its later requests share one connection, uncapped."""
        self._cap.multiplexed.add(self._key)

    def release(self) -> None:
        slots, self._slots = self._slots, None
        if slots is not None:
            slots.release()


class BoundedConnector(aiohttp.TCPConnector):
    """aiohttp's connector, with ``limit`` bounding the connections it holds open, not only those in use.

    aiohttp's own ``limit`` counts the connections requests hold; each one it keeps alive for the
    next request to its origin is on top, so a crawl of 300 origins held 300 sockets with ``limit=50``
    (and a crawl of 1,000 ran out of file descriptors). Before it opens a connection, this one closes
    the idle connections that would put it over ``limit``, the longest unused first, as httpcore's
    pool does. It reads aiohttp's pool (``_conns``, ``_acquired``), pinned by a test.
    """

    async def _create_connection(
        self,
        req: ClientRequest,
        traces: list[Trace],
        timeout: aiohttp.ClientTimeout,  # noqa: ASYNC109 - aiohttp's own signature
    ) -> ResponseHandler:
        if self._make_room():
            # asyncio lets go of a closed transport's socket in a callback on the loop's next turn:
            # take that turn, so the sockets closed are gone before the new one is opened.
            await asyncio.sleep(0)
        return await super()._create_connection(req, traces, timeout)

    def _make_room(self) -> bool:
        """Close idle connections until the one being opened (already counted as in use) fits the limit;
        whether any was closed."""
        limit = self.limit
        pools = self._conns
        over = len(self._acquired) + sum(len(each) for each in pools.values()) - limit
        if not limit or over <= 0:
            return False
        idle = sorted(((used, key) for key, each in pools.items() for _, used in each), key=_first)
        for _, key in idle[:over]:
            pool = pools[key]
            protocol, _ = pool.popleft()  # each origin's deque is oldest first
            if not pool:
                del pools[key]
            protocol.close()
        return True


def _first(pair: tuple[float, object]) -> float:
    return pair[0]


def idle_aiohttp(session: aiohttp.ClientSession) -> int:
    """Open connections aiohttp keeps for reuse. Its connector has no public count: this reads the
    pool it keeps (``_conns``), pinned by a test so an aiohttp that moves it fails loudly."""
    conns = getattr(session.connector, "_conns", None)
    return sum(len(each) for each in conns.values()) if isinstance(conns, dict) else 0


def idle_httpx(transport: httpx.AsyncBaseTransport) -> int:
    """Idle connections of an httpx transport's httpcore pool (``connections`` is public in httpcore;
    the transport's ``_pool`` is not); 0 for a transport of another kind (a test seam)."""
    pool = getattr(transport, "_pool", None)
    connections = getattr(pool, "connections", None)  # read by name: importing httpcore costs start-up time
    if not isinstance(connections, list):
        return 0
    return sum(1 for connection in connections if connection.is_idle())
