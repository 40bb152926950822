"""Write your own extractors: find the books through robots.txt and the sitemap, read their JSON-LD.

    python examples/custom_extractor.py

An extractor is a class with one async method. Annotate a handler parameter with
``Annotated[T, YourExtractor()]`` and spire runs it once per page, sharing the page's single fetch
with every other parameter. A handler that asks for nothing from the response causes no fetch.
Exits 0 only if every book was found, each book page was fetched exactly once, no other page from
the sitemap was fetched, and each book's JSON-LD price matches the price printed on its page.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Annotated, Any

import anyio
from parsel import Selector
from pydantic import BaseModel
from shop.server import ShopServer

from spire import Context, Crawler, Dataset, Extractor, Html, Links, Response, RobotsRules, Router, Seed, Url, resolve


class SitemapUrls(Extractor[list[str]]):
    """The ``<loc>`` URLs of an XML sitemap."""

    async def extract(self, ctx: Context) -> list[str]:
        response = await resolve(ctx, Response)
        sitemap = Selector(body=response.body, type="xml")
        sitemap.remove_namespaces()
        return sitemap.xpath("//url/loc/text()").getall()


class JsonLd(Extractor[dict[str, Any]]):
    """The page's JSON-LD object of one ``@type`` (``{}`` when it has none)."""

    def __init__(self, type_: str) -> None:
        self.type = type_

    async def extract(self, ctx: Context) -> dict[str, Any]:
        page = await resolve(ctx, Html)  # shares the page's one fetch and parse with the handler
        for script in page.css('script[type="application/ld+json"]::text').getall():
            data = json.loads(script)
            if isinstance(data, dict) and data.get("@type") == self.type:
                return data
        return {}

    def key(self) -> tuple[type[JsonLd], str]:
        return (JsonLd, self.type)  # JsonLd("Product") in two parameters runs once


class Product(BaseModel):
    url: str
    name: str
    sku: str
    price: Decimal
    currency: str
    shown_price: Decimal


router = Router()


@router.handler("robots")
async def robots(rules: RobotsRules, links: Links) -> None:
    """robots.txt as the crawl already read it (every crawl does, first): no second fetch."""
    await links.follow(rules.sitemaps() if rules is not None else [], tag="sitemap")


@router.handler("sitemap")
async def sitemap(urls: Annotated[list[str], SitemapUrls()], links: Links) -> None:
    await links.follow(urls)  # untagged: routed by their path


@router.handler(path="/books/*.html")
async def book(
    url: Url, page: Html, product: Annotated[dict[str, Any], JsonLd("Product")], products: Dataset[Product]
) -> None:
    offer = product["offers"]
    await products.push(
        {
            "url": url,
            "name": product["name"],
            "sku": product["sku"],
            "price": offer["price"],
            "currency": offer["priceCurrency"],
            "shown_price": page.css("p.price_color::text").re_first(r"[\d.]+"),
        }
    )


@router.default
async def not_a_book(url: Url) -> None:
    """Listings and info pages: asks for nothing from the response, so they are never fetched."""


async def main() -> int:
    with ShopServer() as shop:
        crawler = Crawler(router)
        stats = await crawler.arun([Seed(shop.url("/robots.txt"), tag="robots")])
        hits = shop.hits()
    print(stats)
    products = [product async for product in crawler.dataset(Product)]
    book_paths = {book.path for book in shop.shop.books}

    problems: list[str] = []
    if {p.url for p in products} != shop.book_urls:
        problems.append(f"found {len(products)} of {len(shop.book_urls)} books")
    if any(hits[path] != 1 for path in book_paths):
        problems.append("a book page was fetched more or less than once")
    if fetched := sorted(path for path in hits if path not in book_paths | {"/robots.txt", "/sitemap.xml"}):
        problems.append(f"fetched pages no handler needed: {fetched[:3]}")
    if mismatched := [p.url for p in products if p.price != p.shown_price]:
        problems.append(f"JSON-LD and page prices differ on {mismatched[:3]}")
    print(f"{len(products)} books, {sum(hits.values())} requests: {'; '.join(problems) or 'every check passed'}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(anyio.run(main))
