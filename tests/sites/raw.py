"""A raw TCP server on 127.0.0.1 for fault tests: each connection runs a function that writes bytes.

    with RawServer(lambda conn: conn.sendall(b"HTTP/1.1 200 OK\\r\\n")) as server:
        server.url("/")

The function gets the socket after the request head has been read; it may stall, trickle, reset
(``reset(conn)``) or write malformed framing. The server closes every socket when it stops.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Self

Serve = Callable[[socket.socket], None]


def read_head(conn: socket.socket) -> bytes:
    """Read ``conn`` up to the end of a request head; what came, short of one, if the client closed first."""
    head = b""
    while b"\r\n\r\n" not in head:
        data = conn.recv(65536)
        if not data:
            break
        head += data
    return head


def reset(conn: socket.socket) -> None:
    """Close ``conn`` with a TCP reset (RST) instead of an orderly FIN."""
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


class RawServer:
    """Accepts connections and hands each, after its request head, to ``serve`` in a thread."""

    def __init__(self, serve: Serve, *, read_request: bool = True) -> None:
        self._serve = serve
        self._read_request = read_request
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self.port = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._open: list[socket.socket] = []
        self.connections = 0
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            self._open.append(conn)
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        try:
            if self._read_request and b"\r\n\r\n" not in read_head(conn):
                return  # the client went away before its request
            self._serve(conn)
        except OSError:
            pass  # the client hung up: what a fault test expects

    def stopping(self) -> bool:
        """Whether the server is shutting down (a stalling ``serve`` returns when it is)."""
        return self._stop.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds`` in a ``serve`` function; True when the server is stopping."""
        return self._stop.wait(seconds)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object | TracebackType) -> None:
        self._stop.set()
        self._listener.close()
        self._thread.join(timeout=2)
        for conn in self._open:
            with contextlib.suppress(OSError):
                conn.close()
