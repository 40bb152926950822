"""The crawl's ledger: every URL's fate, where it was found, and each request made for it.

This module holds the ledger's record types and the read side (``LedgerView``) the report, the
dashboard and ``spire why`` use; the stores (memory, SQLite beside ``SqliteFrontier``, Redis beside
``RedisFrontier``) write them with the outcome they record.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import anyio

from spire_core.errors import SpireError
from spire_core.outcome import Fail, Outcome, Retry, SkipTag
from spire_core.session.redact import redact_text

if TYPE_CHECKING:
    from spire_core.frontier.base import PushResult
    from spire_core.revisit import PageNote
    from spire_core.seed import Seed
    from spire_core.session.record import RequestRecord
    from spire_core.skips import SkipReason

__all__ = [
    "DeferredLedger",
    "LedgerNote",
    "LATENCY_BOUNDS",
    "TIMELINE_BINS",
    "Attempt",
    "Entry",
    "Fate",
    "HostRow",
    "LedgerMode",
    "LedgerSink",
    "LedgerSummary",
    "LedgerView",
    "Sample",
    "replay",
    "entry_json",
    "every_entry",
    "export_jsonl",
    "fate_line",
    "settled_fate",
    "timeline_step",
]

#: ``"full"``: every URL with its attempts; ``"light"``: counts and a few samples per reason and host.
LedgerMode = Literal["full", "light"]

#: The latency histogram's upper bounds in ms (the last bucket, ``inf``, holds the rest).
LATENCY_BOUNDS: tuple[float, ...] = (10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, float("inf"))


class Fate(enum.StrEnum):
    """What became of a URL the crawl met."""

    #: Fetched and handled; ``Entry.status`` is its final status.
    KEPT = "kept"
    #: Left out, before queueing (strategy, pattern, extension...) or after (robots, duplicate redirect...);
    #: ``Entry.reason`` is the ``SkipReason``.
    SKIPPED = "skipped"
    #: Given up after its attempts; ``Entry.reason`` is the error category.
    FAILED = "failed"
    #: Queued (or being retried) when the crawl stopped.
    QUEUED = "queued"
    #: Not a page: a file the crawl read for what it lists (robots.txt's sitemaps, a sitemap);
    #: ``Entry.reason`` says which (``robots.txt``, ``sitemap``), ``Entry.status`` what it answered.
    READ = "read"


@dataclasses.dataclass(frozen=True, slots=True)
class Attempt:
    """One request made for a URL (a redirect hop's request is an attempt of the seed that led to it)."""

    #: When it was sent, seconds since the epoch.
    at: float
    url: str
    status: int | None
    elapsed_ms: int
    bytes: int
    #: The proxy it went through, credentials redacted; ``None`` direct.
    proxy: str | None
    identity: str | None
    #: ``ok`` or an error category, as on the request's trace line.
    outcome: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "url", redact_text(self.url))


@dataclasses.dataclass(frozen=True, slots=True)
class Entry:
    """A URL's line in the ledger."""

    url: str
    unique_key: str
    fate: Fate
    #: The ``SkipReason`` value for a skip, the error category for a failure, else ``None``.
    reason: str | None
    #: More about the reason: the robots.txt rule that matched, the error message.
    detail: str | None
    #: The final status of a kept or failed page.
    status: int | None
    #: The page it was first found on; ``None`` for a start seed.
    referrer: str | None
    depth: int
    tag: str | None
    attempts: Sequence[Attempt] = ()
    #: How many times the seed was tried (a retry is one more; its redirect hops are not).
    tries: int = 0
    #: On a crawl that keeps page states (``recrawl=``): what this crawl found of the page
    #: (``new``, ``changed``, ``unchanged``, ``gone``, ``failed``: ``spire_core.recrawl.Change``), and how.
    change: str | None = None
    how: str | None = None
    #: The page's fingerprint now, and as the crawl before kept it.
    hash: str | None = None
    previous_hash: str | None = None
    #: When the page last changed, as far as the crawls know (seconds since the epoch).
    changed_at: float | None = None

    def __post_init__(self) -> None:
        # What the ledger shows is read by people: a URL's own user:password is not (the queue keeps it).
        for name in ("url", "unique_key", "referrer"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, redact_text(value))


