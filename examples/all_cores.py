"""Crawl the bundled example bookshop on every core: one worker process a core.

    python examples/all_cores.py

The router is ``shop_crawl.py``'s. The crawl's own process keeps the frontier, the host limits and
the books; the workers fetch the pages, parse them and run the handlers. Prints the stats and exits
0 only if every book the shop has was found exactly once.
"""

from __future__ import annotations

import anyio
from shop.server import ShopServer
from shop_crawl import Book, router

from spire import Crawler, Seed


async def found(crawler: Crawler) -> list[Book]:
    return [item async for item in crawler.dataset(Book)]


def main() -> int:
    with ShopServer() as shop:
        crawler = Crawler(router, processes="auto")
        stats = crawler.run([Seed(shop.url("/"), tag="listing")])
    books = anyio.run(found, crawler)
    print(stats)
    print(f"{len(books)} of {len(shop.book_urls)} books, on {crawler.processes} worker processes")
    return 0 if sorted(book.url for book in books) == sorted(shop.book_urls) else 1


if __name__ == "__main__":
    raise SystemExit(main())
