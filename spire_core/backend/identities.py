"""``Identities``: a backend that spreads seeds over several browser identities.

Crawler(router, backend=Identities([Identity("chrome", "windows"), Identity("firefox", "macos")]))
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Sequence
from typing import Any

from spire_core.backend.http import HttpBackend
from spire_core.errors import ConfigError
from spire_core.response import Response
from spire_core.seed import Seed
from spire_core.session.identity import Identity

__all__ = ["Identities"]


class Identities:
    """A backend that spreads seeds over several identities, each with its own backend and cookie jar.

    A seed always goes to the same identity (chosen by its unique key), so its retries do too. Each
    identity gets an ``HttpBackend(identity=identity, **backend_options)``.
    """

    def __init__(self, identities: Sequence[Identity], **backend_options: Any) -> None:
        if not identities:
            raise ConfigError("Identities needs at least one identity")
        self.identities = tuple(identities)
        self._backends = [HttpBackend(identity=identity, **backend_options) for identity in self.identities]

    def identity_for(self, seed: Seed) -> Identity:
        return self.identities[zlib.crc32(seed.unique_key.encode()) % len(self.identities)]

    async def fetch(self, seed: Seed) -> Response:
        index = zlib.crc32(seed.unique_key.encode()) % len(self.identities)
        return await self._backends[index].fetch(seed)

    async def download(self, seed: Seed, path: str | os.PathLike[str], *, limit: int | None = None) -> int:
        index = zlib.crc32(seed.unique_key.encode()) % len(self.identities)
        return await self._backends[index].download(seed, path, limit=limit)

    async def aclose(self) -> None:
        for backend in self._backends:
            await backend.aclose()
