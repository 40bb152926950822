"""``Links``: candidates, shortcuts and every option, proved by real crawls of local sites."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import httpx
import pytest

from spire import (
    ConfigError,
    Crawler,
    CrawlPolicy,
    CrawlStats,
    EnqueueResult,
    HostLimits,
    Html,
    HttpBackend,
    Links,
    Response,
    Router,
    Seed,
    SeedInfo,
    SkipReason,
    Url,
)
from tests.sites.server import Site


def crawl(router: Router, *seeds: Seed | str, policy: CrawlPolicy | None = None, **options: Any) -> CrawlStats:
    """One crawl, one request at a time unless told otherwise, so the server's log is in crawl order."""
    concurrency = options.pop("concurrency", 1)
    crawler = Crawler(
        router,
        concurrency=concurrency,
        host_limits=HostLimits(max_in_flight=concurrency),
        policy=policy,
        **options,
    )
    return crawler.run(seeds)


def leaf_router(results: list[EnqueueResult]) -> tuple[Router, list[str]]:
    """A router for the test to add its ``root`` handler to; every other seed is fetched and recorded."""
    router = Router()
    visited: list[str] = []

    @router.default
    async def leaf(url: Url, response: Response) -> None:
        visited.append(url)

    return router, visited


def paths(site: Site) -> list[str]:
    """Paths requested, in order; robots.txt (read first by every crawl) left out."""
    return [request.path for request in site.page_requests()]


# -- candidates -------------------------------------------------------------------------------------


def test_shortcut_extracts_a_and_area_links_resolved_against_base_href(site: Site) -> None:
    site.page(
        "/",
        """<html><head><base href="/docs/"><link rel="stylesheet" href="/style.css"></head><body>
        <a href="intro">intro</a> <a href="/top">top</a> <a>no href</a>
        <map><area href="map" alt="map"></map> <img src="/logo.png"></body></html>""",
    )
    for path in ("/docs/intro", "/docs/map", "/top"):
        site.page(path, "leaf")
    results: list[EnqueueResult] = []
    router, _ = leaf_router(results)

    @router.handler("root")
    async def root(page: Html, links: Links) -> None:
        results.append(await links.same_hostname())

    stats = crawl(router, Seed(site.url("/"), tag="root"))
    assert sorted(paths(site)) == ["/", "/docs/intro", "/docs/map", "/top"]
    assert [seed.url for seed in results[0].added] == [site.url(p) for p in ("/docs/intro", "/top", "/docs/map")]
    assert (results[0].skipped, stats.failed) == ([], 0)


@pytest.mark.parametrize(
    ("shortcut", "fetched"),
    [
        ("all", {"/", "/same-origin", "/other-port", "/via-localhost"}),
        ("same_hostname", {"/", "/same-origin", "/other-port"}),
        ("same_domain", {"/", "/same-origin", "/other-port"}),
        ("same_origin", {"/", "/same-origin"}),
    ],
)
def test_each_shortcut_keeps_the_links_its_relationship_allows(
    site: Site, other_site: Site, shortcut: str, fetched: set[str]
) -> None:
    via_localhost = f"http://localhost:{site.port}/via-localhost"  # the same server, another host name
    site.page(
        "/",
        f"""<a href="/same-origin">1</a> <a href="{other_site.url("/other-port")}">2</a>
        <a href="{via_localhost}">3</a> <a href="mailto:someone@example.com">4</a>
        <a href="mailto:someone@example.com">a repeated rejection is reported once</a>""",
    )
    site.page("/same-origin", "leaf")
    site.page("/via-localhost", "leaf")
    other_site.page("/other-port", "leaf")
    results: list[EnqueueResult] = []
    router, _ = leaf_router(results)

    @router.handler("root")
    async def root(page: Html, links: Links) -> None:
        results.append(await getattr(links, shortcut)())

    crawl(router, Seed(site.url("/"), tag="root"))
    assert set(paths(site)) | set(paths(other_site)) == fetched
    assert results[0].skipped_for(SkipReason.SCHEME) == ["mailto:someone@example.com"]
    rejected = {"/other-port", "/via-localhost"} - fetched
    assert {url.rsplit("/", 1)[1] for url in results[0].skipped_for("strategy")} == {p[1:] for p in rejected}


