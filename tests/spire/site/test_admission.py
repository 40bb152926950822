"""Which URLs the site crawl queues: schemes, scope, canonical duplicates, length and depth."""

from __future__ import annotations

import pytest

import spire
from spire.site import SkipReason
from tests.sites.server import Site
from tests.spire.site.helpers import FAST, VirtualHosts, collect, header, page, page_paths, robots, urls_of

pytestmark = pytest.mark.anyio


async def test_only_http_and_https_links_are_queued_and_each_skip_is_counted(site: Site) -> None:
    site.page("/", page("home", "mailto:a@b.example", "javascript:void(0)", "ftp://files.example/x", "/a", "/a"))
    site.page("/a", page("a", "/"))
    crawl = spire.crawl(site.url("/"), host_limits=FAST)
    await collect(crawl)
    assert crawl.stats.skipped(SkipReason.SCHEME) == 3
    assert crawl.stats.skipped("duplicate") == 1  # /a links back to the seed; the repeat on one page is not a new link
    assert page_paths(site) == ["/", "/a"]


async def test_host_scope_is_the_seed_host_and_port(site: Site, other_site: Site) -> None:
    localhost = f"http://localhost:{site.port}/elsewhere"  # same machine, another host name
    site.page("/", page("home", other_site.url("/x"), localhost, "/inside"))
    site.page("/inside", page("inside"))
    crawl = spire.crawl(site.url("/"), host_limits=FAST)
    pages, _ = await collect(crawl)
    assert urls_of(pages) == {site.url("/"), site.url("/inside")}
    assert crawl.stats.skipped(SkipReason.SCOPE) == 2
    assert other_site.requests == []
    assert all((header(request, "host") or "").startswith("127.0.0.1") for request in site.requests)


def test_http_and_https_on_their_default_ports_are_one_host() -> None:
    crawl = spire.crawl("http://docs.example/guide/")
    assert crawl.in_scope("https://docs.example/other")
    assert crawl.in_scope("https://docs.example:443/other")
    assert crawl.in_scope("http://DOCS.example./x")
    assert not crawl.in_scope("http://docs.example:8080/x")  # another port is another site
    assert not crawl.in_scope("http://www.docs.example/x")
    assert not crawl.in_scope("mailto:someone@docs.example")


def test_domain_scope_adds_subdomains_under_the_registrable_domain() -> None:
    crawl = spire.crawl("https://www.example.co.uk/", scope="domain")
    assert crawl.in_scope("https://shop.example.co.uk/cart")
    assert crawl.in_scope("http://example.co.uk/")
    assert crawl.in_scope("https://a.b.example.co.uk/")
    assert not crawl.in_scope("https://other.co.uk/")
    assert not crawl.in_scope("https://example.co.uk:8443/")  # another port is another site
    # github.io is a public suffix: each user's pages are a site of their own.
    pages = spire.crawl("https://alice.github.io/", scope="domain")
    assert not pages.in_scope("https://bob.github.io/")
    assert pages.in_scope("https://docs.alice.github.io/")


def test_prefix_scope_is_the_seed_path_directory_on_its_host() -> None:
    crawl = spire.crawl("https://docs.example/guide/intro.html?lang=en", scope="prefix")
    assert crawl.in_scope("https://docs.example/guide/")
    assert crawl.in_scope("https://docs.example/guide/deep/page.html")
    assert not crawl.in_scope("https://docs.example/guidebook/")
    assert not crawl.in_scope("https://docs.example/")
    assert not crawl.in_scope("https://other.example/guide/")


