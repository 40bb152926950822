"""A crawl on a ``SqliteFrontier`` killed with SIGKILL resumes from its file and finishes the site."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from pathlib import Path

import anyio

from spire_core import SqliteFrontier
from tests.sites.server import Site, held_tree, killed_when_held

CRAWL = Path(__file__).with_name("resume_crawl.py")
REPO = Path(__file__).parents[3]
PAGES = 200
CONCURRENCY = 4  # what resume_crawl.py runs with: at most this many requests in flight at the kill
KILL_AFTER = 60
DELAY = 0.02  # the server answers each page this late, so the crawl is still running at the kill


def run_crawl(path: Path, root: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CRAWL), str(path), root], cwd=REPO, capture_output=True, text=True, timeout=120
    )


def page_hits(site: Site) -> dict[str, int]:
    return {path: count for path, count in site.hits().items() if path.startswith("/page/")}


async def pending(path: Path) -> int:
    async with SqliteFrontier(path) as frontier:
        return await frontier.pending()


def test_a_killed_crawl_resumes_from_its_file_and_refetches_only_what_was_in_flight(site: Site, tmp_path: Path) -> None:
    path = tmp_path / "crawl.db"
    reached, killed = threading.Event(), threading.Event()
    root = held_tree(site, PAGES, hold_from=KILL_AFTER, reached=reached, released=killed, delay=DELAY)

    first = killed_when_held([sys.executable, str(CRAWL), str(path), root], reached=reached, released=killed, cwd=REPO)
    assert first.returncode == -signal.SIGKILL, first.stderr
    before = page_hits(site)
    assert KILL_AFTER <= sum(before.values()) < PAGES

    second = run_crawl(path, root)
    assert second.returncode == 0, second.stderr

    hits = page_hits(site)
    assert set(hits) == {f"/page/{i}" for i in range(PAGES)}
    refetched = sorted(page for page, count in hits.items() if count > 1)
    # Exactly the requests in flight at the kill ran again: at least the one held open, at most
    # one per crawl slot; everything reported before the kill stayed done.
    assert 1 <= len(refetched) <= CONCURRENCY, refetched
    assert all(hits[page] == 2 for page in refetched)
    assert anyio.run(pending, path) == 0

    # The file remembers the finished crawl: running it again fetches nothing.
    total = sum(hits.values())
    third = run_crawl(path, root)
    assert third.returncode == 0, third.stderr
    assert sum(page_hits(site).values()) == total
