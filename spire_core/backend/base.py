"""The ``Backend`` contract: hand out a session for a request; the session fetches one hop."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Protocol, Self, runtime_checkable

from spire_core.response import Response
from spire_core.seed import Seed

__all__ = ["Backend", "Fetcher", "FunctionBackend", "Session", "Shared"]


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


class Fetcher:
    """Fetches single URLs through a backend, as robots.txt and sitemap readers do.

    Given no backend it makes an ``HttpBackend`` and closes it on ``aclose``; a backend passed in
    belongs to its owner and is left open.
    """

    def __init__(self, backend: Backend | None = None) -> None:
        if backend is None:
            from spire_core.backend.http import HttpBackend

            backend = HttpBackend()
            self._owns_backend = True
        else:
            self._owns_backend = False
        self._backend = backend

    async def fetch_one(self, url: str) -> Response:
        """GET ``url`` (one hop: redirects are the caller's to follow); ``InvalidUrl`` if it is not http(s)."""
        seed = Seed(url)
        async with self._backend.session(seed) as session:
            return await session.fetch(seed)

    async def aclose(self) -> None:
        """Close the backend this fetcher made itself (one passed in is left open)."""
        if self._owns_backend:
            await self._backend.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
