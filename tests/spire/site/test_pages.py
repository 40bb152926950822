"""Which fetched pages the site crawl keeps: statuses, content types, blocks, page rules, canonicals, copies."""

from __future__ import annotations

import pytest

import spire
from spire.site import CrawlPage, SkipReason
from spire_core.backend.http import HttpBackend
from spire_core.blocks import BlockRules
from spire_core.ledger import Fate
from spire_core.limits import HostLimits
from tests.sites.server import Site
from tests.spire.site.helpers import FAST, collect, page, page_paths, paths, urls_of

pytestmark = pytest.mark.anyio

WORDS = " ".join(f"word{number}" for number in range(30))  # long enough to be compared as a copy


async def test_a_kept_page_has_its_url_depth_status_html_text_and_meta(site: Site) -> None:
    head = '<meta name="Description" content="All about A"><meta property="og:title" content="A!">'
    site.page("/", page("home", "/a"))
    site.page("/a", page("Page  A", body="Hello <b>there</b>", head=head))
    pages, _ = await collect(spire.crawl(site.url("/"), host_limits=FAST))
    a = next(item for item in pages if item.url == site.url("/a"))
    assert (a.depth, a.status, a.title) == (1, 200, "Page A")
    assert "<b>there</b>" in a.html
    assert a.text.splitlines()[0] == "Hello there"
    assert a.meta("description") == "All about A"
    assert a.meta("OG:TITLE") == "A!"
    assert a.meta("keywords") is None
    assert a.to_json()["meta"] == {"description": "All about A", "og:title": "A!"}


async def test_error_statuses_are_skipped(site: Site) -> None:
    site.page("/", page("home", "/gone", "/forbidden", "/missing"))
    site.page("/gone", page("gone"), status=410)
    site.page("/forbidden", page("forbidden"), status=403)
    crawl = spire.crawl(site.url("/"), host_limits=FAST)
    pages, errors = await collect(crawl)
    assert urls_of(pages) == {site.url("/")}
    assert errors == []
    assert crawl.stats.skipped(SkipReason.STATUS) == 3


async def test_only_html_content_types_are_kept(site: Site) -> None:
    site.page("/", page("home", "/doc", "/data.json", "/page.xhtml"))
    site.page("/doc", b"%PDF-1.7", content_type="application/pdf")
    site.page("/data.json", b"{}", content_type="application/json")
    site.page("/page.xhtml", page("xhtml"), content_type="application/xhtml+xml")
    crawl = spire.crawl(site.url("/"), host_limits=FAST)
    pages, _ = await collect(crawl)
    assert urls_of(pages) == {site.url("/"), site.url("/page.xhtml")}
    assert crawl.stats.skipped(SkipReason.CONTENT_TYPE) == 2


async def test_links_to_well_known_non_page_files_are_skipped_before_any_request(site: Site) -> None:
    site.page("/", page("home", "/report.PDF", "/photo.jpg?size=2", "/archive.tar.gz", "/page.html"))
    site.page("/page.html", page("page"))
    crawl = spire.crawl(site.url("/"), host_limits=FAST)
    pages, _ = await collect(crawl)
    assert urls_of(pages) == {site.url("/"), site.url("/page.html")}
    assert crawl.stats.skipped(SkipReason.EXTENSION) == 3
    assert sorted(page_paths(site)) == ["/", "/page.html"]


async def test_a_page_without_content_type_is_kept_when_it_sniffs_as_html(site: Site) -> None:
    site.page("/", page("home", "/untyped-html", "/untyped-text"))
    site.route("/untyped-html", lambda request: (200, {}, b"  <!DOCTYPE html><html><p>hi</p></html>"))
    site.route("/untyped-text", lambda request: (200, {}, b"just some text <p>"))
    crawl = spire.crawl(site.url("/"), host_limits=FAST)
    pages, _ = await collect(crawl)
    assert urls_of(pages) == {site.url("/"), site.url("/untyped-html")}
    assert crawl.stats.skipped(SkipReason.CONTENT_TYPE) == 1


async def test_block_pages_of_known_vendors_are_skipped(site: Site) -> None:
    site.page("/", page("home", "/challenge", "/incident"))
    site.page("/challenge", page("Just a moment..."), status=403, headers={"cf-mitigated": "challenge"})
    site.page("/incident", page("denied", body="Request unsuccessful. Incapsula incident ID: 1-2"))
    crawl = spire.crawl(site.url("/"), host_limits=FAST)
    pages, _ = await collect(crawl)
    assert urls_of(pages) == {site.url("/")}
    assert crawl.stats.skipped(SkipReason.BLOCKED) == 2
    assert crawl.stats.skipped(SkipReason.STATUS) == 0