@dataclasses.dataclass(frozen=True, slots=True)
class Sample:
    """One example URL of a group (a skip reason, a failure kind), with the page it was found on."""

    url: str
    referrer: str | None
    detail: str | None
    #: On a recrawl, what it found of the page (``Entry.change``): a page an earlier crawl kept has no
    #: referrer in this one.
    change: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "url", redact_text(self.url))
        if self.referrer is not None:
            object.__setattr__(self, "referrer", redact_text(self.referrer))


@dataclasses.dataclass(frozen=True, slots=True)
class HostRow:
    """One origin's totals, as the report's per-host table shows them."""

    origin: str
    requests: int
    #: URLs of this origin kept.
    pages: int
    #: Responses by status code.
    statuses: dict[int, int]
    #: Failed URLs by error category.
    errors: dict[str, int]
    #: Skipped URLs by reason.
    skips: dict[str, int]
    p50_ms: float | None
    p95_ms: float | None
    bytes: int


@dataclasses.dataclass(frozen=True, slots=True)
class LedgerSummary:
    """What the report shows, computed by the store (in SQL where it is SQLite)."""

    #: URLs by fate.
    fates: dict[Fate, int]
    #: Responses by status code, every request counted.
    statuses: dict[int, int]
    #: Skipped URLs by reason, with up to N samples each.
    skips: dict[str, tuple[int, Sequence[Sample]]]
    #: Failed URLs by error category, with up to N samples each.
    failures: dict[str, tuple[int, Sequence[Sample]]]
    hosts: Sequence[HostRow]
    #: Requests by latency bucket: ``(upper bound in ms, count)``, the last bound ``inf``.
    latency_histogram: Sequence[tuple[float, int]]
    #: Per ``timeline_step`` seconds of the crawl since its first request: ``(second the bin starts,
    #: requests, pages kept)``; at most ``TIMELINE_BINS`` bins, however long the crawl (or its clock) ran.
    timeline: Sequence[tuple[int, int, int]]
    requests: int
    bytes: int
    #: On a recrawl: pages by change (``new``, ``changed``, ``unchanged``, ``gone``, ``failed``).
    changes: dict[str, int] = dataclasses.field(default_factory=dict)
    #: The seconds each point of ``timeline`` covers.
    timeline_step: int = 1


#: The most points a summary's timeline has: a crawl of a week, or a clock that once said 1970, is
#: binned by its range, not drawn a point a second.
TIMELINE_BINS = 600


def timeline_step(span: float) -> int:
    """The seconds per timeline bin for a crawl whose requests span ``span`` seconds: 1 up to
    ``TIMELINE_BINS`` seconds, more after, so there are never more than ``TIMELINE_BINS`` bins."""
    return max(1, math.ceil((span + 1) / TIMELINE_BINS))


class LedgerView(Protocol):
    """The read side of a ledger: what ``spire why``, the report and the dashboard ask."""

    async def entry(self, url: str) -> Entry | None:
        """The URL's entry (by its unique key), or ``None`` when the crawl never met it."""
        ...

    async def entries(
        self,
        *,
        fate: Fate | None = None,
        reason: str | None = None,
        origin: str | None = None,
        limit: int = 100,
        offset: int = 0,
        attempts: bool = False,
        changed: bool = False,
        change: str | None = None,
    ) -> Sequence[Entry]:
        """Entries matching every filter given, in the order the crawl met them, a page at a time;
        each with its attempts when ``attempts`` (else none, which is cheaper); only those with a
        ``change`` when ``changed`` (the change feed of a crawl that keeps page states), only those
        whose ``change`` is ``change`` when given (``"gone"``: the pages a recrawl found gone)."""
        ...

    async def summary(self, *, samples: int = 5) -> LedgerSummary:
        """The totals the report shows, with up to ``samples`` example URLs per group."""
        ...


