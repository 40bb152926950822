"""The site crawl on the engine: several seeds, credentials by origin, a request budget, and a resume
after SIGKILL on a SQLite frontier like any other crawl."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

import spire
from tests.sites.server import Site, held_tree, killed_when_held
from tests.spire.site.helpers import FAST, collect, header, page, urls_of

pytestmark = pytest.mark.anyio

SCRIPT = Path(__file__).with_name("resume_site.py")
REPO = Path(__file__).parents[3]


async def test_several_seeds_crawl_the_union_of_their_scopes(site: Site, other_site: Site) -> None:
    site.page("/", page("a", "/a1", other_site.url("/b1")))
    site.page("/a1", page("a1"))
    other_site.page("/", page("b", "/b1"))
    other_site.page("/b1", page("b1"))
    crawl = spire.crawl([site.url("/"), other_site.url("/")], host_limits=FAST)
    pages, errors = await collect(crawl)
    assert errors == []
    assert urls_of(pages) == {site.url("/"), site.url("/a1"), other_site.url("/"), other_site.url("/b1")}


async def test_credentials_by_origin_reach_their_origin_only(site: Site, other_site: Site) -> None:
    site.page("/", page("a", other_site.url("/")))
    other_site.page("/", page("b"))
    crawl = spire.crawl(
        [site.url("/"), other_site.url("/")],
        host_limits=FAST,
        credentials={other_site.url("/"): {"Authorization": "Bearer b"}},
    )
    await collect(crawl)
    assert all(header(request, "authorization") is None for request in site.requests)
    assert all(header(request, "authorization") == "Bearer b" for request in other_site.requests)


async def test_max_requests_bounds_the_seeds_a_site_crawl_handles(site: Site) -> None:
    site.page("/", page("home", *(f"/p{n}" for n in range(20))))
    for n in range(20):
        site.page(f"/p{n}", page(f"p{n}"))
    crawl = spire.crawl(site.url("/"), host_limits=FAST, max_requests=5)
    pages, _ = await collect(crawl)
    assert len(pages) <= 5
    assert crawl.stats.finished <= 5


def test_a_site_crawl_on_a_sqlite_frontier_resumes_after_sigkill(site: Site, tmp_path: Path) -> None:
    pages, kill_after, concurrency = 60, 20, 4
    reached, killed = threading.Event(), threading.Event()
    held_tree(site, pages, hold_from=kill_after, reached=reached, released=killed, prefix="/p")
    state, output = tmp_path / "state.db", tmp_path / "pages.txt"
    command = [sys.executable, str(SCRIPT), str(state), site.url("/p0"), str(output)]
    killed_when_held(command, reached=reached, released=killed, cwd=REPO)
    second = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    kept = output.read_text(encoding="utf-8").split()
    assert set(kept) == {site.url(f"/p{i}") for i in range(pages)}
    hits = site.hits()
    refetched = [path for path, count in hits.items() if count > 1]
    assert len(refetched) <= concurrency, refetched  # only what was in flight at the kill ran again
    assert len(kept) - pages <= concurrency