async def test_block_rules_from_toml_and_bare_statuses_are_used(site: Site) -> None:
    rules = BlockRules.builtin()
    rules.extend(
        BlockRules.from_toml('[[rule]]\nvendor = "shop"\nkind = "block"\nheader = "x-shop-block"\nvalue = "1"\n')
    )
    rules.extend(BlockRules.statuses([429]))
    site.page("/", page("home", "/flagged", "/limited"))
    site.page("/flagged", page("flagged"), headers={"X-Shop-Block": "1"})
    site.page("/limited", page("slow down"), status=429, headers={"Retry-After": "0"})
    crawl = spire.crawl(site.url("/"), host_limits=FAST, block_rules=rules)
    pages, errors = await collect(crawl)
    assert urls_of(pages) == {site.url("/")}
    assert errors == []
    assert crawl.stats.skipped(SkipReason.BLOCKED) == 2
    assert page_paths(site).count("/limited") == 1  # a block is skipped, not tried again


async def test_a_failed_url_comes_out_as_an_error_and_the_crawl_goes_on(site: Site) -> None:
    site.page("/", page("home", "/broken", "/fine"))
    site.page("/broken", b"not gzip at all", headers={"Content-Encoding": "gzip"})
    site.page("/fine", page("fine"))
    crawl = spire.crawl(site.url("/"), host_limits=FAST)
    pages, errors = await collect(crawl)
    assert urls_of(pages) == {site.url("/"), site.url("/fine")}
    assert [(error.url, error.category) for error in errors] == [(site.url("/broken"), "decode")]
    assert crawl.stats.errors == 1
    assert page_paths(site).count("/broken") == 1  # not worth a retry


async def test_a_body_over_the_backend_cap_is_an_error(site: Site) -> None:
    site.page("/", page("home", "/huge"))
    site.page("/huge", page("huge", body="x" * 5000))
    crawl = spire.crawl(site.url("/"), host_limits=FAST, backend=HttpBackend(max_body_size=2000))
    pages, errors = await collect(crawl)
    assert [error.category for error in errors] == ["body_limit"]
    assert urls_of(pages) == {site.url("/")}


# -- the page's own rules ----------------------------------------------------------------------------


async def test_a_noindex_page_is_skipped_but_its_links_are_followed(site: Site) -> None:
    site.page("/", page("home", "/hub"))
    site.page("/hub", page("hub", "/leaf", head='<meta name="robots" content="noindex">'))
    site.page("/leaf", page("leaf"))
    crawl = spire.crawl(site.url("/"), host_limits=FAST)
    pages, _ = await collect(crawl)
    assert urls_of(pages) == {site.url("/"), site.url("/leaf")}
    assert crawl.stats.skipped(SkipReason.NOINDEX) == 1


async def test_a_nofollow_page_queues_nothing(site: Site) -> None:
    site.page("/", page("home", "/hub"))
    site.page("/hub", page("hub", "/leaf", head='<meta name="ROBOTS" content="NOFOLLOW">'))
    site.page("/leaf", page("leaf"))
    pages, _ = await collect(spire.crawl(site.url("/"), host_limits=FAST))
    assert urls_of(pages) == {site.url("/"), site.url("/hub")}
    assert "/leaf" not in paths(site)


async def test_links_marked_rel_nofollow_are_skipped(site: Site) -> None:
    site.page("/", '<a href="/a" rel="nofollow">a</a><a href="/b" rel="ugc NoFollow">b</a><a href="/c">c</a>')
    site.page("/c", page("c"))
    crawl = spire.crawl(site.url("/"), host_limits=FAST)
    pages, _ = await collect(crawl)
    assert urls_of(pages) == {site.url("/"), site.url("/c")}
    assert crawl.stats.skipped(SkipReason.NOFOLLOW) == 2


