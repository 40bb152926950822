"""A crawl on a ``SqliteFrontier`` whose items go to a table of the same file, run by ``test_items_crash.py``.

    python items_crawl.py FRONTIER_PATH ROOT_URL [PROCESSES]

Follows every link from ``ROOT_URL``, four requests at a time, and stores one item per page, on
``PROCESSES`` worker processes (default 1: this one).
"""

from __future__ import annotations

import sys

import anyio
from pydantic import BaseModel

from spire import Crawler, Dataset, HostLimits, Html, Links, Router, Seed, Url
from spire_core import SqliteFrontier


class Page(BaseModel):
    url: str
    links: int


def tree_router() -> Router:
    router = Router()

    @router.default
    async def page(html: Html, links: Links, url: Url, pages: Dataset[Page]) -> None:
        found = html.css("a::attr(href)").getall()
        await links.follow(found)
        await pages.push(Page(url=url, links=len(found)))

    return router


async def crawl(path: str, root: str, processes: int) -> None:
    async with SqliteFrontier(path) as frontier:
        crawler = Crawler(
            tree_router(),
            frontier=frontier.dedup(),
            datasets=frontier.dataset,
            concurrency=4,
            host_limits=HostLimits(max_in_flight=4),
            processes=processes,
        )
        print(await crawler.arun([Seed(root)]), flush=True)


if __name__ == "__main__":
    anyio.run(crawl, sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 1)
