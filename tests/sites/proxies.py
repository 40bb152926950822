"""Small local forward proxies for tests (plain HTTP, absolute-form requests), each keeping its own log.

    with ForwardProxy() as good, ForwardProxy(refuse=True) as bad:
        ProxyPool([good.url, bad.url])
        good.log   # [("forward", "http://127.0.0.1:1234/a"), ...]
        good.headers   # [{"User-Agent": ..., "Cookie": ...}, ...]: what each request carried

``refuse=True`` resets every connection; ``garbage=True`` answers bytes that are no HTTP;
``ban_after=N`` forwards N requests, then answers 407 to every one after; ``block_page=True``
answers each request with a Cloudflare block page itself; ``challenge=True`` (with ``user``) answers
407 with a Basic challenge to a request without that login. A ``CONNECT`` (an HTTPS target) is
always answered 502: the proxy cannot reach the site.
"""

from __future__ import annotations

import base64
import http.client
import socket
import struct
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

BLOCK_PAGE = b"<html><title>Attention Required! | Cloudflare</title><h1>Sorry, you have been blocked</h1></html>"


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass


class ForwardProxy:
    """An HTTP forward proxy on 127.0.0.1; ``log`` holds ``(action, url, proxy_authorization)`` per request."""

    def __init__(
        self,
        *,
        refuse: bool = False,
        ban_after: int | None = None,
        block_page: bool = False,
        user: str = "",
        unreachable: bool = False,
        garbage: bool = False,
        challenge: bool = False,
    ) -> None:
        self.log: list[tuple[str, str, str | None]] = []
        #: The headers of each request it received, in order (``User-Agent``, ``Cookie``...).
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        login = "Basic " + base64.b64encode(urllib.parse.unquote(user).encode()).decode()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_CONNECT(self) -> None:
                with proxy._lock:
                    proxy.log.append(("unreachable" if unreachable else "refuse", self.path, None))
                self._reply(502, {}, b"cannot reach the site")  # this proxy tunnels nowhere

            def do_GET(self) -> None:
                authorization = self.headers.get("Proxy-Authorization")
                with proxy._lock:
                    forwarded = sum(1 for action, _, _ in proxy.log if action == "forward")
                    if challenge and authorization != login:
                        action = "challenge"
                    elif refuse:
                        action = "refuse"
                    elif garbage:
                        action = "garbage"
                    elif block_page:
                        action = "block"
                    elif ban_after is not None and forwarded >= ban_after:
                        action = "banned"
                    else:
                        action = "forward"
                    proxy.log.append((action, self.path, authorization))
                    proxy.headers.append(dict(self.headers.items()))
                if action == "refuse":
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.connection.close()
                    self.close_connection = True
                    return
                if action == "garbage":
                    self.wfile.write(b"this is no HTTP at all\r\n\r\n")
                    self.close_connection = True
                    return
                if action == "challenge":
                    self._reply(407, {"Proxy-Authenticate": 'Basic realm="proxy"'}, b"log in")
                    return
                if action == "banned":
                    self._reply(407, {"Proxy-Authenticate": 'Basic realm="banned"'}, b"banned")
                    return
                if action == "block":
                    self._reply(403, {"Server": "cloudflare", "Content-Type": "text/html"}, BLOCK_PAGE)
                    return
                target = urllib.parse.urlsplit(self.path)
                upstream = http.client.HTTPConnection(target.hostname or "", target.port or 80, timeout=10)
                try:
                    upstream.request("GET", target.path or "/", headers={"Host": target.netloc})
                    answer = upstream.getresponse()
                    body = answer.read()
                    headers = {
                        k: v for k, v in answer.getheaders() if k.lower() not in ("content-length", "connection")
                    }
                    self._reply(answer.status, headers, body)
                finally:
                    upstream.close()

            def _reply(self, status: int, headers: dict[str, str], body: bytes) -> None:
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = _Server(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        self.url = f"http://{user + '@' if user else ''}127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def actions(self) -> list[str]:
        with self._lock:
            return [action for action, _, _ in self.log]

    def __enter__(self) -> ForwardProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