async def test_x_robots_tag_headers_apply_and_one_naming_an_agent_applies_to_it_alone(site: Site) -> None:
    site.page("/", page("home", "/all", "/ours", "/theirs", "/none"))
    site.page("/all", page("all"), headers={"X-Robots-Tag": "noindex"})
    site.page("/ours", page("ours"), headers={"X-Robots-Tag": "SpireBot: noindex"})
    site.page("/theirs", page("theirs"), headers={"X-Robots-Tag": "otherbot: noindex"})
    site.page("/none", page("none", "/behind"), headers={"X-Robots-Tag": "none"})
    site.page("/behind", page("behind"))
    pages, _ = await collect(spire.crawl(site.url("/"), host_limits=FAST))
    assert urls_of(pages) == {site.url(p) for p in ("/", "/ours", "/theirs")}
    pages, _ = await collect(spire.crawl(site.url("/"), host_limits=FAST, agent="spirebot"))
    assert urls_of(pages) == {site.url(p) for p in ("/", "/theirs")}
    assert "/behind" not in paths(site)


async def test_a_meta_tag_named_for_the_agent_applies_to_it_alone(site: Site) -> None:
    site.page("/", page("home", "/a"))
    site.page("/a", page("a", head='<meta name="spirebot" content="noindex">'))
    pages, _ = await collect(spire.crawl(site.url("/"), host_limits=FAST))
    assert site.url("/a") in urls_of(pages)
    pages, _ = await collect(spire.crawl(site.url("/"), host_limits=FAST, agent="SpireBot"))
    assert site.url("/a") not in urls_of(pages)


async def test_ignore_robots_keeps_noindex_pages_and_follows_nofollow_links(site: Site) -> None:
    site.page("/", '<meta name="robots" content="noindex, nofollow"><a href="/a" rel="nofollow">a</a>')
    site.page("/a", page("a"), headers={"X-Robots-Tag": "noindex"})
    pages, _ = await collect(spire.crawl(site.url("/"), host_limits=FAST, ignore_robots=True))
    assert urls_of(pages) == {site.url("/"), site.url("/a")}


# -- canonical pages ---------------------------------------------------------------------------------


def canonical(href: str) -> str:
    return f'<link rel="canonical" href="{href}">'


async def test_a_page_is_dropped_when_its_canonical_page_is_kept(site: Site) -> None:
    site.page("/", page("home", "/copy", "/original"))
    site.page("/copy", page("copy", head=canonical("/original")))
    site.page("/original", page("original"))
    crawl = spire.crawl(site.url("/"), host_limits=FAST)
    pages, _ = await collect(crawl)
    assert urls_of(pages) == {site.url("/"), site.url("/original")}
    assert crawl.stats.skipped(SkipReason.CANONICAL) == 1


async def test_a_canonical_page_nobody_links_to_is_fetched(site: Site) -> None:
    site.page("/", page("home", "/copy"))
    site.page("/copy", page("copy", head=canonical(site.url("/original?b=2&a=1"))))
    site.page("/original", page("original"))
    crawl = spire.crawl(site.url("/"), host_limits=FAST)
    pages, _ = await collect(crawl)
    assert urls_of(pages) == {site.url("/"), site.url("/original?b=2&a=1")}
    assert crawl.stats.skipped(SkipReason.CANONICAL) == 1


@pytest.mark.parametrize(
    "original",
    [
        {"status": 404},
        {"headers": {"X-Robots-Tag": "noindex"}},
        {"headers": {"Content-Encoding": "gzip"}},  # a body that is not gzip: the fetch fails
    ],
)
async def test_a_page_is_kept_when_its_canonical_page_is_skipped_or_fails(
    site: Site, original: dict[str, object]
) -> None:
    site.page("/", page("home", "/copy"))
    site.page("/copy", page("copy", head=canonical("/original")))
    site.page("/original", "not gzip: <html>original</html>", **original)  # type: ignore[arg-type]
    pages, _ = await collect(spire.crawl(site.url("/"), host_limits=FAST))
    assert urls_of(pages) == {site.url("/"), site.url("/copy")}


async def test_a_canonical_page_out_of_scope_is_not_waited_for(site: Site, other_site: Site) -> None:
    site.page("/", page("home", "/copy"))
    site.page("/copy", page("copy", head=canonical(other_site.url("/original"))))
    pages, _ = await collect(spire.crawl(site.url("/"), host_limits=FAST))
    assert urls_of(pages) == {site.url("/"), site.url("/copy")}
    assert other_site.requests == []


async def test_a_page_waits_for_a_canonical_page_that_redirects(site: Site) -> None:
    site.page("/", page("home", "/copy"))
    site.page("/copy", page("copy", head=canonical("/old")))
    site.route("/old", lambda request: (301, {"Location": "/new"}, b""))
    site.page("/new", page("new"))
    crawl = spire.crawl(site.url("/"), host_limits=FAST)
    pages, _ = await collect(crawl)
    assert urls_of(pages) == {site.url("/"), site.url("/new")}
    assert crawl.stats.skipped(SkipReason.CANONICAL) == 1


