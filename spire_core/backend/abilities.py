"""What a backend may offer beyond ``fetch``: small protocols the engine asks for, never a backend's type.

A backend that wraps another (a cache, a WARC recorder, the adaptive backend) forwards each of
them to the backend it wraps (``Forwarding``), so wrapping a backend never changes how the crawl
behaves: the robots.txt agent, the crawl's timeouts, the pool stats and downloads stay the same.

    user_agent_of(CachingBackend(HttpBackend(user_agent="mybot/1.0"), ".cache"))  # "mybot/1.0"
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from spire_core.backend.base import Backend
from spire_core.errors import ConfigError
from spire_core.response import Response
from spire_core.seed import Seed
from spire_core.session.timeouts import Timeouts

__all__ = [
    "Conditional",
    "CountsSends",
    "DEFAULT_USER_AGENT",
    "Downloader",
    "EventLoopBound",
    "Forwarding",
    "HasPoolStats",
    "HasUserAgent",
    "PoolStats",
    "Streamer",
    "Timed",
    "check_event_loop",
    "count_sends",
    "sends_conditional",
    "pool_stats_of",
    "user_agent_of",
]

#: The User-Agent of an ``HttpBackend`` given none, and the robots.txt agent of a backend that names none.
DEFAULT_USER_AGENT = "spire/0.1 (+a polite crawler)"


@dataclasses.dataclass(frozen=True, slots=True)
class PoolStats:
    """The connection pool of an ``HttpBackend``: requests holding a connection now, open connections
    no request holds (kept alive for the next), and the caps (``None``: no per-host cap)."""

    busy: int
    max_connections: int
    idle: int = 0
    max_connections_per_host: int | None = None


@runtime_checkable
class HasUserAgent(Protocol):
    """A backend that sends a known User-Agent (robots.txt rules are read for its product token)."""

    @property
    def user_agent(self) -> str | None: ...


@runtime_checkable
class HasPoolStats(Protocol):
    """A backend with a connection pool to report on."""

    def pool_stats(self) -> PoolStats | None: ...


@runtime_checkable
class Timed(Protocol):
    """A backend whose own timeouts (connect, read, body) the crawl's ``timeouts=`` set."""

    def use_timeouts(self, timeouts: Timeouts | None) -> Timeouts:
        """Adopt ``timeouts`` (``None``: keep its own) and return the ones it uses; ``ConfigError`` when
        it was given other timeouts of its own, so a crawl's timeouts have one owner."""
        ...


@runtime_checkable
class EventLoopBound(Protocol):
    """A backend that runs under one kind of event loop only (aiohttp: asyncio)."""

    def check_event_loop(self) -> None:
        """``ConfigError`` when the running event loop is not one it can use."""
        ...


@runtime_checkable
class Conditional(Protocol):
    """A backend that sends a request's conditional headers as given and hands back a 304 as it came
    (HTTP does; a browser would show a 304 as an empty page, so a recrawl compares what it renders)."""

    def sends_conditional(self) -> bool: ...


@runtime_checkable
class Downloader(Backend, Protocol):
    """A backend that can stream a body to a file (``HttpBackend`` is one)."""

    async def download(self, seed: Seed, path: str | os.PathLike[str], *, limit: int | None = None) -> int: ...


@runtime_checkable
class Streamer(Backend, Protocol):
    """A backend that can leave a 2xx body unread, for a ``BodyStream`` to read (``HttpBackend`` is one).

    A wrapping backend does not forward it: a cache or a recorder needs the whole body, so through
    one a stream is served from the body it read (``BodyStream.of``).
    """

    async def stream(self, seed: Seed) -> Response:
        """``seed``'s response; a 2xx one as a ``StreamedResponse`` whose body is not read yet."""
        ...


@runtime_checkable
class CountsSends(Protocol):
    """A backend that says when each request goes on the wire, so the crawl counts what the server saw.

    A request it refuses before sending (every proxy of its pool banned, a connection that failed)
    is not counted, and one its client library writes twice (aiohttp sends a GET again on a new
    connection when a kept-alive one closed unanswered) counts twice. A backend without it has its
    requests counted when the crawl decides to send them. A wrapping backend does not forward it:
    a cache serves a hit without the wire, and its hits count as requests.
    """

    def count_sends(self, sent: Callable[[Seed], None]) -> None:
        """From now on, call ``sent(seed)`` as each request for ``seed`` (the one ``fetch`` was given) is written."""
        ...


def user_agent_of(backend: object) -> str | None:
    """The User-Agent ``backend`` sends, when it says."""
    return backend.user_agent if isinstance(backend, HasUserAgent) else None


def pool_stats_of(backend: object) -> PoolStats | None:
    """``backend``'s connection pool, when it has one."""
    return backend.pool_stats() if isinstance(backend, HasPoolStats) else None


def sends_conditional(backend: object) -> bool:
    """Whether a recrawl's revisits may go to ``backend`` as conditional requests."""
    return isinstance(backend, Conditional) and backend.sends_conditional()


def count_sends(backend: object, sent: Callable[[Seed], None]) -> bool:
    """Have ``backend`` call ``sent`` for each request it writes; ``False`` when it cannot say (``CountsSends``)."""
    if not isinstance(backend, CountsSends):
        return False
    backend.count_sends(sent)
    return True


def check_event_loop(backend: object) -> None:
    """Raise ``backend``'s ``ConfigError`` for a wrong event loop, when it runs on one kind only."""
    if isinstance(backend, EventLoopBound):
        backend.check_event_loop()


class Forwarding:
    """The abilities of a wrapping backend: each is the wrapped ``backend``'s (which it may not have)."""

    #: The backend wrapped, whose abilities these are.
    backend: Backend

    @property
    def user_agent(self) -> str | None:
        return user_agent_of(self.backend)

    def pool_stats(self) -> PoolStats | None:
        return pool_stats_of(self.backend)

    def use_timeouts(self, timeouts: Timeouts | None) -> Timeouts:
        if isinstance(self.backend, Timed):
            return self.backend.use_timeouts(timeouts)
        return Timeouts() if timeouts is None else timeouts

    def check_event_loop(self) -> None:
        check_event_loop(self.backend)

    def sends_conditional(self) -> bool:
        return sends_conditional(self.backend)

    async def download(self, seed: Seed, path: str | os.PathLike[str], *, limit: int | None = None) -> int:
        if not isinstance(self.backend, Downloader):
            raise ConfigError(f"{type(self.backend).__name__} cannot stream a download; HttpBackend can")
        return await self.backend.download(seed, path, limit=limit)
