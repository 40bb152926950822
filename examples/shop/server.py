"""Serve the example bookshop on 127.0.0.1 from a thread, or from the command line to browse it.

with ShopServer() as server:            # an ephemeral port
    server.url("/")                     # "http://127.0.0.1:53117/"
    server.shop.books                   # what a crawl should find
    server.hits()                       # requests per path so far

python -m examples.shop.server --port 8000
"""

from __future__ import annotations

import argparse
import hashlib
import threading
from collections import Counter
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .site import Shop

__all__ = ["BUSY_MARKER", "ShopServer", "main"]

#: The class of the notice on a "busy" page: HTTP 200, but no content yet (a soft error).
BUSY_MARKER = "notice busy"

_BUSY_PAGE = (
    '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>One moment | Spire Books</title>'
    f'</head><body><p class="{BUSY_MARKER}">We are restocking this shelf. Please try again in a moment.</p>'
    "</body></html>\n"
).encode()


class ShopServer:
    """The shop on ``http://127.0.0.1:<port>``, served by a ``ThreadingHTTPServer`` in a daemon thread.

    ``port=0`` picks a free port. Each path in ``busy_once`` answers its first request with a
    "please try again" page (status 200), the kind of soft error a handler has to recognise.
    """

    def __init__(
        self,
        shop: Shop | None = None,
        *,
        port: int = 0,
        busy_once: Iterable[str] = (),
        log_requests: bool = False,
    ) -> None:
        self.shop = shop if shop is not None else Shop()
        self._lock = threading.Lock()
        self._hits: Counter[str] = Counter()
        self._busy = set(busy_once)
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            server_version = "SpireBooks/1.0"
            # headers and body go out in two writes; with Nagle on, the body waits ~40 ms for the
            # client's delayed ACK on every keep-alive request
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:
                if log_requests:
                    super().log_message(format, *args)

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                with server._lock:
                    server._hits[path] += 1
                    busy = path in server._busy
                    server._busy.discard(path)
                if busy:
                    status, content_type, body = 200, "text/html; charset=utf-8", _BUSY_PAGE
                else:
                    page = server.shop.render(path, origin=server.origin)
                    status, content_type, body = page.status, page.content_type, page.body
                # A strong validator, as a static file server sends: a recrawl asks with If-None-Match.
                etag = '"' + hashlib.sha256(body).hexdigest()[:20] + '"'
                if status == 200 and etag in (self.headers.get("If-None-Match") or "").split(", "):
                    status, body = 304, b""
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                if status in (200, 304):
                    self.send_header("ETag", etag)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_HEAD = do_GET

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="shop-server", daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str = "/") -> str:
        return self.origin + path

    @property
    def book_urls(self) -> set[str]:
        """The URL of every book page: what a complete crawl of the catalogue finds."""
        return {self.url(book.path) for book in self.shop.books}

    def hits(self) -> Counter[str]:
        """Requests so far, by path (query dropped)."""
        with self._lock:
            return Counter(self._hits)

    def start(self) -> ShopServer:
        """Serve from a daemon thread."""
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve from this thread until interrupted."""
        try:
            self._server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            self._server.server_close()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> ShopServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    """Serve the shop until interrupted, logging each request."""
    parser = argparse.ArgumentParser(description="Serve the example bookshop on 127.0.0.1.")
    parser.add_argument("--port", type=int, default=8000, help="the port to listen on (0 picks a free one)")
    args = parser.parse_args(argv)
    server = ShopServer(port=args.port, log_requests=True)
    print(f"Spire Books: {len(server.shop.books)} books at {server.url('/')} (Ctrl-C to stop)", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