def test_same_domain_follows_subdomains_of_the_registrable_domain_only(site: Site) -> None:
    # The local site acts as a forward proxy, so the crawl reaches real host names on 127.0.0.1.
    pages = {
        "http://a.example.co.uk/": """<a href="http://b.example.co.uk/">b</a>
            <a href="http://example.co.uk/about">apex</a> <a href="http://other.co.uk/">other</a>""",
        "http://x.github.io/": """<a href="http://y.github.io/">y</a> <a href="http://docs.x.github.io/">docs</a>""",
    }
    for url, body in pages.items():
        site.page(url, body)
    for url in ("http://b.example.co.uk/", "http://example.co.uk/about", "http://docs.x.github.io/"):
        site.page(url, "leaf")
    results: list[EnqueueResult] = []
    router, visited = leaf_router(results)

    @router.handler("root")
    async def root(page: Html, links: Links) -> None:
        results.append(await links.same_domain())

    backend = HttpBackend(transport=httpx.AsyncHTTPTransport(proxy=site.origin))
    crawl(router, *(Seed(url, tag="root") for url in pages), backend=backend)
    assert sorted(visited) == ["http://b.example.co.uk/", "http://docs.x.github.io/", "http://example.co.uk/about"]
    skipped = sorted(url for result in results for url in result.skipped_for(SkipReason.STRATEGY))
    assert skipped == ["http://other.co.uk/", "http://y.github.io/"]


def test_selector_picks_elements_by_href_or_the_strings_an_attr_selector_returns(site: Site) -> None:
    site.page(
        "/",
        """<nav><a href="/nav-1">1</a><a href="/nav-2">2</a></nav> <a href="/body">body</a>
        <link rel="next" href="/next"> <div data-url="/from-data"></div>""",
    )
    results: list[EnqueueResult] = []
    router, _ = leaf_router(results)

    @router.handler("root")
    async def root(page: Html, links: Links) -> None:
        results.append(await links.enqueue(selector="nav a"))
        results.append(await links.enqueue(selector="link[rel=next]"))
        results.append(await links.enqueue(selector="div::attr(data-url)"))

    crawl(router, Seed(site.url("/"), tag="root"))
    added = [[seed.url.removeprefix(site.origin) for seed in result.added] for result in results]
    assert added == [["/nav-1", "/nav-2"], ["/next"], ["/from-data"]]
    assert "/body" not in paths(site)


def test_explicit_urls_must_be_absolute_and_bypass_the_strategy(site: Site, other_site: Site) -> None:
    other_site.page("/x", "leaf")
    results: list[EnqueueResult] = []
    router, _ = leaf_router(results)

    @router.handler("root")
    async def root(links: Links) -> None:
        results.append(
            await links.enqueue(urls=[other_site.url("/x"), "/relative", "mailto:a@b.example", "http://[::1"])
        )

    crawl(router, Seed(site.url("/"), tag="root"), policy=CrawlPolicy(strategy="same_origin"))
    assert paths(other_site) == ["/x"]
    assert results[0].skipped == [
        ("/relative", SkipReason.INVALID_URL),
        ("mailto:a@b.example", SkipReason.SCHEME),
        ("http://[::1", SkipReason.INVALID_URL),
    ]
    assert paths(site) == []  # a handler that needs no response causes no fetch


def test_raw_urls_resolve_against_the_page_after_redirects_or_against_base_url(site: Site) -> None:
    site.page("/start", "", status=302, headers={"Location": "/dir/page"})
    site.page("/dir/page", "no links in the markup")
    results: list[EnqueueResult] = []
    router, _ = leaf_router(results)

    @router.handler("root")
    async def root(response: Response, links: Links) -> None:
        results.append(await links.enqueue(raw_urls=["a", "/b", "?q=1"]))
        results.append(await links.enqueue(raw_urls="c", base_url=site.url("/other/")))

    crawl(router, Seed(site.url("/start"), tag="root"))
    assert [seed.url for seed in results[0].added] == [site.url(p) for p in ("/dir/a", "/b", "/dir/page?q=1")]
    assert [seed.url for seed in results[1].added] == [site.url("/other/c")]
    assert sorted(paths(site)) == ["/b", "/dir/a", "/dir/page", "/dir/page?q=1", "/other/c", "/start"]


