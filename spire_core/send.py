"""``Sender``: the one request path. Every request a crawl makes goes out through ``Sender.send``.

Pages and their redirect hops (``SeedFetcher``), robots.txt reads and downloads all call it, and
nothing else calls a backend's ``fetch``. It applies, once, what every request carries: a slot of
the host limits (held by the caller until it is done), the origin's credentials and no other
origin's, the crawl's timeouts (adopted by the backend, ``Timed``), a recrawl's conditional headers
(a revisit's ``If-None-Match`` / ``If-Modified-Since``, to a backend that sends them as given),
counting (``stats.requests``, cache hits, latency), the moment each request goes out for the rate
spacing (a backend that sends later, or twice, tells it: ``session.pacing``), the pause of an
origin that answered 429 or 503, a check the caller gives (block pages and failing statuses for
pages), and one ``spire.trace`` line and ``Metrics`` record.

Above it sit the hop policies: page redirects admitted like links (``Redirects``), robots.txt's own
redirects (RFC 9309, ``RobotsCache``), and none for downloads.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Protocol

import anyio

from spire_core.admission import RequestBudget
from spire_core.backend.abilities import Downloader, Streamer, count_sends, sends_conditional
from spire_core.backend.base import Backend, request_exits
from spire_core.errors import ConfigError, FetchTimeout
from spire_core.limits import HostGate, SharedSlots
from spire_core.response import Response
from spire_core.revisit import conditions
from spire_core.seed import Seed
from spire_core.session.addresses import AddressPolicy
from spire_core.session.credentials import with_credentials
from spire_core.session.pacing import pacing
from spire_core.session.streaming import BodyStream, StreamedResponse, stream_wanted
from spire_core.session.timeouts import Timeouts, deadline, expired
from spire_core.session.trace import Trace
from spire_core.stats import CrawlStats

__all__ = ["GateSlot", "Sender", "Slot", "count_cached", "fleet_slot"]

_UNGUARDED: AbstractContextManager[None] = nullcontext()


class Slot(Protocol):
    """The host-limit slot one request holds: ``origin`` is ``None`` while it holds none."""

    origin: str | None

    async def take(self, origin: str) -> None:
        """Wait for a slot of ``origin``, then hold it."""
        ...

    def sending(self) -> None:
        """The request goes out now (rate spacing counts from here)."""
        ...

    def sent_later(self) -> None:
        """The backend's request went out only now (a browser started first): spacing counts from here."""
        ...

    async def another(self) -> None:
        """One more request of the seed goes to the origin under this slot (a page rendered after its
        HTTP fetch): wait out the origin's spacing and pause, then space from here."""
        ...

    def answered(self, status: int, headers: Mapping[str, str]) -> None:
        """The origin answered ``status`` with ``headers``: pause it when the limits say so (429, 503), for
        its ``Retry-After`` (read only then: not on every response)."""
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

    def sent_later(self) -> None:
        self.sending()

    async def another(self) -> None:
        if self.origin is not None:
            await self._gate.pace(self.origin)

    def answered(self, status: int, headers: Mapping[str, str]) -> None:
        if self.origin is not None and status in self._gate.limits.pause_on:
            self._gate.pause_for_status(self.origin, status, headers.get("retry-after"))

    def release(self) -> None:
        if self.origin is not None:
            self._gate.release(self.origin, sent=self.sent)
            self.origin = None
            self.sent = False
            self._on_release()


class fleet_slot:
    """``async with fleet_slot(shared, origin)``: hold one of the fleet's shared slots of ``origin``
    (``RedisFrontier``) for a request the frontier did not lease, such as a robots.txt read."""

    __slots__ = ("_held", "_origin", "_shared")

    def __init__(self, shared: SharedSlots | None, origin: str) -> None:
        self._shared = shared
        self._origin = origin
        self._held = False

    async def __aenter__(self) -> None:
        if self._shared is None:
            return
        while True:
            wait = await self._shared.hold(self._origin)
            if wait <= 0:
                break
            await anyio.sleep(wait)  # the store's own spacing: ask again when it says
        self._held = True

    async def __aexit__(self, *exc: object) -> None:
        if self._held and self._shared is not None:
            with anyio.CancelScope(shield=True):
                await self._shared.unhold(self._origin)


