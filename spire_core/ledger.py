"""The crawl's ledger: every URL's fate, where it was found, and each request made for it.

This module holds the ledger's record types and the read side (``LedgerView``) the report, the
dashboard and ``spire why`` use; the stores (memory, SQLite beside ``SqliteFrontier``, Redis beside
``RedisFrontier``) write them with the outcome they record.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence
from typing import Protocol

__all__ = [
    "Attempt",
    "Entry",
    "Fate",
    "HostRow",
    "LedgerSummary",
    "LedgerView",
    "Sample",
]


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


@dataclasses.dataclass(frozen=True, slots=True)
class Sample:
    """One example URL of a group (a skip reason, a failure kind), with the page it was found on."""

    url: str
    referrer: str | None
    detail: str | None


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
    #: Per second of the crawl since its first request: ``(second, requests, pages kept)``.
    timeline: Sequence[tuple[int, int, int]]
    requests: int
    bytes: int


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
    ) -> Sequence[Entry]:
        """Entries matching every filter given, in the order the crawl met them, a page at a time."""
        ...

    async def summary(self, *, samples: int = 5) -> LedgerSummary:
        """The totals the report shows, with up to ``samples`` example URLs per group."""
        ...
