"""``LocalSite``: a small threaded HTTP server on 127.0.0.1 for tests, with a request log and peak concurrency.

    with LocalSite({"/": "<a href='/a'>a</a>", "/a": "<title>A</title>"}) as site:
        Crawler(router).run([site.url("/")])
        assert site.hits()["/a"] == 1

Pages come from a dict, a folder (``LocalSite(folder="site/")``: ``/`` is ``index.html``), or
``page()`` / ``route()`` / ``sequence()`` calls; anything else answers 404.
"""

from __future__ import annotations

import dataclasses
import mimetypes
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

import httpx

__all__ = ["LocalSite", "Reply", "Request", "RouteFn"]

#: What a route answers: status, headers, body (a ``str`` body is sent as UTF-8).
Reply = tuple[int, Mapping[str, str], bytes | str]
RouteFn = Callable[["Request"], Reply]


@dataclasses.dataclass(frozen=True)
class Request:
    """One request the site received (``at`` is ``time.monotonic()`` on arrival)."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes
    at: float


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # the default listen backlog (5) drops a burst of new connections for a second

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up early (a timeout, a body cap) is expected here, not an error."""


class LocalSite:
    """A local site on 127.0.0.1 with an ephemeral port; start it with ``with`` (or ``start()``/``stop()``).

    ``requests`` logs every request; ``in_flight`` and ``peak`` count requests being answered now
    and at most at once, to check a crawl's politeness.
    """

    def __init__(
        self,
        pages: Mapping[str, str | bytes] | None = None,
        *,
        folder: str | Path | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        self._routes: dict[str, RouteFn] = {}
        self._folder = Path(folder).resolve() if folder is not None else None
        self._lock = threading.Lock()
        self.requests: list[Request] = []
        self.in_flight = 0
        self.peak = 0
        for path, body in (pages or {}).items():
            self.page(path, body)
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go in two writes; Nagle would hold the body

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                # Case-insensitive, as HTTP header names are: clients differ in the case they send.
                headers = httpx.Headers(list(self.headers.items()))
                request = Request(self.command, self.path, headers, body, time.monotonic())
                with site._lock:
                    site.requests.append(request)
                    site.in_flight += 1
                    site.peak = max(site.peak, site.in_flight)
                try:
                    status, reply_headers, answer = site._answer(request)
                finally:
                    with site._lock:
                        site.in_flight -= 1
                payload = answer.encode() if isinstance(answer, str) else answer
                self.send_response(status)
                for name, value in reply_headers.items():
                    self.send_header(name, value)
                if not any(name.lower() == "content-length" for name in reply_headers):
                    self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)

            do_GET = do_POST = do_HEAD = _serve

        self._server = _QuietServer((host, 0), Handler)
        # A short poll interval: shutdown() waits up to one interval, and every test stops a server.
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def _answer(self, request: Request) -> Reply:
        route = self._routes.get(request.path.split("?", 1)[0]) or self._routes.get(request.path)
        if route is not None:
            return route(request)
        found = self._file(request.path.split("?", 1)[0])
        if found is not None:
            kind = mimetypes.guess_type(found.name)[0] or "application/octet-stream"
            if kind.startswith("text/"):
                kind += "; charset=utf-8"
            return 200, {"Content-Type": kind}, found.read_bytes()
        return 404, {"Content-Type": "text/plain"}, b"not found"

    def _file(self, path: str) -> Path | None:
        if self._folder is None:
            return None
        found = (self._folder / path.lstrip("/")).resolve()
        if found.is_dir():
            found = found / "index.html"
        if not found.is_relative_to(self._folder) or not found.is_file():
            return None
        return found

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str = "/") -> str:
        return self.origin + path

    def route(self, path: str, fn: RouteFn) -> None:
        """Answer ``path`` with ``fn(request)``."""
        self._routes[path] = fn

    def page(
        self,
        path: str,
        body: str | bytes,
        *,
        status: int = 200,
        content_type: str = "text/html; charset=utf-8",
        headers: Mapping[str, str] | None = None,
        delay: float = 0.0,
    ) -> None:
        """Answer ``path`` with ``body``; ``delay`` makes the server slow (tests never sleep themselves)."""
        payload = body.encode() if isinstance(body, str) else body

        def reply(request: Request) -> Reply:
            if delay:
                time.sleep(delay)
            return status, {"Content-Type": content_type, **(headers or {})}, payload

        self.route(path, reply)

    def sequence(self, path: str, replies: list[Reply]) -> None:
        """Answer ``path`` with each reply in turn, then the last one forever."""
        remaining = list(replies)

        def reply(request: Request) -> Reply:
            with self._lock:
                return remaining.pop(0) if len(remaining) > 1 else remaining[0]

        self.route(path, reply)

    def hits(self, *, robots: bool = False) -> Counter[str]:
        """Requests per path so far; ``/robots.txt``, which every crawl reads first, only with ``robots``."""
        with self._lock:
            return Counter(r.path for r in self.requests if robots or r.path != "/robots.txt")

    def page_requests(self) -> list[Request]:
        """The requests other than ``/robots.txt``, in order."""
        with self._lock:
            return [request for request in self.requests if request.path != "/robots.txt"]

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
