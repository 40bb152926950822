"""The dashboard's server: loopback by default, a clear error for a taken port, paged URLs, and reads
of the ledger kept under 5% of the crawl's event loop."""

from __future__ import annotations

import logging
import socket
from collections.abc import Sequence

import anyio
import httpx
import pytest

from spire.report import Dashboard
from spire.site import SiteCrawl
from spire_core.errors import ConfigError
from spire_core.ledger import Entry, LedgerSummary, LedgerView
from tests.sites.server import Site

SETTINGS = {"start": "http://127.0.0.1/"}


def test_it_listens_on_loopback_and_pages_the_url_table(crawled: tuple[Site, LedgerView, SiteCrawl]) -> None:
    site, ledger, _ = crawled

    async def main() -> None:
        async with Dashboard(ledger, settings=SETTINGS) as dashboard, httpx.AsyncClient() as client:
            assert dashboard.url.startswith("http://127.0.0.1:")
            data = (await client.get(dashboard.url + "data.json")).json()
            assert data["live"] is True
            assert data["totals"]["failed"] == 1
            second = (await client.get(dashboard.url + "entries.json", params={"offset": 1})).json()
            assert second[0]["url"] == data["entries"]["first"]["all"][1]["url"]
            skipped = (await client.get(dashboard.url + "entries.json", params={"fate": "skipped"})).json()
            assert {row["url"] for row in skipped} >= {site.url("/private/x"), site.url("/report.pdf")}
            bad = await client.get(dashboard.url + "entries.json", params={"offset": "x"})
            assert bad.status_code == 400

    anyio.run(main)


def test_a_taken_port_is_one_sentence_naming_it(crawled: tuple[Site, LedgerView, SiteCrawl]) -> None:
    _, ledger, _ = crawled
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]

        async def main() -> None:
            async with Dashboard(ledger, settings=SETTINGS, port=port):
                pass

        with pytest.raises(ConfigError, match=f"cannot listen on 127.0.0.1:{port}.*--dashboard PORT"):
            anyio.run(main)


class SteppedClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class TimedView:
    """A crawl's real ledger whose summary takes ``cost`` seconds of a stepped clock, and is counted."""

    def __init__(self, ledger: LedgerView, clock: SteppedClock, cost: float) -> None:
        self.ledger, self.clock, self.cost = ledger, clock, cost
        self.summaries = 0

    async def entry(self, url: str) -> Entry | None:
        return await self.ledger.entry(url)

    async def entries(self, **filters: object) -> Sequence[Entry]:
        return await self.ledger.entries(**filters)  # type: ignore[arg-type]

    async def summary(self, *, samples: int = 5) -> LedgerSummary:
        self.summaries += 1
        self.clock.now += self.cost
        return await self.ledger.summary(samples=samples)


@pytest.mark.parametrize(
    ("cost", "fresh_for"),
    [(0.001, 1.0), (0.5, 10.0)],  # a cheap read: once a refresh; a slow one: 20 times its cost apart
)
def test_the_ledger_is_read_at_most_once_a_refresh_and_under_5_percent_of_the_loop(
    crawled: tuple[Site, LedgerView, SiteCrawl], cost: float, fresh_for: float
) -> None:
    _, ledger, _ = crawled
    clock = SteppedClock()
    view = TimedView(ledger, clock, cost)
    dashboard = Dashboard(view, settings=SETTINGS, refresh=1.0, clock=clock)

    async def main() -> None:
        first = await dashboard.data()
        assert view.summaries == 1
        clock.now = fresh_for - 0.01  # polls from every open page before then get the same data
        assert await dashboard.data() is first
        assert await dashboard.data() is first
        assert view.summaries == 1
        clock.now = fresh_for
        await dashboard.data()
        assert view.summaries == 2

    anyio.run(main)


class HeldView(TimedView):
    """A real ledger whose first summary is held until a second one starts (or a bounded wait ends):
    polls that each read the ledger meet while the first read is in flight."""

    def __init__(self, ledger: LedgerView) -> None:
        super().__init__(ledger, SteppedClock(), 0.0)
        self.second = anyio.Event()

    async def summary(self, *, samples: int = 5) -> LedgerSummary:
        if self.summaries == 0:
            self.summaries += 1
            with anyio.move_on_after(2):  # a read of its own would end the wait at once
                await self.second.wait()
        else:
            self.summaries += 1
            self.second.set()
        return await self.ledger.summary(samples=samples)


