"""download(): a capped, decoded stream to a file that is whole or absent, holding its host slot until the end."""

from __future__ import annotations

import gzip
import socket
from pathlib import Path

import anyio
import pytest

from spire import Crawler, HostLimits, Response, Router
from spire_core.backend.http import HttpBackend
from spire_core.download import download
from spire_core.errors import BodyLimitError, ConnectError, HttpStatusError, SpireError
from spire_core.limits import HostGate
from tests.sites.raw import RawServer, reset
from tests.sites.server import Site


def leftovers(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir())


def fails(url: str, path: Path, **options: object) -> SpireError:
    async def main() -> SpireError:
        try:
            with anyio.fail_after(10):
                await download(url, path, **options)  # type: ignore[arg-type]
        except SpireError as exc:
            return exc
        raise AssertionError("the download succeeded")

    return anyio.run(main)


def test_a_download_writes_the_decoded_body_and_returns_its_size(site: Site, tmp_path: Path) -> None:
    data = b"sku,price\n" * 10_000
    site.page("/catalog.csv", gzip.compress(data), content_type="text/csv", headers={"Content-Encoding": "gzip"})
    target = tmp_path / "catalog.csv"
    written = anyio.run(lambda: download(site.url("/catalog.csv"), target, limit=10 * 2**20))
    assert written == len(data)
    assert target.read_bytes() == data
    assert leftovers(tmp_path) == ["catalog.csv"]


def test_a_declared_length_over_the_limit_is_refused_before_reading(tmp_path: Path) -> None:
    def serve(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 50000000\r\n\r\n")
        server.wait(10)  # never sends the body: a refusal must not wait for it

    with RawServer(serve) as server:
        error = fails(server.url("/big"), tmp_path / "big.bin", limit=1000)
    assert isinstance(error, BodyLimitError)
    assert leftovers(tmp_path) == []


def test_a_body_over_the_limit_leaves_no_file(site: Site, tmp_path: Path) -> None:
    site.page("/big", gzip.compress(b"x" * 100_000), headers={"Content-Encoding": "gzip"})
    error = fails(site.url("/big"), tmp_path / "big.bin", limit=1000)
    assert isinstance(error, BodyLimitError)
    assert leftovers(tmp_path) == []


def test_a_reset_mid_body_leaves_no_file(tmp_path: Path) -> None:
    def serve(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + b"x" * 5000)
        reset(conn)

    with RawServer(serve) as server:
        error = fails(server.url("/cut"), tmp_path / "cut.bin")
    assert isinstance(error, ConnectError)
    assert leftovers(tmp_path) == []


def test_an_error_status_is_an_error_and_leaves_no_file(site: Site, tmp_path: Path) -> None:
    site.page("/gone", "gone", status=404)
    error = fails(site.url("/gone"), tmp_path / "gone.bin")
    assert isinstance(error, HttpStatusError)
    assert error.status == 404
    assert leftovers(tmp_path) == []


def test_a_cancelled_download_leaves_no_file_and_frees_its_slot(tmp_path: Path) -> None:
    def serve(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + b"x" * 5000)
        server.wait(10)

    gate = HostGate(HostLimits(max_in_flight=1))
    with RawServer(serve) as server:
        url = server.url("/slow")
        origin = url.rsplit("/", 1)[0]
        held: list[int] = []

        async def main() -> None:
            backend = HttpBackend()
            try:
                with anyio.fail_after(10), anyio.move_on_after(0.5):  # the body stalls: cancel it
                    await download(url, tmp_path / "slow.bin", backend=backend, gate=gate)
                held.append(gate.in_flight(origin))
            finally:
                await backend.aclose()

        anyio.run(main)
    assert held == [0]  # released when the cancelled body ended
    assert leftovers(tmp_path) == []


def test_the_host_slot_is_held_until_the_body_ends(site: Site, tmp_path: Path) -> None:
    site.page("/file", b"y" * 1000)
    gate = HostGate(HostLimits(max_in_flight=1))
    seen: list[int] = []

    class Watching(HttpBackend):
        async def download(self, *args: object, **options: object) -> int:
            seen.append(gate.in_flight(site.origin))
            written = await super().download(*args, **options)  # type: ignore[arg-type]
            seen.append(gate.in_flight(site.origin))
            return written

    async def main() -> int:
        backend = Watching()
        try:
            return await download(site.url("/file"), tmp_path / "file.bin", backend=backend, gate=gate)
        finally:
            await backend.aclose()

    assert anyio.run(main) == 1000
    assert seen == [1, 1]
    assert gate.in_flight(site.origin) == 0


def test_a_handler_downloads_through_the_crawl(site: Site, tmp_path: Path) -> None:
    site.page("/", "<a href='/report.pdf'>report</a>")
    site.page("/report.pdf", b"%PDF-1.7 report", content_type="application/pdf")
    router = Router()
    crawler = Crawler(router, host_limits=HostLimits(max_in_flight=1))

    @router.default
    async def page(response: Response) -> None:
        await crawler.download(site.url("/report.pdf"), tmp_path / "report.pdf", limit=2**20)

    stats = crawler.run([site.url("/")])
    assert stats.finished == 1
    assert (tmp_path / "report.pdf").read_bytes() == b"%PDF-1.7 report"


@pytest.mark.parametrize("limit", [0])
def test_a_zero_limit_refuses_any_body(site: Site, tmp_path: Path, limit: int) -> None:
    site.page("/one", b"1")
    assert isinstance(fails(site.url("/one"), tmp_path / "one", limit=limit), BodyLimitError)


def test_a_download_on_the_crawls_backend_leaves_the_crawls_count_whole(site: Site, tmp_path: Path) -> None:
    for n in range(4):
        site.page(f"/p{n}", "ok")
    site.page("/file", b"y" * 100)
    backend = HttpBackend()
    router = Router()

    @router.default
    async def page(response: Response) -> None:
        if response.url.endswith("/p0"):  # its own request path on the same backend, counted apart
            await download(site.url("/file"), tmp_path / "file.bin", backend=backend, gate=HostGate(HostLimits()))

    crawler = Crawler(router, backend=backend, concurrency=1, robots=False)
    stats = crawler.run([site.url(f"/p{n}") for n in range(4)])
    assert stats.requests == len(site.page_requests()) - 1 == 4  # every page; the download is not the crawl's
