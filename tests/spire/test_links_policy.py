"""``Links`` under a ``CrawlPolicy``: strategy defaults, depth and request-count admission, duplicates,
skip reporting; real crawls of local sites."""

from __future__ import annotations

import re
from typing import Any

import anyio.lowlevel
import pytest

from spire import (
    ConfigError,
    Crawler,
    CrawlPolicy,
    CrawlStats,
    EnqueueResult,
    HostLimits,
    Html,
    Links,
    Response,
    Retry,
    Router,
    Seed,
    SeedInfo,
    SkipReason,
)
from tests.sites.server import Site, binary_tree

HREF = re.compile(r'href="([^"]+)"')


def crawl(router: Router, *seeds: Seed | str, policy: CrawlPolicy | None = None, concurrency: int = 1) -> CrawlStats:
    crawler = Crawler(router, concurrency=concurrency, host_limits=HostLimits(max_in_flight=concurrency), policy=policy)
    return crawler.run(seeds)


def page_router(results: list[EnqueueResult], **options: Any) -> Router:
    """Every page queues its same-host links with ``options`` and keeps the result."""
    router = Router()

    @router.default
    async def page(html: Html, links: Links) -> None:
        results.append(await links.same_hostname(**options))

    return router


def paths(site: Site) -> list[str]:
    """Paths requested, in order; robots.txt (read first by every crawl) left out."""
    return [request.path for request in site.page_requests()]


def test_binary_tree_through_raw_urls_makes_exactly_one_hundred_requests(site: Site) -> None:
    root = binary_tree(site, 100)
    router = Router()

    @router.default
    async def page(response: Response, links: Links) -> None:
        # No parse: the links are plain strings found in the body, relative to the page.
        await links.enqueue(raw_urls=HREF.findall(response.text))

    stats = crawl(router, root, concurrency=8)
    assert (stats.requests, stats.finished, stats.failed) == (101, 100, 0)  # robots.txt first
    assert len(site.hits()) == 100
    assert set(site.hits().values()) == {1}


def test_rediscovered_links_in_a_cyclic_site_are_reported_as_duplicates(site: Site) -> None:
    pages = [f"/{i}" for i in range(6)]
    for path in pages:  # every page links to every page, itself included
        site.page(path, " ".join(f'<a href="{p}">{p}</a>' for p in pages))
    results: list[EnqueueResult] = []

    stats = crawl(page_router(results), site.url("/0"))
    assert sorted(paths(site)) == pages
    assert sum(len(result.added) for result in results) == 5
    duplicates = sum(len(result.skipped_for(SkipReason.DUPLICATE)) for result in results)
    assert duplicates == 6 * 6 - 5
    assert stats.skipped("duplicate") == duplicates
    assert all(reason == "duplicate" for result in results for _, reason in result.skipped)


def test_a_link_staged_earlier_by_the_same_request_is_a_duplicate(site: Site) -> None:
    site.page("/", '<a href="/a">a</a>')
    site.page("/a", "a")
    results: list[EnqueueResult] = []
    router = Router()

    @router.handler("root")
    async def root(html: Html, links: Links) -> None:
        results.append(await links.same_hostname())
        results.append(await links.follow(["/a", "/a#again"]))

    @router.default
    async def leaf(response: Response) -> None:
        pass

    crawl(router, Seed(site.url("/"), tag="root"))
    assert [seed.url for seed in results[0].added] == [site.url("/a")]
    assert results[1].added == []
    assert results[1].skipped == [(site.url("/a"), SkipReason.DUPLICATE)]  # the repeat within the call is silent
    assert paths(site) == ["/", "/a"]


def test_the_policy_strategy_is_the_default_and_a_call_overrides_it(site: Site, other_site: Site) -> None:
    site.page("/", f'<a href="{other_site.url("/x")}">x</a> <a href="/local">local</a>')
    site.page("/local", "local")
    other_site.page("/x", "x")
    results: list[EnqueueResult] = []
    router = Router()

    @router.handler("root")
    async def root(html: Html, links: Links) -> None:
        results.append(await links.enqueue())
        results.append(await links.enqueue(strategy="all"))

    @router.default
    async def leaf(response: Response) -> None:
        pass

    crawl(router, Seed(site.url("/"), tag="root"), policy=CrawlPolicy(strategy="same_origin"))
    assert results[0].skipped == [(other_site.url("/x"), SkipReason.STRATEGY)]
    assert [seed.url for seed in results[1].added] == [other_site.url("/x")]
    assert paths(other_site) == ["/x"]


def test_the_default_policy_keeps_links_to_the_same_host_name(site: Site) -> None:
    elsewhere = f"http://localhost:{site.port}/elsewhere"
    site.page("/", f'<a href="{elsewhere}">elsewhere</a> <a href="/here">here</a>')
    site.page("/here", "here")
    results: list[EnqueueResult] = []
    router = Router()

    @router.handler("root")
    async def root(html: Html, links: Links) -> None:
        results.append(await links.enqueue())

    @router.default
    async def leaf(response: Response) -> None:
        pass

    crawl(router, Seed(site.url("/"), tag="root"))
    assert results[0].skipped == [(elsewhere, SkipReason.STRATEGY)]
    assert sorted(paths(site)) == ["/", "/here"]


def test_max_crawl_depth_admits_links_up_to_that_many_hops_from_a_start_seed(site: Site) -> None:
    for i in range(5):
        site.page(f"/{i}", f'<a href="/{i + 1}">next</a>')
    results: list[EnqueueResult] = []

    crawl(page_router(results), site.url("/0"), policy=CrawlPolicy(max_crawl_depth=2))
    assert paths(site) == ["/0", "/1", "/2"]
    assert [seed.depth for result in results for seed in result.added] == [1, 2]
    assert results[-1].skipped == [(site.url("/3"), SkipReason.DEPTH)]


