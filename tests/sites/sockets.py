"""Sockets bound to a free port on 127.0.0.1 and kept: a server is handed the socket, not a number.

A port probed then closed can be taken (by another test's server, or as the local port of any
outgoing connection) before the server binds it; a bound socket cannot.

    sock = bound_tcp()
    config.bind = [handed_over(sock)]     # hypercorn's "fd://N"; the server owns and closes it
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator

__all__ = ["bound_tcp", "bound_tcp_and_udp", "handed_over", "refusing_port"]


def bound_tcp() -> socket.socket:
    """A TCP socket bound to a free port on 127.0.0.1 (not yet listening)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    return sock


def bound_tcp_and_udp() -> tuple[socket.socket, socket.socket]:
    """A TCP and a UDP socket bound to the same free port on 127.0.0.1 (HTTP/3 offers itself on the TCP port)."""
    for _ in range(50):
        tcp = bound_tcp()
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            udp.bind(tcp.getsockname())
        except OSError:  # the number is some UDP socket's already: another one
            udp.close()
            tcp.close()
            continue
        return tcp, udp
    raise RuntimeError("no port free for both TCP and UDP on 127.0.0.1")


def handed_over(sock: socket.socket) -> str:
    """``fd://N`` for hypercorn's ``bind`` or ``quic_bind``; the server now owns the descriptor and closes it."""
    return f"fd://{sock.detach()}"


@contextlib.contextmanager
def refusing_port() -> Iterator[int]:
    """A port on 127.0.0.1 that refuses every connection while the block runs: bound, never listening,
    so no other test's server can start on it meanwhile."""
    with bound_tcp() as sock:
        yield sock.getsockname()[1]
