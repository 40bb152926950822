"""The crawler end to end against real local servers."""

from __future__ import annotations

from pydantic import BaseModel

from spire import Crawler, Dataset, HostLimits, Html, Links, Router, Seed, Url
from tests.sites.server import Site, binary_tree


class Page(BaseModel):
    url: str
    title: str


def tree_router() -> Router:
    router = Router()

    @router.default
    async def page(html: Html, links: Links, pages: Dataset[Page], url: Url) -> None:
        await links.follow(html.css("a::attr(href)").getall())
        await pages.push(Page(url=url, title=html.css("title::text").get(default="")))

    return router


def test_binary_tree_is_crawled_with_exactly_one_request_per_page(site: Site) -> None:
    root = binary_tree(site, 100)
    crawler = Crawler(tree_router(), concurrency=8, host_limits=HostLimits(max_in_flight=8))
    stats = crawler.run([Seed(root)])
    assert (stats.requests, stats.finished, stats.failed) == (100, 100, 0)
    assert all(count == 1 for count in site.hits().values())
    assert len(site.hits()) == 100
    assert stats.items == 100
