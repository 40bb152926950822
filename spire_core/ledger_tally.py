"""The ledger's totals, added up in Python: what the memory and Redis stores' ``summary`` returns.

The SQLite store computes the same ``LedgerSummary`` in SQL (``spire_core.ledger_sqlite``).
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Sequence

from spire_core.ledger import LATENCY_BOUNDS, Attempt, Fate, HostRow, LedgerSummary, Sample, timeline_step

__all__ = ["Tally", "percentile"]


def percentile(ordered: Sequence[float], fraction: float) -> float | None:
    """The nearest-rank percentile of sorted values (what the SQL store computes too)."""
    if not ordered:
        return None
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


@dataclasses.dataclass(slots=True)
class _Host:
    requests: int = 0
    pages: int = 0
    bytes: int = 0
    statuses: Counter[int] = dataclasses.field(default_factory=Counter)
    errors: Counter[str] = dataclasses.field(default_factory=Counter)
    skips: Counter[str] = dataclasses.field(default_factory=Counter)
    latencies: list[float] = dataclasses.field(default_factory=list)
    buckets: Counter[int] = dataclasses.field(default_factory=Counter)


class Tally:
    """The summary's totals, added up one URL and one request at a time (the memory stores' ``summary``)."""

    def __init__(self, samples: int) -> None:
        self.samples = samples
        self.fates: Counter[Fate] = Counter()
        self.statuses: Counter[int] = Counter()
        self.skips: dict[str, tuple[int, list[Sample]]] = {}
        self.failures: dict[str, tuple[int, list[Sample]]] = {}
        self.hosts: dict[str, _Host] = {}
        self.buckets: Counter[int] = Counter()
        self.seconds: dict[int, list[int]] = {}
        self.first: float | None = None
        self.requests = 0
        self.bytes = 0
        #: Pages by what a recrawl found of them.
        self.changes: Counter[str] = Counter()

    def _host(self, origin: str) -> _Host:
        host = self.hosts.get(origin)
        if host is None:
            host = self.hosts[origin] = _Host()
        return host

    def url(
        self,
        url: str,
        origin: str,
        fate: Fate,
        reason: str | None,
        referrer: str | None,
        detail: str | None,
        change: str | None = None,
    ) -> None:
        self.fates[fate] += 1
        if fate is Fate.KEPT:
            self._host(origin).pages += 1
        elif fate is Fate.SKIPPED or fate is Fate.FAILED:
            group = self.skips if fate is Fate.SKIPPED else self.failures
            name = reason or "unknown"
            count, found = group.get(name, (0, []))
            if len(found) < self.samples:
                found.append(Sample(url, referrer, detail, change))
            group[name] = (count + 1, found)
            host = self._host(origin)
            (host.skips if fate is Fate.SKIPPED else host.errors)[name] += 1

    def request(self, origin: str, attempt: Attempt, *, keep: bool = True) -> None:
        host = self._host(origin)
        host.requests += 1
        host.bytes += attempt.bytes
        self.requests += 1
        self.bytes += attempt.bytes
        if attempt.status is not None:
            host.statuses[attempt.status] += 1
            self.statuses[attempt.status] += 1
        bucket = _bucket(attempt.elapsed_ms)
        self.buckets[bucket] += 1
        if keep:
            host.latencies.append(attempt.elapsed_ms)
        else:
            host.buckets[bucket] += 1
        self.first = attempt.at if self.first is None else min(self.first, attempt.at)
        self._second(attempt.at)[0] += 1

    def kept_at(self, at: float) -> None:
        self._second(at)[1] += 1

    def _second(self, at: float) -> list[int]:
        found = self.seconds.get(math.floor(at))
        if found is None:
            found = self.seconds[math.floor(at)] = [0, 0]
        return found

    def summary(self) -> LedgerSummary:
        start = min(self.seconds) if self.seconds else 0
        step = timeline_step(max(self.seconds) - start if self.seconds else 0)
        bins: dict[int, list[int]] = {}
        for second, (requests, kept) in self.seconds.items():
            counts = bins.setdefault((second - start) // step, [0, 0])
            counts[0] += requests
            counts[1] += kept
        hosts = [
            HostRow(
                origin=origin,
                requests=host.requests,
                pages=host.pages,
                statuses=dict(host.statuses),
                errors=dict(host.errors),
                skips=dict(host.skips),
                p50_ms=_pct(host, 0.5),
                p95_ms=_pct(host, 0.95),
                bytes=host.bytes,
            )
            for origin, host in sorted(self.hosts.items(), key=lambda item: (-item[1].requests, item[0]))
        ]
        return LedgerSummary(
            fates={fate: count for fate, count in self.fates.items() if count},
            statuses=dict(sorted(self.statuses.items())),
            skips={name: (count, tuple(found)) for name, (count, found) in self.skips.items()},
            failures={name: (count, tuple(found)) for name, (count, found) in self.failures.items()},
            hosts=hosts,
            latency_histogram=[(bound, self.buckets[index]) for index, bound in enumerate(LATENCY_BOUNDS)],
            timeline=[(index * step, requests, kept) for index, (requests, kept) in sorted(bins.items())],
            timeline_step=step,
            requests=self.requests,
            bytes=self.bytes,
            changes=dict(self.changes),
        )


def _pct(host: _Host, fraction: float) -> float | None:
    if host.latencies:
        return percentile(sorted(host.latencies), fraction)
    total = sum(host.buckets.values())
    if not total:
        return None
    rank, seen = math.ceil(fraction * total), 0
    for index in sorted(host.buckets):
        seen += host.buckets[index]
        if seen >= rank:
            return LATENCY_BOUNDS[index]
    return None


def _bucket(elapsed_ms: float) -> int:
    for index, bound in enumerate(LATENCY_BOUNDS):
        if elapsed_ms <= bound:
            return index
    return len(LATENCY_BOUNDS) - 1
