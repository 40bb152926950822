"""The request log (logger spire.trace), Metrics, host stats and the Prometheus exposition, on real crawls."""

from __future__ import annotations

import json
import logging
import threading
import time

import anyio
import anyio.to_thread
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from spire import Crawler, HostLimits, Response, Router, Seed
from spire_core.backend.http import HttpBackend, PoolStats
from spire_core.session.metrics import Metrics
from spire_core.session.redact import redact, redact_text
from spire_core.session.retry import RetryPolicy
from spire_core.session.trace import JsonFormatter
from tests.sites.server import Site

LIMITS = HostLimits(max_in_flight=2, pause_on=frozenset({503}), default_pause=0.01)


def router() -> Router:
    routes = Router()

    @routes.default
    async def page(response: Response) -> None:
        pass

    return routes


def small_site(site: Site) -> list[str]:
    site.page("/a", "a" * 100)
    site.page("/b", "b" * 50)
    site.page("/missing", "gone", status=404)
    site.sequence("/flaky", [(503, {}, b"busy"), (200, {}, b"ok")])
    return [site.url(path) for path in ("/a", "/b", "/missing", "/flaky")]


def crawl(urls: list[str], **options: object) -> Crawler:
    crawler = Crawler(router(), host_limits=LIMITS, retry=RetryPolicy.transient(backoff=0.01), **options)  # type: ignore[arg-type]
    crawler.run(urls)
    return crawler


def test_metrics_count_requests_by_outcome_retries_bytes_and_latency(site: Site) -> None:
    metrics = Metrics()
    crawl(small_site(site), metrics=metrics)
    snapshot = metrics.snapshot()
    assert snapshot.requests == 6  # robots.txt is a request too
    assert snapshot.outcomes == {"ok": 4, "status": 2}
    assert snapshot.errors("status") == 2
    assert snapshot.retries == 1
    assert snapshot.bytes == 169  # every body read: 100 + 50 + "gone" + "busy" + "ok" + robots.txt's "not found"
    assert [bound for bound, _ in snapshot.latency] == [10, 50, 100, 250, 500, 1000, 2500, 5000, 10000, None]
    assert sum(count for _, count in snapshot.latency) == 6
    line = str(snapshot)
    assert "\n" not in line
    assert line.startswith("requests=6 ok=4 errors=2 retries=1 bytes=169 error.status=2")
    assert all("=" in field for field in line.split())


def test_the_request_log_writes_one_line_per_request(site: Site, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="spire.trace")
    crawl(small_site(site))
    lines = [record.getMessage() for record in caplog.records if record.name == "spire.trace"]
    assert len(lines) == 6
    (robots,) = [line for line in lines if "/robots.txt" in line]
    assert "status=404" in robots
    assert "outcome=ok" in robots
    flaky = [line for line in lines if "/flaky" in line]
    assert "status=503" in flaky[0]
    assert "attempts=1" in flaky[0]
    assert "outcome=status" in flaky[0]
    assert "status=200" in flaky[1]
    assert "attempts=2" in flaky[1]
    assert "outcome=ok" in flaky[1]
    for field in (
        "id=",
        "method=GET",
        "redirects=0",
        "version=HTTP/1.1",
        "elapsed_ms=",
        "tag=",
        "proxy=-",
        "identity=",
    ):
        assert field in flaky[1]


def test_the_request_log_is_quiet_unless_enabled(site: Site, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    crawler = crawl(small_site(site), ledger=False)  # the ledger takes each request's record too
    assert not [record for record in caplog.records if record.name == "spire.trace"]
    assert not crawler.trace.enabled


def test_the_json_formatter_writes_one_object_per_request(site: Site, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="spire.trace")
    site.page("/", "home")
    crawl([site.url("/")])
    robots, record = [record for record in caplog.records if record.name == "spire.trace"]
    assert json.loads(JsonFormatter().format(robots))["url"] == site.url("/robots.txt")
    fields = json.loads(JsonFormatter().format(record))
    assert fields["url"] == site.url("/")
    assert (fields["status"], fields["outcome"], fields["attempts"]) == (200, "ok", 1)


def test_proxy_credentials_are_redacted() -> None:
    assert redact("http://user:secret@proxy.example:8080") == "http://user:***@proxy.example:8080"
    assert redact("http://proxy.example:8080") == "http://proxy.example:8080"
    message = redact_text("cannot connect via http://me:hunter2@10.0.0.1:3128/ (refused)")
    assert "hunter2" not in message


def test_host_stats_show_each_origin_and_its_pause(site: Site) -> None:
    site.page("/busy", "busy", status=503, headers={"Retry-After": "30"})
    crawler = Crawler(router(), host_limits=HostLimits(pause_on=frozenset({503})), retry=RetryPolicy.never())
    crawler.run([site.url("/busy")])
    (stats,) = crawler.host_stats()
    assert stats.origin == site.origin
    assert (stats.in_flight, stats.waiting) == (0, 0)
    assert stats.paused_until - time.monotonic() > 20


def test_metrics_are_exposed_to_prometheus(site: Site) -> None:
    metrics = Metrics()
    crawl(small_site(site), metrics=metrics)
    registry = CollectorRegistry()
    metrics.register(registry)
    text = generate_latest(registry).decode()
    assert 'spire_requests_total{outcome="ok"} 4.0' in text
    assert "spire_retries_total 1.0" in text
    assert 'spire_request_seconds_bucket{le="+Inf"} 6.0' in text


def test_pool_stats_count_the_requests_holding_a_connection(site: Site) -> None:
    arrived, release = threading.Event(), threading.Event()

    def slow(request: object) -> tuple[int, dict[str, str], bytes]:
        arrived.set()
        release.wait(5)  # the server holds the request until the test has looked
        return 200, {}, b"slow"

    site.route("/slow", slow)  # type: ignore[arg-type]
    backend = HttpBackend()
    during: list[int] = []

    async def main() -> None:
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(backend.fetch, Seed(site.url("/slow")))
                assert await anyio.to_thread.run_sync(arrived.wait, 5)
                during.append(backend.pool_stats().busy)
                release.set()
        finally:
            await backend.aclose()

    anyio.run(main)
    assert during == [1]
    assert backend.pool_stats() == PoolStats(busy=0, max_connections=256)
    assert Crawler(router(), backend=backend).pool_stats() == backend.pool_stats()
