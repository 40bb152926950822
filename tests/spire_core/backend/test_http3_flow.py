"""A streamed body over HTTP/3 holds at most a window unread: QUIC flow control follows the reader.

The crawl runs in a process of its own, whose memory tracemalloc measures, beside the same crawl over
TCP (hypercorn's ``Http3Site``). The QUIC server is an aioquic server in this process (``PacedSite``):
it writes a body into aioquic only as far as the client's window reaches, and says when it can send
no more (the client has acknowledged all it was sent, and its window is used up, or the body is
sent), so the test waits on that, not on a clock. It reads aioquic's stream state to know.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
import trustme
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.asyncio.server import QuicServer
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import QuicEvent

from spire import BodyStream, Crawler, Router
from spire_core.backend.http import HttpBackend, Timeouts
from spire_core.backend.http3 import CONNECTION_WINDOW, STREAM_WINDOW
from spire_core.session.decoding import PIECE
from spire_core.session.retry import RetryPolicy
from tests.sites.h3 import Http3Site

ROOT = Path(__file__).resolve().parents[3]
#: The body the slow reader gets: several windows' worth, so a window that follows arrivals shows.
SIZE = 4 * STREAM_WINDOW

#: A crawl of a one-byte page, then of a big body whose handler reads one chunk and waits for a line
#: on stdin before it reads the rest. It prints the most Python allocated while the big one came, over
#: what it held after the first (every module loaded, the connection open), and each chunk's size.
SLOW_READER = """
import json, sys, tracemalloc
import anyio, anyio.to_thread
from spire import BodyStream, Crawler, Router
from spire_core.backend.http import HttpBackend, Timeouts

first, big, ca, http3 = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "quic"
routes = Router()
found = {}

@routes.default
async def slow(body: BodyStream) -> None:
    if body.url == first:
        await body.read()
        found["before"] = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        return
    sizes = [len(await body.read())]
    print("holding", flush=True)
    await anyio.to_thread.run_sync(sys.stdin.readline)  # a reader that does not read, until told
    async for chunk in body:
        sizes.append(len(chunk))
    found.update(growth=tracemalloc.get_traced_memory()[1] - found["before"], sizes=sizes)

tracemalloc.start()
backend = HttpBackend(http3="only" if http3 else False, verify=ca, timeout=Timeouts(connect=10, read=60, body=120))
stats = Crawler(routes, backend=backend, robots=False, concurrency=1).run([first, big])
print(json.dumps({"failed": stats.failed, **found}), flush=True)
"""


class PacedSite:
    """An HTTP/3 server on 127.0.0.1 answering ``/<size>`` with that many bytes, fed to aioquic as the
    client's flow control lets them go; ``held(size)`` is set when that body can go no further."""

    def __init__(self) -> None:
        self._dir = tempfile.TemporaryDirectory()
        folder = Path(self._dir.name)
        ca = trustme.CA()
        self.ca_file = str(folder / "ca.pem")
        ca.cert_pem.write_to_path(self.ca_file)
        ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(folder / "server.pem"))
        # large datagrams (loopback carries them): a few hundred per MiB, not a thousand, on a busy machine
        self._configuration = QuicConfiguration(is_client=False, alpn_protocols=H3_ALPN, max_datagram_size=16384)
        self._configuration.load_cert_chain(str(folder / "server.pem"), str(folder / "server.pem"))
        self._udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._udp.bind(("127.0.0.1", 0))
        self.port: int = self._udp.getsockname()[1]
        self._held: dict[int, threading.Event] = {}
        self._lock = threading.Lock()
        #: How much of each body's stream the client had let through when it was first held, by its size.
        self.let_through: dict[int, int] = {}
        self._loop = asyncio.new_event_loop()
        self._server: QuicServer | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def url(self, size: int) -> str:
        return f"https://127.0.0.1:{self.port}/{size}"

    def held(self, size: int) -> threading.Event:
        """Set when the server can send no more of the body of ``size`` bytes: all of it is sent and
        acknowledged, or so is all the client's window lets through."""
        with self._lock:
            return self._held.setdefault(size, threading.Event())

    def __enter__(self) -> PacedSite:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._serve(), self._loop)
        self._server = future.result(10)
        return self

    async def _serve(self) -> QuicServer:
        loop = asyncio.get_running_loop()
        _, server = await loop.create_datagram_endpoint(
            lambda: QuicServer(configuration=self._configuration, create_protocol=self._protocol), sock=self._udp
        )
        return server

    def _protocol(self, *args: Any, **kwargs: Any) -> _Sender:
        return _Sender(self, *args, **kwargs)

    def __exit__(self, *exc: object) -> None:
        server = self._server
        if server is not None:
            self._loop.call_soon_threadsafe(server.close)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._dir.cleanup()


