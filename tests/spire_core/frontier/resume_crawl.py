"""A crawl over a ``SqliteFrontier`` file, run by ``test_resume.py`` in a subprocess it may kill.

    python resume_crawl.py FRONTIER_PATH ROOT_URL

Follows every link from ``ROOT_URL``, four requests at a time, and prints its stats when done.
"""

from __future__ import annotations

import sys

import anyio

from spire import Crawler, HostLimits, Html, Links, Router, Seed
from spire_core import SqliteFrontier


def tree_router() -> Router:
    router = Router()

    @router.default
    async def page(html: Html, links: Links) -> None:
        await links.follow(html.css("a::attr(href)").getall())

    return router


async def crawl(path: str, root: str) -> None:
    async with SqliteFrontier(path) as frontier:
        crawler = Crawler(
            # No .dedup(): every frontier the Crawler runs on is deduplicated by unique key.
            tree_router(),
            frontier=frontier,
            concurrency=4,
            host_limits=HostLimits(max_in_flight=4),
        )
        stats = await crawler.arun([Seed(root)])
        print(stats, flush=True)


if __name__ == "__main__":
    anyio.run(crawl, sys.argv[1], sys.argv[2])
