"""Sitemaps in the site crawl: which are read, formats, caps, and what their URLs go through."""

from __future__ import annotations

import gzip

import anyio
import pytest

import spire
from spire.site import SkipReason
from spire_core.limits import HostLimits
from tests.sites.server import Site
from tests.spire.site.helpers import FAST, VirtualHosts, collect, page, paths, redirect, robots, text, urls_of

pytestmark = pytest.mark.anyio


def urlset(*locs: str, extra: str = "") -> str:
    entries = "".join(f"<url><loc>{loc}</loc>{extra}</url>" for loc in locs)
    return f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</urlset>'


def index(*locs: str) -> str:
    entries = "".join(f"<sitemap><loc>{loc}</loc></sitemap>" for loc in locs)
    return f'<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</sitemapindex>'


def xml(site: Site, path: str, body: str | bytes, content_type: str = "application/xml") -> None:
    site.page(path, body, content_type=content_type)


async def test_pages_only_a_sitemap_lists_are_found(site: Site) -> None:
    robots(site, f"User-agent: *\nSitemap: {site.url('/maps/pages.xml')}\n")
    xml(site, "/maps/pages.xml", urlset(site.url("/orphan")))
    site.page("/", page("home"))
    site.page("/orphan", page("nobody links here"))
    crawl = spire.crawl(site.url("/"), host_limits=FAST)
    pages, errors = await collect(crawl)
    assert urls_of(pages) == {site.url("/"), site.url("/orphan")}
    assert errors == []
    assert "/sitemap.xml" not in paths(site)  # robots.txt listed one
    assert next(item for item in pages if item.url.endswith("/orphan")).depth == 1


async def test_sitemap_xml_is_read_when_robots_txt_lists_none(site: Site) -> None:
    xml(site, "/sitemap.xml", urlset(site.url("/orphan")))
    site.page("/", page("home"))
    site.page("/orphan", page("orphan"))
    pages, _ = await collect(spire.crawl(site.url("/"), host_limits=FAST))
    assert urls_of(pages) == {site.url("/"), site.url("/orphan")}


async def test_sitemap_xml_is_not_read_when_robots_txt_disallows_it(site: Site) -> None:
    robots(site, "User-agent: *\nDisallow: /sitemap.xml\n")
    xml(site, "/sitemap.xml", urlset(site.url("/orphan")))
    site.page("/", page("home"))
    site.page("/orphan", page("orphan"))
    pages, _ = await collect(spire.crawl(site.url("/"), host_limits=FAST))
    assert "/sitemap.xml" not in paths(site)
    assert urls_of(pages) == {site.url("/")}


async def test_with_ignore_robots_sitemap_xml_is_read_directly(site: Site) -> None:
    robots(site, f"User-agent: *\nDisallow: /\nSitemap: {site.url('/listed.xml')}\n")
    xml(site, "/sitemap.xml", urlset(site.url("/orphan")))
    site.page("/", page("home"))
    site.page("/orphan", page("orphan"))
    pages, _ = await collect(spire.crawl(site.url("/"), host_limits=FAST, ignore_robots=True))
    assert urls_of(pages) == {site.url("/"), site.url("/orphan")}
    assert "/robots.txt" not in paths(site)
    assert "/listed.xml" not in paths(site)


async def test_a_missing_sitemap_is_not_an_error(site: Site) -> None:
    site.page("/", page("home"))
    crawl = spire.crawl(site.url("/"), host_limits=FAST)
    pages, errors = await collect(crawl)
    assert "/sitemap.xml" in paths(site)
    assert len(pages) == 1
    assert errors == []
    assert crawl.stats.errors == 0


async def test_a_failing_sitemap_is_tried_three_times_and_counts_as_an_error(site: Site) -> None:
    site.route("/sitemap.xml", lambda request: text("down", 500, **{"Retry-After": "0"}))
    site.page("/", page("home"))
    crawl = spire.crawl(site.url("/"), host_limits=FAST)
    pages, errors = await collect(crawl)
    assert paths(site).count("/sitemap.xml") == 3
    assert [error.url for error in errors] == [site.url("/sitemap.xml")]
    assert crawl.stats.errors == 1
    assert len(pages) == 1


async def test_sitemaps_listed_on_another_site_are_not_read(site: Site, other_site: Site) -> None:
    robots(site, f"User-agent: *\nSitemap: {other_site.url('/sitemap.xml')}\n")
    xml(site, "/sitemap.xml", urlset(site.url("/orphan")))
    site.page("/", page("home"))
    site.page("/orphan", page("orphan"))
    pages, _ = await collect(spire.crawl(site.url("/"), host_limits=FAST))
    assert other_site.requests == []
    assert urls_of(pages) == {site.url("/"), site.url("/orphan")}  # /sitemap.xml, as if none were listed


