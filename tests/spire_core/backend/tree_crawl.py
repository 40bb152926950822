"""A crawl of a local binary tree that keeps each page's title: what the cache and WARC tests replay."""

from __future__ import annotations

import anyio
from pydantic import BaseModel

from spire import Crawler, Dataset, HostLimits, Html, Links, Router, Url
from spire_core.backend.base import Backend


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


def crawl(backend: Backend, start: str) -> tuple[Crawler, list[Page]]:
    """Crawl from ``start`` through ``backend``; the crawler and its pages, sorted by URL."""
    crawler = Crawler(tree_router(), concurrency=8, host_limits=HostLimits(max_in_flight=8), backend=backend)
    crawler.run([start])

    async def read() -> list[Page]:
        return [item async for item in crawler.dataset(Page)]

    return crawler, sorted(anyio.run(read), key=lambda page: page.url)
