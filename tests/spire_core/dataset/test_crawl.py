"""A crawl writing through ``Dataset[Model]`` into a ``JsonlDataset``: committed items only."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
from pydantic import BaseModel

from spire import Crawler, Dataset, Html, JsonlDataset, Links, Router, Seed, Url
from tests.sites.server import Site


class Book(BaseModel):
    url: str
    title: str


def bookshop(site: Site) -> str:
    """A listing that links to two books and to a page whose handler fails after pushing."""
    site.page("/", '<a href="/book/1">1</a> <a href="/book/2">2</a> <a href="/book/broken">3</a>')
    site.page("/book/1", "<h1>Dune</h1>")
    site.page("/book/2", "<h1>Emma</h1>")
    site.page("/book/broken", "<h1>Broken</h1>")
    return site.url("/")


def bookshop_router() -> Router:
    router = Router()

    @router.handler("listing")
    async def listing(page: Html, links: Links) -> None:
        await links.follow(page.css("a::attr(href)").getall(), tag="book")

    @router.handler("book")
    async def book(page: Html, url: Url, books: Dataset[Book]) -> None:
        await books.push(Book(url=url, title=page.css("h1::text").get(default="")))
        if url.endswith("/broken"):
            raise ValueError("the handler fails after pushing its item")

    return router


def test_a_crawl_writes_the_items_its_handlers_push_to_the_jsonl_file(site: Site, tmp_path: Path) -> None:
    path = tmp_path / "books.jsonl"
    books = JsonlDataset(Book, path)
    stats = Crawler(bookshop_router(), datasets={Book: books}).run([Seed(bookshop(site), tag="listing")])
    assert (stats.finished, stats.failed, stats.items) == (3, 1, 2)
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert sorted(rows, key=lambda row: row["title"]) == [
        {"url": site.url("/book/1"), "title": "Dune"},
        {"url": site.url("/book/2"), "title": "Emma"},
    ]
    # The crawl closed the dataset when it ended; reading it afterwards opens the file again.
    assert {book.title for book in anyio.run(books.items)} == {"Dune", "Emma"}


def test_a_handler_that_raises_after_pushing_leaves_no_items_in_the_file(site: Site, tmp_path: Path) -> None:
    path = tmp_path / "books.jsonl"
    site.page("/book/broken", "<h1>Broken</h1>")
    books = JsonlDataset(Book, path)
    stats = Crawler(bookshop_router(), datasets={Book: books}).run([Seed(site.url("/book/broken"), tag="book")])
    assert (stats.failed, stats.items) == (1, 0)
    assert site.hits()["/book/broken"] == 1  # failed for good, not retried
    assert not path.exists()  # nothing was committed, so the file was never even opened
