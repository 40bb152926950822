"""Streamed bodies (``BodyStream``): the host slot held until the body ends, fails or is dropped; the
body cap and deadline while streaming; the body's end logged with its request's id; ``copy_decoded_to``."""

from __future__ import annotations

import gzip
import json
import logging
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import pytest

from spire import BodyStream, Crawler, HostLimits, HttpBackend, RetryPolicy, Router, Timeouts
from spire_core.backend.base import FunctionBackend
from spire_core.response import Response
from spire_core.seed import Seed
from spire_core.session.trace import JsonFormatter
from tests.sites.raw import RawServer
from tests.sites.server import Site

CHUNK = 64 * 1024


def crawl(router: Router, url: str, **options: object) -> Crawler:
    options.setdefault("robots", False)
    options.setdefault("retry", RetryPolicy.transient(attempts=1))
    crawler = Crawler(router, **options)  # type: ignore[arg-type]
    crawler.run([url])
    return crawler


def in_flight(crawler: Crawler) -> int:
    return sum(host.in_flight for host in crawler.host_stats())


def test_a_streamed_body_holds_its_slot_until_it_ends_and_no_longer() -> None:
    more = threading.Event()

    def serve(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (3 * CHUNK) + b"a" * CHUNK)
        more.wait(10)  # the rest only once the handler has looked at the slot mid-body
        conn.sendall(b"b" * (2 * CHUNK))

    router = Router()
    seen: dict[str, int] = {}

    @router.default
    async def handler(body: BodyStream) -> None:
        first = await body.read()
        seen["mid_body"] = in_flight(crawler)
        seen["busy"] = crawler.pool_stats().busy  # type: ignore[union-attr]
        more.set()
        rest = b"".join([chunk async for chunk in body])
        seen["size"] = len(first) + len(rest)
        seen["after_end"] = in_flight(crawler)
        seen["busy_after"] = crawler.pool_stats().busy  # type: ignore[union-attr]

    with RawServer(serve) as server:
        crawler = Crawler(router, robots=False, host_limits=HostLimits(max_in_flight=1))
        stats = crawler.run([server.url("/big")])
    assert stats.failed == 0
    assert seen == {"mid_body": 1, "busy": 1, "size": 3 * CHUNK, "after_end": 0, "busy_after": 0}


