"""``CrawlStats.as_dict()``: the stats line's figures as data."""

from __future__ import annotations

import json

from spire import Crawler, Router, Url
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