def test_polls_that_come_during_a_read_share_it(crawled: tuple[Site, LedgerView, SiteCrawl]) -> None:
    _, ledger, _ = crawled
    view = HeldView(ledger)

    async def main() -> list[bytes]:
        answers: list[bytes] = []
        async with Dashboard(view, settings=SETTINGS, clock=view.clock) as dashboard, httpx.AsyncClient() as client:

            async def poll() -> None:
                answers.append((await client.get(dashboard.url + "data.json")).content)

            with anyio.fail_after(30):
                async with anyio.create_task_group() as tg:
                    for _ in range(20):
                        tg.start_soon(poll)
        return answers

    answers = anyio.run(main)
    assert view.summaries == 1
    assert len(answers) == 20
    assert len(set(answers)) == 1  # one read served them all


async def raw_get(port: int, head: bytes) -> bytes:
    """What the server at ``port`` answers ``head`` (a request line and headers), over a raw socket."""
    with anyio.fail_after(10):
        async with await anyio.connect_tcp("127.0.0.1", port) as stream:
            await stream.send(head + b"Connection: close\r\n\r\n")
            answer = b""
            try:
                while chunk := await stream.receive():
                    answer += chunk
            except anyio.EndOfStream:
                pass
            return answer


def test_it_answers_only_requests_addressed_to_it(crawled: tuple[Site, LedgerView, SiteCrawl]) -> None:
    _, ledger, _ = crawled

    async def main() -> None:
        async with Dashboard(ledger, settings=SETTINGS) as dashboard:
            port = dashboard.port
            for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"):
                ok = await raw_get(port, f"GET /data.json HTTP/1.1\r\nHost: {host}\r\n".encode())
                assert ok.startswith(b"HTTP/1.1 200"), host
            rebound = await raw_get(port, f"GET /data.json HTTP/1.1\r\nHost: evil.example:{port}\r\n".encode())
            assert rebound.startswith(b"HTTP/1.1 421")
            assert b"answers only to 127.0.0.1:" in rebound
            assert b"/private/x" not in rebound
            no_port = await raw_get(port, b"GET /entries.json HTTP/1.1\r\nHost: evil.example\r\n")
            assert no_port.startswith(b"HTTP/1.1 421")
            cross = await raw_get(
                port,
                f"GET /entries.json HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nOrigin: http://evil.example\r\n".encode(),
            )
            assert cross.startswith(b"HTTP/1.1 403")
            assert b"/private/x" not in cross
            own = await raw_get(
                port,
                f"GET /data.json HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nOrigin: http://127.0.0.1:{port}\r\n".encode(),
            )
            assert own.startswith(b"HTTP/1.1 200")

    anyio.run(main)


def test_an_offset_past_any_row_or_a_too_long_line_is_a_400_and_no_traceback(
    crawled: tuple[Site, LedgerView, SiteCrawl], caplog: pytest.LogCaptureFixture
) -> None:
    _, ledger, _ = crawled

    async def main() -> tuple[bytes, bytes]:
        async with Dashboard(ledger, settings=SETTINGS) as dashboard:
            port = dashboard.port
            huge = await raw_get(
                port, f"GET /entries.json?offset={'9' * 20} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode()
            )
            long = await raw_get(
                port, f"GET /entries.json?q={'a' * 100_000} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode()
            )
            return huge, long

    with caplog.at_level(logging.DEBUG):
        huge, long = anyio.run(main)
    assert huge.startswith(b"HTTP/1.1 400")
    assert huge.split(b"\r\n\r\n", 1)[1].decode().endswith("offset a number.\n")
    assert long.startswith(b"HTTP/1.0 400")  # aiohttp's own answer: the line never reached the dashboard
    assert b"Traceback" not in long
    served = [record for record in caplog.records if record.name.startswith("aiohttp")]
    assert not [record for record in served if record.exc_info], caplog.text