async def test_an_index_is_followed_to_sitemaps_on_its_own_host_only(site: Site, other_site: Site) -> None:
    xml(site, "/sitemap.xml", index(site.url("/part1.xml"), other_site.url("/part2.xml")))
    xml(site, "/part1.xml", urlset(site.url("/one")))
    site.page("/", page("home"))
    site.page("/one", page("one"))
    pages, _ = await collect(spire.crawl(site.url("/"), host_limits=FAST))
    assert urls_of(pages) == {site.url("/"), site.url("/one")}
    assert other_site.requests == []


async def test_gzipped_xml_and_plain_text_sitemaps_are_read(site: Site) -> None:
    robots(site, f"User-agent: *\nSitemap: {site.url('/a.xml.gz')}\nSitemap: {site.url('/b.txt')}\n")
    xml(site, "/a.xml.gz", gzip.compress(urlset(site.url("/from-gzip")).encode()), "application/gzip")
    xml(site, "/b.txt", f"{site.url('/from-text')}\n\n{site.url('/also-text')}\n", "text/plain")
    site.page("/", page("home"))
    for name in ("/from-gzip", "/from-text", "/also-text"):
        site.page(name, page(name))
    pages, _ = await collect(spire.crawl(site.url("/"), host_limits=FAST))
    assert urls_of(pages) == {site.url(p) for p in ("/", "/from-gzip", "/from-text", "/also-text")}


@pytest.mark.parametrize("processes", [1, 2])
async def test_at_most_50_sitemap_files_are_opened(site: Site, processes: int) -> None:
    # with worker processes too: the sitemap budget is the crawl's, not one per worker
    children = [site.url(f"/part{number}.xml") for number in range(60)]
    xml(site, "/sitemap.xml", index(*children))
    for number in range(60):
        xml(site, f"/part{number}.xml", urlset(site.url(f"/p{number}")))
        site.page(f"/p{number}", page(f"page {number}"))
    site.page("/", page("home"))
    pages, _ = await collect(spire.crawl(site.url("/"), host_limits=FAST, processes=processes))
    opened = [path for path in paths(site) if path.endswith(".xml")]
    assert len(opened) == 50  # the index and 49 of its children
    assert len(pages) == 1 + 49


async def test_with_a_limit_no_new_sitemap_file_opens_once_that_many_urls_are_queued(site: Site) -> None:
    robots(site, f"User-agent: *\nSitemap: {site.url('/first.xml')}\nSitemap: {site.url('/second.xml')}\n")
    xml(site, "/first.xml", urlset(*(site.url(f"/p{number}") for number in range(5))))
    xml(site, "/second.xml", urlset(site.url("/later")))
    site.page("/", page("home"))
    for number in range(5):
        site.page(f"/p{number}", page(f"page {number}"))
    # One request at a time, so the first sitemap is read before the second could open.
    crawl = spire.crawl(site.url("/"), host_limits=HostLimits(max_in_flight=1), limit=3)
    pages, _ = await collect(crawl)
    assert len(pages) == 3
    assert "/first.xml" in paths(site)
    assert "/second.xml" not in paths(site)


async def test_image_video_and_news_locs_are_not_pages(site: Site) -> None:
    extra = (
        '<image:image xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">'
        f"<image:loc>{site.url('/photo.html')}</image:loc></image:image>"
        '<video:video xmlns:video="http://www.google.com/schemas/sitemap-video/1.1">'
        f"<video:content_loc>{site.url('/clip.html')}</video:content_loc>"
        f"<video:player_loc>{site.url('/player.html')}</video:player_loc><video:loc>{site.url('/v.html')}</video:loc>"
        "</video:video>"
        '<news:news xmlns:news="http://www.google.com/schemas/sitemap-news/0.9">'
        f"<news:loc>{site.url('/news.html')}</news:loc></news:news>"
    )
    xml(site, "/sitemap.xml", urlset(site.url("/listed"), extra=extra))
    site.page("/", page("home"))
    site.page("/listed", page("listed"))
    pages, _ = await collect(spire.crawl(site.url("/"), host_limits=FAST))
    assert urls_of(pages) == {site.url("/"), site.url("/listed")}
    assert not {"/photo.html", "/clip.html", "/player.html", "/v.html", "/news.html"} & set(paths(site))


