"""The ``Backend`` contract: one method that fetches one hop, and ``aclose``; like httpx's transport.

A resource that must outlive ``fetch`` (a browser tab the handler still drives) is registered on the
request's exit stack, ``request_exits()``, which the crawler opens for each request and closes when
its handler ends. Outside a request there is no stack, and such a resource is released at once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from contextvars import ContextVar
from types import TracebackType
from typing import Protocol, runtime_checkable

from spire_core.response import Response
from spire_core.seed import Seed

__all__ = ["Backend", "FunctionBackend", "request_exits", "request_scope"]

_scope: ContextVar[_RequestScope | None] = ContextVar("spire_request_exits", default=None)


@runtime_checkable
class Backend(Protocol):
    """Fetches one request without following redirects (the crawler follows them, hop by hop)."""

    async def fetch(self, seed: Seed) -> Response: ...

    async def aclose(self) -> None: ...


def request_exits() -> AsyncExitStack | None:
    """The exit stack of the request being handled in this task, or ``None`` outside a request."""
    scope = _scope.get()
    return None if scope is None else scope.exits()


def request_scope() -> AbstractAsyncContextManager[None]:
    """Open a request's exit stack for the code inside; it is closed when the block ends.

    ``async with request_scope():`` around a fetch and the code that uses what it left open.
    """
    return _RequestScope()


class _RequestScope:
    """A request's scope; its exit stack is made only when something is registered on it (a browser
    tab, a streamed body), so a request that leaves nothing open costs no stack."""

    __slots__ = ("_stack", "_token")

    def __init__(self) -> None:
        self._stack: AsyncExitStack | None = None

    def exits(self) -> AsyncExitStack:
        if self._stack is None:
            self._stack = AsyncExitStack()
        return self._stack

    async def __aenter__(self) -> None:
        self._token = _scope.set(self)

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> bool | None:
        _scope.reset(self._token)
        stack = self._stack
        return None if stack is None else await stack.__aexit__(kind, error, trace)


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
