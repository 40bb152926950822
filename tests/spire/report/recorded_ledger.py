"""``RecordedLedger``: a ``LedgerView`` over a real crawl's request log, until the ledger stores land.

It listens on ``spire.trace`` (one record a request, the crawl's own request path) and answers
the ledger's questions from those records: each URL's fate is its last request's outcome. It
knows no skips' URLs and no referrers (the request log has neither): the stores do.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from urllib.parse import urlsplit

from spire_core.ledger import Attempt, Entry, Fate, HostRow, LedgerSummary, Sample
from spire_core.session.record import RequestRecord
from spire_core.stats import LATENCY_BOUNDS_MS

__all__ = ["RecordedLedger"]


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _quantile(values: list[int], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return float(ordered[max(0, math.ceil(q * len(ordered)) - 1)])


class RecordedLedger(logging.Handler):
    """Every request of the crawls run inside ``recording()``, read back as a ledger."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.requests: list[tuple[float, RequestRecord]] = []

    def emit(self, record: logging.LogRecord) -> None:
        request = getattr(record, "request", None)
        if isinstance(request, RequestRecord):
            self.requests.append((record.created, request))

    @contextlib.contextmanager
    def recording(self) -> Iterator[RecordedLedger]:
        trace = logging.getLogger("spire.trace")
        level, propagate = trace.level, trace.propagate
        trace.addHandler(self)
        trace.setLevel(logging.INFO)
        trace.propagate = False  # the records are for this ledger, not the console
        try:
            yield self
        finally:
            trace.removeHandler(self)
            trace.setLevel(level)
            trace.propagate = propagate

    def _entries(self) -> list[Entry]:
        attempts: dict[str, list[Attempt]] = defaultdict(list)
        for at, request in list(self.requests):
            attempts[request.url].append(
                Attempt(
                    at=at,
                    url=request.url,
                    status=request.status,
                    elapsed_ms=request.elapsed_ms,
                    bytes=request.bytes,
                    proxy=request.proxy,
                    identity=request.identity,
                    outcome=request.outcome,
                )
            )
        entries = []
        for url, tries in attempts.items():
            last = tries[-1]
            kept = last.outcome == "ok"
            entries.append(
                Entry(
                    url=url,
                    unique_key=url,
                    fate=Fate.KEPT if kept else Fate.FAILED,
                    reason=None if kept else last.outcome,
                    detail=None,
                    status=last.status,
                    referrer=None,
                    depth=0,
                    tag=None,
                    attempts=tuple(tries),
                )
            )
        return entries

    async def entry(self, url: str) -> Entry | None:
        return next((entry for entry in self._entries() if entry.url == url), None)

    async def entries(
        self,
        *,
        fate: Fate | None = None,
        reason: str | None = None,
        origin: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> Sequence[Entry]:
        found = [
            entry
            for entry in self._entries()
            if (fate is None or entry.fate == fate)
            and (reason is None or entry.reason == reason)
            and (origin is None or _origin(entry.url) == origin)
        ]
        return found[offset : offset + limit]

    async def summary(self, *, samples: int = 5) -> LedgerSummary:
        requests = [request for _, request in list(self.requests)]
        entries = self._entries()
        hosts: dict[str, list[RequestRecord]] = defaultdict(list)
        for request in requests:
            hosts[_origin(request.url)].append(request)
        rows = []
        for origin, sent in hosts.items():
            mine = [entry for entry in entries if _origin(entry.url) == origin]
            elapsed = [request.elapsed_ms for request in sent]
            rows.append(
                HostRow(
                    origin=origin,
                    requests=len(sent),
                    pages=sum(entry.fate is Fate.KEPT for entry in mine),
                    statuses=dict(Counter(r.status for r in sent if r.status is not None)),
                    errors=dict(Counter(e.reason for e in mine if e.fate is Fate.FAILED and e.reason)),
                    skips={},
                    p50_ms=_quantile(elapsed, 0.5),
                    p95_ms=_quantile(elapsed, 0.95),
                    bytes=sum(request.bytes for request in sent),
                )
            )
        failures: dict[str, list[Entry]] = defaultdict(list)
        for entry in entries:
            if entry.fate is Fate.FAILED and entry.reason:
                failures[entry.reason].append(entry)
        histogram = Counter(next((b for b in LATENCY_BOUNDS_MS if r.elapsed_ms <= b), math.inf) for r in requests)
        first = min((at for at, _ in self.requests), default=0.0)
        timeline: dict[int, list[int]] = defaultdict(lambda: [0, 0])
        for at, request in list(self.requests):
            point = timeline[int(at - first)]
            point[0] += 1
            point[1] += request.outcome == "ok" and (request.status or 0) < 400
        return LedgerSummary(
            fates=dict(Counter(entry.fate for entry in entries)),
            statuses=dict(Counter(r.status for r in requests if r.status is not None)),
            skips={},
            failures={
                kind: (len(group), [Sample(e.url, e.referrer, e.detail) for e in group[:samples]])
                for kind, group in failures.items()
            },
            hosts=rows,
            latency_histogram=[(float(bound), histogram[bound]) for bound in (*LATENCY_BOUNDS_MS, math.inf)],
            timeline=[(second, timeline[second][0], timeline[second][1]) for second in sorted(timeline)],
            requests=len(requests),
            bytes=sum(request.bytes for request in requests),
        )
