"""Pages/s for HTTP, browser and adaptive backends on the JavaScript shop (examples/js_shop/).

    .venv/bin/python benchmarks/browser_backends.py                     # 20 categories x 10 products
    .venv/bin/python benchmarks/browser_backends.py --categories 10 --products 20 --drivers 4
    .venv/bin/python benchmarks/browser_backends.py --memory 300   # pool RSS, recycled every 50 or never

One router for every backend: the home page links the categories, a category's product links are
built by its script, each product page is static. The HTTP backend sees no product; the browser
renders every page; the adaptive backend renders only the categories. Printed, never asserted.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

from js_shop.server import JsShopServer

from spire import AdaptiveBackend, BrowserBackend, Crawler, Html, Links, Router, Url
from spire_core.backend.adaptive import missing
from spire_core.backend.base import Backend
from spire_core.backend.http import HttpBackend


def shop_router(found: set[str]) -> Router:
    router = Router()

    @router.default
    async def home(page: Html, links: Links) -> None:
        await links.follow(page.css("a.category::attr(href)").getall(), tag="category")

    @router.handler("category")
    async def category(page: Html, links: Links) -> None:
        await links.follow(page.css("a.product::attr(href)").getall(), tag="product")

    @router.handler("product")
    async def product(page: Html, url: Url) -> None:
        found.add(url)

    return router


def run(name: str, make: Callable[[], Backend], args: argparse.Namespace) -> None:
    with JsShopServer(categories=args.categories, products=args.products) as shop:
        backend = make()
        found: set[str] = set()
        started = time.perf_counter()
        stats = Crawler(shop_router(found), backend=backend, concurrency=args.concurrency).run([shop.url("/")])
        seconds = time.perf_counter() - started
        renders = sum(shop.browser_hits().values())
        print(
            f"| {name} | {stats.pages} | {len(found)} of {len(shop.product_urls)} | {renders} | "
            f"{seconds:.1f} | {stats.pages / seconds:.1f} |",
            flush=True,
        )


def memory(pages: int, args: argparse.Namespace) -> None:
    """The pool's RSS over a crawl of ``pages`` JavaScript pages, recycling every 50 pages or never."""
    print("| recycle_after | pages | pool RSS, first 10% (MiB) | pool RSS, last 10% (MiB) | peak (MiB) | seconds |")
    print("|---|---|---|---|---|---|")
    for recycle in (50, None):
        samples, handled, seconds = memory_run(pages, recycle, args)
        tenth = max(1, len(samples) // 10)
        print(
            f"| {recycle} | {handled} | {max(samples[:tenth])} | {max(samples[-tenth:])} | "
            f"{max(samples)} | {seconds:.1f} |",
            flush=True,
        )


def memory_run(pages: int, recycle: int | None, args: argparse.Namespace) -> tuple[list[int], int, float]:
    """The pool's RSS in MiB after each page, the pages handled, and the seconds the crawl took."""
    with JsShopServer(categories=max(1, pages // 10), products=9) as shop:
        backend = BrowserBackend(drivers=args.drivers, recycle_after=recycle)
        samples: list[int] = []
        router = Router()

        @router.default
        async def page(html: Html, links: Links) -> None:
            await links.same_origin()
            samples.append(await backend.pool.rss() >> 20)

        started = time.perf_counter()
        stats = Crawler(router, backend=backend, concurrency=args.concurrency).run([shop.url("/")])
        return samples, stats.pages, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--categories", type=int, default=20)
    parser.add_argument("--products", type=int, default=10)
    parser.add_argument("--drivers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--memory", type=int, default=0, help="measure the pool's RSS over this many pages instead")
    args = parser.parse_args()
    if args.memory:
        memory(args.memory, args)
        return
    print(f"{1 + args.categories * (1 + args.products)} pages, {args.drivers} drivers, concurrency {args.concurrency}")
    print("| backend | pages handled | products found | pages rendered | seconds | pages/s |")
    print("|---|---|---|---|---|---|")
    run("HttpBackend", HttpBackend, args)
    run("BrowserBackend", lambda: BrowserBackend(drivers=args.drivers), args)
    run(
        "AdaptiveBackend",
        lambda: AdaptiveBackend(
            BrowserBackend(drivers=args.drivers), needs_browser={"category": missing("a.product")}, default="http"
        ),
        args,
    )


if __name__ == "__main__":
    main()
