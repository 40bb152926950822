"""One story of each URL in every ledger a site crawl keeps (memory, Redis; SQLite in tests/spire/cli):
robots.txt and sitemaps are files read, not pages kept; a page dropped for its canonical page once
it was settled is a skip; a nofollow link is recorded under its absolute URL."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator

import pytest

import spire
from spire_core.frontier.base import Frontier
from spire_core.frontier.memory import MemoryFrontier
from spire_core.frontier.redis import RedisFrontier
from spire_core.ledger import Fate
from tests.redis_server import redis_server, redis_url
from tests.sites.server import Site
from tests.spire.cli.test_why import story_site
from tests.spire.report.conftest import fast_limits, ledger_of

__all__ = ["redis_server", "redis_url"]  # fixtures

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["memory", "redis"])
def frontier(request: pytest.FixtureRequest) -> Iterator[Frontier]:
    if request.param == "memory":
        yield MemoryFrontier()
        return
    yield RedisFrontier(request.getfixturevalue("redis_url"), name=f"story-{uuid.uuid4().hex[:8]}")


async def test_every_ledger_tells_files_read_and_late_canonical_drops_from_pages_kept(
    site: Site, frontier: Frontier
) -> None:
    story_site(site)
    one_at_a_time = dataclasses.replace(fast_limits(), max_in_flight=1)  # /a is settled before /b is fetched
    crawl = spire.crawl(site.url("/"), frontier=frontier, host_limits=one_at_a_time)
    try:
        async with crawl:
            kept = [page.url async for page in crawl if isinstance(page, spire.CrawlPage)]
        ledger = ledger_of(crawl)
        fates = {
            path: (None if entry is None else (entry.fate, entry.reason, entry.status))
            for path in ("/robots.txt", "/sitemap.xml", "/a", "/b", "/private/login")
            for entry in [await ledger.entry(site.url(path))]
        }
        summary = await ledger.summary()
    finally:
        await frontier.aclose()
    assert sorted(kept) == [site.url("/"), site.url("/b")]
    assert fates == {
        "/robots.txt": (Fate.READ, "robots.txt", None),
        "/sitemap.xml": (Fate.READ, "sitemap", 404),
        "/a": (Fate.SKIPPED, "canonical", 200),
        "/b": (Fate.KEPT, None, 200),
        "/private/login": (Fate.SKIPPED, "nofollow", None),
    }
    assert summary.fates[Fate.KEPT] == len(kept)
    assert summary.fates[Fate.READ] == 2