@runtime_checkable
class LedgerSink(Protocol):
    """The write side of a ledger, as the engine and the frontier store call it.

    The engine tells it what it decides (``found`` before a push, ``refused``/``rejected`` link
    candidates, ``left_out`` before a seed's report, ``attempt`` per request); the store it lives in
    calls ``pushed`` and ``settled`` inside the write that queues or settles the seed, so a crash
    leaves ledger and frontier agreeing. None of these block: a store writes what they stage with
    its next commit.
    """

    def found(self, seeds: Sequence[Seed], referrer: str | None) -> None:
        """``seeds`` are about to be pushed, found on ``referrer`` (``None``: start seeds)."""
        ...

    def pushed(self, added: Sequence[Seed]) -> None:
        """The store queued ``added`` (called by the store, in its push)."""
        ...

    def rejected(self, result: PushResult) -> None:
        """A push found ``result.duplicates`` and ``result.rejected``: each a skip unless met before."""
        ...

    def refused(self, skips: Iterable[tuple[str, SkipReason]], *, referrer: str | None, depth: int) -> None:
        """Link candidates refused before queueing, each ``(url, reason)``, found on ``referrer``."""
        ...

    def left_out(self, seed: Seed, reason: SkipReason, detail: str | None = None) -> None:
        """``seed`` is settled as a skip (robots.txt, a refused redirect) by its next report; a seed
        settled already (a page kept, then dropped for its canonical page) is a skip from now on."""
        ...

    def read(self, seed: Seed, kind: str, detail: str | None = None) -> None:
        """``seed`` is no page but a file read for what it lists (``kind``: ``robots.txt``, ``sitemap``),
        settled as such by its next report unless it fails."""
        ...

    def attempt(self, seed: Seed, record: RequestRecord, at: float) -> None:
        """One request made for ``seed`` (a hop's seed carries the key of the seed it serves)."""
        ...

    def page(self, seed: Seed, note: PageNote) -> None:
        """What handling ``seed`` found of its page (a crawl that keeps page states), settled by its next report."""
        ...

    def settled(self, seed: Seed, outcome: Outcome) -> None:
        """The store settled ``seed`` with ``outcome`` (called by the store, in its report)."""
        ...


def settled_fate(
    outcome: Outcome,
    tag: str | None,
    left_out: tuple[str, str | None] | None,
    read: tuple[str, str | None] | None = None,
) -> tuple[Fate, str | None, str | None]:
    """``(fate, reason, detail)`` of a seed reported with ``outcome``; ``left_out`` is a skip noted for
    it, ``read`` the kind of file it was read as (and more about it)."""
    if left_out is not None:
        return Fate.SKIPPED, left_out[0], left_out[1]
    if isinstance(outcome, Retry):
        return Fate.QUEUED, None, None
    if isinstance(outcome, Fail):
        error = outcome.error
        category = error.category if isinstance(error, SpireError) else "handler"
        return Fate.FAILED, category, f"{type(error).__name__}: {error}"
    if isinstance(outcome, SkipTag) and outcome.tag == tag:
        return Fate.SKIPPED, "tag", None
    if read is not None:
        return Fate.READ, read[0], read[1]
    return Fate.KEPT, None, None


def fate_line(entry: Entry) -> str:
    """The fate as ``spire why`` says it first: ``kept (200)``, ``skipped: robots (Disallow: /x)``,
    ``failed: timeout after 3 attempts``, ``read: sitemap (404, no sitemap there)``, ``queued``."""
    if entry.fate is Fate.KEPT:
        return "kept" if entry.status is None else f"kept ({entry.status})"
    if entry.fate is Fate.READ:
        said = ", ".join(str(part) for part in (entry.status, entry.detail) if part is not None)
        return f"read: {entry.reason}" + (f" ({said})" if said else "")
    if entry.fate is Fate.SKIPPED:
        return f"skipped: {entry.reason}" + (f" ({entry.detail})" if entry.detail else "")
    if entry.fate is Fate.FAILED:
        tries = entry.tries or len(entry.attempts)
        status = f" ({entry.status})" if entry.status is not None and entry.reason == "status" else ""
        return f"failed: {entry.reason}{status} after {tries} attempt{'s' if tries != 1 else ''}"
    return "queued"