# -- options ----------------------------------------------------------------------------------------


def test_tag_and_user_data_reach_each_child_and_children_are_one_level_deeper(site: Site) -> None:
    site.page("/", '<a href="/d1">1</a> <a href="/d2">2</a>')
    site.page("/d1", "detail")
    site.page("/d2", "detail")
    router = Router()
    children: list[Seed] = []

    @router.handler("root")
    async def root(page: Html, links: Links) -> None:
        await links.same_origin(tag="detail", user_data={"from": "root"})

    @router.handler("detail")
    async def detail(seed: SeedInfo) -> None:
        children.append(seed)

    crawl(router, Seed(site.url("/"), tag="root"))
    assert sorted(seed.url for seed in children) == [site.url("/d1"), site.url("/d2")]
    assert all((s.tag, s.user_data, s.depth) == ("detail", {"from": "root"}, 1) for s in children)
    assert children[0].user_data is not children[1].user_data  # each child owns a copy


def test_priority_orders_links_within_an_origin(site: Site) -> None:
    router, _ = leaf_router([])

    @router.handler("root")
    async def root(links: Links) -> None:
        await links.enqueue(urls=[site.url("/low")])
        await links.enqueue(urls=[site.url("/high")], priority=5)

    crawl(router, Seed(site.url("/"), tag="root"))
    assert paths(site) == ["/high", "/low"]


def test_globs_and_regex_include_and_exclude_wins_over_them(site: Site) -> None:
    site.page(
        "/",
        """<a href="/book/1">b1</a> <a href="/book/2">b2</a> <a href="/book/3?draft=1">b3</a>
        <a href="/author/7">a7</a> <a href="/author/7/photo">photo</a> <a href="/cart">cart</a>""",
    )
    results: list[EnqueueResult] = []
    router, _ = leaf_router(results)

    @router.handler("root")
    async def root(page: Html, links: Links) -> None:
        results.append(
            await links.same_origin(
                globs=["http://*/book/*"],
                regex=re.compile(r"/author/\d+$"),
                exclude=["*draft=*", re.compile(r"/book/2$")],
            )
        )
        results.append(await links.same_origin(regex=r"/CART$|/cart$", exclude="*/book/*"))

    crawl(router, Seed(site.url("/"), tag="root"))
    first, second = results
    assert [seed.url.removeprefix(site.origin) for seed in first.added] == ["/book/1", "/author/7"]
    assert [url.removeprefix(site.origin) for url in first.skipped_for(SkipReason.PATTERN)] == [
        "/book/2",
        "/book/3?draft=1",
        "/author/7/photo",
        "/cart",
    ]
    assert [seed.url.removeprefix(site.origin) for seed in second.added] == ["/cart"]
    assert len(second.skipped_for("pattern")) == 5


def test_a_glob_matches_the_whole_url_and_its_star_crosses_slashes(site: Site) -> None:
    site.page("/", '<a href="/a/b/c.html">deep</a> <a href="/a/b/c.html?x=1">query</a> <a href="/c.htm">other</a>')
    results: list[EnqueueResult] = []
    router, _ = leaf_router(results)

    @router.handler("root")
    async def root(page: Html, links: Links) -> None:
        results.append(await links.all(globs="*.html"))

    crawl(router, Seed(site.url("/"), tag="root"))
    assert [seed.url for seed in results[0].added] == [site.url("/a/b/c.html")]


