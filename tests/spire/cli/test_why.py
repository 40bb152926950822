"""``spire why``: a URL's fate, referrer and attempts from a crawl's state file; a reason's URLs; export."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from spire import Crawler, Links, Router, Seed
from spire.cli import main
from spire_core.frontier.redis import RedisFrontier
from spire_core.frontier.sqlite import SqliteFrontier
from spire_core.session.retry import RetryPolicy
from tests.redis_server import redis_server, redis_url
from tests.sites.server import Site, held_tree, killed_when_held

__all__ = ["redis_server", "redis_url"]  # fixtures

REPO = Path(__file__).parents[3]


@pytest.fixture
def hung() -> Iterator[threading.Event]:
    released = threading.Event()
    yield released
    released.set()


def fates_site(site: Site, hung: threading.Event) -> None:
    site.page("/robots.txt", "User-agent: *\nDisallow: /private\n", content_type="text/plain")
    site.page(
        "/",
        '<title>home</title><p>the home page</p><a href="/a">a</a> <a href="/private/x">private</a>'
        ' <a href="/missing">missing</a> <a href="/slow">slow</a> <a href="http://elsewhere.example/">off</a>'
        ' <a href="mailto:me@example.com">mail</a> <a href="/doc.pdf">pdf</a> <a href="/moved">moved</a>',
    )
    site.page("/a", '<title>a</title><p>the page a</p><a href="/">home</a>')
    site.page("/missing", "gone", status=404)
    site.page("/moved", "", status=301, headers={"Location": "/target"})
    site.page("/target", "<title>target</title><p>the target page</p>")

    def slow(request: object) -> tuple[int, dict[str, str], bytes]:
        hung.wait(timeout=30)
        return 200, {"Content-Type": "text/html"}, b"too late"

    site.route("/slow", slow)


def why(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], str]:
    status = main(["why", *args])
    out, err = capsys.readouterr()
    return status, out.splitlines(), err


def spire(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "spire", *args], cwd=REPO, capture_output=True, text=True, timeout=120)


def test_spire_why_names_each_fate_of_a_site_crawl_and_where_it_was_found(
    site: Site, hung: threading.Event, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fates_site(site, hung)
    state = tmp_path / "crawl.sqlite"
    crawled = spire(
        "crawl", site.url("/"), "-o", str(tmp_path / "pages.jsonl"), "--state", str(state),
        "--per-second", "0", "--progress", "none", "--timeout", "0.3",
    )  # fmt: skip
    assert crawled.returncode == 0, crawled.stderr
    home = site.url("/")
    expected = {
        home: ("kept (200)", "  found: a start URL (depth 0)"),
        site.url("/a"): ("kept (200)", f"  found on: {home} (depth 1)"),
        site.url("/private/x"): ("skipped: robots (Disallow: /private)", f"  found on: {home} (depth 1)"),
        site.url("/missing"): ("skipped: status (HTTP 404)", f"  found on: {home} (depth 1)"),
        "http://elsewhere.example/": ("skipped: scope", f"  found on: {home} (depth 1)"),
        "mailto:me@example.com": ("skipped: scheme", f"  found on: {home} (depth 1)"),
        site.url("/doc.pdf"): ("skipped: extension", f"  found on: {home} (depth 1)"),
        site.url("/moved"): ("kept (200)", f"  found on: {home} (depth 1)"),
        site.url("/target"): ("kept (200)", f"  found on: {home} (depth 1)"),  # the redirect of /moved
    }
    for url, (fate, where) in expected.items():
        status, lines, _ = why(capsys, url, "--state", str(state))
        assert status == 0
        assert (lines[0], lines[2]) == (fate, where), url
    status, lines, _ = why(capsys, site.url("/slow"), "--state", str(state))
    assert lines[0].startswith("failed: timeout after ")
    attempts = int(lines[0].split("after ")[1].split()[0])
    assert attempts > 1
    assert lines[lines.index(f"  attempts: {attempts}") + 1].endswith(" timeout")
    status, lines, _ = why(capsys, site.url("/moved"), "--state", str(state))
    assert [line.split()[3:5] for line in lines[-2:]] == [
        [site.url("/moved"), "status=301"],
        [site.url("/target"), "status=200"],
    ]


def test_a_url_the_crawl_never_met_exits_1_with_one_sentence(site: Site, tmp_path: Path) -> None:
    site.page("/", "<title>home</title><p>alone</p>")
    state = tmp_path / "crawl.sqlite"
    spire("crawl", site.url("/"), "-o", str(tmp_path / "p.jsonl"), "--state", str(state), "--progress", "none")
    never = spire("why", site.url("/elsewhere"), "--state", str(state))
    assert never.returncode == 1
    assert never.stdout == ""
    assert never.stderr.strip() == (
        f"spire: the crawl in {state} never met {site.url('/elsewhere')}: it was not found on any page"
    )
    missing = spire("why", site.url("/"), "--state", str(tmp_path / "nothing.sqlite"))
    assert missing.returncode == 2
    assert "no crawl state at" in missing.stderr


def test_why_reason_lists_the_urls_skipped_for_it_with_their_referrers_and_export_writes_json_lines(
    site: Site, hung: threading.Event, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fates_site(site, hung)
    state = tmp_path / "crawl.sqlite"

    async def run() -> None:
        router = Router()

        @router.default
        async def page(links: Links) -> None:
            await links.enqueue()

        async with SqliteFrontier(state) as frontier:
            crawler = Crawler(router, frontier=frontier, retry=RetryPolicy.transient(backoff=0.01), timeouts=0.3)
            await crawler.arun([Seed(site.url("/"))])

    anyio.run(run)
    status, lines, _ = why(capsys, "--reason", "robots", "--state", str(state))
    assert (status, lines) == (0, [f"{site.url('/private/x')}  (found on {site.url('/')})  [Disallow: /private]"])
    status, lines, _ = why(capsys, site.url("/slow"), "--state", str(state))
    assert lines[0] == "failed: timeout after 3 attempts"
    status, lines, _ = why(capsys, site.url("/missing"), "--state", str(state))
    assert lines[0] == "failed: status (404) after 1 attempt"
    status, _, err = why(capsys, "--reason", "captcha", "--state", str(state))
    assert status == 1
    assert "was skipped or failed for 'captcha' (its reasons: robots, scheme, status, strategy, timeout)" in err
    out = tmp_path / "ledger.jsonl"
    status, lines, _ = why(capsys, "--export", str(out), "--state", str(state))
    entries = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert lines == [f"wrote {len(entries)} ledger entries to {out}"]
    assert {entry["url"]: entry["fate"] for entry in entries}[site.url("/a")] == "kept"


def test_why_reads_a_fleets_ledger_from_redis(site: Site, redis_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    site.page("/", '<a href="/a">a</a> <a href="mailto:me@example.com">mail</a>')
    site.page("/a", "a")

    async def run() -> None:
        router = Router()

        @router.default
        async def page(links: Links) -> None:
            await links.enqueue()

        frontier = RedisFrontier(redis_url, name="whyfleet")
        try:
            await Crawler(router, frontier=frontier).arun([Seed(site.url("/"))])
        finally:
            await frontier.aclose()

    anyio.run(run)
    status, lines, _ = why(capsys, site.url("/a"), "--redis", redis_url, "--name", "whyfleet")
    assert (status, lines[0], lines[2]) == (0, "kept (200)", f"  found on: {site.url('/')} (depth 1)")
    status, lines, _ = why(capsys, "--reason", "scheme", "--redis", redis_url, "--name", "whyfleet")
    assert lines == [f"mailto:me@example.com  (found on {site.url('/')})"]
    status, _, err = why(capsys, site.url("/b"), "--redis", redis_url, "--name", "whyfleet")
    assert status == 1
    assert f"the crawl in 'whyfleet' at {redis_url} never met" in err


def ledger_agrees_with_queue(state: Path) -> tuple[int, int]:
    """Check every queued seed is queued in the ledger and every settled one settled; ``(queued, settled)``."""
    db = sqlite3.connect(f"file:{state}?mode=ro", uri=True)
    try:
        queue = dict(db.execute("SELECT unique_key, state FROM queue").fetchall())
        fates = dict(db.execute("SELECT key, fate FROM ledger").fetchall())
        seen = {key for (key,) in db.execute("SELECT key FROM seen")}
    finally:
        db.close()
    for key, row_state in queue.items():
        assert fates.get(key) == ("failed" if row_state == 3 else "queued"), key  # 3: failed for good
    for key, fate in fates.items():
        if fate == "queued":
            assert key in queue, key
    settled = seen - set(queue)
    for key in settled:
        assert fates.get(key) in ("kept", "skipped", "failed", "read"), key
    return sum(1 for fate in fates.values() if fate == "queued"), len(settled)


def test_after_kill_9_and_resume_the_ledger_agrees_with_the_frontier(site: Site, tmp_path: Path) -> None:
    reached, released = threading.Event(), threading.Event()
    held_tree(site, 40, hold_from=15, reached=reached, released=released, prefix="/p")
    state = tmp_path / "crawl.sqlite"
    command = [
        sys.executable, "-m", "spire", "crawl", site.url("/p0"), "-o", str(tmp_path / "pages.jsonl"),
        "--state", str(state), "--max-in-flight", "4", "--per-second", "0", "--progress", "none",
    ]  # fmt: skip
    crawl = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert reached.wait(timeout=60), "the crawl never reached the kill point"
        running = spire("why", site.url("/p0"), "--state", str(state))  # read beside the running crawl
        assert running.returncode == 0, running.stderr
        assert running.stdout.splitlines()[0] == "kept (200)"
        crawl.send_signal(signal.SIGKILL)
        crawl.communicate(timeout=30)
    finally:
        if crawl.poll() is None:
            crawl.kill()
            crawl.wait()
        released.set()
    queued, settled = ledger_agrees_with_queue(state)
    assert queued > 0
    assert settled > 0
    resumed = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    queued, _ = ledger_agrees_with_queue(state)
    assert queued == 0
    db = sqlite3.connect(f"file:{state}?mode=ro", uri=True)
    try:
        pages = dict(db.execute("SELECT url, fate FROM ledger WHERE tag IS NOT 'spire:discover'").fetchall())
        referrer = db.execute("SELECT referrer FROM ledger WHERE url = ?", (site.url("/p39"),)).fetchone()[0]
    finally:
        db.close()
    assert {site.url(f"/p{i}"): "kept" for i in range(40)}.items() <= pages.items()
    assert referrer == site.url("/p19")  # page i links to 2i+1 and 2i+2


def story_site(site: Site) -> None:
    """A site whose every URL has one story: robots.txt and a missing sitemap read, a nofollow link, a
    mailto: link, and /a held for its canonical page /b (fetched after it), then dropped."""
    site.page("/robots.txt", "User-agent: *\nAllow: /\n", content_type="text/plain")
    site.page("/sitemap.xml", "no sitemap", status=404)
    site.page(
        "/",
        '<title>home</title><p>the home page</p><a href="/a">a</a> <a href="/b">b</a>'
        ' <a rel="nofollow" href="private/login">login</a> <a href="mailto:me@example.com">mail</a>',
    )
    site.page("/a", '<title>a</title><link rel="canonical" href="/b"><p>the page a, a copy of b</p>')
    site.page("/b", "<title>b</title><p>the page b itself</p>")


def test_why_tells_files_read_from_pages_and_a_page_dropped_for_its_canonical_from_one_kept(
    site: Site, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    story_site(site)
    state, out = tmp_path / "crawl.sqlite", tmp_path / "pages.jsonl"
    crawled = spire(
        "crawl", site.url("/"), "-o", str(out), "--state", str(state), "--per-second", "0", "--progress", "none"
    )
    assert crawled.returncode == 0, crawled.stderr
    written = {json.loads(line)["url"] for line in out.read_text(encoding="utf-8").splitlines()}
    assert written == {site.url("/"), site.url("/b")}
    assert "skipped.canonical=1" in crawled.stderr
    home, robots = site.url("/"), site.url("/robots.txt")
    expected = {
        robots: ("read: robots.txt", "  found: read by the crawl itself (depth 0)"),
        site.url("/sitemap.xml"): ("read: sitemap (404, no sitemap there)", f"  found on: {robots} (depth 0)"),
        site.url("/a"): ("skipped: canonical", f"  found on: {home} (depth 1)"),
        site.url("/b"): ("kept (200)", f"  found on: {home} (depth 1)"),
        site.url("/private/login"): ("skipped: nofollow", f"  found on: {home} (depth 1)"),
    }  # fmt: skip
    for url, (fate, where) in expected.items():
        status, lines, _ = why(capsys, url, "--state", str(state))
        assert (status, lines[0], lines[2]) == (0, fate, where), url
        assert not [line for line in lines if line.startswith("  change:")], url  # a first crawl: no change line
    status, lines, _ = why(capsys, robots, "--state", str(state))  # its request was made for no seed: it is shown
    assert lines[3] == "  attempts: 1"
    assert lines[4].split()[3:5] == [robots, "status=200"]
    db = sqlite3.connect(f"file:{state}?mode=ro", uri=True)
    try:
        fates = dict(db.execute("SELECT fate, count(*) FROM ledger GROUP BY fate").fetchall())
        origins = {origin for (origin,) in db.execute("SELECT origin FROM ledger WHERE reason = 'nofollow'")}
    finally:
        db.close()
    assert fates["kept"] == len(written)  # the ledger's kept pages are the pages written
    assert fates["read"] == 2
    assert origins == {site.origin}


def test_a_request_in_flight_at_kill_9_is_in_the_ledger_as_interrupted(
    site: Site, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reached, released = threading.Event(), threading.Event()
    held_tree(site, 7, hold_from=3, reached=reached, released=released, prefix="/p")
    state = tmp_path / "crawl.sqlite"
    command = [
        sys.executable, "-m", "spire", "crawl", site.url("/p0"), "-o", str(tmp_path / "pages.jsonl"),
        "--state", str(state), "--per-second", "0", "--progress", "none",
    ]  # fmt: skip
    killed_when_held(command, reached=reached, released=released, cwd=REPO)
    held = [path for path, count in site.hits().items() if count == 1 and path.startswith("/p")][-1]
    resumed = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    db = sqlite3.connect(f"file:{state}?mode=ro", uri=True)
    try:
        recorded = dict(db.execute("SELECT url, count(*) FROM ledger_attempts GROUP BY url").fetchall())
    finally:
        db.close()
    served = {site.url(path): count for path, count in site.hits(robots=True).items()}
    assert recorded == served  # every request the server had, the one in flight at the kill included
    status, lines, _ = why(capsys, site.url(held), "--state", str(state))
    assert (status, lines[0]) == (0, "kept (200)")
    assert lines[lines.index("  attempts: 2") + 1].endswith("interrupted: in flight when the crawl was killed")
