"""The benchmark job with Crawlee for Python: a ParselCrawler on memory storage.

    benchmarks/.venv-compare/bin/python benchmarks/crawl_crawlee.py \
        --start http://127.0.0.1:8632/scipy/index.html --out pages.jsonl

Runs in the comparison venv. Concurrency is pinned (min = desired = max = ``--concurrency``) so
the autoscaled pool starts at full speed; robots are off (Crawlee's default); its default HTTP
client (impit) is used.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import re
import time
from pathlib import Path

from crawlee import ConcurrencySettings
from crawlee.crawlers import ParselCrawler, ParselCrawlingContext
from crawlee.storage_clients import MemoryStorageClient


async def crawl(starts: list[str], out: Path, concurrency: int) -> int:
    prefixes = [start.rsplit("/", 1)[0] + "/" for start in starts]
    include = [re.compile("^" + re.escape(prefix)) for prefix in prefixes]
    crawler = ParselCrawler(
        storage_client=MemoryStorageClient(),
        concurrency_settings=ConcurrencySettings(
            min_concurrency=concurrency, desired_concurrency=concurrency, max_concurrency=concurrency
        ),
        respect_robots_txt_file=False,
        configure_logging=False,
    )

    @crawler.router.default_handler
    async def page(context: ParselCrawlingContext) -> None:
        selector = context.selector
        hrefs = selector.css("a::attr(href)").getall()
        await context.enqueue_links(selector="a", strategy="same-origin", include=include)
        await context.push_data(
            {
                "url": context.request.url,
                "title": selector.css("title::text").get(default=""),
                "links": len(hrefs),
            }
        )

    await crawler.run(starts)
    data = await crawler.get_data(limit=10**9)
    await asyncio.to_thread(out.write_text, "".join(json.dumps(item) + "\n" for item in data.items))
    return len(data.items)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--start", action="append", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    started = time.perf_counter()
    pages = asyncio.run(crawl(args.start, args.out, args.concurrency))
    print(f"pages={pages}")
    print(f"BENCH crawl_seconds={time.perf_counter() - started:.4f}")


if __name__ == "__main__":
    main()