async def test_pages_naming_each_other_as_canonical_keep_one(site: Site) -> None:
    site.page("/", page("home", "/a", "/b"))
    site.page("/a", page("a", head=canonical("/b")))
    site.page("/b", page("b", head=canonical("/a")))
    crawl = spire.crawl(site.url("/"), host_limits=FAST)
    pages, _ = await collect(crawl)
    assert len(urls_of(pages) & {site.url("/a"), site.url("/b")}) == 1
    assert crawl.stats.skipped(SkipReason.CANONICAL) == 1


async def test_a_held_page_counts_toward_the_limit_and_is_kept_when_no_room_is_left(site: Site) -> None:
    site.page("/", page("home", "/copy"))
    site.page("/copy", page("copy", head=canonical("/original")))
    site.page("/original", page("original"))
    pages, _ = await collect(spire.crawl(site.url("/"), host_limits=FAST, limit=2))
    # The home page and the held page fill the limit: the canonical page is never fetched.
    assert urls_of(pages) == {site.url("/"), site.url("/copy")}
    assert "/original" not in paths(site)


async def test_a_held_page_is_kept_when_other_pages_fill_the_limit(site: Site) -> None:
    site.page("/", page("home", "/copy", "/other"))
    site.page("/copy", page("copy", head=canonical("/original")))
    site.page("/other", page("other"))
    site.page("/original", page("original"))
    # One request at a time: /copy is held, then /other fills the limit before /original is read.
    pages, _ = await collect(spire.crawl(site.url("/"), host_limits=HostLimits(max_in_flight=1), limit=3))
    assert urls_of(pages) == {site.url("/"), site.url("/copy"), site.url("/other")}


async def test_a_held_page_waits_while_the_limit_leaves_room(site: Site) -> None:
    site.page("/", page("home", "/copy"))
    site.page("/copy", page("copy", head=canonical("/original")))
    site.page("/original", page("original"))
    pages, _ = await collect(spire.crawl(site.url("/"), host_limits=FAST, limit=3))
    assert urls_of(pages) == {site.url("/"), site.url("/original")}


# -- copies ------------------------------------------------------------------------------------------


async def test_a_page_with_the_same_words_as_a_kept_page_is_skipped(site: Site) -> None:
    site.page("/", page("home", "/a", "/b", "/short-a", "/short-b"))
    site.page("/a", f"<html><body><h1>{WORDS}</h1></body></html>")
    site.page("/b", f"<html><head><title>other</title></head><body><div>\n{WORDS}   </div></body></html>")
    short = " ".join(f"w{number}" for number in range(19))
    site.page("/short-a", f"<p>{short}</p>")
    site.page("/short-b", f"<div>{short}</div>")
    crawl = spire.crawl(site.url("/"), host_limits=FAST)
    pages, _ = await collect(crawl)
    kept = urls_of(pages)
    assert len(kept & {site.url("/a"), site.url("/b")}) == 1
    assert {site.url("/short-a"), site.url("/short-b")} <= kept  # under 20 words: never a copy
    assert crawl.stats.skipped(SkipReason.NEAR_DUPLICATE) == 1
    (copy,) = {site.url("/a"), site.url("/b")} - kept
    assert crawl.crawler.ledger is not None
    entry = await crawl.crawler.ledger.entry(copy)
    assert entry is not None
    assert (entry.fate, entry.reason) == (Fate.SKIPPED, "near_duplicate")  # spire why says so, not "kept"


async def test_a_page_differing_in_one_word_is_kept(site: Site) -> None:
    site.page("/", page("home", "/a", "/b"))
    site.page("/a", f"<p>{WORDS} end</p>")
    site.page("/b", f"<p>{WORDS} END</p>")
    pages, _ = await collect(spire.crawl(site.url("/"), host_limits=FAST))
    assert len(pages) == 3


async def test_limit_stops_after_that_many_kept_pages(site: Site) -> None:
    for number in range(40):
        site.page(f"/p{number}", page(f"page {number}", f"/p{2 * number + 1}", f"/p{2 * number + 2}"))
    crawl = spire.crawl(site.url("/p0"), host_limits=FAST, limit=7)
    pages, _ = await collect(crawl)
    assert len(pages) == 7
    assert crawl.stats.pages == 7
    assert all(isinstance(item, CrawlPage) for item in pages)
