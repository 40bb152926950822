"""A local HTTP/3 server for tests: hypercorn serving a tiny ASGI app over QUIC and TLS TCP on one port.

with Http3Site() as site:
    HttpBackend(http3="only", verify=site.ca_file).fetch(Seed(site.url("/")))

TCP (HTTP/2 and HTTP/1.1) answers with ``Alt-Svc: h3=":<port>"``, so a client can move to QUIC.
``quic=False`` leaves the UDP port closed (the kernel answers "port unreachable") while TCP still
offers HTTP/3; ``quic="silent"`` binds it to a socket that reads and never answers, as a firewall
that drops UDP does, and counts the datagrams it swallowed.

The app's pages: ``/`` and ``/page/<n>`` link to ``/page/0`` .. ``/page/<pages - 1>``; ``/big?size=N``
sends N bytes in 16 KiB pieces; ``/cookie`` sets one and echoes the ones sent; ``/robots.txt`` is
missing (404); ``/stall`` sends a first piece of its body and then nothing. Every request is recorded
(``versions``), and so is the most in flight at once (``max_in_flight``).
"""

from __future__ import annotations

import asyncio
import socket
import tempfile
import threading
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import trustme
from hypercorn.asyncio import serve
from hypercorn.config import Config

from tests.sites.sockets import bound_tcp_and_udp, handed_over


class Http3Site:
    """HTTP/3 over QUIC and HTTPS over TCP on 127.0.0.1, one port, certified by a local CA."""

    def __init__(
        self, *, quic: bool | Literal["silent"] = True, pages: int = 4, max_age: int = 3600, names: Sequence[str] = ()
    ) -> None:
        self._dir = tempfile.TemporaryDirectory()
        folder = Path(self._dir.name)
        ca = trustme.CA()
        cert = ca.issue_cert("127.0.0.1", "localhost", *names)  # names: more the certificate is for
        self.ca_file = str(folder / "ca.pem")
        ca.cert_pem.write_to_path(self.ca_file)
        cert.private_key_and_cert_chain_pem.write_to_path(str(folder / "server.pem"))
        tcp, udp = bound_tcp_and_udp()
        self.port: int = tcp.getsockname()[1]
        self.pages = pages
        #: The HTTP version of each request the server answered, in order ("1.1", "2", "3").
        self.versions: list[str] = []
        #: The client address of each request: one per connection (a QUIC connection's UDP port).
        self.clients: list[tuple[str, int]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        #: Datagrams the silent UDP socket swallowed (``quic="silent"``).
        self.swallowed = 0
        self._config = Config()
        self._config.bind = [handed_over(tcp)]
        if quic is True:
            self._config.quic_bind = [handed_over(udp)]
        self._config.alt_svc_headers = [f'h3=":{self.port}"; ma={max_age}']
        self._config.certfile = self._config.keyfile = str(folder / "server.pem")
        self._config.loglevel = "ERROR"
        self._config.graceful_timeout = 0.2  # a stalled body is cut off at once when the site stops
        # silent: the UDP socket reads and drops; False: it closes, and the kernel answers "port unreachable"
        self._silent = udp if quic == "silent" else None
        if quic is False:
            udp.close()
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def url(self, path: str = "/") -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    async def _app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        self.versions.append(scope["http_version"])
        self.clients.append(tuple(scope["client"]))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await self._answer(scope, send)
        finally:
            self.in_flight -= 1

    async def _answer(self, scope: dict[str, Any], send: Any) -> None:
        path: str = scope["path"]
        if path == "/robots.txt":
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        if path == "/cookie":  # sets one, and says which cookies came with the request
            sent = dict(scope["headers"]).get(b"cookie", b"").decode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"text/plain"), (b"set-cookie", b"visit=yes; Path=/")],
                }
            )
            await send({"type": "http.response.body", "body": f"cookie: {sent}".encode()})
            return
        if path == "/big":
            size = int(urllib.parse.parse_qs(scope["query_string"].decode()).get("size", ["0"])[0])
            await _start(send, "application/octet-stream")
            for start in range(0, size, 16384):
                await send({"type": "http.response.body", "body": b"x" * min(16384, size - start), "more_body": True})
            await send({"type": "http.response.body", "body": b""})
            return
        if path == "/stall":
            await _start(send, "text/plain")
            await send({"type": "http.response.body", "body": b"first piece", "more_body": True})
            await asyncio.Event().wait()  # never more: the client's body deadline must end it
            return
        await asyncio.sleep(0.02)  # a page takes a moment, so requests a client sends together overlap here
        links = "".join(f'<a href="/page/{n}">page {n}</a>' for n in range(self.pages))
        body = f"<html><body><p>HTTP/{scope['http_version']} {path}</p>{links}</body></html>".encode()
        await _start(send, "text/html")
        await send({"type": "http.response.body", "body": body})

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def main() -> None:
            self._stop = asyncio.Event()
            if self._silent is not None:
                await self._loop.create_datagram_endpoint(lambda: _Silent(self), sock=self._silent)
            self._loop.call_soon(self._started.set)
            await serve(self._app, self._config, shutdown_trigger=self._stop.wait)  # type: ignore[arg-type]

        try:
            self._loop.run_until_complete(main())
        finally:
            self._loop.close()

    def __enter__(self) -> Http3Site:
        self._thread.start()
        self._started.wait(10)
        for _ in range(200):  # until hypercorn listens on the TCP socket (it opens QUIC before it)
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", self.port)) == 0:
                    break
            threading.Event().wait(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=5)
        if self._silent is not None:
            self._silent.close()
        self._dir.cleanup()


class _Silent(asyncio.DatagramProtocol):
    """A UDP port that reads every datagram and answers none: QUIC blocked on the way."""

    def __init__(self, site: Http3Site) -> None:
        self._site = site

    def datagram_received(self, data: bytes, addr: tuple[str | Any, int]) -> None:
        self._site.swallowed += 1


async def _start(send: Any, content_type: str) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", content_type.encode())]})
