"""HttpBackend against servers that misbehave: each fault ends in its documented error category.

Both HTTP paths are tried: aiohttp (the default) and httpx (HTTP/2 or a given transport).
"""

from __future__ import annotations

import functools
import gzip
import socket
import ssl
import subprocess
import sys
import textwrap
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import brotli
import httpx
import pytest
import trustme

from spire_core.backend.http import HttpBackend
from spire_core.errors import (
    BodyLimitError,
    ConnectError,
    DecodeError,
    FetchTimeout,
    IncompleteBody,
    ProtocolError,
    SpireError,
)
from spire_core.seed import Seed
from spire_core.session import Timeouts
from tests.sites.raw import RawServer, read_head, reset

Make = Callable[..., HttpBackend]


def _aiohttp(**options: Any) -> HttpBackend:
    return HttpBackend(**options)


def _httpx(**options: Any) -> HttpBackend:
    return HttpBackend(transport=httpx.AsyncHTTPTransport(), **options)


@pytest.fixture(params=[_aiohttp, _httpx], ids=["aiohttp", "httpx"])
def make(request: pytest.FixtureRequest) -> Make:
    factory: Make = request.param
    return factory


def _fetch_error(backend: HttpBackend, url: str) -> SpireError:
    async def main() -> SpireError:
        try:
            with anyio.fail_after(20):  # a hang is a failure of the test, not a stuck suite
                await backend.fetch(Seed(url))
        except SpireError as exc:
            return exc
        finally:
            await backend.aclose()
        raise AssertionError("the fetch succeeded")

    return anyio.run(main)


def _head(*lines: str) -> bytes:
    return ("HTTP/1.1 200 OK\r\n" + "".join(f"{line}\r\n" for line in lines) + "\r\n").encode()


def test_a_reset_in_the_middle_of_a_chunked_body_is_a_connect_error(make: Make) -> None:
    def serve(conn: socket.socket) -> None:
        conn.sendall(_head("Transfer-Encoding: chunked") + b"10\r\n0123456789abcdef\r\n")
        time.sleep(0.05)
        reset(conn)

    with RawServer(serve) as server:
        error = _fetch_error(make(), server.url("/chunked"))
    assert isinstance(error, ConnectError), repr(error)
    assert error.category == "connect"


def test_a_reset_in_the_middle_of_a_sized_body_is_a_connect_error_too(make: Make) -> None:
    def serve(conn: socket.socket) -> None:
        conn.sendall(_head("Content-Length: 1000") + b"x" * 100)
        time.sleep(0.05)
        reset(conn)

    with RawServer(serve) as server:
        error = _fetch_error(make(), server.url("/sized"))
    assert error.category == "connect", repr(error)


def _close(conn: socket.socket) -> None:
    """End the connection in order (FIN), as a server does that thinks it sent everything."""
    conn.shutdown(socket.SHUT_WR)
    conn.close()


@pytest.mark.parametrize(
    ("framing", "sent", "shown"),
    [
        ("Content-Length: 1000", b"x" * 100, "received 100"),
        ("Transfer-Encoding: chunked", b"10\r\n0123456789abcdef\r\n", ""),
        ("Transfer-Encoding: chunked", b"10\r\n01234", ""),
    ],
    ids=["sized", "chunked-between-chunks", "chunked-inside-a-chunk"],
)
def test_a_body_the_server_closes_before_its_end_is_an_incomplete_body(
    make: Make, framing: str, sent: bytes, shown: str
) -> None:
    def serve(conn: socket.socket) -> None:
        conn.sendall(_head(framing) + sent)
        _close(conn)

    with RawServer(serve) as server:
        error = _fetch_error(make(), server.url("/short"))
    assert isinstance(error, IncompleteBody), repr(error)  # a ProtocolError, not a ConnectError
    assert not isinstance(error, ConnectError)
    assert error.category == "incomplete_body"
    assert "closed before the end of the body" in str(error)
    assert shown in str(error)
    assert error.url == server.url("/short")


def test_malformed_chunked_encoding_is_a_protocol_error(make: Make) -> None:
    def serve(conn: socket.socket) -> None:
        conn.sendall(_head("Transfer-Encoding: chunked") + b"zz\r\nnot a chunk size\r\n0\r\n\r\n")
        time.sleep(0.2)

    with RawServer(serve) as server:
        error = _fetch_error(make(), server.url("/bad-chunks"))
    assert isinstance(error, ProtocolError), repr(error)
    assert error.category == "protocol"