def test_transform_can_change_a_request_or_reject_it(site: Site) -> None:
    site.page("/", '<a href="/keep">k</a> <a href="/reject">r</a> <a href="/alias">a</a> <a href="/renamed">n</a>')
    results: list[EnqueueResult] = []
    router, _ = leaf_router(results)

    async def transform(seed: Seed) -> Seed | None:
        if seed.url.endswith("/reject"):
            return None
        if seed.url.endswith("/alias"):  # renamed to the page itself, which was queued already
            return Seed(site.url("/"), depth=seed.depth)
        if seed.url.endswith("/renamed"):
            return dataclasses.replace(seed, url=site.url("/new-name"), unique_key="")
        return dataclasses.replace(seed, headers={"X-Via": "transform"})

    @router.handler("root")
    async def root(page: Html, links: Links) -> None:
        results.append(await links.same_origin(transform=transform))

    crawl(router, Seed(site.url("/"), tag="root"))
    assert paths(site) == ["/", "/keep", "/new-name"]
    assert site.page_requests()[1].headers.get("x-via") == "transform"
    assert results[0].skipped == [(site.url("/reject"), SkipReason.TRANSFORM), (site.url("/"), SkipReason.DUPLICATE)]


def test_limit_keeps_the_first_distinct_candidates_and_drops_the_rest_silently(site: Site) -> None:
    links_html = '<a href="/1">1</a> <a href="/1#again">1</a> <a href="/2">2</a> <a href="/3">3</a> <a href="/4">4</a>'
    site.page("/", links_html)
    results: list[EnqueueResult] = []
    router, _ = leaf_router(results)

    @router.handler("root")
    async def root(page: Html, links: Links) -> None:
        results.append(await links.same_hostname(limit=2))
        results.append(await links.same_hostname(limit=0))

    crawl(router, Seed(site.url("/"), tag="root"))
    assert [seed.url for seed in results[0].added] == [site.url("/1"), site.url("/2")]
    assert results[0].skipped == []
    assert results[1].added == results[1].skipped == []
    assert sorted(paths(site)) == ["/", "/1", "/2"]


def test_forefront_links_are_fetched_before_links_queued_earlier(site: Site) -> None:
    for path, body in {"/": '<a href="/a">a</a> <a href="/b">b</a>', "/a": "a", "/b": "b", "/a/urgent": "u"}.items():
        site.page(path, body)

    def crawl_with(forefront: bool) -> list[str]:
        site.requests.clear()
        router = Router()

        @router.handler("root")
        async def root(page: Html, links: Links) -> None:
            await links.same_hostname()

        @router.default
        async def child(response: Response, links: Links, url: Url) -> None:
            if url.endswith("/a"):
                await links.follow("/a/urgent", forefront=forefront)

        crawl(router, Seed(site.url("/"), tag="root"))
        return paths(site)

    assert crawl_with(forefront=False) == ["/", "/a", "/b", "/a/urgent"]
    assert crawl_with(forefront=True) == ["/", "/a", "/a/urgent", "/b"]


def test_follow_resolves_relative_urls_and_keeps_to_the_crawls_strategy(site: Site, other_site: Site) -> None:
    other_site.page("/x", "leaf")
    site.page("/dir/child", "leaf")
    results: list[EnqueueResult] = []
    router, _ = leaf_router(results)

    @router.handler("root")
    async def root(page: Html, links: Links) -> None:
        results.append(await links.follow(["child", other_site.url("/x"), "javascript:void(0)"]))

    site.page("/dir/", "<p>no links</p>")
    crawl(router, Seed(site.url("/dir/"), tag="root"), policy=CrawlPolicy(strategy="same_origin"))
    assert [seed.url for seed in results[0].added] == [site.url("/dir/child")]
    assert results[0].skipped == [
        (other_site.url("/x"), SkipReason.STRATEGY),
        ("javascript:void(0)", SkipReason.SCHEME),
    ]
    assert paths(other_site) == []  # the off-site link was never fetched


def test_follow_under_the_default_strategy_skips_off_site_links(site: Site) -> None:
    off_site = f"http://localhost:{site.port}/elsewhere"  # the same server under another host name
    site.page("/", f'<a href="/in">in</a> <a href="{off_site}">out</a>')
    site.page("/in", "leaf")
    site.page("/elsewhere", "leaf")
    results: list[EnqueueResult] = []
    router, _ = leaf_router(results)

    @router.handler("root")
    async def root(page: Html, links: Links) -> None:
        results.append(await links.follow(page.css("a::attr(href)").getall()))

    stats = crawl(router, Seed(site.url("/"), tag="root"))
    assert sorted(paths(site)) == ["/", "/in"]
    assert results[0].skipped_for("strategy") == [off_site]
    assert stats.skipped("strategy") == 1


