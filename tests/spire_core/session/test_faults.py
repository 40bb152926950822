"""A crawl against faulty servers: each fault ends in its documented category, and no seed is lost."""

from __future__ import annotations

import gzip
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anyio
import pytest
import trustme

from spire import Crawler, HostLimits, Response, Router, SkipReason
from spire_core.crawler import Crawler as CoreCrawler
from spire_core.frontier.memory import MemoryFrontier
from spire_core.session import Timeouts
from spire_core.session.retry import RetryPolicy
from spire_core.stats import CrawlStats
from tests.sites.raw import RawServer, reset
from tests.sites.server import Site

FAST = HostLimits(max_in_flight=4)
QUICK_RETRIES = RetryPolicy.transient(attempts=2, backoff=0.01)


def noop_router() -> Router:
    router = Router()

    @router.default
    async def page(response: Response) -> None:
        pass

    return router


def crawl(urls: list[str], **options: object) -> tuple[CrawlStats, int]:
    """Crawl ``urls``; return the stats and what is still pending in the frontier afterwards."""
    frontier = MemoryFrontier().dedup()
    options.setdefault("retry", QUICK_RETRIES)
    options.setdefault("host_limits", FAST)
    options.setdefault("robots", False)  # the faults are the pages' own, not robots.txt's
    crawler: CoreCrawler = Crawler(noop_router(), frontier=frontier, **options)  # type: ignore[arg-type]

    async def main() -> tuple[CrawlStats, int]:
        with anyio.fail_after(30):  # a hang fails the test instead of holding the suite
            stats = await crawler.arun(urls)
        return stats, await frontier.pending()

    return anyio.run(main)


def only_failure(stats: CrawlStats) -> str:
    assert stats.failed == 1, stats
    assert stats.finished == 0, stats
    (category,) = (name for name, count in stats.errors_by_category.items() if count)
    return category


def test_a_reset_mid_body_is_retried_then_fails_as_connect() -> None:
    def serve(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
        reset(conn)

    with RawServer(serve) as server:
        stats, pending = crawl([server.url("/reset")])
        assert server.connections == 2  # retried once: a reset is transient
    assert only_failure(stats) == "connect"
    assert pending == 0


def test_a_body_the_server_closes_short_is_tried_again_and_fails_as_incomplete_body() -> None:
    def serve(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\nonly part")
        conn.shutdown(socket.SHUT_WR)  # an orderly close, 41 bytes short: no reset
        conn.close()

    with RawServer(serve) as server:
        stats, pending = crawl([server.url("/short")])
        assert server.connections == 2  # a cut-off body is transient: tried again (two attempts here), as a reset is
    assert only_failure(stats) == "incomplete_body"
    assert pending == 0


def test_malformed_chunked_encoding_fails_as_protocol_without_a_retry() -> None:
    def serve(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nxyz\r\nhello\r\n0\r\n\r\n")
        server.wait(1)

    with RawServer(serve) as server:
        stats, pending = crawl([server.url("/chunks")])
        assert server.connections == 1
    assert only_failure(stats) == "protocol"
    assert pending == 0


def test_a_stalled_body_fails_as_timeout() -> None:
    def serve(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\nonly part")
        server.wait(10)

    with RawServer(serve) as server:
        stats, pending = crawl([server.url("/stall")], timeouts=Timeouts(read=20, body=0.3, request=20))
    assert only_failure(stats) == "timeout"
    assert pending == 0


def test_a_server_that_never_answers_fails_as_timeout() -> None:
    with RawServer(lambda conn: server.wait(10) and None) as server:
        stats, pending = crawl([server.url("/silent")], timeouts=Timeouts(read=0.3, request=20))
    assert only_failure(stats) == "timeout"
    assert pending == 0


def test_a_gzip_bomb_fails_as_body_limit(site: Site) -> None:
    bomb = gzip.compress(b"\0" * (20 * 1024 * 1024))
    site.page("/bomb", bomb, headers={"Content-Encoding": "gzip"})
    from spire_core.backend.http import HttpBackend

    stats, pending = crawl([site.url("/bomb")], backend=HttpBackend(max_body_size=1024 * 1024))
    assert only_failure(stats) == "body_limit"
    assert pending == 0


def test_a_redirect_loop_ends_as_a_counted_skip(site: Site) -> None:
    site.page("/a", "", status=302, headers={"Location": "/b"})
    site.page("/b", "", status=302, headers={"Location": "/a"})
    stats, pending = crawl([site.url("/a")])
    assert stats.skipped(SkipReason.DUPLICATE) == 1  # each hop is admitted like a link: /a again is seen
    assert (stats.failed, stats.finished) == (0, 0)
    assert pending == 0


def test_a_redirect_chain_past_max_redirects_ends_as_a_counted_skip(site: Site) -> None:
    for n in range(10):
        site.page(f"/r{n}", "", status=302, headers={"Location": f"/r{n + 1}"})
    stats, pending = crawl([site.url("/r0")], max_redirects=3)
    assert stats.skipped(SkipReason.REDIRECTS) == 1
    assert sum(site.hits().values()) == 4  # the first request and three redirects, then it stops
    assert pending == 0


@pytest.fixture
def untrusted_tls_site() -> Iterator[str]:
    """An HTTPS server whose certificate comes from a CA the client does not trust."""
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")

    class Hello(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"hi")

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(context)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    server.daemon_threads = True

    def handle_error(request: object, client_address: object) -> None:
        pass  # the client refusing the certificate is the point

    server.handle_error = handle_error  # type: ignore[method-assign]
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_an_untrusted_certificate_fails_as_tls(untrusted_tls_site: str) -> None:
    stats, pending = crawl([untrusted_tls_site])
    assert only_failure(stats) == "tls"
    assert pending == 0


def test_the_request_deadline_covers_the_wait_for_a_host_slot(site: Site, other_site: Site) -> None:
    """A redirect to a host whose rate allows one request per 4 s waits for it, and times out instead."""
    other_site.page("/x", "x")
    other_site.page("/y", "y")
    site.page("/hop", "", status=302, headers={"Location": other_site.url("/y")})
    slow_host = other_site.origin.removeprefix("http://")
    limits = HostLimits(max_in_flight=4, hosts={slow_host: HostLimits(per_second=0.25)})
    started = time.monotonic()
    stats, pending = crawl(
        [other_site.url("/x"), site.url("/hop")],
        host_limits=limits,
        timeouts=Timeouts(request=0.5),
        retry=RetryPolicy.transient(attempts=1),
    )
    took = time.monotonic() - started
    assert (stats.finished, stats.failed) == (1, 1)
    assert stats.errors_by_category["timeout"] == 1
    assert other_site.hits()["/x"] == 1
    assert other_site.hits()["/y"] == 0  # the hop timed out waiting for its slot
    assert took < 3.0  # not the 4 s the host's rate would have made it wait
    assert pending == 0
