"""``Identities``: a backend that spreads seeds over several browser identities.

Crawler(router, backend=Identities([Identity("chrome", "windows"), Identity("firefox", "macos")]))
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Sequence
from typing import Any

from spire_core.backend.abilities import PoolStats
from spire_core.backend.http import HttpBackend
from spire_core.errors import ConfigError
from spire_core.response import Response
from spire_core.seed import Seed
from spire_core.session.identity import Identity

__all__ = ["Identities"]


class Identities:
    """A backend that spreads seeds over several identities, each with its own backend, cookie jar and
    connections (an identity never reuses another's).

    A seed always goes to the same identity (chosen by its unique key), so its retries do too. Each
    identity gets an ``HttpBackend(identity=identity, **backend_options)``.
    """

    def __init__(self, identities: Sequence[Identity], **backend_options: Any) -> None:
        if not identities:
            raise ConfigError("Identities needs at least one identity")
        self.identities = tuple(identities)
        self._backends = [HttpBackend(identity=identity, **backend_options) for identity in self.identities]

    def identity_for(self, seed: Seed) -> Identity:
        identity = self._backend_for(seed).identity
        assert identity is not None  # each backend was made with one
        return identity

    def _backend_for(self, seed: Seed) -> HttpBackend:
        return self._backends[zlib.crc32(seed.unique_key.encode()) % len(self.identities)]

    async def fetch(self, seed: Seed) -> Response:
        return await self._backend_for(seed).fetch(seed)

    async def stream(self, seed: Seed) -> Response:
        """``seed``'s response, a 2xx body left unread for a ``BodyStream`` (``Streamer``)."""
        return await self._backend_for(seed).stream(seed)

    async def download(self, seed: Seed, path: str | os.PathLike[str], *, limit: int | None = None) -> int:
        return await self._backend_for(seed).download(seed, path, limit=limit)

    def pool_stats(self) -> PoolStats:
        """Every identity's connections together (each identity has a pool of its own, never shared)."""
        each = [backend.pool_stats() for backend in self._backends]
        return PoolStats(
            busy=sum(stats.busy for stats in each),
            max_connections=sum(stats.max_connections for stats in each),
            idle=sum(stats.idle for stats in each),
            max_connections_per_host=each[0].max_connections_per_host,
        )

    async def aclose(self) -> None:
        for backend in self._backends:
            await backend.aclose()
