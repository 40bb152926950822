"""Where spire's crawl chooses otherwise than the session settings of the crawl policy spec, as
``docs/resilience.md`` says: a host's rate wait is no timeout, and a shut-down seed is told apart
from a failed one (``errors_by_category["shut_down"]``, ``Crawler.is_shut_down``, ``ShutDown``)."""

from __future__ import annotations

import threading

from spire import Crawler, Error, HostLimits, Response, Router, Timeouts
from spire_core.errors import ShutDown, SpireError
from tests.sites.server import Reply, Request, Site


def test_a_rate_wait_does_not_end_in_a_timeout(site: Site) -> None:
    for i in range(3):
        site.page(f"/{i}", f"<p>page {i}</p>")
    router = Router()
    handled: list[str] = []

    @router.default
    async def page(response: Response) -> None:
        handled.append(response.url)

    # one request a second to the host, and a request deadline of a fraction of that: the seeds wait
    # their turn in the frontier, without a slot and without a deadline, and none of them times out
    crawler = Crawler(
        router,
        robots=False,
        host_limits=HostLimits(max_in_flight=1, per_second=2.0),
        timeouts=Timeouts(connect=5, read=5, body=5, request=0.25),
    )
    stats = crawler.run([site.url(f"/{i}") for i in range(3)])
    assert stats.errors_by_category["timeout"] == 0
    assert sorted(handled) == sorted(site.url(f"/{i}") for i in range(3))


def test_a_shut_down_seed_is_told_apart_from_a_failed_one(site: Site) -> None:
    reached = threading.Event()
    released = threading.Event()
    held = 0
    lock = threading.Lock()

    def hold(request: Request) -> Reply:
        nonlocal held
        with lock:
            held += 1
            if held == 2:
                reached.set()
        released.wait(timeout=30)  # in flight until the test ends
        return 200, {"Content-Type": "text/html"}, b"<p>late</p>"

    site.route("/held/0", hold)
    site.route("/held/1", hold)
    site.page("/missing", "<p>gone</p>", status=404)
    router = Router()

    failed = threading.Event()

    @router.default
    async def page(response: Response) -> None:
        pass

    @router.failed
    async def gave_up(error: Error) -> None:
        failed.set()

    crawler = Crawler(router, robots=False, host_limits=HostLimits(max_in_flight=4))

    def stop_when_both_are_in_flight() -> None:
        if reached.wait(timeout=30) and failed.wait(timeout=30):
            crawler.shutdown()  # from another thread, as a signal handler would

    stopper = threading.Thread(target=stop_when_both_are_in_flight)
    stopper.start()
    try:
        stats = crawler.run([site.url("/missing"), site.url("/held/0"), site.url("/held/1")])
    finally:
        released.set()
        stopper.join()
    assert crawler.is_shut_down
    assert stats.errors_by_category["shut_down"] == 2  # the two in flight: cut off, not failed
    assert stats.errors_by_category["status"] == 1  # the 404: what the site did
    assert stats.failed == 1
    error = ShutDown(url=site.url("/held/0"))
    assert isinstance(error, SpireError)
    assert error.category == "shut_down"
