"""The connections of ``HttpBackend`` (``backend/connections.py``): a per-host cap on both paths, busy
and idle connections, and identities that never share a connection; counted by a local server that
sees each connection."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import pytest

from spire import HttpBackend, Identities, Identity
from spire_core.errors import ConfigError
from spire_core.seed import Seed
from spire_core.session.streaming import StreamedResponse

#: How many connections at once the server waits for before it answers (up to ``_HOLD`` seconds):
#: a client without a cap reaches it at once, one with a cap of 2 never does.
_CROWD = 3
_HOLD = 0.3


class CountingServer:
    """An HTTP/1.1 keep-alive server on 127.0.0.1 that counts open connections and what each carried."""

    def __init__(self) -> None:
        self.open = 0
        self.most_open = 0
        #: The User-Agent of each request, per connection (by the client's port).
        self.agents: dict[int, list[str]] = {}
        self._lock = threading.Condition()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                with server._lock:
                    server.open += 1
                    server.most_open = max(server.most_open, server.open)
                    server._lock.notify_all()

            def finish(self) -> None:
                super().finish()
                with server._lock:
                    server.open -= 1

            def do_GET(self) -> None:
                with server._lock:
                    server.agents.setdefault(self.client_address[1], []).append(self.headers.get("User-Agent", ""))
                    server._lock.wait_for(lambda: server.open >= _CROWD, timeout=_HOLD)
                body = b"ok"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass

        self._server = Server(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@pytest.fixture
def server() -> Iterator[CountingServer]:
    running = CountingServer()
    running._thread.start()
    try:
        yield running
    finally:
        running._server.shutdown()
        running._server.server_close()


PATHS = ["aiohttp", "httpx"]


def backend_of(path: str, **options: Any) -> HttpBackend:
    return HttpBackend(http2=path == "httpx", **options)


async def fetch_at_once(backend: HttpBackend, urls: list[str]) -> None:
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for url in urls:
                tg.start_soon(backend.fetch, Seed(url))


@pytest.mark.parametrize("path", PATHS)
def test_the_per_host_cap_bounds_the_connections_to_a_host(server: CountingServer, path: str) -> None:
    async def main() -> tuple[int, int]:
        backend = backend_of(path, max_connections_per_host=2)
        try:
            await fetch_at_once(backend, [server.url(f"/{i}") for i in range(6)])
            stats = backend.pool_stats()
            return stats.busy, stats.idle
        finally:
            await backend.aclose()

    busy, idle = anyio.run(main)
    assert server.most_open == 2
    assert (busy, idle) == (0, 2)  # both kept alive for the next request, neither held


@pytest.mark.parametrize("path", PATHS)
def test_without_a_per_host_cap_requests_open_connections_side_by_side(server: CountingServer, path: str) -> None:
    async def main() -> int:
        backend = backend_of(path)
        try:
            await fetch_at_once(backend, [server.url(f"/{i}") for i in range(6)])
            return backend.pool_stats().idle
        finally:
            await backend.aclose()

    idle = anyio.run(main)
    assert server.most_open >= _CROWD
    assert idle == server.most_open  # every connection it opened is idle and kept


@pytest.mark.parametrize("path", PATHS)
def test_identities_never_reuse_each_others_connections(server: CountingServer, path: str) -> None:
    chrome, firefox = Identity("chrome", "windows"), Identity("firefox", "linux")
    identities = Identities([chrome, firefox], http2=path == "httpx")
    seeds = [Seed(server.url(f"/{i}")) for i in range(12)]
    assert {identities.identity_for(seed).name for seed in seeds} == {"chrome-windows", "firefox-linux"}

    async def main() -> int:
        try:
            for seed in seeds:  # one at a time: a shared pool would carry them all on one connection
                await identities.fetch(seed)
            return identities.pool_stats().idle
        finally:
            await identities.aclose()

    idle = anyio.run(main)
    assert sorted(len(set(agents)) for agents in server.agents.values()) == [1, 1]
    assert {agents[0] for agents in server.agents.values()} == {chrome.user_agent, firefox.user_agent}
    assert idle == 2


def test_a_streamed_body_counts_as_busy_until_it_ends(server: CountingServer) -> None:
    async def main() -> tuple[int, int, int]:
        backend = HttpBackend(max_connections_per_host=4)
        try:
            streamed = await backend.stream(Seed(server.url("/a")))
            assert isinstance(streamed, StreamedResponse)
            during = backend.pool_stats()
            await streamed.stream.aclose()
            after = backend.pool_stats()
            return during.busy, after.busy, after.max_connections_per_host or 0
        finally:
            await backend.aclose()

    assert anyio.run(main) == (1, 0, 4)


@pytest.mark.parametrize("cap", [0, -1, True, 1.5])
def test_a_per_host_cap_is_a_positive_whole_number(cap: object) -> None:
    with pytest.raises(ConfigError, match="max_connections_per_host"):
        HttpBackend(max_connections_per_host=cap)  # type: ignore[arg-type]


def _sockets() -> set[str]:
    """The inodes of this process's open sockets, read from ``/proc``."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    return inodes


def _open_sockets_to(ports: set[int], *, besides: set[str]) -> int:
    """This process's established TCP sockets to one of ``ports``, but those in ``besides`` (opened before
    the test: an earlier test's connection to a server gone, whose port a new server may have taken)."""
    inodes = _sockets() - besides
    count = 0
    with open("/proc/net/tcp") as table:
        next(table)
        for line in table:
            fields = line.split()
            remote_port = int(fields[2].split(":")[1], 16)
            if remote_port in ports and fields[3] == "01" and fields[9] in inodes:  # 01: ESTABLISHED
                count += 1
    return count


async def _keep_alive_server(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answers every request on the connection with a small body, and keeps it open."""
    try:
        while await reader.readuntil(b"\r\n\r\n"):
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


@pytest.mark.parametrize("path", PATHS)
def test_max_connections_bounds_the_open_connections_across_many_origins(path: str) -> None:
    async def main() -> tuple[int, int, int]:
        before = _sockets()
        servers = [await asyncio.start_server(_keep_alive_server, "127.0.0.1", 0) for _ in range(30)]
        ports = {server.sockets[0].getsockname()[1] for server in servers}
        backend = backend_of(path, max_connections=5)
        most = 0

        try:
            with anyio.fail_after(30):
                for port in ports:  # one origin after another: each leaves its connection idle
                    await backend.fetch(Seed(f"http://127.0.0.1:{port}/"))
                    most = max(most, _open_sockets_to(ports, besides=before))
                async with anyio.create_task_group() as tg:  # and many at once
                    for port in [*ports, *ports]:
                        tg.start_soon(backend.fetch, Seed(f"http://127.0.0.1:{port}/"))
            # Counted once the loop has run the closes asked for: while many requests start at once, a
            # socket closed to make room lets go of its descriptor a turn of the loop later.
            await asyncio.sleep(0)
            after = _open_sockets_to(ports, besides=before)
            return most, after, backend.pool_stats().idle
        finally:
            await backend.aclose()
            for server in servers:
                server.close()

    most, after, idle = asyncio.run(main())
    assert 0 < most <= 5
    assert 0 < after <= 5
    assert 0 < idle <= 5
