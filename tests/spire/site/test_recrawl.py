"""The site crawl's recrawl: pages handed out again only when new or changed, and sitemap ``lastmod``
trusted only once it has proved right, never after it has proved wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

import spire
from spire.site import CrawlPage
from spire_core.errors import ConfigError
from spire_core.frontier.sqlite import SqliteFrontier
from spire_core.ledger_sqlite import SqliteLedgerView
from spire_core.limits import HostLimits
from spire_core.recrawl import Recrawl, spot_check
from spire_core.seed import fingerprint as unique_key
from tests.sites.changing import ChangingSite
from tests.sites.server import Site
from tests.spire.site.helpers import collect
from tests.spire_core.test_recrawl import EXPECTED, PAGES, build, edit_the_site

pytestmark = pytest.mark.anyio


async def site_crawl(
    changing: ChangingSite, state: Path, recrawl: bool | Recrawl
) -> tuple[list[CrawlPage], dict[str, str]]:
    """One site crawl of ``changing`` on the state file: the pages it handed out, and its change feed
    (``{path: change}``). One request at a time, so its sitemap is read before its pages are revisited."""
    async with SqliteFrontier(state) as frontier:
        crawl = spire.crawl(
            changing.url("/"), frontier=frontier, recrawl=recrawl, host_limits=HostLimits(max_in_flight=1)
        )
        pages, errors = await collect(crawl)
        assert errors == []
        feed = {entry.url.split("/", 3)[3] or "/": str(entry.change) async for entry in crawl.changes()}
    return pages, feed


def paths_of(pages: list[CrawlPage]) -> dict[str, str]:
    return {page.url.split("/", 3)[3] or "/": page.change for page in pages}


async def test_a_site_recrawl_hands_out_new_and_changed_pages_and_feeds_every_change(
    changing: ChangingSite, tmp_path: Path
) -> None:
    state = tmp_path / "state.db"
    first, feed = await site_crawl(changing, state, recrawl=False)
    assert len(first) == PAGES
    assert set(paths_of(first).values()) == {"new"}
    assert set(feed.values()) == {"new"}  # sitemaps and the discovery of them are no pages
    edit_the_site(changing)

    pages, feed = await site_crawl(changing, state, recrawl=True)

    assert paths_of(pages) == {"/": "changed", "p3": "changed", "p7": "changed", "p20": "new"}
    assert feed == EXPECTED


async def test_without_recrawl_a_finished_site_crawl_is_not_crawled_again(
    changing: ChangingSite, tmp_path: Path
) -> None:
    state = tmp_path / "state.db"
    await site_crawl(changing, state, recrawl=False)
    before = len(changing.site.page_requests())

    pages, _ = await site_crawl(changing, state, recrawl=False)

    assert pages == []
    assert len(changing.site.page_requests()) == before


async def test_a_site_crawl_on_its_own_memory_frontier_keeps_no_page_states_and_says_so(
    changing: ChangingSite,
) -> None:
    """Nothing can recrawl a frontier the crawl made for itself, so it fingerprints no page, and its
    change feed is a ConfigError that names the frontier to pass."""
    crawl = spire.crawl(changing.url("/"), host_limits=HostLimits(max_in_flight=1))
    pages, errors = await collect(crawl)

    assert len(pages) == PAGES
    assert errors == []
    assert crawl.crawler.recrawl is None
    with pytest.raises(ConfigError, match=r"frontier=SqliteFrontier\(path\)"):
        async for _ in crawl.changes():
            pass


async def test_a_trusted_sitemap_lastmod_spares_the_requests_of_pages_it_says_are_unchanged(
    changing: ChangingSite, tmp_path: Path
) -> None:
    state, policy = tmp_path / "state.db", Recrawl(trust_lastmod_after=5)
    await site_crawl(changing, state, recrawl=policy)
    await site_crawl(changing, state, recrawl=policy)  # every lastmod unmoved, every page unchanged: trusted
    changing.tick()
    changing.put("/p3", "Page 3", "an honest edit, its lastmod moved", ["/"])
    before = len(changing.site.page_requests())

    pages, feed = await site_crawl(changing, state, recrawl=policy)

    asked = {request.path for request in changing.site.page_requests()[before:]} - {"/sitemap.xml"}
    every = {"/"} | {f"/p{i}" for i in range(1, PAGES)}
    checked = {path for path in every if spot_check(unique_key(changing.url(path)), 3, policy)}
    assert "/p3" in asked  # its lastmod moved
    assert checked <= asked  # this recrawl's spot checks
    # A page revisited before its sitemap was read is fetched (here at most the page leased beside it).
    assert len(asked - checked - {"/p3"}) <= 2
    assert len(asked) < PAGES // 2  # most pages were not fetched at all
    assert paths_of(pages) == {"p3": "changed"}
    assert feed["p3"] == "changed"
    assert {feed[path] for path in feed if path != "p3"} == {"unchanged"}
    async with SqliteLedgerView(state) as ledger:
        for path in every - asked:
            entry = await ledger.entry(changing.url(path))
            assert entry is not None
            assert (entry.how, entry.reason) == ("sitemap-lastmod", "lastmod")


async def test_a_page_changed_under_an_unmoved_lastmod_makes_its_host_untrusted_for_good(
    changing: ChangingSite, tmp_path: Path
) -> None:
    state, policy = tmp_path / "state.db", Recrawl(trust_lastmod_after=5)
    await site_crawl(changing, state, recrawl=policy)
    changing.edit_quietly("/p2", "changed, but neither Last-Modified nor the sitemap says so")

    _, feed = await site_crawl(changing, state, recrawl=policy)  # 18 pages prove it right, one wrong
    assert feed["p2"] == "changed"
    before = len(changing.site.page_requests())

    await site_crawl(changing, state, recrawl=policy)

    asked = {request.path for request in changing.site.page_requests()[before:]} - {"/sitemap.xml"}
    assert asked == {"/"} | {f"/p{i}" for i in range(1, PAGES)}  # every page asked again: lastmod not trusted


@pytest.fixture
def changing(site: Site) -> ChangingSite:
    return build(site, validators=True)