def test_a_stalled_body_ends_at_the_body_deadline_not_the_read_timeout(make: Make) -> None:
    def serve(conn: socket.socket) -> None:
        conn.sendall(_head("Content-Length: 100") + b"x" * 10)
        server.wait(10)  # stalls: no byte for longer than the test runs

    with RawServer(serve) as server:
        backend = make(timeout=Timeouts(connect=5, read=30, body=0.5, request=30))
        started = time.monotonic()
        error = _fetch_error(backend, server.url("/stall"))
        took = time.monotonic() - started
    assert isinstance(error, FetchTimeout), repr(error)
    assert "body" in str(error)
    assert 0.4 <= took < 3.0


def test_headers_trickling_one_byte_at_a_time_end_at_the_request_deadline(make: Make) -> None:
    def serve(conn: socket.socket) -> None:
        for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 1000:
            conn.sendall(bytes([byte]))
            if server.wait(0.1):  # every read is quick, the headers never end
                return

    with RawServer(serve) as server:
        backend = make(timeout=Timeouts(connect=5, read=2, body=30, request=1.0))
        started = time.monotonic()
        error = _fetch_error(backend, server.url("/slow-headers"))
        took = time.monotonic() - started
    assert isinstance(error, FetchTimeout), repr(error)
    assert "request" in str(error)
    assert 0.9 <= took < 4.0


def test_a_server_that_accepts_and_never_answers_is_a_timeout(make: Make) -> None:
    with RawServer(lambda conn: server.wait(10) and None) as server:
        backend = make(timeout=Timeouts(connect=5, read=0.5, body=30, request=30))
        error = _fetch_error(backend, server.url("/silent"))
    assert error.category == "timeout", repr(error)


def _bomb_server(coding: str, payload: bytes) -> RawServer:
    def serve(conn: socket.socket) -> None:
        conn.sendall(_head(f"Content-Encoding: {coding}", f"Content-Length: {len(payload)}") + payload)
        server.wait(5)

    server = RawServer(serve)
    return server


@functools.cache
def _gzip_bomb(size: int) -> bytes:
    return gzip.compress(b"\0" * size, compresslevel=9)


@functools.cache
def _deflate_bomb(size: int) -> bytes:
    return zlib.compress(b"\0" * size, 9)


@functools.cache
def _brotli_bomb(size: int) -> bytes:
    return bytes(brotli.compress(b"\0" * size, quality=5))


BOMBS = {"gzip": _gzip_bomb, "deflate": _deflate_bomb, "br": _brotli_bomb}


@pytest.mark.parametrize("coding", sorted(BOMBS))
def test_a_compression_bomb_stops_at_the_body_cap(make: Make, coding: str) -> None:
    payload = BOMBS[coding](50 * 1024 * 1024)
    with _bomb_server(coding, payload) as server:
        error = _fetch_error(make(max_body_size=1024 * 1024), server.url("/bomb"))
    assert isinstance(error, BodyLimitError), repr(error)


def test_a_content_coding_spire_did_not_offer_is_refused(make: Make) -> None:
    with _bomb_server("zstd", b"\x28\xb5\x2f\xfd" + b"\0" * 20) as server:
        error = _fetch_error(make(), server.url("/zstd"))
    assert isinstance(error, DecodeError), repr(error)
    assert "zstd" in str(error)


def test_a_corrupt_gzip_body_is_a_decode_error(make: Make) -> None:
    with _bomb_server("gzip", b"\x1f\x8b\x08\x00" + b"garbage" * 10) as server:
        error = _fetch_error(make(), server.url("/corrupt"))
    assert isinstance(error, DecodeError), repr(error)