def test_follow_with_strategy_all_follows_any_relationship(site: Site, other_site: Site) -> None:
    other_site.page("/x", "leaf")
    results: list[EnqueueResult] = []
    router, _ = leaf_router(results)

    @router.handler("root")
    async def root(links: Links) -> None:
        results.append(await links.follow(["child", other_site.url("/x")], strategy="all"))

    site.page("/dir/", "<p>no links</p>")
    site.page("/dir/child", "leaf")
    crawl(router, Seed(site.url("/dir/"), tag="root"), policy=CrawlPolicy(strategy="same_origin"))
    assert [seed.url for seed in results[0].added] == [site.url("/dir/child"), other_site.url("/x")]
    assert paths(other_site) == ["/x"]


def test_a_link_from_links_all_may_redirect_off_site(site: Site) -> None:
    off_site = f"http://localhost:{site.port}/landed"  # the same server under another host name
    site.page("/", '<a href="/moved">moved</a>')
    site.page("/moved", "", status=302, headers={"Location": off_site})
    site.page("/landed", "leaf")
    results: list[EnqueueResult] = []
    router, visited = leaf_router(results)

    @router.handler("root")
    async def root(page: Html, links: Links) -> None:
        results.append(await links.all())

    stats = crawl(router, Seed(site.url("/"), tag="root"))  # the crawl's own strategy: same_hostname
    assert paths(site) == ["/", "/moved", "/landed"]
    assert visited == [site.url("/moved")]
    assert stats.finished == 2
    assert stats.skipped("strategy") == 0


# -- errors ----------------------------------------------------------------------------------------


def test_a_selector_parses_the_page_itself_once_when_the_handler_takes_no_html(site: Site) -> None:
    site.page("/", '<a href="/a">a</a> <a href="/b">b</a>')
    site.page("/a", "")
    site.page("/b", "")
    router = Router()
    results: list[EnqueueResult] = []
    pages: list[object] = []

    @router.handler("root")
    async def root(links: Links, page: Html) -> None:
        results.append(await links.same_hostname(limit=1))
        results.append(await links.same_hostname())
        pages.append(page)

    @router.handler("bare")
    async def bare(links: Links) -> None:
        results.append(await links.same_hostname())

    @router.default
    async def leaf(response: Response) -> None:
        pass

    stats = crawl(router, Seed(site.url("/"), tag="bare"))
    assert stats.failed == 0
    assert [seed.url for seed in results[0].added] == [site.url("/a"), site.url("/b")]
    assert sorted(paths(site)) == ["/", "/a", "/b"]  # the page was fetched once, for the selector


def test_invalid_options_raise_config_errors_naming_the_problem(site: Site) -> None:
    site.page("/", '<a href="/a">a</a>')
    router = Router()
    messages: list[str] = []

    def sync_transform(seed: Seed) -> Seed:
        return seed

    async def returns_a_string(seed: Seed) -> Any:
        return seed.url

    bad_calls: list[dict[str, Any]] = [
        {"strategy": "nearby"},
        {"regex": "("},
        {"limit": -1},
        {"base_url": site.url("/")},
        {"raw_urls": ["a"], "base_url": "/relative/"},
        {"selector": "a[["},
        {"transform": sync_transform},
        {"transform": returns_a_string},
        {"globs": [3]},
    ]

    @router.handler("root")
    async def root(page: Html, links: Links) -> None:
        for options in bad_calls:
            with pytest.raises(ConfigError) as raised:
                await links.enqueue(**options)
            messages.append(str(raised.value))

    stats = crawl(router, Seed(site.url("/"), tag="root"))
    assert stats.finished == 1
    expected = ["strategy", "regular expression", "limit", "raw_urls", "base_url", "CSS", "async", "Seed or None"]
    assert [word in message for word, message in zip(expected, messages, strict=False)] == [True] * len(expected)
    assert len(messages) == len(bad_calls)
