"""Frontier memory: queue N distinct seeds (and remember them as seen), report resident memory per URL.

    .venv/bin/python benchmarks/frontier_memory.py spire-memory --urls 1000000
    .venv/bin/python benchmarks/frontier_memory.py spire-sqlite --urls 1000000
    benchmarks/.venv-compare/bin/python benchmarks/frontier_memory.py scrapy --urls 1000000

- ``spire-memory``: ``MemoryFrontier().dedup()``, seeds pushed in batches of 10,000.
- ``spire-sqlite``: ``SqliteFrontier`` (a file under ``benchmarks/.work``) under ``.dedup()``.
- ``scrapy``: Scrapy's own scheduler, built from its settings as a crawl builds it: the memory
  priority queue (``ScrapyPriorityQueue`` over ``LifoMemoryQueue``) and ``RFPDupeFilter``.

The URLs are spread over 100 hosts. Memory is the process's resident set (``VmRSS``) after a
garbage collection, minus the same measure taken after the imports and the empty frontier: it
counts the request objects, their URL strings, the queue and the seen set. The last stdout line
is ``BENCH key=value ...``.
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Iterator
from pathlib import Path

WORK = Path(__file__).resolve().parent / ".work"
BATCH = 10_000


def rss_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def urls(count: int) -> Iterator[str]:
    for i in range(count):
        yield f"http://host-{i % 100}.example/docs/section-{i // 5000}/page-{i}.html"


def spire(count: int, kind: str) -> tuple[int, float, int]:
    import anyio

    from spire import Seed
    from spire_core.frontier.base import Frontier

    async def main() -> tuple[int, float, int]:
        if kind == "spire-memory":
            from spire_core import MemoryFrontier

            frontier: Frontier = MemoryFrontier().dedup()
        else:
            from spire_core.frontier.sqlite import SqliteFrontier

            WORK.mkdir(exist_ok=True)
            frontier = SqliteFrontier(WORK / "frontier-memory.sqlite", fresh=True).dedup()
        await frontier.pending()
        gc.collect()
        base = rss_bytes()
        started = time.perf_counter()
        batch: list[Seed] = []
        added = 0
        for url in urls(count):
            batch.append(Seed(url))
            if len(batch) == BATCH:
                added += len((await frontier.push(batch)).added)
                batch = []
        if batch:
            added += len((await frontier.push(batch)).added)
        seconds = time.perf_counter() - started
        assert await frontier.pending() == count == added
        gc.collect()
        grown = rss_bytes() - base
        await frontier.aclose()
        return added, seconds, grown

    return anyio.run(main)


def scrapy(count: int) -> tuple[int, float, int]:
    from scrapy import Request, Spider
    from scrapy.core.scheduler import Scheduler
    from scrapy.utils.reactor import install_reactor
    from scrapy.utils.test import get_crawler

    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")

    # The objects a crawl builds before it schedules anything, with the default settings: the
    # downloader-aware priority queue over LIFO memory queues, and RFPDupeFilter.
    crawler = get_crawler(Spider, {"LOG_LEVEL": "WARNING"})
    crawler.spider = crawler._create_spider("memory")
    crawler._apply_settings()
    crawler.engine = crawler._create_engine()
    scheduler = Scheduler.from_crawler(crawler)
    scheduler.open(crawler.spider)
    gc.collect()
    base = rss_bytes()
    started = time.perf_counter()
    added = 0
    for url in urls(count):
        added += scheduler.enqueue_request(Request(url))
    seconds = time.perf_counter() - started
    assert len(scheduler) == count == added
    gc.collect()
    return added, seconds, rss_bytes() - base


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["spire-memory", "spire-sqlite", "scrapy"])
    parser.add_argument("--urls", type=int, default=1_000_000)
    args = parser.parse_args()
    if args.kind == "scrapy":
        added, seconds, grown = scrapy(args.urls)
    else:
        added, seconds, grown = spire(args.urls, args.kind)
    disk = (
        sum(path.stat().st_size for path in WORK.glob("frontier-memory.sqlite*")) if args.kind == "spire-sqlite" else 0
    )
    print(
        f"BENCH urls={added} seconds={seconds:.3f} rss_grown={grown} bytes_per_url={grown / added:.1f} "
        f"disk_bytes_per_url={disk / added:.1f}"
    )


if __name__ == "__main__":
    main()
