"""Redirects in the site crawl: queued as links, widened scope for the seed, chains, scope."""

from __future__ import annotations

import pytest

import spire
from spire.site import SkipReason
from tests.sites.server import Site
from tests.spire.site.helpers import FAST, VirtualHosts, collect, page, page_paths, paths, redirect, robots, urls_of

pytestmark = pytest.mark.anyio


async def test_a_page_is_kept_at_its_address_after_redirects(site: Site) -> None:
    site.page("/", page("home", "/old"))
    site.route("/old", lambda request: redirect("/new"))
    site.page("/new", page("new"))
    pages, _ = await collect(spire.crawl(site.url("/"), host_limits=FAST))
    assert urls_of(pages) == {site.url("/"), site.url("/new")}
    new = next(item for item in pages if item.url == site.url("/new"))
    assert new.depth == 1  # a redirect is not a link level


async def test_a_redirect_target_passes_the_same_checks_as_a_link(site: Site) -> None:
    robots(site, "User-agent: *\nDisallow: /private\n")
    site.page("/", page("home", "/to-private", "/to-linked", "/linked"))
    site.route("/to-private", lambda request: redirect("/private"))
    site.route("/to-linked", lambda request: redirect("/linked", 302))
    site.page("/linked", page("linked"))
    crawl = spire.crawl(site.url("/"), host_limits=FAST)
    pages, _ = await collect(crawl)
    assert urls_of(pages) == {site.url("/"), site.url("/linked")}
    assert "/private" not in paths(site)
    assert crawl.stats.skipped(SkipReason.ROBOTS) == 1
    assert page_paths(site).count("/linked") == 1  # the redirect's target was queued before: a duplicate
    assert crawl.stats.skipped(SkipReason.DUPLICATE) >= 1


async def test_a_redirect_out_of_scope_counts_as_scope(site: Site, other_site: Site) -> None:
    site.page("/", page("home", "/away"))
    site.route("/away", lambda request: redirect(other_site.url("/")))
    crawl = spire.crawl(site.url("/"), host_limits=FAST)
    pages, _ = await collect(crawl)
    assert urls_of(pages) == {site.url("/")}
    assert crawl.stats.skipped(SkipReason.SCOPE) == 1
    assert other_site.requests == []


async def test_five_redirects_are_followed_and_a_sixth_is_skipped(site: Site) -> None:
    for chain, hops in (("a", 5), ("b", 6)):
        for hop in range(hops):
            site.route(f"/{chain}{hop}", lambda request, chain=chain, hop=hop: redirect(f"/{chain}{hop + 1}"))
        site.page(f"/{chain}{hops}", page(f"end of {chain}"))
    site.page("/", page("home", "/a0", "/b0"))
    crawl = spire.crawl(site.url("/"), host_limits=FAST)
    pages, _ = await collect(crawl)
    assert urls_of(pages) == {site.url("/"), site.url("/a5")}
    assert "/b6" not in paths(site)
    assert crawl.stats.skipped(SkipReason.REDIRECTS) == 1


@pytest.mark.parametrize("location", ["ftp://files.example/x", "mailto:someone@example.com"])
async def test_a_redirect_to_a_non_http_url_is_skipped(site: Site, location: str) -> None:
    site.page("/", page("home", "/files"))
    site.route("/files", lambda request: redirect(location))
    crawl = spire.crawl(site.url("/"), host_limits=FAST)
    await collect(crawl)
    assert crawl.stats.skipped(SkipReason.SCHEME) == 1


async def test_a_seed_redirected_to_another_site_yields_only_that_page(site: Site, other_site: Site) -> None:
    site.route("/", lambda request: redirect(other_site.url("/landing")))
    other_site.page("/landing", page("landing", "/more", site.url("/back")))
    other_site.page("/more", page("more"))
    site.page("/back", page("back"))
    crawl = spire.crawl(site.url("/"), host_limits=FAST)
    pages, _ = await collect(crawl)
    assert urls_of(pages) == {other_site.url("/landing")}
    assert "/more" not in paths(other_site)
    assert paths(other_site)[0] == "/robots.txt"  # that site's robots.txt still applies
    assert crawl.in_scope(site.url("/back"))
    assert not crawl.in_scope(other_site.url("/more"))


async def test_a_seed_redirected_to_another_host_of_the_same_site_adds_its_scope(site: Site) -> None:
    site.page("/", page("www", "/a"))
    site.page("/a", page("a"))
    apex = Site().start()
    try:
        apex.route("/", lambda request: redirect("http://www.shop.test/"))
        with VirtualHosts({"shop.test": apex, "www.shop.test": site}) as proxy:
            crawl = spire.crawl("http://shop.test/", host_limits=FAST, backend=proxy.backend())
            pages, _ = await collect(crawl)
    finally:
        apex.stop()
    assert urls_of(pages) == {"http://www.shop.test/", "http://www.shop.test/a"}
    assert crawl.in_scope("http://www.shop.test/b")
    assert crawl.in_scope("http://shop.test/b")
    assert not crawl.in_scope("http://blog.shop.test/")


async def test_a_seed_redirected_within_its_host_adds_the_prefix_of_its_target(site: Site) -> None:
    site.route("/docs/", lambda request: redirect("/v2/docs/"))
    site.page("/v2/docs/", page("docs", "guide.html", "/v2/blog/"))
    site.page("/v2/docs/guide.html", page("guide"))
    site.page("/v2/blog/", page("blog"))
    crawl = spire.crawl(site.url("/docs/"), scope="prefix", host_limits=FAST)
    pages, _ = await collect(crawl)
    assert urls_of(pages) == {site.url("/v2/docs/"), site.url("/v2/docs/guide.html")}
    assert crawl.stats.skipped(SkipReason.SCOPE) == 1


async def test_a_redirect_that_is_not_the_seed_never_widens_the_scope(site: Site, other_site: Site) -> None:
    site.page("/", page("home", "/moved"))
    site.route("/moved", lambda request: redirect(f"http://localhost:{site.port}/moved"))
    crawl = spire.crawl(site.url("/"), host_limits=FAST)
    await collect(crawl)
    assert not crawl.in_scope(f"http://localhost:{site.port}/")
    assert crawl.stats.skipped(SkipReason.SCOPE) == 1
