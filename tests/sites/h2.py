"""A local TLS HTTP/2 server for tests: hypercorn serving a tiny ASGI app, with trustme certificates.

with Http2Site() as site:
    HttpBackend(http2=True, verify=site.ca_file).fetch(Seed(site.url("/")))
"""

from __future__ import annotations

import asyncio
import socket
import tempfile
import threading
from pathlib import Path
from typing import Any

import trustme
from hypercorn.asyncio import serve
from hypercorn.config import Config

from tests.sites.sockets import bound_tcp, handed_over


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    body = f"<html><p>{scope['http_version']} {scope['path']}</p></html>".encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/html")]})
    await send({"type": "http.response.body", "body": body})


class Http2Site:
    """HTTPS with HTTP/2 (ALPN ``h2``, HTTP/1.1 as fallback) on 127.0.0.1, certified by a local CA."""

    def __init__(self) -> None:
        self._dir = tempfile.TemporaryDirectory()
        folder = Path(self._dir.name)
        ca = trustme.CA()
        cert = ca.issue_cert("127.0.0.1", "localhost")
        self.ca_file = str(folder / "ca.pem")
        ca.cert_pem.write_to_path(self.ca_file)
        cert.private_key_and_cert_chain_pem.write_to_path(str(folder / "server.pem"))
        listener = bound_tcp()
        self.port: int = listener.getsockname()[1]
        self._config = Config()
        self._config.bind = [handed_over(listener)]
        self._config.certfile = self._config.keyfile = str(folder / "server.pem")
        self._config.loglevel = "ERROR"
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def url(self, path: str = "/") -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def main() -> None:
            self._stop = asyncio.Event()
            self._loop.call_soon(self._started.set)
            await serve(_app, self._config, shutdown_trigger=self._stop.wait)  # type: ignore[arg-type]

        self._loop.run_until_complete(main())

    def __enter__(self) -> Http2Site:
        self._thread.start()
        self._started.wait(10)
        for _ in range(100):  # until hypercorn listens on the socket
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", self.port)) == 0:
                    break
            threading.Event().wait(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=5)
        self._dir.cleanup()
