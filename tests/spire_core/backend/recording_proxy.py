"""``RecordingProxy``: a forward proxy on 127.0.0.1 that records every request a browser sends through it.

    with RecordingProxy() as proxy:
        BrowserBackend(proxy=proxy.url)
        proxy.hosts()   # {"127.0.0.1:4321", "accounts.google.com:443", ...}

Every method is recorded, ``CONNECT`` included, so nothing a browser asks for is missed. A plain
``GET`` for 127.0.0.1 is forwarded as it is (a redirect stays a redirect, for the browser to
follow); anything else is answered 502 and goes no further. ``foreign`` is set the moment a request
for any host but 127.0.0.1 arrives.
"""

from __future__ import annotations

import http.client
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: Headers that describe one hop's connection, not the answer being forwarded.
_HOP_HEADERS = frozenset({"connection", "content-length", "keep-alive", "transfer-encoding"})


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass


def host_of(method: str, target: str) -> str:
    """The ``host:port`` a request is for: a CONNECT names it; any other method has an absolute URL."""
    if method == "CONNECT":
        return target
    split = urllib.parse.urlsplit(target)
    return f"{split.hostname}:{split.port or {'http': 80, 'https': 443}.get(split.scheme, 0)}"


class RecordingProxy:
    """An HTTP forward proxy on 127.0.0.1; ``log`` holds ``(method, target)`` per request, in order."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str]] = []
        self.foreign = threading.Event()
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def handle_one_request(self) -> None:
                # Every method lands here, so none goes unrecorded for want of a do_METHOD.
                self.raw_requestline = self.rfile.readline(65537)
                if not self.raw_requestline or not self.parse_request():
                    self.close_connection = True
                    return
                proxy._record(self.command, self.path)
                split = urllib.parse.urlsplit(self.path)
                if self.command == "GET" and split.hostname == "127.0.0.1":
                    self._forward(split)
                else:
                    self._reply(502, [], b"this proxy reaches 127.0.0.1 only")

            def _forward(self, target: urllib.parse.SplitResult) -> None:
                upstream = http.client.HTTPConnection(target.hostname or "", target.port or 80, timeout=10)
                try:
                    path = target.path + (f"?{target.query}" if target.query else "") or "/"
                    headers = {
                        name: value for name, value in self.headers.items() if name.lower() != "proxy-connection"
                    }
                    upstream.request("GET", path, headers=headers)
                    answer = upstream.getresponse()
                    kept = [(name, value) for name, value in answer.getheaders() if name.lower() not in _HOP_HEADERS]
                    self._reply(answer.status, kept, answer.read())
                finally:
                    upstream.close()

            def _reply(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
                self.send_response(status)
                for name, value in headers:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                self.wfile.flush()

        self._server = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def _record(self, method: str, target: str) -> None:
        with self._lock:
            self.log.append((method, target))
        if not host_of(method, target).startswith("127.0.0.1:"):
            self.foreign.set()

    def hosts(self) -> set[str]:
        """Every ``host:port`` something was requested for."""
        with self._lock:
            return {host_of(method, target) for method, target in self.log}

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