async def test_domain_scope_crawls_the_subdomains_it_links_to(site: Site, other_site: Site) -> None:
    outside = Site().start()
    try:
        site.page("/", page("www", "http://blog.shop.test/", "http://shop.example/"))
        other_site.page("/", page("blog", "/post"))
        other_site.page("/post", page("post"))
        outside.page("/", page("another domain"))
        hosts = {"www.shop.test": site, "blog.shop.test": other_site, "shop.example": outside}
        with VirtualHosts(hosts) as proxy:
            crawl = spire.crawl("http://www.shop.test/", scope="domain", host_limits=FAST, backend=proxy.backend())
            pages, _ = await collect(crawl)
        assert urls_of(pages) == {"http://www.shop.test/", "http://blog.shop.test/", "http://blog.shop.test/post"}
        assert crawl.stats.skipped(SkipReason.SCOPE) == 1
        assert outside.requests == []
        # Each host's own robots.txt was read before its pages.
        assert other_site.requests[0].path == "/robots.txt"
    finally:
        outside.stop()


async def test_prefix_scope_crawls_only_under_the_seed_directory(site: Site) -> None:
    site.page("/docs/guide/index.html", page("guide", "a.html", "deep/b.html", "/docs/other.html", "/blog/"))
    site.page("/docs/guide/a.html", page("a"))
    site.page("/docs/guide/deep/b.html", page("b"))
    crawl = spire.crawl(site.url("/docs/guide/index.html"), scope="prefix", host_limits=FAST)
    pages, _ = await collect(crawl)
    assert urls_of(pages) == {
        site.url(p) for p in ("/docs/guide/index.html", "/docs/guide/a.html", "/docs/guide/deep/b.html")
    }
    assert crawl.stats.skipped(SkipReason.SCOPE) == 2


async def test_urls_are_compared_in_canonical_form(site: Site) -> None:
    links = ("/a", "/a#part", "/list?b=2&a=1", "/list?a=1&b=2", "/%7Euser", "/~user", "/a?")
    site.page("/", page("home", *links))
    site.page("/a", page("a"))
    site.page("/list", page("list"))
    site.page("/~user", page("user"))
    site.page("/%7Euser", page("user"))
    crawl = spire.crawl(site.url("/"), host_limits=FAST)
    await collect(crawl)
    requested = page_paths(site)
    assert len(requested) == 4
    assert {"/", "/a", "/list?b=2&a=1"} < set(requested)  # the query as written
    assert {"/~user", "/%7Euser"} & set(requested)  # one of the two (the HTTP client may decode %7E)
    assert crawl.stats.skipped(SkipReason.DUPLICATE) == 3


async def test_a_url_longer_than_2048_bytes_is_dropped_without_a_count(site: Site) -> None:
    long_url = "/search?q=" + "x" * 2040
    fits = "/search?q=" + "y" * (2048 - len(site.url("/search?q=")))
    site.page("/", page("home", long_url, fits))
    site.page("/search", page("search"))
    crawl = spire.crawl(site.url("/"), host_limits=FAST)
    await collect(crawl)
    assert page_paths(site) == ["/", fits]
    assert crawl.stats.skipped() == 0


async def test_a_url_more_than_64_links_from_the_seed_is_dropped_without_a_count(site: Site) -> None:
    for number in range(70):
        site.page(f"/p{number}", page(f"page {number}", f"/p{number + 1}"))
    crawl = spire.crawl(site.url("/p0"), host_limits=FAST)
    pages, _ = await collect(crawl)
    assert max(item.depth for item in pages) == 64
    assert len(pages) == 65
    assert "/p65" not in page_paths(site)
    assert crawl.stats.skipped() == 0


async def test_robots_rules_apply_after_admission(site: Site) -> None:
    robots(site, "User-agent: *\nDisallow: /private\n")
    site.page("/", page("home", "/private/x", "/private/x#again", "/public"))
    site.page("/public", page("public"))
    crawl = spire.crawl(site.url("/"), host_limits=FAST)
    pages, _ = await collect(crawl)
    assert urls_of(pages) == {site.url("/"), site.url("/public")}
    assert crawl.stats.skipped(SkipReason.ROBOTS) == 1  # the fragment twin was a duplicate, not asked again
    assert "/private/x" not in page_paths(site)
