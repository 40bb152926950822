"""A small threaded HTTP server for tests: routes, delays, request log and peak concurrency."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

Reply = tuple[int, Mapping[str, str], bytes]
RouteFn = Callable[["Request"], Reply]


@dataclasses.dataclass(frozen=True)
class Request:
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


class Site:
    """A local site on 127.0.0.1 with an ephemeral port.

    with Site() as site:
        site.page("/", "<a href='/a'>a</a>")
        site.url("/")
    """

    def __init__(self, *, host: str = "127.0.0.1") -> None:
        self._routes: dict[str, RouteFn] = {}
        self._lock = threading.Lock()
        self.requests: list[Request] = []
        self.in_flight = 0
        self.peak = 0
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
                    route = site._routes.get(self.path.split("?", 1)[0]) or site._routes.get(self.path)
                    if route is None:
                        status, headers, payload = 404, {"Content-Type": "text/plain"}, b"not found"
                    else:
                        status, headers, payload = route(request)
                finally:
                    with site._lock:
                        site.in_flight -= 1
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                if not any(name.lower() == "content-length" for name in headers):
                    self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)

            do_GET = do_POST = do_HEAD = _serve

        self._server = _QuietServer((host, 0), Handler)
        self._server.daemon_threads = True
        # A short poll interval: shutdown() waits up to one interval, and every test stops a server.
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str = "/") -> str:
        return self.origin + path

    def route(self, path: str, fn: RouteFn) -> None:
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
        payload = body.encode() if isinstance(body, str) else body

        def reply(request: Request) -> Reply:
            if delay:
                time.sleep(delay)  # the server is slow; tests never sleep themselves
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
        """Requests per path; ``/robots.txt``, which every crawl reads first, only with ``robots``."""
        with self._lock:
            return Counter(r.path for r in self.requests if robots or r.path != "/robots.txt")

    def page_requests(self) -> list[Request]:
        """The requests other than ``/robots.txt``, in order."""
        with self._lock:
            return [request for request in self.requests if request.path != "/robots.txt"]

    def start(self) -> Site:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Site:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def binary_tree(site: Site, pages: int = 100, *, prefix: str = "/page/", delay: float = 0.0) -> str:
    """Serve a binary tree of ``pages`` pages (page i links to 2i+1 and 2i+2); return the root URL."""
    for i in range(pages):
        links = "".join(f'<a href="{prefix}{c}">page {c}</a>\n' for c in (2 * i + 1, 2 * i + 2) if c < pages)
        site.page(f"{prefix}{i}", f"<html><head><title>Page {i}</title></head><body>{links}</body></html>", delay=delay)
    return site.url(f"{prefix}0")
