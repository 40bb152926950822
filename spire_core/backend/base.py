"""The ``Backend`` contract: hand out a session for a request; the session fetches one hop."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Protocol, runtime_checkable

from spire_core.response import Response
from spire_core.seed import Seed

__all__ = ["Backend", "FunctionBackend", "Session"]


@runtime_checkable
class Session(Protocol):
    """Fetches one request, without following redirects: the crawler follows them itself."""

    async def fetch(self, seed: Seed) -> Response: ...


@runtime_checkable
class Backend(Protocol):
    """Hands out a ``Session`` for each request (a pooled HTTP client, a browser from a pool...)."""

    def session(self, seed: Seed) -> AbstractAsyncContextManager[Session]: ...

    async def aclose(self) -> None: ...


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

    @asynccontextmanager
    async def _session(self) -> AsyncIterator[Session]:
        yield self

    def session(self, seed: Seed) -> AbstractAsyncContextManager[Session]:
        return self._session()

    async def aclose(self) -> None:
        """Nothing to close."""
