"""``Metrics``: counters of what a crawl's requests did, read as a snapshot or scraped by Prometheus.

    metrics = Metrics()
    Crawler(router, metrics=metrics).run(seeds)
    print(metrics.snapshot())     # requests=120 ok=117 retries=3 bytes=5812333 error.timeout=3 latency_p50_ms=100 ...

Requests by outcome (``ok`` or an error category), retries (requests after the first try),
decoded bytes, and a latency histogram with bounds 10, 50, 100, 250, 500, 1000, 2500, 5000 and
10000 ms plus an overflow bucket. ``register(registry)`` exposes them to ``prometheus_client``
(the ``prometheus`` extra).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterator
from typing import Any

from spire_core.errors import ConfigError
from spire_core.session.record import RequestRecord
from spire_core.stats import LATENCY_BOUNDS_MS, LatencyHistogram

__all__ = ["LATENCY_BOUNDS_MS", "Metrics", "MetricsSnapshot"]


@dataclasses.dataclass(frozen=True, slots=True)
class MetricsSnapshot:
    """The counters at one moment; ``str()`` is one ``key=value`` line."""

    requests: int
    outcomes: dict[str, int]
    retries: int
    bytes: int
    #: ``(bound_ms, count)`` pairs; the last bound is ``None``: slower than 10 s.
    latency: tuple[tuple[int | None, int], ...]
    #: The elapsed time of every request added up, in milliseconds.
    elapsed_ms: int = 0

    def errors(self, category: str | None = None) -> int:
        """Failed requests, of one error ``category`` or of every one."""
        if category is not None:
            return self.outcomes.get(category, 0)
        return sum(count for outcome, count in self.outcomes.items() if outcome != "ok")

    def __str__(self) -> str:
        fields = [
            f"requests={self.requests}",
            f"ok={self.outcomes.get('ok', 0)}",
            f"errors={self.errors()}",
            f"retries={self.retries}",
            f"bytes={self.bytes}",
        ]
        fields += [f"error.{name}={count}" for name, count in sorted(self.outcomes.items()) if name != "ok"]
        fields += [f"latency_le_{bound if bound is not None else 'inf'}ms={count}" for bound, count in self.latency]
        return " ".join(fields)


class Metrics:
    """Counts every request a crawl makes; give it to ``Crawler(metrics=...)`` and keep it to read."""

    def __init__(self) -> None:
        self._outcomes: Counter[str] = Counter()
        self._retries = 0
        self._bytes = 0
        self._latency = LatencyHistogram()
        self._elapsed_ms = 0

    def record(self, request: RequestRecord) -> None:
        """Count one request."""
        self._outcomes[request.outcome] += 1
        if request.attempts > 1:
            self._retries += 1
        self._bytes += request.bytes
        self._latency.record(request.elapsed_ms / 1000)
        self._elapsed_ms += request.elapsed_ms

    def snapshot(self) -> MetricsSnapshot:
        """The counters now."""
        return MetricsSnapshot(
            requests=sum(self._outcomes.values()),
            outcomes=dict(self._outcomes),
            retries=self._retries,
            bytes=self._bytes,
            latency=tuple(self._latency.buckets()),
            elapsed_ms=self._elapsed_ms,
        )

    def register(self, registry: Any = None) -> None:
        """Expose these counters to ``prometheus_client`` (its default registry unless one is given).

        Needs the ``prometheus`` extra; serve them with ``prometheus_client.start_http_server``.
        """
        try:  # here, not at the top: prometheus_client is an optional extra
            import prometheus_client.core as prometheus
            from prometheus_client import REGISTRY
        except ImportError:
            raise ConfigError(
                "Metrics.register needs prometheus_client: pip install 'spire-crawl[prometheus]'"
            ) from None
        (registry if registry is not None else REGISTRY).register(_Collector(self, prometheus))


class _Collector:
    """A prometheus_client collector reading a ``Metrics`` on each scrape."""

    def __init__(self, metrics: Metrics, prometheus: Any) -> None:
        self._metrics = metrics
        self._prometheus = prometheus

    def collect(self) -> Iterator[Any]:
        snapshot = self._metrics.snapshot()
        p = self._prometheus
        requests = p.CounterMetricFamily("spire_requests", "Requests by outcome", labels=["outcome"])
        for outcome, count in sorted(snapshot.outcomes.items()):
            requests.add_metric([outcome], count)
        yield requests
        yield p.CounterMetricFamily("spire_retries", "Requests after the first try", value=snapshot.retries)
        yield p.CounterMetricFamily("spire_body_bytes", "Decoded body bytes", value=snapshot.bytes)
        running = 0
        buckets = []
        for bound, count in snapshot.latency:
            running += count
            buckets.append(("+Inf" if bound is None else str(bound / 1000), running))
        histogram = p.HistogramMetricFamily(
            "spire_request_seconds", "Request latency", buckets=buckets, sum_value=snapshot.elapsed_ms / 1000
        )
        yield histogram
