"""The progress display's figures: pages against queue, errors by category, the last error, rate and ETA."""

from __future__ import annotations

import io
import logging
import socket

import anyio

from spire import Crawler, Response, Router
from spire.cli.progress import Progress
from spire_core.errors import HttpStatusError
from spire_core.log import FailureLog
from spire_core.robots import RobotsPolicy
from spire_core.seed import Seed
from spire_core.stats import CrawlStats


def test_the_lines_show_pages_queue_errors_by_category_the_last_error_and_an_eta() -> None:
    stats = CrawlStats(requests=12, pages=10, finished=10, failed=2)
    stats.started_at -= 4.0  # four seconds in: 3 seeds a second
    stats.errors_by_category.update({"status": 2})
    failures = FailureLog(log=logging.getLogger("test.quiet"))
    failures.failed(Seed("http://a.test/x"), HttpStatusError(404, url="http://a.test/x"), handler="page")

    async def pending() -> int:
        return 30

    progress = Progress(
        "spire crawl", stats=lambda: stats, pending=pending, failures=lambda: failures, stream=io.StringIO()
    )
    first, by_category, last = anyio.run(progress.lines)
    assert first.startswith("pages=10 queue=30 requests=12 errors=2 rate=3.0/s eta=10s elapsed=4s")
    assert by_category == "errors by category: status=2"
    assert last == "last error: http://a.test/x: HttpStatusError: HTTP status 404 (http://a.test/x)"
    assert progress.mode == "plain"  # not a terminal


def test_while_a_dead_hosts_robots_txt_is_tried_again_the_progress_shows_why() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}/"
    routes = Router()

    @routes.default
    async def page(response: Response) -> None:
        pass

    crawler = Crawler(routes, robots=RobotsPolicy(retry_delays=(0.3, 0.3)))
    seen_during_retries: list[str] = []

    async def main() -> None:
        async def watch() -> None:
            while not crawler.failures.unreachable:  # the retries are still going on
                last = crawler.failures.last
                if last is not None:
                    seen_during_retries.append(last[1])
                    return
                await anyio.sleep(0.01)

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(watch)
                await crawler.arun([dead])

    anyio.run(main)
    assert seen_during_retries
    assert "ConnectError" in seen_during_retries[0]
    assert "robots.txt" in seen_during_retries[0]
    assert crawler.stats.failed == 0  # its pages are skipped, not failed: the log says the host, the stats the skip
    assert crawler.stats.skipped("robots_unreachable") == 1
