"""Crawl a shop whose category pages build their product links with JavaScript, adaptively.

    python examples/js_site_adaptive.py

Serves the shop (examples/js_shop/) on 127.0.0.1. Every page is fetched over HTTP first; a category
page, whose HTTP body has no ``a.product`` link, is rendered in headless Chromium; once three have
taught the backend that HTTP never suffices for that tag, later categories skip the HTTP fetch. The
home page and the products never touch the browser. Prints the crawl's stats and the
backend's decisions, and exits 0 only if every product was found with only the categories rendered.
"""

from __future__ import annotations

import sys

from js_shop.server import JsShopServer

from spire import AdaptiveBackend, BrowserBackend, Crawler, Html, Links, Router, Url
from spire_core.backend.adaptive import missing

router = Router()
prices: dict[str, str] = {}


@router.default
async def home(page: Html, links: Links) -> None:
    await links.follow(page.css("a.category::attr(href)").getall(), tag="category")


@router.handler("category")
async def category(page: Html, links: Links) -> None:  # the same handler runs on HTTP, browser or adaptive
    await links.follow(page.css("a.product::attr(href)").getall(), tag="product")


@router.handler("product")
async def product(page: Html, url: Url) -> None:
    prices[url] = page.css("p.price::text").get(default="")


def main() -> int:
    with JsShopServer(categories=6, products=5) as shop:
        backend = AdaptiveBackend(
            BrowserBackend(drivers=2),
            needs_browser={"category": missing("a.product")},  # what the category handler reads
            default="http",  # other tags stay on HTTP
        )
        stats = Crawler(router, backend=backend, concurrency=4).run([shop.url("/")])
        print(stats)
        print(f"adaptive: {backend.stats}")
        rendered = sorted(shop.browser_hits())
        print(f"rendered in the browser: {', '.join(rendered)}")
        found_all = set(prices) == shop.product_urls and all(prices.values())
        only_categories = rendered == sorted(f"/c/{number}" for number in range(shop.categories))
        print(f"{len(prices)} of {len(shop.product_urls)} products found")
        if found_all and only_categories and stats.failed == 0:
            print("every check passed")
            return 0
        return 1


if __name__ == "__main__":
    sys.exit(main())