def test_a_dropped_stream_gives_its_slot_back_and_its_end_is_logged_with_the_request_id(
    site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    site.page("/file", b"x" * (4 * CHUNK), content_type="application/octet-stream")
    router = Router()
    kept: list[BodyStream] = []

    @router.default
    async def handler(body: BodyStream) -> None:
        kept.append(body)  # never read: dropped when the handler returns

    with caplog.at_level(logging.INFO, logger="spire.trace"):
        crawler = crawl(router, site.url("/file"))
    assert kept[0].ended
    assert in_flight(crawler) == 0
    lines = [record.getMessage() for record in caplog.records if record.name == "spire.trace"]
    request = next(line for line in lines if line.startswith("request ") and "/file" in line)
    body = next(line for line in lines if line.startswith("body "))
    request_id = re.search(r"id=(\S+)", request).group(1)  # type: ignore[union-attr]
    assert f"body id={request_id} " in body
    assert body.endswith("outcome=dropped")
    assert lines.index(body) > lines.index(request)  # a separate event, after the request's line


def test_a_body_read_to_its_end_logs_ok_with_its_size(site: Site, caplog: pytest.LogCaptureFixture) -> None:
    site.page("/file", b"x" * 100_000, content_type="application/octet-stream")
    router = Router()

    @router.default
    async def handler(body: BodyStream) -> None:
        async for _ in body:
            pass

    with caplog.at_level(logging.INFO, logger="spire.trace"):
        crawl(router, site.url("/file"))
    record = next(record for record in caplog.records if record.getMessage().startswith("body "))
    body = record.getMessage()
    assert "bytes=100000" in body
    assert body.endswith("outcome=ok")
    fields = json.loads(JsonFormatter().format(record))
    assert (fields["event"], fields["bytes"], fields["outcome"]) == ("body_end", 100_000, "ok")


def test_the_body_cap_holds_while_streaming_a_compressed_body(site: Site) -> None:
    site.page("/bomb", gzip.compress(b"x" * 1_000_000), headers={"Content-Encoding": "gzip"})
    router = Router()
    read: list[int] = []

    @router.default
    async def handler(body: BodyStream) -> None:
        try:
            async for chunk in body:
                read.append(len(chunk))
        finally:
            read.append(-1)

    crawler = crawl(router, site.url("/bomb"), backend=HttpBackend(max_body_size=100_000))
    assert crawler.stats.errors_by_category["body_limit"] == 1
    assert sum(size for size in read if size > 0) <= 100_000 + CHUNK  # stopped at the piece that passed the cap
    assert in_flight(crawler) == 0


@pytest.mark.parametrize("http2", [False, True], ids=["aiohttp", "httpx"])
def test_the_body_deadline_runs_while_streaming(http2: bool) -> None:
    def serve(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
        while not server.wait(0.05):  # a byte now and then: never a read timeout, always a slow body
            try:
                conn.sendall(b"x")
            except OSError:
                return

    router = Router()

    @router.default
    async def handler(body: BodyStream) -> None:
        async for _ in body:
            pass

    with RawServer(serve) as server:
        started = time.monotonic()
        crawler = crawl(
            router,
            server.url("/slow"),
            backend=HttpBackend(http2=http2),
            timeouts=Timeouts(read=5, body=0.5, request=30),
        )
        took = time.monotonic() - started
    assert crawler.stats.errors_by_category["timeout"] == 1
    assert took < 20  # the body deadline, not the request's or the server's end
    assert in_flight(crawler) == 0


@pytest.mark.parametrize("http2", [False, True], ids=["aiohttp", "httpx"])
def test_the_body_deadline_holds_while_the_handler_reads_slower_than_the_server_sends(http2: bool) -> None:
    def serve(conn: socket.socket) -> None:
        size = 1500 * CHUNK  # under the body cap; read at the handler's pace, 15 s at least
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size)
        for _ in range(size // CHUNK):  # as fast as the socket takes it: every read finds a chunk waiting
            try:
                conn.sendall(b"x" * CHUNK)
            except OSError:
                return

    router = Router()
    reads: list[int] = []

    @router.default
    async def handler(body: BodyStream) -> None:
        started = time.monotonic()
        while time.monotonic() - started < 10:  # a bound for the test, far past the body's deadline
            reads.append(len(await body.read()))
            await anyio.sleep(0.01)  # the handler's own work between reads: slower than the server

    with RawServer(serve) as server:
        crawler = crawl(
            router, server.url("/flood"), backend=HttpBackend(http2=http2), timeouts=Timeouts(body=0.5, request=60)
        )
    assert crawler.stats.errors_by_category["timeout"] == 1  # before, on aiohttp: read for 10 s, and done
    assert crawler.stats.failed == 1
    assert in_flight(crawler) == 0


@pytest.mark.parametrize("http2", [False, True], ids=["aiohttp", "httpx"])
def test_copy_decoded_to_writes_the_decoded_body_and_leaves_no_partial_file(
    site: Site, tmp_path: Path, http2: bool
) -> None:
    data = b"sku,price\n" * 50_000
    site.page("/catalog.csv", gzip.compress(data), content_type="text/csv", headers={"Content-Encoding": "gzip"})
    router = Router()
    written: list[int] = []

    @router.default
    async def handler(body: BodyStream) -> None:
        written.append(await body.copy_decoded_to(tmp_path / "catalog.csv"))

    crawler = crawl(router, site.url("/catalog.csv"), backend=HttpBackend(http2=http2))
    assert written == [len(data)]
    assert in_flight(crawler) == 0
    assert (tmp_path / "catalog.csv").read_bytes() == data
    assert sorted(path.name for path in tmp_path.iterdir()) == ["catalog.csv"]


def test_a_declared_length_over_the_cap_is_refused_before_the_body_streams() -> None:
    def serve(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 50000000\r\n\r\n")
        server.wait(10)  # never sends the body: the refusal must not wait for it

    router = Router()
    handled: list[str] = []

    @router.default
    async def handler(body: BodyStream) -> None:
        handled.append(body.url)

    with RawServer(serve) as server:
        crawler = crawl(router, server.url("/big"), backend=HttpBackend(max_body_size=1000))
    assert handled == []
    assert crawler.stats.errors_by_category["body_limit"] == 1
    assert in_flight(crawler) == 0


def test_a_failed_copy_removes_its_temporary_file(site: Site, tmp_path: Path) -> None:
    site.page("/big", gzip.compress(b"x" * 1_000_000), headers={"Content-Encoding": "gzip"})
    router = Router()

    @router.default
    async def handler(body: BodyStream) -> None:
        await body.copy_decoded_to(tmp_path / "big.bin")

    crawler = crawl(router, site.url("/big"), backend=HttpBackend(max_body_size=200_000))
    assert crawler.stats.errors_by_category["body_limit"] == 1
    assert list(tmp_path.iterdir()) == []


def test_a_backend_that_cannot_stream_serves_the_stream_from_memory() -> None:
    async def fake(seed: Seed) -> Response:
        return Response(url=seed.url, status=200, body=b"y" * 200_000)

    router = Router()
    chunks: list[int] = []

    @router.default
    async def handler(body: BodyStream) -> None:
        chunks.extend([len(chunk) async for chunk in body])

    crawl(router, "http://127.0.0.1:9/", backend=FunctionBackend(fake))
    assert sum(chunks) == 200_000
    assert max(chunks) <= CHUNK


def test_an_error_status_is_read_whole_and_fails_the_seed_as_any_page(site: Site) -> None:
    site.page("/gone", b"not here", status=404)
    router = Router()
    handled: list[str] = []

    @router.default
    async def handler(body: BodyStream) -> None:
        handled.append(body.url)

    crawler = crawl(router, site.url("/gone"))
    assert handled == []
    assert crawler.stats.errors_by_category["status"] == 1
    assert in_flight(crawler) == 0


_PEAK_SCRIPT = """
import socket, sys
from pathlib import Path

from spire import BodyStream, Crawler, HttpBackend, Router
from tests.sites.raw import RawServer

SIZE = 200 * 2**20
BLOCK = b"z" * 2**16


def peak_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise SystemExit("no VmHWM")


def serve(conn: socket.socket) -> None:
    size = SIZE if conn_count[0] else 2**20  # the warm-up crawl gets 1 MiB, the measured one 200 MiB
    conn_count[0] += 1
    conn.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: %d\\r\\nConnection: close\\r\\n\\r\\n" % size)
    for _ in range(size // len(BLOCK)):
        conn.sendall(BLOCK)


conn_count = [0]
router = Router()
sizes = []


@router.default
async def save(body: BodyStream) -> None:
    sizes.append(await body.copy_decoded_to(sys.argv[1]))


with RawServer(serve) as server:
    backend = HttpBackend(max_body_size=300 * 2**20)
    Crawler(router, robots=False, backend=backend).run([server.url("/warm")])
    before = peak_kib()
    Crawler(router, robots=False, backend=HttpBackend(max_body_size=300 * 2**20)).run([server.url("/big")])
    after = peak_kib()
print(sizes[-1], before, after)
"""


def test_a_200_mb_body_copied_to_a_file_keeps_the_peak_memory_flat(tmp_path: Path) -> None:
    target = tmp_path / "big.bin"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[3])}
    done = subprocess.run(
        [sys.executable, "-c", _PEAK_SCRIPT, str(target)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=Path(__file__).parents[3],
    )
    assert done.returncode == 0, done.stderr
    size, before, after = (int(part) for part in done.stdout.split())
    assert size == 200 * 2**20 == target.stat().st_size
    assert after - before < 20 * 1024, f"peak RSS grew {(after - before) / 1024:.1f} MiB"
