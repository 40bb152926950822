"""The progress display's figures: pages against queue, errors by category, the last error, rate and ETA."""

from __future__ import annotations

import io
import logging

import anyio

from spire import Crawler, Response, Router
from spire.cli.progress import Progress, QueueTrend, politeness
from spire.site import polite_limits
from spire_core.errors import HttpStatusError
from spire_core.limits import HostLimits
from spire_core.log import FailureLog
from spire_core.robots import RobotsPolicy
from spire_core.seed import Seed
from spire_core.stats import CrawlStats
from tests.sites.server import Site


def test_the_lines_show_pages_queue_errors_by_category_and_the_last_error() -> None:
    stats = CrawlStats(requests=12, pages=10, finished=10, failed=2)
    stats.started_at -= 4.0  # four seconds in: 3 seeds a second
    stats.errors_by_category.update({"status": 2})
    failures = FailureLog(log=logging.getLogger("test.quiet"))
    failures.retried(Seed("http://a.test/y"), HttpStatusError(503, url="http://a.test/y"), handler="page")
    failures.failed(Seed("http://a.test/x"), HttpStatusError(404, url="http://a.test/x"), handler="page")

    async def pending() -> int:
        return 30

    progress = Progress(
        "spire crawl", stats=lambda: stats, pending=pending, failures=lambda: failures, stream=io.StringIO()
    )
    first, by_category, last = anyio.run(progress.lines)
    # One look at the queue says nothing of where it is going: no ETA yet. errors= counts each failed try.
    assert first.startswith("pages=10 queue=30 requests=12 errors=2 rate=3.0/s eta=- elapsed=4s")
    assert by_category == "errors by category: status=2"
    assert last == "last error: http://a.test/x: HttpStatusError: HTTP status 404 (http://a.test/x)"
    assert progress.mode == "plain"  # not a terminal


def test_while_a_dead_hosts_robots_txt_is_tried_again_the_progress_shows_why(dead_port: int) -> None:
    dead = f"http://127.0.0.1:{dead_port}/"
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


def test_each_robots_txt_try_a_server_error_answered_is_a_failed_try(site: Site) -> None:
    site.page("/robots.txt", "down", status=503, headers={"Retry-After": "0"})
    site.page("/", "<html><body>home</body></html>")
    routes = Router()

    @routes.default
    async def page(response: Response) -> None:
        pass

    crawler = Crawler(routes, robots=RobotsPolicy(retry_delays=(0, 0)))
    anyio.run(crawler.arun, [site.url("/")])
    assert site.hits(robots=True)["/robots.txt"] == 3
    assert crawler.failures.failed_tries == 3  # each 503 as it came, not only once the site was given up
    assert crawler.failures.last is not None
    assert "HTTP status 503 (robots.txt, tried again)" in crawler.failures.last[1]


class SteppedClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_no_eta_while_the_queue_grows_as_a_site_crawl_starts() -> None:
    clock = SteppedClock()
    trend = QueueTrend(clock=clock)
    # The crawl of the issue: 7 s in, 1 page a second, each page adding links faster than it takes one off.
    etas = []
    for second, queue in enumerate([1, 5, 12, 20, 26, 31, 40, 48, 55, 61, 70, 80]):
        clock.now = float(second)
        etas.append(trend.eta(queue))
    assert etas == [None] * 12


def test_the_eta_is_the_queue_over_its_recent_net_shrink_rate() -> None:
    clock = SteppedClock()
    trend = QueueTrend(window=60.0, settle=10.0, clock=clock)
    etas = {}
    for second in range(0, 100):
        clock.now = float(second)
        queue = 100 + second if second <= 40 else 140 - 2 * (second - 40)  # grows, then shrinks by 2 a second
        etas[second] = trend.eta(queue)
    assert all(etas[second] is None for second in range(0, 41))
    # At 99 s the queue (22) is 117 shorter than 60 s before (139): 22 / (117 / 60) s to go, not 22 / 2.
    assert etas[99] == 22 / (117 / 60)
    clock.now = 100.0
    assert trend.eta(0) is None  # nothing queued: nothing to estimate


def test_the_start_line_names_the_site_crawls_politeness_and_how_to_change_it() -> None:
    line = politeness(polite_limits(), robots=True, change="--per-second, --max-in-flight to change")
    assert line == (
        "polite: 1 request/s per host, 1 in flight per host, 16 in flight overall; robots.txt obeyed "
        "(--per-second, --max-in-flight to change)"
    )
    fast = politeness(HostLimits(per_second=0.5), robots=False, change="x")
    assert fast == "polite: 1 request every 2 s per host; robots.txt ignored (x)"
    assert politeness(HostLimits(), robots=True, change="x").startswith("polite: no limit per host;")


def test_a_plain_progress_says_the_limits_first() -> None:
    stream = io.StringIO()

    async def pending() -> int:
        return 0

    progress = Progress(
        "t",
        stats=CrawlStats,
        pending=pending,
        failures=FailureLog,
        mode="plain",
        stream=stream,
        every=0.01,
        limits="polite: 1 request/s per host",
    )

    async def main() -> None:
        with anyio.move_on_after(0.2):
            await progress.run()

    anyio.run(main)
    assert stream.getvalue().splitlines()[0] == "polite: 1 request/s per host"
    assert stream.getvalue().splitlines()[1].startswith("progress pages=0")
