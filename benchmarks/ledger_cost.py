"""What the ledger costs: bytes per URL in memory and on disk, and pages/s with it full, light and off.

    .venv/bin/python benchmarks/ledger_cost.py                        # all three measures
    .venv/bin/python benchmarks/ledger_cost.py --urls 10000 --repeats 5 --site postgresql

- memory: ``tracemalloc`` over a ``MemoryLedger`` (and a ``LightLedger``) fed ``--urls`` URLs the way a
  crawl feeds it (found, queued, one request each, kept), divided by the URL count;
  (the URL strings are the seeds', made before: a finished crawl's ledger holds them too, ``49 + len``
  bytes each for an ASCII URL);
- disk: the size of a ``SqliteFrontier`` file after the same URLs were pushed, leased, requested once
  and reported, with the ledger and without, divided by the URL count, and the CPU time of that work;
- pages/s: the benchmark crawl of ``benchmarks/crawl_spire.py`` (robots off, concurrency 16) on the
  site nginx serves (``benchmarks/serve.py start``), ``--repeats`` times per mode, interleaved, with a
  ``MemoryFrontier`` and with a ``SqliteFrontier``; the median pages per wall second and per CPU
  second of the process (threads included: what a busy machine disturbs less) is printed.

Numbers are printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from crawl_spire import make_router

from spire import Crawler, HostLimits
from spire_core.frontier.memory import MemoryFrontier
from spire_core.frontier.sqlite import SqliteFrontier
from spire_core.ledger_stores import LightLedger, MemoryLedger
from spire_core.outcome import Done
from spire_core.seed import Seed
from spire_core.session.record import RequestRecord

SITES = {
    "postgresql": "http://127.0.0.1:8631/postgresql/index.html",
    "scipy": "http://127.0.0.1:8632/scipy/index.html",
}


def _urls(count: int) -> list[Seed]:
    return [Seed(f"http://127.0.0.1:8631/postgresql/page-{i:07d}.html", depth=2) for i in range(count)]


def _record(seed: Seed) -> RequestRecord:
    return RequestRecord(
        id="1",
        method="GET",
        url=seed.url,
        redirects=0,
        status=200,
        version="HTTP/1.1",
        attempts=1,
        elapsed_ms=3,
        tag=None,
        proxy=None,
        identity=None,
        outcome="ok",
        bytes=20_000,
    )


def memory_bytes(count: int, light: bool) -> float:
    seeds = _urls(count)
    records = [_record(seed) for seed in seeds]  # made before: they are the request path's, not the ledger's
    referrer = "http://127.0.0.1:8631/postgresql/index.html"
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    ledger: Any = LightLedger() if light else MemoryLedger()
    for start in range(0, count, 50):
        batch = seeds[start : start + 50]
        ledger.found(batch, referrer)
        ledger.pushed(batch)
    now = time.time()
    for seed, record in zip(seeds, records, strict=True):
        ledger.attempt(seed, record, now)
        ledger.settled(seed, Done())
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return (after - before) / count


async def _fill(path: Path, count: int, ledger: bool) -> None:
    async with SqliteFrontier(path, fresh=True) as frontier:
        sink = frontier.open_ledger("full") if ledger else None
        seeds = _urls(count)
        for start in range(0, count, 50):
            batch = seeds[start : start + 50]
            if sink is not None:
                sink.found(batch, "http://127.0.0.1:8631/postgresql/index.html")
            await frontier.push(batch, unique=True)
        now = time.time()
        while True:
            lease = await frontier.lease()
            if not hasattr(lease, "seed"):
                break
            if sink is not None:
                sink.attempt(lease.seed, _record(lease.seed), now)  # type: ignore[union-attr]
            await frontier.report(lease, Done())  # type: ignore[arg-type]


def disk_bytes(count: int) -> tuple[float, int, int, float, float]:
    """Bytes per URL the ledger adds to the file, the two sizes, and CPU microseconds per URL of the
    frontier's push, lease and report without and with it (its threads included)."""
    with tempfile.TemporaryDirectory() as folder:
        sizes, cpu = [], []
        for ledger in (False, True):
            path = Path(folder) / f"ledger-{ledger}.db"
            began = time.process_time()
            anyio.run(_fill, path, count, ledger)
            cpu.append((time.process_time() - began) / count * 1e6)
            sizes.append(os.path.getsize(path))
    return (sizes[1] - sizes[0]) / count, sizes[0], sizes[1], cpu[0], cpu[1]


def crawl_rate(start: str, mode: Any, sqlite: bool) -> tuple[float, float, int]:
    """Pages per second of wall time and per CPU second of this process (its threads included: what
    a loaded machine does not change), and the pages crawled."""
    prefixes = (start.rsplit("/", 1)[0] + "/",)
    with tempfile.TemporaryDirectory() as folder:

        async def run() -> tuple[float, float, int]:
            frontier: Any
            frontier = SqliteFrontier(Path(folder) / "crawl.db") if sqlite else MemoryFrontier()
            crawler = Crawler(
                make_router(prefixes),
                concurrency=16,
                host_limits=HostLimits(max_in_flight=16),
                frontier=frontier,
                robots=False,
                ledger=mode,
            )
            began, cpu = time.perf_counter(), time.process_time()
            stats = await crawler.arun([start])
            await frontier.aclose()
            took, used = time.perf_counter() - began, time.process_time() - cpu
            return stats.pages / took, stats.pages / used, stats.pages

        return anyio.run(run)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--urls", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--site", choices=sorted(SITES), default="postgresql")
    parser.add_argument("--only", choices=["memory", "disk", "rate"], action="append")
    args = parser.parse_args()
    only = set(args.only or ["memory", "disk", "rate"])
    if "memory" in only:
        for light in (False, True):
            name = "light" if light else "full"
            print(f"memory {name}: {memory_bytes(args.urls, light):.0f} bytes per URL over {args.urls} URLs")
    if "disk" in only:
        per_url, without, with_ledger, cpu_off, cpu_on = disk_bytes(args.urls)
        print(f"disk full: {per_url:.0f} bytes per URL (file {without} -> {with_ledger} bytes, {args.urls} URLs)")
        print(
            f"SqliteFrontier push+lease+report: {cpu_off:.0f} us CPU per URL without the ledger,"
            f" {cpu_on:.0f} us with it (+{cpu_on - cpu_off:.0f} us)"
        )
    if "rate" in only:
        start = SITES[args.site]
        for sqlite in (False, True):
            rates: dict[str, list[float]] = {"full": [], "light": [], "off": []}
            per_cpu: dict[str, list[float]] = {"full": [], "light": [], "off": []}
            pages = 0
            for _ in range(args.repeats):
                for name, mode in (("full", "full"), ("light", "light"), ("off", False)):
                    rate, cpu_rate, pages = crawl_rate(start, mode, sqlite)
                    rates[name].append(rate)
                    per_cpu[name].append(cpu_rate)
            store = "SqliteFrontier" if sqlite else "MemoryFrontier"
            off, off_cpu = statistics.median(rates["off"]), statistics.median(per_cpu["off"])
            for name, values in rates.items():
                median, cpu_median = statistics.median(values), statistics.median(per_cpu[name])
                cpu_change, wall_change = 100 * (cpu_median - off_cpu) / off_cpu, 100 * (median - off) / off
                print(
                    f"{args.site} {store} ledger={name}: {median:.1f} pages/s wall, {cpu_median:.1f} pages per"
                    f" CPU second, median of {args.repeats} ({pages} pages; {cpu_change:+.1f}% per CPU second,"
                    f" {wall_change:+.1f}% wall vs off)"
                )


if __name__ == "__main__":
    main()
