"""What crosses between the crawl's process and its worker processes (``processes=N``).

``WorkerSpec`` is what a worker inherits when it is forked: the crawl's worker (its router), how it
fetches, its policy and retry policy. ``Handled`` is what a worker sends back for each seed.

Every message is a small typed record, dispatched by its class (``match message: case Work(...)``):

- the crawl's process sends ``Work`` (a seed to handle), ``Cancel`` and ``Stop``;
- a worker sends ``Hello``, then per seed ``Sending`` and ``Answered`` (what its host slot must
  hear), ``Release``, and ``Finished`` (the outcome with the counts since its last message) or
  ``Mistake`` (a ``ConfigError``: the crawl stops); ``Counts`` now and then while seeds are in flight;
- a worker asks (``Channel.call``) with ``Take``, ``Pace``, ``AdmitHop``, ``AdmitMove``, ``AdmitDownload``
  and ``Claim``.

A download a handler sends (``Crawler.download``) is admitted by the crawl's process (``AdmitDownload``),
and goes out under a slot of its own, with an id as a lease's: ``Take``, ``Sending`` and ``Release`` it.

They are ``NamedTuple``s pickled as their class and their fields (``pickled_by_fields``): a frozen
slotted dataclass would pickle several times slower, and a plain tuple only a little faster.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from pydantic import BaseModel

from spire_core.admission import CrawlPolicy
from spire_core.context import Context, Worker
from spire_core.dataset.base import Dataset
from spire_core.download import DownloadPath
from spire_core.errors import SpireError
from spire_core.ledger import LedgerNote
from spire_core.outcome import Outcome
from spire_core.processes.channel import pickled_by_fields
from spire_core.response import Response
from spire_core.revisit import PageNote
from spire_core.robots import Robots
from spire_core.seed import Seed
from spire_core.seed_fetcher import SeedFetcher
from spire_core.session.retry import RetryPolicy
from spire_core.skips import LeftOut
from spire_core.stats import CrawlStats

__all__ = [
    "AdmitDownload",
    "AdmitHop",
    "AdmitMove",
    "Answered",
    "Cancel",
    "Claim",
    "Counts",
    "CountsDelta",
    "Finished",
    "Handled",
    "Hello",
    "Mistake",
    "Pace",
    "Release",
    "Sending",
    "Stop",
    "Take",
    "Work",
    "WorkerSpec",
]


@dataclasses.dataclass(frozen=True, slots=True)
class WorkerSpec:
    """What a worker process needs to handle seeds as the crawl's process would (it inherits it)."""

    worker: Worker
    fetcher: SeedFetcher
    policy: CrawlPolicy
    retry: RetryPolicy
    #: The crawl's datasets, for validation only: items are stored by the crawl's process.
    datasets: Mapping[type[BaseModel], Dataset[Any]]
    #: The statuses that pause an origin (``HostLimits.pause_on``): the only answers the gate hears of.
    pause_on: frozenset[int]
    #: Where the crawl's ``Crawler.download`` goes (``Run.route_downloads``): the worker points it at its
    #: own request path, or its handlers' downloads would go out on the copy of the crawl's it inherited.
    route_downloads: Callable[[DownloadPath], None]
    #: Whether the crawl keeps page states (``recrawl=``): revisits are checked, pages noted.
    pages: bool = False


class Handled(NamedTuple):
    """What a worker process sends back for a seed: the outcome and its staged writes."""

    outcome: Outcome | LeftOut
    links: list[tuple[list[Seed], bool]]
    items: list[tuple[type[BaseModel], list[Any]]]
    #: The response, when the seed failed or is retried (the failed hook may read it).
    response: Response | None
    #: Links the handler found that were not queued because it failed.
    dropped_links: int = 0
    #: What the worker noted for the crawl's ledger since its last outcome (``DeferredLedger``).
    ledger: list[LedgerNote] = []  # noqa: RUF012 - a NamedTuple default, never mutated
    #: What handling found of the page, on a crawl that keeps page states (``recrawl=``).
    page: PageNote | None = None

    async def fetched(self, ctx: Context) -> Response:
        """The response the worker fetched, for a hook that asks for it here."""
        if self.response is None:
            raise SpireError("the page was handled in a worker process and is not kept", url=ctx.seed.url)
        return self.response


# -- the crawl's process to a worker --------------------------------------------------------------


class Work(NamedTuple):
    """Handle ``seed`` (lease ``lease_id``), holding a slot of its origin when ``admitted``."""

    lease_id: int
    seed: Seed
    admitted: bool
    #: Whether the origin keeps a minimum interval between requests (the worker says when it sends).
    spaced: bool
    #: The origin's robots.txt rules, when this worker has not had them yet.
    rules: tuple[str, Robots] | None
    #: The unique keys other workers staged since this worker's last ``Work``: seen from now on, so
    #: that this worker does not send them back as links (the frontier would drop them).
    seen: list[str]


