"""The benchmark job with Scrapy: a plain spider, a LinkExtractor, a JSON Lines feed.

    benchmarks/.venv-compare/bin/python benchmarks/crawl_scrapy.py \
        --start http://127.0.0.1:8632/scipy/index.html --out pages.jsonl

Runs in the comparison venv (``benchmarks/setup.sh`` builds it). Settings: ``CONCURRENT_REQUESTS``
and ``CONCURRENT_REQUESTS_PER_DOMAIN`` = ``--concurrency``, no delay, no AutoThrottle, robots off.
``--polite``: ``DOWNLOAD_DELAY=0.25``, ``CONCURRENT_REQUESTS_PER_DOMAIN=1``, no randomized delay.
``--cache DIR``: Scrapy's HTTP cache in DIR (``HTTPCACHE_ENABLED``, its defaults: ``DummyPolicy``,
``FilesystemCacheStorage``, no expiry): the first run stores every response, a later one replays them.
"""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import scrapy
from scrapy.crawler import CrawlerProcess
from scrapy.http import Response
from scrapy.linkextractors import LinkExtractor


def _drop_fragment(value: str) -> str:
    return value.split("#", 1)[0]


class PagesSpider(scrapy.Spider):
    name = "pages"

    def __init__(self, starts: list[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.starts = starts
        prefixes = [start.rsplit("/", 1)[0] + "/" for start in starts]
        self.extractor = LinkExtractor(
            allow=[f"^{re.escape(prefix)}" for prefix in prefixes],
            tags=("a",),
            attrs=("href",),
            deny_extensions=[],  # follow every link, whatever its file type (see benchmarks/README.md)
            process_value=_drop_fragment,
        )

    async def start(self) -> AsyncIterator[Any]:
        # Start requests skip the duplicate filter by default; the job fetches every page once.
        for url in self.starts:
            yield scrapy.Request(url, callback=self.parse, dont_filter=False)

    def parse(self, response: Response) -> Iterator[Any]:
        hrefs = response.css("a::attr(href)").getall()
        yield {"url": response.url, "title": response.css("title::text").get(default=""), "links": len(hrefs)}
        for link in self.extractor.extract_links(response):
            yield scrapy.Request(link.url, callback=self.parse)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--start", action="append", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--polite", action="store_true", help="1 in flight per host, 0.25 s between requests")
    parser.add_argument("--cache", type=Path, default=None, help="a folder for Scrapy's HTTP cache")
    args = parser.parse_args()
    args.out.unlink(missing_ok=True)
    settings: dict[str, Any] = {
        "CONCURRENT_REQUESTS": args.concurrency,
        "CONCURRENT_REQUESTS_PER_DOMAIN": args.concurrency,
        "DOWNLOAD_DELAY": 0,
        "AUTOTHROTTLE_ENABLED": False,
        "ROBOTSTXT_OBEY": False,
        "TELNETCONSOLE_ENABLED": False,
        "LOG_LEVEL": "INFO",
        "FEEDS": {str(args.out): {"format": "jsonlines", "encoding": "utf8"}},
    }
    if args.polite:
        settings.update(
            {"DOWNLOAD_DELAY": 0.25, "CONCURRENT_REQUESTS_PER_DOMAIN": 1, "RANDOMIZE_DOWNLOAD_DELAY": False}
        )
    if args.cache is not None:
        settings.update({"HTTPCACHE_ENABLED": True, "HTTPCACHE_DIR": str(args.cache.resolve())})
    started = time.perf_counter()
    process = CrawlerProcess(settings)
    process.crawl(PagesSpider, starts=args.start)
    process.start()
    print(f"BENCH crawl_seconds={time.perf_counter() - started:.4f}")


if __name__ == "__main__":
    main()
