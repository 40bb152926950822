"""Crawl the bundled example bookshop and write every book to a JSON Lines file.

    python examples/shop_crawl.py --output out/books.jsonl

Serves the shop (examples/shop/) on 127.0.0.1, crawls it from the home page: listings lead to
books and to their next page, each book page becomes one ``Book``. Prints the crawl's stats and
exits 0 only if it found every book the shop has.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pydantic import BaseModel
from shop.server import ShopServer

from spire import Crawler, Dataset, Html, JsonlDataset, Links, Router, Seed, Url


class Book(BaseModel):
    url: str
    title: str
    price: float
    rating: int
    in_stock: bool
    category: str


RATINGS = {"One": 1, "Two": 2, "Three": 3, "Four": 4, "Five": 5}

router = Router()


@router.handler("listing")
async def listing(page: Html, links: Links) -> None:
    await links.follow(page.css("nav.categories a::attr(href)").getall(), tag="listing")
    await links.follow(page.css("article.product_pod h3 a::attr(href)").getall(), tag="book")
    await links.follow(page.css("li.next a::attr(href)").getall(), tag="listing")


@router.handler("book")
async def book(page: Html, url: Url, books: Dataset[Book]) -> None:
    stars = page.css("p.star-rating::attr(class)").re_first(r"star-rating (\w+)", default="")
    await books.push(
        {
            "url": url,
            "title": page.css("h1::text").get(),
            "price": page.css("p.price_color::text").re_first(r"[\d.]+"),
            "rating": RATINGS.get(stars),
            "in_stock": page.css("p.availability::text").get("").startswith("In stock"),
            "category": page.css("ul.breadcrumb li:nth-child(2) a::text").get(),
        }
    )


def main() -> int:
    parser = argparse.ArgumentParser(description="Crawl the example bookshop into a JSON Lines file.")
    parser.add_argument("--output", type=Path, default=Path("books.jsonl"), help="the JSON Lines file to write")
    args = parser.parse_args()
    with ShopServer() as shop:
        # A file dataset adds to its file by default; "overwrite" starts this crawl's output afresh.
        crawler = Crawler(router, datasets={Book: JsonlDataset(Book, args.output, mode="overwrite")})
        stats = crawler.run([Seed(shop.url("/"), tag="listing")])
    print(stats)

    books = [Book.model_validate_json(line) for line in args.output.read_text(encoding="utf-8").splitlines()]
    print(f"{len(books)} of {len(shop.book_urls)} books written to {args.output}")
    return 0 if sorted(book.url for book in books) == sorted(shop.book_urls) else 1


if __name__ == "__main__":
    raise SystemExit(main())
