"""The ``Backend`` contract: one method that fetches one hop, and ``aclose``; like httpx's transport.

A resource that must outlive ``fetch`` (a browser tab the handler still drives) is registered on the
request's exit stack, ``request_exits()``, which the crawler opens for each request and closes when
its handler ends. Outside a request there is no stack, and such a resource is released at once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from contextvars import ContextVar
from typing import Protocol, runtime_checkable

from spire_core.response import Response
from spire_core.seed import Seed

__all__ = ["Backend", "FunctionBackend", "request_exits", "request_scope"]

_exits: ContextVar[AsyncExitStack | None] = ContextVar("spire_request_exits", default=None)


@runtime_checkable
class Backend(Protocol):
    """Fetches one request without following redirects (the crawler follows them, hop by hop)."""

    async def fetch(self, seed: Seed) -> Response: ...

    async def aclose(self) -> None: ...


def request_exits() -> AsyncExitStack | None:
    """The exit stack of the request being handled in this task, or ``None`` outside a request."""
    return _exits.get()


@asynccontextmanager
async def request_scope() -> AsyncIterator[AsyncExitStack]:
    """Open a request's exit stack for the code inside; it is closed (shielded) when the block ends."""
    async with AsyncExitStack() as stack:
        token = _exits.set(stack)
        try:
            yield stack
        finally:
            _exits.reset(token)


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

    async def aclose(self) -> None:
        """Nothing to close."""
