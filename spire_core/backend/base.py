"""The ``Backend`` contract: hand out a session for a request; the session fetches one hop."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Protocol, runtime_checkable

from spire_core.response import Response
from spire_core.seed import Seed

__all__ = ["Backend", "FunctionBackend", "Session", "Shared"]


@runtime_checkable
class Session(Protocol):
    """Fetches one request, without following redirects: the crawler follows them itself."""

    async def fetch(self, seed: Seed) -> Response: ...


@runtime_checkable
class Backend(Protocol):
    """Hands out a ``Session`` for each request (a pooled HTTP client, a browser from a pool...)."""

    def session(self, seed: Seed) -> AbstractAsyncContextManager[Session]: ...

    async def aclose(self) -> None: ...


class Shared(AbstractAsyncContextManager[Session]):
    """The session of a backend whose every request shares one client: entering it hands the
    session out, leaving it does nothing. A plain object, so the per-request cost is two calls."""

    __slots__ = ("_session",)

    def __init__(self, session: Session) -> None:
        self._session = session

    async def __aenter__(self) -> Session:
        return self._session

    async def __aexit__(self, *exc_info: object) -> None:
        return None


class FunctionBackend:
    """A backend made of one async function from ``Seed`` to ``Response``: the test seam.

    async def fake(seed: Seed) -> Response:
        return Response(url=seed.url, status=200, body=b"<html>hi</html>")

    Crawler(router, backend=FunctionBackend(fake))
    """

    def __init__(self, fetch: Callable[[Seed], Awaitable[Response]]) -> None:
        self._fetch = fetch

    async def fetch(self, seed: Seed) -> Response:
        return await self._fetch(seed)

    def session(self, seed: Seed) -> AbstractAsyncContextManager[Session]:
        return Shared(self)

    async def aclose(self) -> None:
        """Nothing to close."""
