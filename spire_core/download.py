"""``download``: stream a response body to a file with a size cap, never leaving a partial file behind.

    written = await download("https://shop.example/catalog.csv", "catalog.csv", limit=50 * 2**20)

The decoded body goes to a temporary file in the target folder and is renamed to ``path`` only
when it is complete; any error or cancel removes the temporary file. A ``Content-Length`` over the
limit is refused before the body is read. Given a ``HostGate`` (a crawl's, ``crawler.gate``), the
download waits for a slot of its origin and holds it until the body ends.
"""

from __future__ import annotations

import os
from typing import Protocol

from spire_core.backend.abilities import Downloader
from spire_core.limits import HostGate
from spire_core.seed import Seed
from spire_core.send import GateSlot, Sender
from spire_core.session.trace import Trace
from spire_core.stats import CrawlStats

__all__ = ["DownloadPath", "Downloader", "download"]


class DownloadPath(Protocol):
    """How a process of a crawl sends ``Crawler.download``: on its run's request path, or on a worker
    process's (``processes=N``), which asks the crawl's process for robots.txt, the budget and a slot."""

    async def __call__(self, seed: Seed, path: str | os.PathLike[str], *, limit: int | None) -> int: ...


async def download(
    url: str | Seed,
    path: str | os.PathLike[str],
    *,
    limit: int | None = None,
    backend: Downloader | None = None,
    gate: HostGate | None = None,
) -> int:
    """Download ``url`` to ``path``; return the bytes written.

    ``limit`` caps the decoded size (``BodyLimitError`` past it). ``backend`` defaults to a new
    ``HttpBackend``, closed afterwards; a backend given is left open. Redirects are not followed.
    Inside a crawl, use ``Crawler.download``: it obeys robots.txt and counts the request too.
    """
    seed = url if isinstance(url, Seed) else Seed(url)
    own = backend is None
    if backend is None:
        from spire_core.backend.http import HttpBackend  # aiohttp: only when no backend is given

        backend = HttpBackend()
    try:
        if gate is None:
            return await backend.download(seed, path, limit=limit)
        sender = Sender(backend=backend, trace=Trace(), stats=CrawlStats())
        slot = GateSlot(gate, None, _nothing)
        try:
            return await sender.download(seed, path, slot, limit=limit)  # held until the body ended or failed
        finally:
            slot.release()
    finally:
        if own:
            await backend.aclose()


def _nothing() -> None:
    """No scheduler to wake."""
