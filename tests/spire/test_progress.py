"""The progress display's figures: pages against queue, errors by category, the last error, rate and ETA."""

from __future__ import annotations

import io
import logging

import anyio

from spire.cli.progress import Progress
from spire_core.errors import HttpStatusError
from spire_core.log import FailureLog
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