async def _dropped(response: Response | None) -> None:
    """Close the body of a streamed response the request path gives up on (a block page, a cancel)."""
    if isinstance(response, StreamedResponse):
        with anyio.CancelScope(shield=True):
            await response.stream.aclose()


def count_cached(stats: CrawlStats, response: Response) -> None:
    """Count what a wrapping backend says of a response: a cache served it (``CachingBackend``, a
    WARC replay), or an adaptive backend chose how to fetch it."""
    if response.from_cache:
        stats.cached += 1
        stats.revalidated += response.revalidated
    if response.rendering is not None:
        stats.rendering[response.rendering] += 1


@dataclasses.dataclass(slots=True, eq=False, weakref_slot=True)  # a backend holds its count of writes weakly
class Sender:
    """The crawl's one request path: its backend, credentials, timeouts, counts and request log.

    ``stats`` is where requests are counted (a worker process's own, summed by the crawl): as the
    backend writes them when it says (``CountsSends``), so a request it never sent is not counted
    and one it sent twice counts twice, else as they are handed to it.
    """

    backend: Backend
    trace: Trace
    stats: CrawlStats
    timeouts: Timeouts = dataclasses.field(default_factory=Timeouts)
    credentials: Mapping[str, Mapping[str, str]] = dataclasses.field(default_factory=dict)
    #: Which hosts may be sent to (private addresses only where the crawl started); ``None``: any.
    addresses: AddressPolicy | None = None
    #: The crawl's request budget, each request's share of it taken before ``send``: a request the
    #: backend never wrote gives its share back, one it wrote twice takes one more (``None``: none here).
    budget: RequestBudget | None = None
    #: Told of each request counted (a worker process keeps a tally the crawl reads if it is killed).
    counted: Callable[[], None] | None = None
    #: Whether the backend says when it writes a request (``CountsSends``).
    _at_wire: bool = dataclasses.field(init=False, default=False)
    #: How many times the backend wrote each request in hand, by ``id`` of the seed it was given.
    _writes: dict[int, int] = dataclasses.field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self._at_wire = count_sends(self.backend, self._wrote)

    def _wrote(self, seed: Seed) -> None:
        """The backend wrote a request for ``seed``: it went on the wire (counted if it is one of ours)."""
        key = id(seed)
        writes = self._writes.get(key)
        if writes is not None:
            self._writes[key] = writes + 1
            self._count()

    def _count(self) -> None:
        self.stats.requests += 1
        if self.counted is not None:
            self.counted()

    def _handing(self, seed: Seed) -> None:
        """The request for ``seed`` is handed to the backend: counted now, unless the backend says when it writes it."""
        if self._at_wire:
            self._writes[id(seed)] = 0
        else:
            self._count()  # every attempt, a failed connect included

    def _handed(self, seed: Seed) -> None:
        """The backend is done with the request for ``seed``: its share of the budget follows what it wrote."""
        if self._at_wire:
            writes = self._writes.pop(id(seed), 1)
            if self.budget is not None:
                self.budget.settle(writes)

    async def send(
        self, seed: Seed, slot: Slot, *, hop: int = 0, check: Callable[[Response], None] | None = None
    ) -> Response:
        """Send ``seed`` under a slot of its origin (taken now if ``slot`` holds none; the caller releases it,
        except for a ``StreamedResponse``, whose body keeps the slot until it ends and then releases it).

        ``hop`` is how many redirects led here (for the request log); ``check`` judges the response
        (it may raise, as a block page or a failing status does), before the request is logged.
        """
        started = time.perf_counter()
        response: Response | None = None
        try:
            if self.addresses is not None:
                self.addresses.check(seed)  # before a slot, a connection or a DNS lookup of the backend's
            if slot.origin is None:
                await slot.take(seed.origin)
            slot.sending()
            sent = with_credentials(seed, self.credentials)
            if seed.revisit is not None and hop == 0 and sends_conditional(self.backend):
                sent = sent.with_headers(conditions(seed.revisit))  # a recrawl's revisit: 304 if unchanged
            self._handing(sent)
            try:
                # the backend's resolver judges a host name's addresses; the backend paces its sends
                with self._guarding(seed), pacing(slot):
                    response = await self._fetch(sent)
            finally:
                self._handed(sent)
            stats = self.stats  # read after the await: a worker process hands its counts on and starts afresh
            before = response.fetched_before
            if before is not None:  # the backend sent two requests for this seed (fetched, then rendered)
                self._count()
                self.trace.request(seed, response=before, error=None, elapsed=before.elapsed, hop=hop)
            count_cached(stats, response)
            stats.latency.record(response.elapsed)
            slot.answered(response.status, response.headers)
            if check is not None:
                check(response)
        except Exception as exc:
            await _dropped(response)
            self.trace.request(seed, response=response, error=exc, elapsed=time.perf_counter() - started, hop=hop)
            raise
        except anyio.get_cancelled_exc_class():
            await _dropped(response)
            self._cancelled(seed, started, hop)
            raise
        request_id = self.trace.request(
            seed, response=response, error=None, elapsed=time.perf_counter() - started, hop=hop
        )
        if isinstance(response, StreamedResponse):
            self._holding(seed, response.stream, slot, request_id, started)
        return response

    async def _fetch(self, seed: Seed) -> Response:
        """``seed``'s response from the backend: its body left unread when the request asked for a stream
        (``streamed()``) and the backend can stream."""
        backend = self.backend
        if stream_wanted() and isinstance(backend, Streamer):
            return await backend.stream(seed)
        return await backend.fetch(seed)

    def _holding(self, seed: Seed, stream: BodyStream, slot: Slot, request_id: str | None, started: float) -> None:
        """Keep ``slot`` until ``stream``'s body ends, fails or is dropped; log its end with the request's id.

        Inside a request (a handler), the stream is closed, if it is still open, when the handler ends.
        """

        def ended(error: BaseException | None, size: int, dropped: bool) -> None:
            slot.release()
            elapsed = time.perf_counter() - started
            self.trace.body_end(request_id, seed, error=error, size=size, dropped=dropped, elapsed=elapsed)

        stream.on_end(ended)
        exits = request_exits()
        if exits is not None:
            exits.push_async_callback(stream.aclose)

    def _guarding(self, seed: Seed) -> AbstractContextManager[None]:
        return _UNGUARDED if self.addresses is None else self.addresses.guarding(seed)

    def _cancelled(self, seed: Seed, started: float, hop: int = 0) -> None:
        """Log a request cut off by an enclosing deadline (its timeout is raised out there); not a shutdown."""
        if expired():
            error = FetchTimeout("the request took longer than its deadline", url=seed.url)
            self.trace.request(seed, response=None, error=error, elapsed=time.perf_counter() - started, hop=hop)

    async def download(self, seed: Seed, path: str | os.PathLike[str], slot: Slot, *, limit: int | None) -> int:
        """Stream ``seed``'s body to ``path`` under a slot of its origin, held until the body ends."""
        backend = self.backend
        if not isinstance(backend, Downloader):
            raise ConfigError(f"{type(backend).__name__} cannot stream a download; HttpBackend can")
        started = time.perf_counter()
        try:
            with deadline(self.timeouts.seconds("request"), url=seed.url, what="request"):
                if self.addresses is not None:
                    self.addresses.check(seed)
                if slot.origin is None:
                    await slot.take(seed.origin)
                slot.sending()
                sent = with_credentials(seed, self.credentials)
                self._handing(sent)
                try:
                    with self._guarding(seed):
                        size = await backend.download(sent, path, limit=limit)
                finally:
                    self._handed(sent)
        except Exception as exc:
            self.trace.request(seed, response=None, error=exc, elapsed=time.perf_counter() - started)
            raise
        except anyio.get_cancelled_exc_class():
            self._cancelled(seed, started)
            raise
        self.trace.request(seed, response=None, error=None, elapsed=time.perf_counter() - started, size=size)
        return size
