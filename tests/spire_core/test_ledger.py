"""The ledger: every URL a crawl met, its fate, where it was found and each attempt, in every store."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from spire import Crawler, Links, Router, Seed
from spire_core.admission import IGNORED_EXTENSIONS, CrawlPolicy
from spire_core.errors import ConfigError
from spire_core.frontier.base import Frontier, Lease
from spire_core.frontier.memory import MemoryFrontier
from spire_core.frontier.redis import RedisFrontier
from spire_core.frontier.sqlite import SqliteFrontier
from spire_core.ledger import TIMELINE_BINS, Entry, Fate, LedgerView, export_jsonl, fate_line
from spire_core.ledger_sqlite import SqliteLedgerView
from spire_core.ledger_stores import LightLedger, ledger_of
from spire_core.outcome import Done
from spire_core.session.retry import RetryPolicy
from tests.redis_server import redis_server, redis_url
from tests.sites.server import Site

__all__ = ["redis_server", "redis_url"]  # fixtures

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def hung() -> Iterator[threading.Event]:
    """Set at teardown: a route waiting on it never answers while the test runs (a timeout)."""
    released = threading.Event()
    yield released
    released.set()


def fates_site(site: Site, hung: threading.Event) -> str:
    """A site with one URL of each fate: kept, robots, 404, timeout, off-site, mailto, .pdf, redirect."""
    site.page("/robots.txt", "User-agent: *\nDisallow: /private\n", content_type="text/plain")
    site.page(
        "/",
        '<a href="/a">a</a> <a href="/private/x">private</a> <a href="/missing">missing</a>'
        ' <a href="/slow">slow</a> <a href="http://elsewhere.example/">off</a> <a href="mailto:me@example.com">mail</a>'
        ' <a href="/doc.pdf">pdf</a> <a href="/moved">moved</a>',
    )
    site.page("/a", '<a href="/">home</a> <a href="/a">itself</a>')
    site.page("/missing", "gone", status=404)
    site.page("/moved", "", status=301, headers={"Location": "/target"})
    site.page("/target", "the target")

    def slow(request: object) -> tuple[int, dict[str, str], bytes]:
        hung.wait(timeout=30)
        return 200, {"Content-Type": "text/html"}, b"too late"

    site.route("/slow", slow)
    return site.url("/")


def links_router() -> Router:
    router = Router()

    @router.default
    async def page(links: Links) -> None:
        await links.enqueue()

    return router


async def crawl(frontier: Frontier, start: str, **options: object) -> Crawler:
    crawler = Crawler(
        links_router(),
        frontier=frontier,
        policy=CrawlPolicy(ignored_extensions=IGNORED_EXTENSIONS),
        retry=RetryPolicy.transient(backoff=0.01),
        timeouts=0.3,
        **options,  # type: ignore[arg-type]
    )
    await crawler.arun([Seed(start)])
    return crawler


async def found(view: LedgerView, url: str) -> Entry:
    entry = await view.entry(url)
    assert entry is not None, f"{url} is not in the ledger"
    return entry


async def check_fates(view: LedgerView, site: Site) -> None:
    """Each URL of ``fates_site`` has its fate and its referrer."""
    home = site.url("/")
    expected = {
        home: ("kept (200)", None),
        site.url("/a"): ("kept (200)", home),
        site.url("/private/x"): ("skipped: robots (Disallow: /private)", home),
        site.url("/missing"): ("failed: status (404) after 1 attempt", home),
        site.url("/slow"): ("failed: timeout after 3 attempts", home),
        "http://elsewhere.example/": ("skipped: strategy", home),
        "mailto:me@example.com": ("skipped: scheme", home),
        site.url("/doc.pdf"): ("skipped: extension", home),
        site.url("/moved"): ("kept (200)", home),
    }
    for url, (fate, referrer) in expected.items():
        entry = await found(view, url)
        assert (fate_line(entry), entry.referrer) == (fate, referrer), url
    moved = await found(view, site.url("/moved"))
    assert [(attempt.url, attempt.status) for attempt in moved.attempts] == [
        (site.url("/moved"), 301),
        (site.url("/target"), 200),
    ]
    assert (await found(view, site.url("/target"))).url == site.url("/moved")  # reached as its redirect
    assert (await found(view, site.url("/a"))).depth == 1
    assert len((await found(view, site.url("/slow"))).attempts) == 3
    assert await view.entry(site.url("/never-linked")) is None


async def test_a_memory_crawl_records_each_fate_with_its_referrer(site: Site, hung: threading.Event) -> None:
    frontier = MemoryFrontier()
    crawler = await crawl(frontier, fates_site(site, hung))
    assert crawler.ledger is ledger_of(frontier) is not None
    await check_fates(crawler.ledger, site)
    assert fate_line(await found(crawler.ledger, site.url("/a"))) == "kept (200)"
    assert (await crawler.why(site.url("/a"))) == await crawler.ledger.entry(site.url("/a"))


async def test_a_sqlite_crawl_records_each_fate_in_its_file(site: Site, hung: threading.Event, tmp_path: Path) -> None:
    path = tmp_path / "crawl.db"
    async with SqliteFrontier(path) as frontier:
        await crawl(frontier, fates_site(site, hung))
    async with SqliteLedgerView(path) as view:
        await check_fates(view, site)


async def test_a_redis_crawl_records_each_fate_for_every_worker_to_read(
    site: Site, hung: threading.Event, redis_url: str
) -> None:
    frontier = RedisFrontier(redis_url, name="fates")
    try:
        await crawl(frontier, fates_site(site, hung))
    finally:
        await frontier.aclose()
    reader = RedisFrontier(redis_url, name="fates")  # another worker, or spire status
    try:
        reader.open_ledger("full")
        assert reader.ledger is not None
        await check_fates(reader.ledger, site)
        summary = await reader.ledger.summary()
        assert summary.fates == {Fate.KEPT: 3, Fate.FAILED: 2, Fate.SKIPPED: 4}
        assert summary.requests == 9
        assert [entry.url for entry in await reader.ledger.entries(reason="robots")] == [site.url("/private/x")]
        # A fleet keeps no page states: no line has a change, whatever the filter asks.
        assert await reader.ledger.entries(fate=Fate.KEPT)
        assert await reader.ledger.entries(fate=Fate.KEPT, change="new") == []
        assert await reader.ledger.entries(changed=True) == []
    finally:
        await reader.aclose()


async def test_the_summary_counts_fates_statuses_hosts_and_samples(
    site: Site, hung: threading.Event, tmp_path: Path
) -> None:
    path = tmp_path / "crawl.db"
    memory = MemoryFrontier()
    await crawl(memory, fates_site(site, hung))
    async with SqliteFrontier(path) as frontier:
        await crawl(frontier, site.url("/"))
    assert memory.ledger is not None
    async with SqliteLedgerView(path) as view:
        for summary in (await memory.ledger.summary(samples=2), await view.summary(samples=2)):
            assert summary.fates == {Fate.KEPT: 3, Fate.FAILED: 2, Fate.SKIPPED: 4}
            assert summary.statuses == {200: 4, 301: 1, 404: 1}  # robots.txt, /, /a, /target; /moved; /missing
            assert summary.requests == 9  # with the three timeouts, which have no status
            assert summary.skips["robots"] == (1, summary.skips["robots"][1])
            assert [sample.referrer for sample in summary.skips["robots"][1]] == [site.url("/")]
            assert set(summary.failures) == {"status", "timeout"}
            host = next(row for row in summary.hosts if row.origin == site.origin)
            assert (host.requests, host.pages, host.errors) == (9, 3, {"status": 1, "timeout": 1})
            assert host.skips == {"robots": 1, "extension": 1}
            assert host.p50_ms is not None
            assert host.p95_ms is not None
            assert host.p50_ms <= host.p95_ms
            assert sum(count for _, count in summary.latency_histogram) == 9
            assert sum(requests for _, requests, _ in summary.timeline) == 9
            assert sum(kept for _, _, kept in summary.timeline) == 3


async def test_a_clock_that_once_said_1970_bins_the_timeline_by_its_range(site: Site, tmp_path: Path) -> None:
    for n in range(5):
        site.page(f"/p{n}", "ok")
    site.page("/", "".join(f'<a href="/p{n}">p{n}</a>' for n in range(5)))
    path = tmp_path / "crawl.db"
    async with SqliteFrontier(path) as frontier:
        await crawl(frontier, site.url("/"))
    with sqlite3.connect(path) as db:  # one request stamped by a clock at the epoch
        db.execute("UPDATE ledger_attempts SET at = 1.0 WHERE rowid = (SELECT min(rowid) FROM ledger_attempts)")
    async with SqliteLedgerView(path) as view:
        summary = await view.summary()
    assert summary.timeline_step > 1_000_000  # the range, 56 years, in at most TIMELINE_BINS bins
    assert len(summary.timeline) <= TIMELINE_BINS
    assert summary.timeline[-1][0] < summary.timeline_step * TIMELINE_BINS
    assert sum(requests for _, requests, _ in summary.timeline) == summary.requests == 7
    assert sum(kept for _, _, kept in summary.timeline) == 6


async def test_entries_are_paged_in_the_order_met_and_filtered(site: Site, hung: threading.Event) -> None:
    frontier = MemoryFrontier()
    await crawl(frontier, fates_site(site, hung))
    view = frontier.ledger
    assert view is not None
    everything = await view.entries(limit=100)
    assert everything[0].url == site.url("/")
    pages = [
        *await view.entries(limit=3),
        *await view.entries(limit=3, offset=3),
        *await view.entries(limit=100, offset=6),
    ]
    assert [entry.url for entry in pages] == [entry.url for entry in everything]
    skipped = await view.entries(fate=Fate.SKIPPED)
    assert {entry.reason for entry in skipped} == {"robots", "strategy", "scheme", "extension"}
    assert [entry.url for entry in await view.entries(reason="robots")] == [site.url("/private/x")]
    assert all(entry.attempts == () for entry in everything)
    with_attempts = await view.entries(fate=Fate.KEPT, attempts=True)
    assert all(entry.attempts for entry in with_attempts)


async def test_the_ledger_exports_as_json_lines(site: Site, hung: threading.Event, tmp_path: Path) -> None:
    frontier = MemoryFrontier()
    await crawl(frontier, fates_site(site, hung))
    assert frontier.ledger is not None
    out = tmp_path / "ledger.jsonl"
    count = await export_jsonl(frontier.ledger, str(out))
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert count == len(lines) == len(await frontier.ledger.entries(limit=1000))
    moved = next(line for line in lines if line["url"] == site.url("/moved"))
    assert moved["fate"] == "kept"
    assert [attempt["status"] for attempt in moved["attempts"]] == [301, 200]


async def test_a_running_crawls_ledger_can_be_read_beside_it(tmp_path: Path) -> None:
    path = tmp_path / "crawl.db"
    async with SqliteFrontier(path) as frontier:
        sink = frontier.open_ledger("full")
        seeds = [Seed("http://127.0.0.1:9/a"), Seed("http://127.0.0.1:9/b")]
        sink.found(seeds, None)
        await frontier.push(seeds, unique=True)
        async with SqliteLedgerView(path) as reader:  # while the frontier holds the file
            assert [entry.fate for entry in await reader.entries()] == [Fate.QUEUED, Fate.QUEUED]
            lease = await frontier.lease()
            assert isinstance(lease, Lease)
            await frontier.report(lease, Done())
            assert fate_line(await found(reader, lease.seed.url)) == "kept"  # committed with the report


async def test_ledger_false_keeps_none_and_light_keeps_counts(site: Site, hung: threading.Event) -> None:
    with pytest.raises(ConfigError, match="ledger must be 'full', 'light' or False, not 'ful'"):
        Crawler(links_router(), ledger="ful")  # type: ignore[arg-type]
    off = MemoryFrontier()
    crawler = await crawl(off, fates_site(site, hung), ledger=False)
    assert crawler.ledger is None
    assert off.ledger is None
    with pytest.raises(ConfigError, match="keeps no ledger"):
        await crawler.why(site.url("/"))
    light = MemoryFrontier()
    await crawl(light, site.url("/"), ledger="light")
    assert isinstance(light.ledger, LightLedger)
    summary = await light.ledger.summary()
    assert summary.fates == {Fate.KEPT: 3, Fate.FAILED: 2, Fate.SKIPPED: 4}
    assert summary.requests == 9
    assert summary.skips["robots"][1][0].url == site.url("/private/x")
    assert await light.ledger.entry(site.url("/private/x")) is not None  # a sample
    assert await light.ledger.entry(site.url("/a")) is None  # no line per kept URL
    assert await light.ledger.entries(reason="robots")
    assert await light.ledger.entries(reason="robots", change="new") == []  # it keeps no page states


async def test_a_start_seed_given_twice_has_one_line(site: Site) -> None:
    site.page("/", "home")
    frontier = MemoryFrontier()
    crawler = Crawler(links_router(), frontier=frontier)
    await crawler.arun([Seed(site.url("/")), Seed(site.url("/"))])
    assert frontier.ledger is not None
    assert [entry.url for entry in await frontier.ledger.entries()] == [site.url("/")]


def test_spire_why_reads_a_ledger_written_in_another_event_loop(site: Site, tmp_path: Path) -> None:
    site.page("/", "home")
    path = tmp_path / "crawl.db"

    async def run() -> None:
        async with SqliteFrontier(path) as frontier:
            await Crawler(links_router(), frontier=frontier).arun([Seed(site.url("/"))])

    anyio.run(run)

    async def read() -> str:
        async with SqliteLedgerView(path) as view:
            return fate_line(await found(view, site.url("/")))

    assert anyio.run(read) == "kept (200)"


async def test_a_refused_redirect_is_a_skip_of_the_seed_with_its_hop_as_an_attempt(site: Site) -> None:
    site.page("/", '<a href="/out">out</a>')
    site.page("/out", "", status=302, headers={"Location": "http://elsewhere.example/landing"})
    frontier = MemoryFrontier()
    await Crawler(links_router(), frontier=frontier).arun([Seed(site.url("/"))])
    assert frontier.ledger is not None
    out = await found(frontier.ledger, site.url("/out"))
    assert (fate_line(out), out.referrer) == ("skipped: strategy", site.url("/"))
    assert [(attempt.url, attempt.status) for attempt in out.attempts] == [(site.url("/out"), 302)]


async def test_a_state_file_written_without_a_ledger_gets_a_line_per_queued_seed(tmp_path: Path) -> None:
    path = tmp_path / "crawl.db"
    async with SqliteFrontier(path) as frontier:  # no ledger: an older spire, or ledger=False
        await frontier.push([Seed("http://127.0.0.1:9/a"), Seed("http://127.0.0.1:9/b")], unique=True)
    async with SqliteFrontier(path) as frontier:
        frontier.open_ledger("full")
        await frontier.pending()  # opens the file, creating the ledger's tables
        assert frontier.ledger is not None
        entries = await frontier.ledger.entries()
    assert [(entry.url, entry.fate) for entry in entries] == [
        ("http://127.0.0.1:9/a", Fate.QUEUED),
        ("http://127.0.0.1:9/b", Fate.QUEUED),
    ]


@pytest.mark.parametrize("store", ["memory", "sqlite"])
async def test_with_worker_processes_the_ledger_has_every_attempt_and_refusal(
    site: Site, hung: threading.Event, tmp_path: Path, store: str
) -> None:
    # the handlers and requests run in the workers; what they note reaches the crawl's ledger with each outcome
    frontier: Frontier = SqliteFrontier(tmp_path / "crawl.db") if store == "sqlite" else MemoryFrontier()
    crawler = await crawl(frontier, fates_site(site, hung), processes=2)
    assert crawler.ledger is not None
    await check_fates(crawler.ledger, site)
    if isinstance(frontier, SqliteFrontier):
        await frontier.aclose()


async def test_a_seed_urls_own_password_is_in_no_log_line_ledger_entry_or_report(
    site: Site, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    site.page("/", '<a href="/a">a</a>')
    site.page("/a", "a page")
    start = site.url("/").replace("http://", "http://alice:s3cret@")
    caplog.set_level("INFO", logger="spire.trace")
    async with SqliteFrontier(tmp_path / "state.db") as frontier:
        crawler = await crawl(frontier, start)
        entry = await crawler.why(start)
        assert entry is not None
        assert entry.fate is Fate.KEPT
        assert entry.url == site.url("/").replace("http://", "http://alice:***@")
        exported = tmp_path / "ledger.jsonl"
        assert crawler.ledger is not None
        await export_jsonl(crawler.ledger, str(exported))
        from spire.report.data import report_data

        report = json.dumps(await report_data(crawler.ledger, settings={"start": "x"}))
    assert "alice:***@" in caplog.text
    for text in (caplog.text, exported.read_text(encoding="utf-8"), report, repr(entry)):
        assert "s3cret" not in text
    assert any("authorization" in request.headers for request in site.page_requests())  # it was still sent