class Cancel(NamedTuple):
    """The crawl let go of lease ``lease_id`` (shutting down): stop handling it."""

    lease_id: int


class Stop(NamedTuple):
    """Cancel everything, send the last counts and exit."""


# -- a worker to the crawl's process --------------------------------------------------------------


class Hello(NamedTuple):
    """A worker connected; its pid."""

    pid: int


class Sending(NamedTuple):
    """Lease ``lease_id``'s request goes out now (an origin with a rate spacing only)."""

    lease_id: int


class Answered(NamedTuple):
    """Lease ``lease_id``'s request was answered with a status that pauses its origin."""

    lease_id: int
    status: int
    retry_after: str | None


class Release(NamedTuple):
    """Lease ``lease_id`` gives its host slot back before it finishes (a redirect to another origin)."""

    lease_id: int


class Finished(NamedTuple):
    """Lease ``lease_id`` was handled (its slot given back): what it staged, and the worker's counts
    since its last message, so a worker that dies later loses none of them."""

    lease_id: int
    handled: Handled
    counts: CountsDelta


class Mistake(NamedTuple):
    """Handling lease ``lease_id`` showed a mistake in the crawl's code (a ``ConfigError``)."""

    lease_id: int
    error: BaseException


class Counts(NamedTuple):
    """The worker's counts since its last message (sent while seeds take long, and when it stops)."""

    counts: CountsDelta


#: The plain counters of ``CrawlStats`` (its ``int`` fields), in the order ``CountsDelta`` holds them.
_SCALARS = tuple(field.name for field in dataclasses.fields(CrawlStats) if field.type == "int")
_REQUESTS, _PAGES = _SCALARS.index("requests"), _SCALARS.index("pages")
_scalars_of = operator.attrgetter(*_SCALARS)


class CountsDelta(NamedTuple):
    """A worker's counts since its last message, as plain values: it goes with every seed finished,
    and a ``CrawlStats`` (its ``Counter``s, its histogram) pickles several times slower."""

    scalars: tuple[int, ...]
    skipped: dict[str, int]
    errors: dict[str, int]
    rendering: dict[str, int]
    latency: list[int]

    @classmethod
    def of(cls, stats: CrawlStats) -> CountsDelta:
        return cls(
            _scalars_of(stats),
            dict(stats.skipped_by_reason),
            dict(stats.errors_by_category),
            dict(stats.rendering),
            stats.latency.counts,
        )

    @property
    def requests(self) -> int:
        return self.scalars[_REQUESTS]

    @property
    def pages(self) -> int:
        return self.scalars[_PAGES]

    def add_to(self, stats: CrawlStats) -> None:
        """Add these counts to the crawl's ``stats`` (as ``CrawlStats.add`` would, without making one)."""
        for name, value in zip(_SCALARS, self.scalars, strict=True):
            if value:
                setattr(stats, name, getattr(stats, name) + value)
        if self.skipped:
            stats.skipped_by_reason.update(self.skipped)
        if self.errors:
            stats.errors_by_category.update(self.errors)
        if self.rendering:
            stats.rendering.update(self.rendering)
        latency = stats.latency.counts
        for index, count in enumerate(self.latency):
            if count:
                latency[index] += count


# -- what a worker asks -----------------------------------------------------------------------------


class Take(NamedTuple):
    """A slot of ``origin`` for lease ``lease_id`` (a redirect to another origin, or a download's slot);
    the answer: is it spaced."""

    lease_id: int
    origin: str


class AdmitHop(NamedTuple):
    """The admission of a redirect hop; the answer: the seed to send next (or ``RedirectRefused``)."""

    seed: Seed
    current: Seed
    response: Response
    chain: tuple[str, ...]


class AdmitMove(NamedTuple):
    """Whether a browser tab holding ``seed``'s page, now at ``page``, may go on to ``target``; the
    answer: ``True`` or ``False`` (a refusal counted by the crawl)."""

    seed: Seed
    page: str
    target: str


class Pace(NamedTuple):
    """Lease ``lease_id`` sends one more request to its origin (a render after its page's fetch); the
    answer, once the origin's spacing lets it go: none."""

    lease_id: int


class AdmitDownload(NamedTuple):
    """A download of ``seed`` a handler asked for (robots.txt, the budget); the answer: the id its slot
    goes by (``RobotsDisallowed``, or a ``FetchError`` when the budget is spent). Its ``Release`` ends it."""

    seed: Seed


class Claim(NamedTuple):
    """Claim ``keys`` in the crawl's seen set; the answer: which were new."""

    keys: Sequence[str]


pickled_by_fields(Work, Cancel, Stop, Hello, Sending, Answered, Release, Finished, Mistake, Counts)
pickled_by_fields(Take, AdmitHop, AdmitMove, AdmitDownload, Pace, Claim, Handled, CountsDelta)
