"""``CrawlStats``: the stats line's figures as data, and the sum of a worker process's counts."""

from __future__ import annotations

import json

from spire import Crawler, Router, Url
from spire_core.stats import CrawlStats
from tests.sites.server import Site


def test_as_dict_gives_every_counter_as_json_ready_data(site: Site) -> None:
    site.page("/", "home")
    router = Router()

    @router.default
    async def page(url: Url) -> None: ...

    crawler = Crawler(router)
    stats = crawler.run([site.url("/"), site.url("/")])
    stats.errors_by_category["status"] += 2
    figures = stats.as_dict()
    assert json.loads(json.dumps(figures)) == figures
    assert {key: figures[key] for key in ("requests", "pages", "finished", "failed", "retries", "items")} == {
        "requests": 1,  # robots.txt only: a handler that needs no response sends no request
        "pages": 0,
        "finished": 1,
        "failed": 0,
        "retries": 0,
        "items": 0,
    }
    assert figures["skipped"] == {"duplicate": 1}
    assert figures["errors"] == {"status": 2}
    assert set(figures["latency_ms"]) == {"p50", "p95"}
    assert figures["elapsed"] >= 0


def test_add_sums_every_counter_a_worker_process_sends() -> None:
    ours, theirs = CrawlStats(), CrawlStats()
    ours.requests, ours.pages, ours.cached = 3, 2, 1
    theirs.requests, theirs.pages, theirs.items, theirs.revalidated = 4, 4, 5, 1
    theirs.skip("duplicate", 7)
    theirs.errors_by_category["status"] += 2
    theirs.rendering["rendered"] += 1
    theirs.latency.record(0.005)
    ours.add(theirs)
    assert (ours.requests, ours.pages, ours.items, ours.cached, ours.revalidated) == (7, 6, 5, 1, 1)
    assert ours.skipped("duplicate") == 7
    assert ours.errors_by_category["status"] == 2
    assert ours.rendering["rendered"] == 1
    assert sum(ours.latency.counts) == 1