class _Sender(QuicConnectionProtocol):
    """One client's connection: each request's body is written to aioquic only as far as the client's
    window reaches, so what the server sends is what the client allowed."""

    def __init__(self, site: PacedSite, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._site = site
        self._http = H3Connection(self._quic)
        self._sizes: dict[int, int] = {}  # the body's size, per stream
        self._left: dict[int, int] = {}  # body bytes not yet written, per stream
        self._sent: dict[int, int] = {}  # how far into the stream the server has sent, per stream

    def quic_event_received(self, event: QuicEvent) -> None:
        for h3_event in self._http.handle_event(event):
            if isinstance(h3_event, HeadersReceived):
                path = dict(h3_event.headers)[b":path"]
                status = [(b":status", b"200"), (b"content-type", b"application/octet-stream")]
                self._http.send_headers(h3_event.stream_id, status)
                self._sizes[h3_event.stream_id] = self._left[h3_event.stream_id] = int(path.strip(b"/"))

    def datagram_received(self, data: bytes | str, addr: Any) -> None:
        super().datagram_received(data, addr)  # acknowledgements and window updates first
        self._feed()
        self.transmit()

    def _feed(self) -> None:
        for stream_id, left in list(self._left.items()):
            stream = self._quic._streams.get(stream_id)
            if stream is None:  # all of it sent and acknowledged: aioquic let the stream go
                del self._left[stream_id]
                self._hold(stream_id)
                continue
            sender = stream.sender
            while left and (room := stream.max_stream_data_remote - sender._buffer_stop) > 0:
                piece = min(left, room, 16384)
                left -= piece
                self._http.send_data(stream_id, b"x" * piece, end_stream=not left)
            self._left[stream_id] = left
            self._sent[stream_id] = sender.highest_offset
            acknowledged = sender._buffer_start == sender.highest_offset  # all it sent has been acknowledged
            if acknowledged and (not left or sender.highest_offset >= stream.max_stream_data_remote):
                self._hold(stream_id)

    def _hold(self, stream_id: int) -> None:
        """The body on ``stream_id`` can go no further: say so, and how far it got, the first time."""
        size = self._sizes[stream_id]
        self._site.let_through.setdefault(size, self._sent.get(stream_id, 0))
        self._site.held(size).set()


@pytest.fixture
def paced_site() -> Iterator[PacedSite]:
    with PacedSite() as running:
        yield running


@pytest.fixture
def h3_site() -> Iterator[Http3Site]:
    with Http3Site() as running:
        yield running


def slow_reader(first: str, big: str, ca_file: str, version: str, held: threading.Event | None) -> dict[str, Any]:
    """Run ``SLOW_READER`` on ``first`` and ``big``; it reads on when ``held`` is set (at once without one)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with subprocess.Popen(
        [sys.executable, "-c", SLOW_READER, first, big, ca_file, version],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    ) as crawl:
        assert crawl.stdin is not None
        assert crawl.stdout is not None
        try:
            assert crawl.stdout.readline() == "holding\n"
            if held is not None:
                assert held.wait(60), "the server never stopped sending"
            crawl.stdin.write("go\n")
            crawl.stdin.flush()
            out, _ = crawl.communicate(timeout=120)
        finally:
            crawl.kill()
    found: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return found


def test_a_slow_reader_over_http3_holds_a_window_of_its_body_not_all_of_it(
    paced_site: PacedSite, h3_site: Http3Site
) -> None:
    held = paced_site.held(SIZE)
    quic = slow_reader(paced_site.url(1), paced_site.url(SIZE), paced_site.ca_file, "quic", held)
    tcp = slow_reader(h3_site.url("/big?size=1"), h3_site.url(f"/big?size={SIZE}"), h3_site.ca_file, "tcp", None)
    assert quic["failed"] == tcp["failed"] == 0
    assert sum(quic["sizes"]) == sum(tcp["sizes"]) == SIZE  # the window opened again as the reader read on
    # while it did not read, the server could send a window past its first chunk, not the body
    assert paced_site.let_through[SIZE] < PIECE + STREAM_WINDOW + STREAM_WINDOW // 4
    assert quic["growth"] < tcp["growth"] + STREAM_WINDOW, (quic["growth"], tcp["growth"])
    # what waited is handed out in 64 KiB chunks, not packet by packet
    assert quic["sizes"][1:9] == [PIECE] * 8
    assert max(quic["sizes"]) == PIECE


def test_bodies_dropped_unread_over_http3_give_the_connection_its_window_back(paced_site: PacedSite) -> None:
    # more bodies, each left holding a window unread, than the connection's window has room for
    dropped = [2 * STREAM_WINDOW + n for n in range(CONNECTION_WINDOW // STREAM_WINDOW + 2)]
    read = 3 * STREAM_WINDOW
    routes = Router()
    sizes: list[int] = []

    @routes.default
    async def page(body: BodyStream) -> None:
        size = int(body.url.rsplit("/", 1)[1])
        if size in dropped:  # the handler returns once its window has come, reading none of it
            assert await anyio.to_thread.run_sync(paced_site.held(size).wait, 15)
            return
        sizes.append(len(await body.read()))
        async for chunk in body:
            sizes.append(len(chunk))

    backend = HttpBackend(http3="only", verify=paced_site.ca_file, timeout=Timeouts(connect=10, read=10, body=30))
    urls = [paced_site.url(size) for size in [*dropped, read]]
    stats = Crawler(routes, backend=backend, robots=False, concurrency=1, retry=RetryPolicy.never()).run(urls)
    assert stats.failed == 0
    assert sum(sizes) == read  # the last came whole: nothing the others left unread held the connection
    assert max(paced_site.let_through[size] for size in dropped) < STREAM_WINDOW + STREAM_WINDOW // 4
