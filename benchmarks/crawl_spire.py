"""The benchmark job with spire's public API: a Router, one handler (Html, Links, Url, a Dataset).

    .venv/bin/python benchmarks/crawl_spire.py --start http://127.0.0.1:8632/scipy/index.html --out pages.jsonl

Follows every ``<a href>`` under the start URL's folder (fragment dropped) and writes url, title and
link count per page as JSON Lines. ``--polite`` limits each host to 1 request in flight and 4 a second.
``--cache DIR`` fetches through a ``CachingBackend`` in DIR (policy "dev"): the first run stores every
response, a later one replays them without a request. ``--plain`` runs the "plain" handler instead: it
reads the hrefs with ``html.css``, joins and filters them itself (as the bare loop does) and queues
them with ``links.follow(urls)``, the way a handler written without spire's link options reads.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import time
from pathlib import Path

import ada_url
from pydantic import BaseModel

from spire import Crawler, CrawlStats, Dataset, HostLimits, Html, Links, Router, Url
from spire_core.frontier.base import Frontier


class Page(BaseModel):
    url: str
    title: str
    links: int


def make_router(prefixes: tuple[str, ...]) -> Router:
    router = Router()
    scope = [re.compile("^" + re.escape(prefix)) for prefix in prefixes]

    @router.default
    async def page(html: Html, links: Links, url: Url, pages: Dataset[Page]) -> None:
        queued = await links.same_origin(selector="a[href]", regex=scope)
        title = html.css("title::text").get(default="")
        await pages.push(Page(url=url, title=title, links=queued.found))

    return router


def make_plain_router(prefixes: tuple[str, ...]) -> Router:
    """The same job with the links joined and filtered by the handler, then queued with ``follow``."""
    router = Router()

    @router.default
    async def page(html: Html, links: Links, url: Url, pages: Dataset[Page]) -> None:
        hrefs = html.css("a::attr(href)").getall()
        urls: list[str] = []
        for href in hrefs:
            try:
                joined: str = ada_url.join_url(url, href.strip())
            except ValueError:
                continue
            joined = joined.split("#", 1)[0]
            if joined.startswith(prefixes):
                urls.append(joined)
        await links.follow(urls)
        title = html.css("title::text").get(default="")
        await pages.push(Page(url=url, title=title, links=len(hrefs)))

    return router


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--start", action="append", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--polite", action="store_true", help="1 in flight and 4 requests/s per host")
    parser.add_argument("--cache", type=Path, default=None, help="a folder: responses are stored and replayed")
    parser.add_argument("--processes", default="1", help="worker processes (a number, or auto)")
    parser.add_argument("--plain", action="store_true", help="the handler joins its links and calls links.follow")
    parser.add_argument(
        "--ledger", choices=("full", "light", "off"), default="full", help="the crawl's ledger (spire's default: full)"
    )
    parser.add_argument("--state", type=Path, default=None, help="keep the crawl in this SqliteFrontier file")
    parser.add_argument("--recrawl", action="store_true", help="keep page states: a finished --state is recrawled")
    args = parser.parse_args()
    args.out.unlink(missing_ok=True)
    started = time.perf_counter()
    if args.state is None:
        crawler = build(args, frontier=None)
        stats = crawler.run(args.start)
    else:
        import anyio

        stats = anyio.run(crawl_with_state, args)
        crawler = None
    if crawler is not None and not args.out.exists():  # no JSON Lines dataset yet: export the memory one
        import anyio

        anyio.run(crawler.dataset(Page).export, args.out)
    print(stats)
    print(f"BENCH crawl_seconds={time.perf_counter() - started:.4f}")


async def crawl_with_state(args: argparse.Namespace) -> CrawlStats:
    """The crawl on a ``SqliteFrontier`` in ``args.state``: resumed, or recrawled once finished."""
    from spire_core.frontier.sqlite import SqliteFrontier

    async with SqliteFrontier(args.state) as frontier:
        return await build(args, frontier).arun(args.start)


def build(args: argparse.Namespace, frontier: Frontier | None) -> Crawler:
    prefixes = tuple(start.rsplit("/", 1)[0] + "/" for start in args.start)
    limits = HostLimits(max_in_flight=args.concurrency)
    if args.polite:
        limits = HostLimits(max_in_flight=1, per_second=4)
    datasets = None
    if importlib.util.find_spec("spire_core.dataset.jsonl") is not None:
        from spire_core.dataset.jsonl import JsonlDataset

        datasets = {Page: JsonlDataset(Page, args.out)}
    backend = None
    if args.cache is not None:
        from spire import CachingBackend, HttpBackend

        backend = CachingBackend(HttpBackend(), args.cache)
    # robots off, as for Scrapy and Crawlee here: the sites are local copies with no robots.txt of their own.
    return Crawler(
        (make_plain_router if args.plain else make_router)(prefixes),
        concurrency=args.concurrency,
        host_limits=limits,
        datasets=datasets,
        backend=backend,
        robots=False,
        processes="auto" if args.processes == "auto" else int(args.processes),
        ledger=False if args.ledger == "off" else args.ledger,
        frontier=frontier,
        recrawl=args.recrawl,
    )


if __name__ == "__main__":
    main()