def entry_json(entry: Entry) -> dict[str, Any]:
    """``entry`` as a plain dict, for JSON Lines."""
    found = dataclasses.asdict(entry)
    found["fate"] = entry.fate.value
    return found


async def export_jsonl(view: LedgerView, path: str, *, batch: int = 1000) -> int:
    """Write every entry of ``view`` to ``path`` as JSON Lines, in the order the crawl met them; return how many."""
    count = 0
    async with await anyio.open_file(path, "w", encoding="utf-8") as out:
        async for entry in every_entry(view, batch=batch, attempts=True):
            await out.write(json.dumps(entry_json(entry), separators=(",", ":")) + "\n")
            count += 1
    return count


async def every_entry(
    view: LedgerView, *, batch: int = 1000, attempts: bool = False, changed: bool = False
) -> AsyncIterator[Entry]:
    """Every entry of ``view`` (only those with a change when ``changed``), in the order the crawl met
    them, read ``batch`` at a time."""
    offset = 0
    while True:
        page = await view.entries(limit=batch, offset=offset, attempts=attempts, changed=changed)
        for entry in page:
            yield entry
        if len(page) < batch:
            return
        offset += len(page)


#: A ledger call a worker process made, as ``(method, args)``: what ``DeferredLedger`` keeps.
LedgerNote = tuple[str, tuple[Any, ...]]
#: The calls a worker process's handlers and requests make (the crawl's process makes the others).
_WORKER_CALLS = frozenset({"refused", "left_out", "read", "attempt"})


class DeferredLedger:
    """The ledger of a worker process (``processes=N``): it keeps each call, and the crawl's process
    makes it on its own ledger when the notes arrive with a seed's outcome (``replay``).

    Notes go out with every outcome the worker sends, so what a handler or a request noted for a seed
    reaches the crawl's ledger no later than that seed's report.
    """

    def __init__(self) -> None:
        self._notes: list[LedgerNote] = []

    def take(self) -> list[LedgerNote]:
        """The notes kept since the last ``take``."""
        notes, self._notes = self._notes, []
        return notes

    def found(self, seeds: Sequence[Seed], referrer: str | None) -> None:
        """Never called in a worker: the crawl's process pushes links."""

    def pushed(self, added: Sequence[Seed]) -> None:
        """Never called in a worker: the crawl's process pushes links."""

    def rejected(self, result: PushResult) -> None:
        """Never called in a worker: the crawl's process pushes links."""

    def settled(self, seed: Seed, outcome: Outcome) -> None:
        """Never called in a worker: the crawl's process reports outcomes."""

    def page(self, seed: Seed, note: PageNote) -> None:
        """Never called in a worker: a page's note crosses with its outcome, and the crawl's process makes it."""

    def refused(self, skips: Iterable[tuple[str, SkipReason]], *, referrer: str | None, depth: int) -> None:
        self._notes.append(("refused", (list(skips), referrer, depth)))

    def left_out(self, seed: Seed, reason: SkipReason, detail: str | None = None) -> None:
        self._notes.append(("left_out", (seed, reason, detail)))

    def read(self, seed: Seed, kind: str, detail: str | None = None) -> None:
        self._notes.append(("read", (seed, kind, detail)))

    def attempt(self, seed: Seed, record: RequestRecord, at: float) -> None:
        self._notes.append(("attempt", (seed, record, at)))


def replay(notes: Iterable[LedgerNote], ledger: LedgerSink) -> None:
    """Make on ``ledger`` the calls a worker process's ``DeferredLedger`` kept."""
    for method, args in notes:
        if method not in _WORKER_CALLS:
            continue  # not a call a worker makes: nothing to replay
        if method == "refused":
            skips, referrer, depth = args
            ledger.refused(skips, referrer=referrer, depth=depth)
        elif method == "left_out":
            ledger.left_out(*args)
        elif method == "read":
            ledger.read(*args)
        else:
            ledger.attempt(*args)
