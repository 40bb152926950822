"""A deterministic guard on what one page costs a crawl: Python calls per page, counted, not timed.

The example shop (examples/shop/) is served from another process, so only the crawl's side is
counted; cProfile watches only the thread that runs the crawl's loop. Two shops of different sizes
are crawled and the difference in calls is divided by the difference in pages, so start-up
(imports, the loop, robots.txt) cancels out. The budget is in tests/cost_budget.json.
"""

from __future__ import annotations

import cProfile
import json
import multiprocessing
import pstats
import statistics
from collections.abc import Iterator
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event
from pathlib import Path

import pytest
from pydantic import BaseModel

from spire import Crawler, Dataset, Html, Links, Router, Seed, Url

BUDGET_FILE = Path(__file__).with_name("cost_budget.json")
#: Over the budget by more than this fails: a page's path got dearer.
ABOVE = 0.05
#: Under the budget by more than this fails too, so that a saving is locked in by lowering the budget.
BELOW = 0.15
SMALL, LARGE = 60, 300
#: Pairs of crawls measured; the median difference is kept (one pair is within ~2% of another).
REPEATS = 3


class Book(BaseModel):
    url: str
    title: str


router = Router()


@router.handler("listing")
async def listing(page: Html, links: Links) -> None:
    await links.follow(page.css("nav.categories a::attr(href)").getall(), tag="listing")
    await links.follow(page.css("article.product_pod h3 a::attr(href)").getall(), tag="book")
    await links.follow(page.css("li.next a::attr(href)").getall(), tag="listing")


@router.handler("book")
async def book(page: Html, url: Url, books: Dataset[Book]) -> None:
    await books.push({"url": url, "title": page.css("h1::text").get()})


def _serve(books: int, urls: Queue[str], stop: Event) -> None:
    from examples.shop.server import ShopServer
    from examples.shop.site import Shop

    with ShopServer(Shop(books=books)) as shop:
        urls.put(shop.url("/"))
        stop.wait()


@pytest.fixture(scope="module")
def shops() -> Iterator[dict[int, str]]:
    """The home pages of a small and a large shop, each served by a process of its own."""
    spawn = multiprocessing.get_context("spawn")
    stop = spawn.Event()
    urls: dict[int, str] = {}
    servers = []
    for books in (SMALL, LARGE):
        queue: Queue[str] = spawn.Queue()
        server = spawn.Process(target=_serve, args=(books, queue, stop), daemon=True)
        server.start()
        servers.append(server)
        urls[books] = queue.get(timeout=30)
    yield urls
    stop.set()
    for server in servers:
        server.join(timeout=10)


def calls_and_pages(url: str) -> tuple[int, int]:
    """The Python calls a crawl from ``url`` makes on this thread, and the pages it handled."""
    crawler = Crawler(router)  # the defaults: 16 in flight, robots on, HttpBackend, MemoryFrontier
    profile = cProfile.Profile()
    profile.enable()
    try:
        stats = crawler.run([Seed(url, tag="listing")])
    finally:
        profile.disable()
    calls: int = pstats.Stats(profile).total_calls  # type: ignore[attr-defined]
    return calls, stats.pages


def per_page_calls(urls: dict[int, str]) -> list[float]:
    """Calls per page of ``REPEATS`` pairs of crawls, after a first crawl of each shop."""
    # a first crawl of each fills the caches and imports what the crawl imports lazily
    calls_and_pages(urls[SMALL])
    calls_and_pages(urls[LARGE])
    per_page = []
    for _ in range(REPEATS):
        small_calls, small_pages = calls_and_pages(urls[SMALL])
        large_calls, large_pages = calls_and_pages(urls[LARGE])
        assert large_pages > small_pages + 200, (small_pages, large_pages)
        per_page.append((large_calls - small_calls) / (large_pages - small_pages))
    return per_page


def test_calls_per_page_stay_within_the_budget(shops: dict[int, str]) -> None:
    budget = json.loads(BUDGET_FILE.read_text(encoding="utf-8"))["calls_per_page"]
    # Measured in a fresh process: what earlier tests left in this one (a log level, a tracer, an
    # installed event loop policy) would change the count, so the figure would depend on the order
    # in which tests happen to run.
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        per_page = pool.apply(per_page_calls, (shops,))
    measured = statistics.median(per_page)
    print(f"calls per page: {measured:.0f} (runs: {', '.join(f'{p:.0f}' for p in per_page)}), budget {budget}")
    update = f"update calls_per_page in {BUDGET_FILE.name} to {measured:.0f} and say so in the commit message"
    assert measured <= budget * (1 + ABOVE), (
        f"a page costs {measured:.0f} Python calls, over the budget of {budget} by more than {ABOVE:.0%}: "
        f"find the new calls (cProfile a crawl), or if the cost is meant, {update}"
    )
    assert measured >= budget * (1 - BELOW), (
        f"a page costs {measured:.0f} Python calls, under the budget of {budget} by more than {BELOW:.0%}: "
        f"lock the saving in: {update}"
    )
