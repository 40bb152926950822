"""``SeedFetcher``: one seed's fetch, hop by hop, under its host slot: what a handler's lazy fetch runs.

Each hop takes a slot of its origin (``Slot``), goes out through the backend with its origin's
credentials, pauses the origin on a 429 or 503, and, when it is a redirect, passes the crawl's
admission (``Redirects``) before the next hop. The last response is checked for a block page and
for a failing status. The crawl's own process holds its slots in the ``HostGate``; a worker process
of ``processes=N`` holds them in the crawl's gate over its pipe: the ``Slot`` is the seam.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Protocol

from spire_core.backend.base import Backend
from spire_core.blocks import BlockRules
from spire_core.errors import Blocked, HttpStatusError
from spire_core.limits import HostGate, parse_retry_after
from spire_core.response import Response
from spire_core.seed import Seed
from spire_core.session.timeouts import Timeouts, deadline
from spire_core.session.trace import Trace
from spire_core.stats import CrawlStats

__all__ = ["GateSlot", "NextHop", "SeedFetcher", "Slot", "count_cached", "with_credentials"]


class Slot(Protocol):
    """The host-limit slot one request holds: ``origin`` is ``None`` while it holds none."""

    origin: str | None

    async def take(self, origin: str) -> None:
        """Wait for a slot of ``origin``, then hold it."""
        ...

    def sending(self) -> None:
        """The request goes out now (rate spacing counts from here)."""
        ...

    def answered(self, status: int, retry_after: str | None) -> None:
        """The origin answered ``status``: pause it when the limits say so (429, 503)."""
        ...

    def release(self) -> None:
        """Give the slot back, if one is held."""
        ...


class GateSlot:
    """A slot of the crawl's own ``HostGate``; ``on_release`` wakes its scheduler."""

    @property
    def spaced(self) -> bool:
        """Whether the origin held keeps a minimum interval between requests (``sending`` matters)."""
        return self.origin is not None and self._gate.spaced(self.origin)

    __slots__ = ("_gate", "_on_release", "origin", "sent")

    def __init__(self, gate: HostGate, origin: str | None, on_release: Callable[[], None]) -> None:
        self._gate = gate
        self._on_release = on_release
        self.origin = origin
        self.sent = False

    async def take(self, origin: str) -> None:
        await self._gate.admit(origin)
        self.origin = origin

    def sending(self) -> None:
        if self.origin is not None:
            self._gate.sending(self.origin)
            self.sent = True

    def answered(self, status: int, retry_after: str | None) -> None:
        if self.origin is not None:
            self._gate.pause_for_status(self.origin, status, retry_after)

    def release(self) -> None:
        if self.origin is not None:
            self._gate.release(self.origin, sent=self.sent)
            self.origin = None
            self.sent = False
            self._on_release()


class NextHop(Protocol):
    """The crawl's rule for a redirect hop (``Redirects``): the next seed, or ``RedirectRefused``."""

    async def next_hop(self, seed: Seed, current: Seed, response: Response, hops: int) -> Seed: ...


def count_cached(stats: CrawlStats, response: Response) -> None:
    """Count what a wrapping backend says of a response: a cache served it (``CachingBackend``, a
    WARC replay), or an adaptive backend chose how to fetch it."""
    if response.from_cache:
        stats.cached += 1
        stats.revalidated += response.revalidated
    if response.rendering is not None:
        stats.rendering[response.rendering] += 1


def with_credentials(seed: Seed, credentials: Mapping[str, Mapping[str, str]]) -> Seed:
    """``seed`` with its origin's credentials added (its own headers win)."""
    found = credentials.get(seed.origin)
    if not found:
        return seed
    return dataclasses.replace(seed, headers={**found, **(seed.headers or {})}, unique_key=seed.unique_key)


@dataclasses.dataclass(slots=True)
class SeedFetcher:
    """How the crawl fetches a seed: its backend, redirect rule, block rules and status handling.

    ``stats`` is the crawl's (a worker process's own, summed by the crawl); ``max_pause`` bounds a
    ``Retry-After`` the error carries, as the host limits do.
    """

    backend: Backend
    redirects: NextHop
    block_rules: BlockRules
    stats: CrawlStats
    timeouts: Timeouts
    trace: Trace
    credentials: Mapping[str, Mapping[str, str]] = dataclasses.field(default_factory=dict)
    max_pause: float | timedelta = 3600.0
    follow_redirects: bool = True
    raise_for_status: bool = True
    count_pages: bool = True

    async def fetch(self, seed: Seed, slot: Slot, *, accepts_blocks: Callable[[], bool]) -> Response:
        """Fetch ``seed`` within the request deadline (the wait for a host slot included), then give
        the slot back; ``accepts_blocks()`` says whether the handler takes a block page as a page."""
        started = time.perf_counter()
        try:
            with deadline(self.timeouts.seconds("request"), url=seed.url, what="request"):
                response = await self._hops(seed, slot, accepts_blocks)
        except Exception as exc:
            self.trace.request(seed, response=None, error=exc, elapsed=time.perf_counter() - started)
            raise
        finally:
            slot.release()
        self.trace.request(seed, response=response, error=None, elapsed=time.perf_counter() - started)
        return response

    async def _hops(self, seed: Seed, slot: Slot, accepts_blocks: Callable[[], bool]) -> Response:
        """Follow redirects hop by hop, each admitted like a link and against its own origin."""
        current = seed
        hops: list[str] = []
        while True:
            if slot.origin is None:
                await slot.take(current.origin)
            slot.sending()
            self.stats.requests += 1  # every attempt, a failed connect included
            response = await self.backend.fetch(with_credentials(current, self.credentials))
            stats = self.stats  # read after each await: a worker process hands its counts on and starts afresh
            count_cached(stats, response)
            stats.latency.record(response.elapsed)
            retry_after = response.headers.get("retry-after")
            slot.answered(response.status, retry_after)
            if self.follow_redirects and response.is_redirect:
                hops.append(current.url)
                current = await self.redirects.next_hop(seed, current, response, len(hops))
                if current.origin != slot.origin:
                    slot.release()
                continue
            response.seed = seed
            response.redirects = (*hops, *response.redirects)
            signal = self.block_rules.check(response)
            if signal is not None:
                if not accepts_blocks():
                    raise Blocked(signal.vendor, signal.kind, url=response.url, response=response)
                return response  # the handler asked for block pages: it gets this one, whatever its status
            if response.status >= 400 and self.raise_for_status:
                error = HttpStatusError(
                    response.status,
                    url=response.url,
                    retry_after=parse_retry_after(retry_after, max_wait=self.max_pause),
                )
                error.response = response
                raise error
            if response.status < 400 and self.count_pages:
                stats.pages += 1
            return response
