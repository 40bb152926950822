"""Crawl the bundled example bookshop on every core: one worker process a core.

    python examples/all_cores.py

The crawl's own process keeps the frontier, the host limits and the books; the workers fetch the
pages, parse them and run the handlers. Prints the stats and how many workers handled books, and
exits 0 only if every book the shop has was found exactly once.
"""

from __future__ import annotations

import os

import anyio
from pydantic import BaseModel
from shop.server import ShopServer

from spire import Crawler, Dataset, Html, Links, Router, Seed, Url


class Book(BaseModel):
    url: str
    title: str
    worker: int


router = Router()


@router.handler("listing")
async def listing(page: Html, links: Links) -> None:
    await links.follow(page.css("nav.categories a::attr(href)").getall(), tag="listing")
    await links.follow(page.css("article.product_pod h3 a::attr(href)").getall(), tag="book")
    await links.follow(page.css("li.next a::attr(href)").getall(), tag="listing")


@router.handler("book")
async def book(page: Html, url: Url, books: Dataset[Book]) -> None:
    await books.push(Book(url=url, title=page.css("h1::text").get(""), worker=os.getpid()))


async def found(crawler: Crawler) -> list[Book]:
    return [item async for item in crawler.dataset(Book)]


def main() -> int:
    with ShopServer() as shop:
        crawler = Crawler(router, processes="auto")
        stats = crawler.run([Seed(shop.url("/"), tag="listing")])
    books = anyio.run(found, crawler)
    print(stats)
    print(f"{len(books)} of {len(shop.book_urls)} books, handled by {len({b.worker for b in books})} workers")
    return 0 if sorted(b.url for b in books) == sorted(shop.book_urls) else 1


if __name__ == "__main__":
    raise SystemExit(main())
