"""A response's headers, on both HTTP paths, are httpx's ``Headers`` of the bytes the server sent:
case-insensitive, multi-valued, in order, their encoding found as httpx finds it, and mutable."""

from __future__ import annotations

import socket
from collections.abc import Callable

import anyio
import httpx
import pytest

from spire_core.backend.http import HttpBackend, WireHeaders
from spire_core.response import Response
from spire_core.seed import Seed
from tests.sites.raw import RawServer

#: What the server sends, as bytes: a repeated name in two cases, a value that is UTF-8, no charset.
SENT = [
    (b"Content-Type", b"text/plain"),
    (b"Set-Cookie", b"a=1"),
    (b"SET-COOKIE", b"b=2"),
    (b"X-Name", "café".encode()),
    (b"Content-Length", b"2"),
]


@pytest.fixture(params=["aiohttp", "httpx"])
def make(request: pytest.FixtureRequest) -> Callable[[], HttpBackend]:
    if request.param == "aiohttp":
        return HttpBackend
    return lambda: HttpBackend(transport=httpx.AsyncHTTPTransport())


def fetched(backend: HttpBackend) -> Response:
    def serve(conn: socket.socket) -> None:
        head = b"".join(name + b": " + value + b"\r\n" for name, value in SENT)
        conn.sendall(b"HTTP/1.1 200 OK\r\n" + head + b"\r\nok")

    async def main(url: str) -> Response:
        try:
            with anyio.fail_after(20):
                return await backend.fetch(Seed(url))
        finally:
            await backend.aclose()

    with RawServer(serve) as server:
        return anyio.run(main, server.url("/"))


def test_response_headers_behave_as_httpx_headers_of_the_bytes_sent(make: Callable[[], HttpBackend]) -> None:
    headers = fetched(make()).headers
    expected = httpx.Headers(SENT)
    assert isinstance(headers, httpx.Headers)
    assert headers == expected
    assert headers.raw == expected.raw == SENT
    assert headers.encoding == expected.encoding == "utf-8"
    assert headers.multi_items() == expected.multi_items()
    assert list(headers.items()) == list(expected.items())
    assert headers["set-cookie"] == "a=1, b=2"
    assert headers.get_list("Set-Cookie") == ["a=1", "b=2"]
    assert headers.get("x-name") == "café"
    assert headers.get("x-absent") is None
    assert "x-absent" not in headers
    copied = headers.copy()
    headers["X-Added"] = "1"
    del headers["set-cookie"]
    assert headers.multi_items()[-1] == ("x-added", "1")
    assert "set-cookie" not in headers
    assert copied == expected


def test_wire_headers_hold_what_httpx_headers_hold_for_the_same_pairs() -> None:
    made = WireHeaders(SENT)
    assert made == httpx.Headers(SENT)
    assert made.raw == httpx.Headers(SENT).raw
    assert WireHeaders([]) == httpx.Headers()
    assert WireHeaders([]).encoding == "ascii"
