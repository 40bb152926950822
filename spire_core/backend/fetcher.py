"""``Fetcher``: single URLs fetched through a backend (one it is given, or an ``HttpBackend`` of its own)."""

from __future__ import annotations

from typing import Self

from spire_core.backend.base import Backend
from spire_core.response import Response
from spire_core.seed import Seed

__all__ = ["Fetcher"]


class Fetcher:
    """Fetches single URLs through a backend, as robots.txt and sitemap readers do.

    Given no backend it makes an ``HttpBackend`` and closes it on ``aclose``; a backend passed in
    belongs to its owner and is left open.
    """

    def __init__(self, backend: Backend | None = None) -> None:
        if backend is None:
            from spire_core.backend.http import HttpBackend  # aiohttp: only when no backend is given

            backend = HttpBackend()
            self._owns_backend = True
        else:
            self._owns_backend = False
        self._backend = backend

    async def fetch_one(self, url: str) -> Response:
        """GET ``url`` (one hop: redirects are the caller's to follow); ``InvalidUrl`` if it is not http(s)."""
        return await self._backend.fetch(Seed(url))

    async def aclose(self) -> None:
        """Close the backend this fetcher made itself (one passed in is left open)."""
        if self._owns_backend:
            await self._backend.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
