"""``CrawlStats``: counters for a whole crawl, and a latency histogram."""

from __future__ import annotations

import bisect
import dataclasses
import functools
import time
from collections import Counter
from typing import Any

__all__ = ["CrawlStats", "LatencyHistogram"]

#: Upper bounds of the latency buckets, in milliseconds; a last bucket counts everything slower.
LATENCY_BOUNDS_MS = (10, 50, 100, 250, 500, 1000, 2500, 5000, 10000)


@dataclasses.dataclass(slots=True)
class LatencyHistogram:
    """Counts of requests by elapsed time; a request falls in the first bucket whose bound covers it."""

    counts: list[int] = dataclasses.field(default_factory=lambda: [0] * (len(LATENCY_BOUNDS_MS) + 1))

    def record(self, elapsed: float) -> None:
        self.counts[bisect.bisect_left(LATENCY_BOUNDS_MS, elapsed * 1000)] += 1

    def buckets(self) -> list[tuple[int | None, int]]:
        """``(bound_ms, count)`` pairs; the last bound is ``None`` (slower than 10 s)."""
        bounds: list[int | None] = [*LATENCY_BOUNDS_MS, None]
        return list(zip(bounds, self.counts, strict=True))

    def quantile(self, q: float) -> int | None:
        """The bucket bound (ms) under which a fraction ``q`` of requests fell."""
        total = sum(self.counts)
        if not total:
            return None
        running = 0
        for bound, count in self.buckets():
            running += count
            if running >= q * total:
                return bound
        return None


@dataclasses.dataclass(slots=True)
class CrawlStats:
    """What a crawl did. ``str(stats)`` is one ``key=value`` line.

    - ``requests``: HTTP requests sent, as the servers saw them: each redirect hop and retry included;
      with a backend that says when it writes a request (``HttpBackend``), one refused before it left
      (a banned proxy pool, a failed connect) is not counted, and one its client library sent again
      counts twice. Other backends' requests count as they are handed over.
    - ``pages``: responses with a status below 400 that reached a handler.
    - ``finished``: seeds handled successfully. ``failed``: seeds that failed for good.
    - ``retries``: seeds put back to be tried again.
    - ``skipped``: candidates or seeds dropped, counted by reason: each link met, so a link on every
      page counts once a page (a ledger's skipped URLs count each URL once).
    - ``cached``: responses a cache served (counted in ``requests`` too); ``revalidated``: those of
      them the site confirmed with a 304.
    """

    requests: int = 0
    pages: int = 0
    finished: int = 0
    failed: int = 0
    retries: int = 0
    items: int = 0
    cached: int = 0
    revalidated: int = 0
    #: An adaptive backend's decisions, by kind (``http``, ``rendered``, ``probed``, ``browser-only``...).
    rendering: Counter[str] = dataclasses.field(default_factory=Counter)
    skipped_by_reason: Counter[str] = dataclasses.field(default_factory=Counter)
    errors_by_category: Counter[str] = dataclasses.field(default_factory=Counter)
    latency: LatencyHistogram = dataclasses.field(default_factory=LatencyHistogram)
    started_at: float = dataclasses.field(default_factory=time.monotonic)
    ended_at: float | None = None

    def skip(self, reason: str, count: int = 1) -> None:
        self.skipped_by_reason[reason] += count

    def add(self, other: CrawlStats) -> None:
        """Add the counts of ``other`` (a worker process's, ``processes=N``) to these; times stay."""
        for name in _counters():
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.rendering.update(other.rendering)
        self.skipped_by_reason.update(other.skipped_by_reason)
        self.errors_by_category.update(other.errors_by_category)
        for index, count in enumerate(other.latency.counts):
            self.latency.counts[index] += count

    def skipped(self, reason: str | None = None) -> int:
        """Skips for ``reason``, or all of them."""
        if reason is None:
            return sum(self.skipped_by_reason.values())
        return self.skipped_by_reason[reason]

    @property
    def errors(self) -> int:
        """Seeds that failed for good (the same as ``failed``)."""
        return self.failed

    @property
    def elapsed(self) -> float:
        return (self.ended_at or time.monotonic()) - self.started_at

    @property
    def rate(self) -> float:
        """Requests per second over the crawl so far."""
        elapsed = self.elapsed
        return self.requests / elapsed if elapsed > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        """The counters as plain data (JSON-ready): what ``str(stats)`` shows, nested by kind.

        {"requests": 12, "pages": 10, ..., "skipped": {"duplicate": 3}, "errors": {"status": 2},
         "elapsed": 1.5, "rate": 8.0, "latency_ms": {"p50": 10, "p95": 50}}
        """
        return {
            "requests": self.requests,
            "pages": self.pages,
            "finished": self.finished,
            "failed": self.failed,
            "retries": self.retries,
            "items": self.items,
            "skipped": dict(sorted(self.skipped_by_reason.items())),
            "errors": dict(sorted(self.errors_by_category.items())),
            "rendering": dict(sorted(self.rendering.items())),
            "elapsed": round(self.elapsed, 3),
            "rate": round(self.rate, 3),
            "latency_ms": {"p50": self.latency.quantile(0.5), "p95": self.latency.quantile(0.95)},
        }

    def __str__(self) -> str:
        fields = [
            f"requests={self.requests}",
            f"pages={self.pages}",
            f"finished={self.finished}",
            f"failed={self.failed}",
            f"retries={self.retries}",
            f"items={self.items}",
            *([f"cached={self.cached}", f"revalidated={self.revalidated}"] if self.cached else []),
            f"skipped={self.skipped()}",
        ]
        fields += [f"skipped.{reason}={n}" for reason, n in sorted(self.skipped_by_reason.items())]
        fields += [f"errors.{category}={n}" for category, n in sorted(self.errors_by_category.items())]
        fields += [f"rendering.{decision}={n}" for decision, n in sorted(self.rendering.items())]
        fields += [f"elapsed={self.elapsed:.2f}s", f"rate={self.rate:.1f}/s", self._median_bound()]
        return " ".join(fields)

    def _median_bound(self) -> str:
        """Half the requests took at most this: a histogram bucket's bound, so shown as one (``p50_ms<=10``)."""
        if not sum(self.latency.counts):
            return "p50_ms=-"
        bound = self.latency.quantile(0.5)
        return f"p50_ms<={bound}" if bound is not None else f"p50_ms>{LATENCY_BOUNDS_MS[-1]}"


@functools.cache
def _counters() -> tuple[str, ...]:
    """The plain counters of ``CrawlStats`` (its ``int`` fields), summed by ``add``."""
    return tuple(field.name for field in dataclasses.fields(CrawlStats) if field.type == "int")