_RSS_PROBE = textwrap.dedent(
    """
    import resource, sys
    import anyio, httpx
    from spire_core.backend.http import HttpBackend
    from spire_core.errors import SpireError
    from spire_core.seed import Seed

    async def main():
        backend = HttpBackend(max_body_size=2 * 1024 * 1024)
        if sys.argv[2] == "httpx":
            backend = HttpBackend(max_body_size=2 * 1024 * 1024, transport=httpx.AsyncHTTPTransport())
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        try:
            await backend.fetch(Seed(sys.argv[1]))
        except SpireError as exc:
            print(exc.category, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
        finally:
            await backend.aclose()

    anyio.run(main)
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("path", ["aiohttp", "httpx"])
@pytest.mark.parametrize("coding", sorted(BOMBS))
def test_peak_memory_stays_bounded_against_a_bomb(coding: str, path: str) -> None:
    """A bomb of 256 MiB decoded, fetched in a fresh process: its peak RSS grows by a few MB, not hundreds."""
    payload = BOMBS[coding](256 * 1024 * 1024)
    with _bomb_server(coding, payload) as server:
        probe = subprocess.run(
            [sys.executable, "-c", _RSS_PROBE, server.url("/bomb"), path],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
    category, grown_mb = probe.stdout.split()
    assert category == "body_limit"
    assert int(grown_mb) < 40, f"peak RSS grew by {grown_mb} MB"


@pytest.mark.parametrize(
    "head",
    [
        _head("Content-Length: abc") + b"hello",
        _head("Content-Length: -5") + b"hello",
        _head("Content-Length: 5", "Content-Length: 7") + b"hello",
        _head("Content-Length: 5", "Transfer-Encoding: chunked") + b"5\r\nhello\r\n0\r\n\r\n",
        b"hello there\r\n\r\n",
    ],
    ids=["bad-length", "negative-length", "conflicting-lengths", "length-and-chunked", "no-status-line"],
)
def test_malformed_framing_is_a_protocol_error_on_both_paths(make: Make, head: bytes) -> None:
    def serve(conn: socket.socket) -> None:
        conn.sendall(head)
        server.wait(0.5)

    with RawServer(serve) as server:
        error = _fetch_error(make(), server.url("/framing"))
    assert isinstance(error, ProtocolError), repr(error)
    assert not error.transient


def _dialed(**options: Any) -> HttpBackend:
    """The httpx path on spire's own dialer (HTTP/2 offered; plain http answers over HTTP/1.1)."""
    return HttpBackend(http2=True, **options)


@pytest.fixture(params=[_aiohttp, _dialed], ids=["aiohttp", "httpx"])
def dialed(request: pytest.FixtureRequest) -> Make:
    factory: Make = request.param
    return factory


def _answer_then_close(answer: bytes) -> RawServer:
    def serve(conn: socket.socket) -> None:
        conn.sendall(answer)
        _close(conn)

    return RawServer(serve)


@pytest.mark.parametrize(
    "answer",
    [b"garbage\r\n", b"SSH-2.0-OpenSSH_9.6\r\n", b"garbage"],
    ids=["a-line-of-garbage", "an-ssh-banner", "no-line-end"],
)
def test_bytes_that_are_no_http_then_a_close_are_a_protocol_error_on_both_paths(dialed: Make, answer: bytes) -> None:
    with _answer_then_close(answer) as server:
        error = _fetch_error(dialed(), server.url("/not-http"))
    assert isinstance(error, ProtocolError), repr(error)  # not the ConnectError of a server that hung up
    assert error.category == "protocol"
    assert not error.transient


def test_an_ssh_banner_over_tls_then_a_close_is_a_protocol_error_on_both_paths(dialed: Make, tmp_path: Path) -> None:
    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    context.set_alpn_protocols(["http/1.1"])  # HTTP/1.1 over TLS: the httpx path's TLS stream is watched too
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))

    def serve(raw: socket.socket) -> None:
        with context.wrap_socket(raw, server_side=True) as conn:
            read_head(conn)
            conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")

    with RawServer(serve, read_request=False) as server:
        error = _fetch_error(dialed(verify=str(ca_file)), server.url("/not-http").replace("http:", "https:", 1))
    assert isinstance(error, ProtocolError), repr(error)
    assert error.category == "protocol"


@pytest.mark.parametrize("answer", [b"", b"HTTP/1.1 200 OK\r\n"], ids=["nothing", "a-head-cut-short"])
def test_a_close_before_a_whole_head_of_http_stays_a_connect_error_on_both_paths(dialed: Make, answer: bytes) -> None:
    with _answer_then_close(answer) as server:
        error = _fetch_error(dialed(), server.url("/hung-up"))
    assert isinstance(error, ConnectError), repr(error)
    assert error.category == "connect"


def test_a_body_read_to_the_close_is_whole_on_both_paths(dialed: Make) -> None:
    async def main() -> bytes:
        backend = dialed()
        try:
            return (await backend.fetch(Seed(server.url("/to-the-close")))).body
        finally:
            await backend.aclose()

    with _answer_then_close(_head("Connection: close") + b"the whole body") as server:
        assert anyio.run(main) == b"the whole body"