@pytest.mark.parametrize("cap", [1, 2, 10, 37])
def test_max_requests_per_crawl_is_exact_under_concurrency_with_awaiting_transforms(site: Site, cap: int) -> None:
    root = binary_tree(site, 100)
    results: list[EnqueueResult] = []

    async def transform(seed: Seed) -> Seed:
        await anyio.lowlevel.checkpoint()  # let the other requests run between admission and staging
        return seed

    policy = CrawlPolicy(max_requests_per_crawl=cap)
    stats = crawl(page_router(results, transform=transform), root, policy=policy, concurrency=8)
    assert stats.requests - 1 == len(site.hits()) == cap  # robots.txt is read first, and is no seed
    assert sum(len(result.added) for result in results) == cap - 1  # the start seed counts
    assert stats.skipped("request_limit") == sum(len(r.skipped_for(SkipReason.REQUEST_LIMIT)) for r in results) > 0


def test_start_seeds_count_against_max_requests_per_crawl(site: Site) -> None:
    for path in ("/a", "/b", "/c"):
        site.page(path, '<a href="/more">more</a>')
    results: list[EnqueueResult] = []

    stats = crawl(
        page_router(results), *(site.url(p) for p in ("/a", "/b")), policy=CrawlPolicy(max_requests_per_crawl=2)
    )
    assert sorted(paths(site)) == ["/a", "/b"]
    assert stats.skipped("request_limit") == 2


def test_rediscovered_links_do_not_use_up_the_request_budget(site: Site) -> None:
    # Page i links back to every page before it, then on to page i + 1.
    for i in range(10):
        site.page(f"/{i}", " ".join(f'<a href="/{j}">{j}</a>' for j in [*range(i), i + 1]))
    results: list[EnqueueResult] = []

    stats = crawl(page_router(results), site.url("/0"), policy=CrawlPolicy(max_requests_per_crawl=5))
    assert paths(site) == ["/0", "/1", "/2", "/3", "/4"]
    assert stats.skipped("request_limit") == 1


def test_links_of_a_retried_request_give_their_budget_back(site: Site) -> None:
    site.page("/", '<a href="/a">a</a> <a href="/b">b</a>')
    site.page("/a", "a")
    site.page("/b", "b")
    router = Router()
    results: list[EnqueueResult] = []

    @router.handler("root")
    async def root(html: Html, links: Links, seed: SeedInfo) -> Retry | None:
        results.append(await links.same_hostname())
        return Retry(after=0) if seed.attempt == 0 else None

    @router.default
    async def leaf(response: Response) -> None:
        pass

    policy = CrawlPolicy(max_requests_per_crawl=3)
    stats = crawl(router, Seed(site.url("/"), tag="root"), policy=policy)
    assert [len(result.added) for result in results] == [2, 2]
    assert sorted(paths(site)) == ["/", "/", "/a", "/b"]
    assert stats.skipped() == 0


def test_every_skip_reason_is_counted_and_reported_to_on_skipped(site: Site) -> None:
    site.page("/", "<p>root</p>")
    site.page("/child", "<p>child</p>")
    elsewhere = f"http://localhost:{site.port}/elsewhere"
    heard: list[tuple[str, str]] = []
    router = Router()

    async def reject(seed: Seed) -> None:
        return None

    @router.handler("root")
    async def root(html: Html, links: Links) -> None:
        await links.enqueue(raw_urls=["/rejected"], transform=reject)
        await links.enqueue(
            raw_urls=["http://[::1", "mailto:x@example.com", elsewhere, "/excluded", "/", "/child"],
            exclude="*/excluded",
        )
        await links.enqueue(raw_urls=["/over"])

    @router.default
    async def child(html: Html, links: Links) -> None:
        await links.enqueue(raw_urls=["/deeper"])

    policy = CrawlPolicy(max_crawl_depth=1, max_requests_per_crawl=2, on_skipped=lambda u, r: heard.append((u, r)))
    stats = crawl(router, Seed(site.url("/"), tag="root"), policy=policy)
    assert heard == [
        (site.url("/rejected"), SkipReason.TRANSFORM),
        ("http://[::1", SkipReason.INVALID_URL),
        ("mailto:x@example.com", SkipReason.SCHEME),
        (elsewhere, SkipReason.STRATEGY),
        (site.url("/excluded"), SkipReason.PATTERN),
        (site.url("/"), SkipReason.DUPLICATE),
        (site.url("/over"), SkipReason.REQUEST_LIMIT),
        (site.url("/deeper"), SkipReason.DEPTH),
    ]
    assert dict(stats.skipped_by_reason) == {reason.value: 1 for _, reason in heard}
    assert paths(site) == ["/", "/child"]


def test_an_async_on_skipped_is_awaited(site: Site) -> None:
    site.page("/", '<a href="mailto:x@example.com">mail</a>')
    heard: list[str] = []

    async def on_skipped(url: str, reason: SkipReason) -> None:
        await anyio.lowlevel.checkpoint()
        heard.append(f"{reason}:{url}")

    crawl(page_router([]), site.url("/"), policy=CrawlPolicy(on_skipped=on_skipped))
    assert heard == ["scheme:mailto:x@example.com"]


@pytest.mark.parametrize(
    "options",
    [{"strategy": "nearby"}, {"max_crawl_depth": -1}, {"max_requests_per_crawl": -1}],
)
def test_a_crawl_policy_rejects_impossible_settings(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        CrawlPolicy(**options)