async def test_entities_in_a_sitemap_are_never_expanded(site: Site) -> None:
    body = (
        f'<?xml version="1.0"?><!DOCTYPE urlset [<!ENTITY secret "{site.url("/secret")}">]>'
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"<url><loc>&secret;</loc></url><url><loc>{site.url('/plain')}</loc></url></urlset>"
    )
    xml(site, "/sitemap.xml", body)
    site.page("/", page("home"))
    site.page("/plain", page("plain"))
    site.page("/secret", page("secret"))
    pages, _ = await collect(spire.crawl(site.url("/"), host_limits=FAST))
    assert "/secret" not in paths(site)
    assert urls_of(pages) == {site.url("/"), site.url("/plain")}


async def test_only_the_first_50_mib_of_a_sitemap_are_read(site: Site) -> None:
    body = f"{site.url('/early')}\n" + "\n" * (50 * 1024 * 1024) + f"{site.url('/late')}\n"
    xml(site, "/sitemap.xml", gzip.compress(body.encode(), compresslevel=1), "application/gzip")
    site.page("/", page("home"))
    site.page("/early", page("early"))
    site.page("/late", page("late"))
    pages, _ = await collect(spire.crawl(site.url("/"), host_limits=FAST))
    assert urls_of(pages) == {site.url("/"), site.url("/early")}


async def test_sitemap_urls_pass_the_same_checks_as_links(site: Site, other_site: Site) -> None:
    robots(site, "User-agent: *\nDisallow: /private\n")
    xml(site, "/sitemap.xml", urlset(other_site.url("/x"), site.url("/private/y"), site.url("/"), "mailto:a@b.example"))
    site.page("/", page("home"))
    crawl = spire.crawl(site.url("/"), host_limits=FAST)
    pages, _ = await collect(crawl)
    assert urls_of(pages) == {site.url("/")}
    assert other_site.requests == []
    assert crawl.stats.skipped(SkipReason.SCOPE) == 1
    assert crawl.stats.skipped(SkipReason.ROBOTS) == 1
    assert crawl.stats.skipped(SkipReason.DUPLICATE) == 1


async def test_a_redirected_sitemap_is_read_at_its_new_address(site: Site) -> None:
    site.route("/sitemap.xml", lambda request: redirect("/maps/sitemap.xml"))
    xml(site, "/maps/sitemap.xml", urlset(site.url("/orphan")))
    site.page("/", page("home"))
    site.page("/orphan", page("orphan"))
    pages, _ = await collect(spire.crawl(site.url("/"), host_limits=FAST))
    assert urls_of(pages) == {site.url("/"), site.url("/orphan")}


async def test_a_sitemap_on_another_host_waits_for_that_hosts_robots_txt(site: Site, other_site: Site) -> None:
    robots(site, "User-agent: *\nSitemap: http://static.shop.test/maps.xml\nSitemap: http://static.shop.test/no.xml\n")
    robots(other_site, "User-agent: *\nDisallow: /no.xml\n")
    xml(other_site, "/maps.xml", urlset("http://www.shop.test/orphan"))
    xml(other_site, "/no.xml", urlset("http://www.shop.test/refused"))
    site.page("/", page("home"))
    site.page("/orphan", page("orphan"))
    site.page("/refused", page("refused"))
    with VirtualHosts({"www.shop.test": site, "static.shop.test": other_site}) as proxy:
        pages, _ = await collect(spire.crawl("http://www.shop.test/", host_limits=FAST, backend=proxy.backend()))
    assert urls_of(pages) == {"http://www.shop.test/", "http://www.shop.test/orphan"}
    assert paths(other_site) == ["/robots.txt", "/maps.xml"]


@pytest.mark.parametrize("concurrency", [1, 8])
async def test_with_a_limit_sitemaps_stop_opening_once_it_is_queued_at_any_concurrency(
    site: Site, concurrency: int
) -> None:
    children = [site.url(f"/part{number}.xml") for number in range(20)]
    xml(site, "/sitemap.xml", index(*children))
    for number in range(20):
        xml(site, f"/part{number}.xml", urlset(site.url(f"/p{number}")))
        site.page(f"/p{number}", page(f"page {number}"))
    site.page("/", page("home"))
    limits = HostLimits(max_in_flight=concurrency)
    with anyio.fail_after(30):
        pages, _ = await collect(spire.crawl(site.url("/"), host_limits=limits, concurrency=concurrency, limit=5))
    opened = [path for path in paths(site) if path.endswith(".xml")]
    assert len(pages) == 5
    assert len(opened) == 1 + 5  # the index, then one child per URL until five are queued
