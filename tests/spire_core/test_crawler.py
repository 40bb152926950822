"""The crawler end to end against real local servers."""

from __future__ import annotations

import gzip
import logging
import threading

import anyio
import pytest
from pydantic import BaseModel

from spire import (
    Crawler,
    Dataset,
    Error,
    HostLimits,
    Html,
    Links,
    MemoryFrontier,
    PauseTag,
    Response,
    Retry,
    Router,
    Seed,
    SeedInfo,
    SkipTag,
    Stop,
    Text,
    Url,
)
from spire_core.backend.http import HttpBackend, Timeouts
from spire_core.clock import FakeClock
from spire_core.errors import FetchTimeout, InvalidUrl
from spire_core.session.retry import RetryPolicy
from tests.sites.server import Reply, Request, Site, binary_tree


class Page(BaseModel):
    url: str
    title: str


def collect(dataset: Dataset[Page]) -> list[Page]:
    async def read() -> list[Page]:
        return [item async for item in dataset]

    return anyio.run(read)


def fast_retries() -> MemoryFrontier:
    """A frontier whose retries back off by milliseconds, so retry tests stay quick."""
    return MemoryFrontier().dedup().retry(3, backoff=0.01)  # type: ignore[return-value]


def tree_router() -> Router:
    router = Router()

    @router.default
    async def page(html: Html, links: Links, pages: Dataset[Page], url: Url) -> None:
        await links.follow(html.css("a::attr(href)").getall())
        await pages.push(Page(url=url, title=html.css("title::text").get(default="")))

    return router


def test_binary_tree_is_crawled_with_exactly_one_request_per_page(site: Site) -> None:
    root = binary_tree(site, 100)
    crawler = Crawler(tree_router(), concurrency=8, host_limits=HostLimits(max_in_flight=8))
    stats = crawler.run([Seed(root)])
    assert (stats.requests, stats.finished, stats.failed) == (101, 100, 0)  # robots.txt first
    assert len(site.hits()) == 100
    assert set(site.hits().values()) == {1}
    assert stats.items == 100


def test_extractors_share_one_fetch_and_url_alone_fetches_nothing(site: Site) -> None:
    site.page("/body", "<html><title>t</title><body><p>hello</p></body></html>")
    site.page("/nobody", "<html></html>")
    seen: dict[str, object] = {}
    router = Router()

    @router.handler("body")
    async def body(response: Response, page: Html, text: Text) -> None:
        seen["body"] = (response.status, page.css("title::text").get(), text)

    @router.handler("url-only")
    async def url_only(url: Url) -> None:
        seen["url"] = url

    stats = Crawler(router).run([Seed(site.url("/body"), tag="body"), Seed(site.url("/nobody"), tag="url-only")])
    assert site.hits() == {"/body": 1}
    assert (stats.requests, stats.finished) == (2, 2)  # robots.txt and /body
    assert seen["body"] == (200, "t", "hello")
    assert seen["url"] == site.url("/nobody")


def test_transient_statuses_are_retried_until_the_page_is_kept(site: Site) -> None:
    site.sequence(
        "/flaky",
        [(503, {}, b"busy"), (503, {}, b"busy"), (200, {"Content-Type": "text/html"}, b"<title>ok</title>")],
    )
    kept: list[str] = []
    router = Router()

    @router.default
    async def page(html: Html) -> None:
        kept.append(html.css("title::text").get(default=""))

    limits = HostLimits(pause_on=frozenset({503}), default_pause=0.01)
    stats = Crawler(router, host_limits=limits, frontier=fast_retries()).run([site.url("/flaky")])
    assert kept == ["ok"]
    assert (stats.requests, stats.retries, stats.finished, stats.failed) == (4, 2, 1, 0)  # robots.txt too


def test_retry_after_is_honoured(site: Site) -> None:
    site.sequence("/later", [(503, {"Retry-After": "2"}, b""), (200, {"Content-Type": "text/html"}, b"ok")])
    router = Router()

    @router.default
    async def page(response: Response) -> None:
        pass

    stats = Crawler(router, frontier=fast_retries()).run([site.url("/later")])
    first, second = site.page_requests()
    assert stats.finished == 1
    assert 1.9 <= second.at - first.at < 4.0


def test_per_origin_max_in_flight_is_never_exceeded(site: Site) -> None:
    site.page("/", "".join(f'<a href="/p{n}">{n}</a>' for n in range(40)))
    for n in range(40):
        site.page(f"/p{n}", "leaf", delay=0.03)  # a slow server, so requests overlap
    stats = Crawler(tree_router(), concurrency=16, host_limits=HostLimits(max_in_flight=3)).run([site.url("/")])
    assert stats.finished == 41
    assert site.peak == 3


def test_a_slow_rate_limited_host_does_not_slow_another_host(site: Site, other_site: Site) -> None:
    slow_root = binary_tree(site, 8)
    fast_root = binary_tree(other_site, 30)
    # Only the first site is rate limited: 2 requests a second, one at a time.
    limits = HostLimits(max_in_flight=2, hosts={f"127.0.0.1:{site.port}": HostLimits(max_in_flight=1, per_second=2)})
    crawler = Crawler(tree_router(), concurrency=2, host_limits=limits)
    stats = crawler.run([slow_root, fast_root])
    assert stats.finished == 38
    slow_times = [r.at for r in site.requests]
    fast_times = [r.at for r in other_site.requests]
    start = min(slow_times[0], fast_times[0])
    slow_span = slow_times[-1] - start
    fast_span = fast_times[-1] - start
    assert slow_span >= 3.0  # 8 pages, 0.5 s apart
    assert fast_span < slow_span / 2  # the fast host never waited behind the slow one


def test_stop_ends_the_crawl_after_in_flight_work(site: Site) -> None:
    root = binary_tree(site, 100)
    router = Router()

    @router.default
    async def page(html: Html, links: Links, url: Url) -> Stop | None:
        await links.follow(html.css("a::attr(href)").getall())
        return Stop() if url.endswith("/page/3") else None

    stats = Crawler(router, concurrency=1).run([root])
    assert stats.requests == 5  # robots.txt, then the four pages
    assert sorted(site.hits()) == ["/page/0", "/page/1", "/page/2", "/page/3"]


def children_site(site: Site, tags: dict[str, int]) -> str:
    """A root page linking to ``count`` children per tag; children are at /<tag>/<n>."""
    for tag, count in tags.items():
        for n in range(count):
            site.page(f"/{tag}/{n}", f"<title>{tag}{n}</title>")
    site.page("/", "root")
    return site.url("/")


def fan_out_router(on_child: object) -> Router:
    router = Router()

    @router.handler("root")
    async def root(links: Links) -> None:
        for tag in ("b", "c"):
            await links.follow([f"/{tag}/{n}" for n in range(5)], tag=tag)

    @router.handler("b")
    async def b(seed: SeedInfo, response: Response) -> object:
        return on_child(seed)  # type: ignore[operator]

    @router.handler("c")
    async def c(response: Response) -> None:
        pass

    return router


def test_skip_tag_drops_every_seed_of_that_tag(site: Site) -> None:
    root = children_site(site, {"b": 5, "c": 5})
    router = fan_out_router(lambda seed: SkipTag("b"))
    stats = Crawler(router, concurrency=1).run([Seed(root, tag="root")])
    hits = site.hits()
    assert sum(count for path, count in hits.items() if path.startswith("/b/")) == 1
    assert sum(count for path, count in hits.items() if path.startswith("/c/")) == 5
    assert stats.skipped("tag") == 5


def test_pause_tag_holds_the_tag_while_others_proceed(site: Site) -> None:
    root = children_site(site, {"b": 5, "c": 5})
    paused_once: list[str] = []

    def on_child(seed: Seed) -> PauseTag | None:
        if not paused_once:
            paused_once.append(seed.url)
            return PauseTag("b", 0.5)
        return None

    clock = FakeClock()
    stats = Crawler(fan_out_router(on_child), concurrency=1, clock=clock).run([Seed(root, tag="root")])
    paths = [r.path for r in site.requests]
    first_b = paths.index("/b/0")
    again = first_b + 1 + paths[first_b + 1 :].index("/b/0")
    between = paths[first_b + 1 : again]
    assert between  # the pause let c pages go first
    assert all(path.startswith("/c/") for path in between)
    assert paths.count("/b/0") == 2  # the paused page ran again after the pause
    assert stats.finished == 11
    assert sum(clock.slept) >= 0.5  # the crawl waited the pause out, on its clock


def test_max_seeds_is_exact(site: Site) -> None:
    root = binary_tree(site, 100)
    stats = Crawler(tree_router(), concurrency=16, max_seeds=2).run([root])
    assert (stats.requests, stats.finished) == (3, 2)  # robots.txt is not a handled seed
    assert len(site.page_requests()) == 2


def test_max_seeds_counts_a_retried_seed_once(site: Site) -> None:
    tried: set[str] = set()

    def once_failing(request: Request) -> Reply:
        if request.path not in tried:
            tried.add(request.path)
            return 500, {}, b"failing once"
        return 200, {"Content-Type": "text/html"}, b"<html>ok</html>"

    for i in range(10):
        site.route(f"/{i}", once_failing)
    retry = RetryPolicy.transient(attempts=2, backoff=0.0)
    crawler = Crawler(tree_router(), max_seeds=10, robots=False, retry=retry)
    stats = crawler.run([site.url(f"/{i}") for i in range(10)])
    assert (stats.finished, stats.failed, stats.retries) == (10, 0, 10)  # each retry is its seed's, not a new one
    assert stats.requests == len(site.page_requests()) == 20


def test_max_requests_counts_every_request_the_server_sees(site: Site) -> None:
    root = binary_tree(site, 100)
    stats = Crawler(tree_router(), concurrency=16, max_requests=5).run([root])
    assert len(site.requests) == 5  # robots.txt included
    assert stats.requests == 5
    assert stats.finished == 4


def test_max_requests_counts_redirect_hops(site: Site) -> None:
    for n in range(20):
        site.page(f"/r{n}", "", status=302, headers={"Location": f"/p{n}"})
        site.page(f"/p{n}", f"p{n}")
    router = Router()

    @router.default
    async def page(html: Html) -> None:
        pass

    stats = Crawler(router, concurrency=4, max_requests=9).run([site.url(f"/r{n}") for n in range(20)])
    assert len(site.requests) == 9  # robots.txt, then four seeds of a redirect and its target each
    assert stats.requests == 9


def test_shutdown_loses_nothing(site: Site) -> None:
    root = binary_tree(site, 100, delay=0.05)  # slow pages, so requests are in flight at the shutdown
    handled: list[str] = []
    router = Router()

    @router.default
    async def page(html: Html, links: Links, url: Url) -> None:
        await links.follow(html.css("a::attr(href)").getall())
        handled.append(url)
        if len(handled) == 30:
            crawler.shutdown()

    frontier = MemoryFrontier().dedup()
    crawler = Crawler(router, concurrency=4, frontier=frontier, host_limits=HostLimits(max_in_flight=4))
    assert crawler.state == "idle"
    first = crawler.run([root])
    assert crawler.is_shut_down
    assert crawler.state == "shut_down"
    assert first.finished < 100
    assert first.errors_by_category["shut_down"] >= 1
    second = crawler.run()
    assert not crawler.is_shut_down
    assert crawler.state == "finished"
    assert second.finished + first.finished == 100
    assert sorted(handled) == sorted(set(handled))
    assert len(handled) == 100


def test_a_retried_handler_leaves_no_duplicate_items(site: Site) -> None:
    site.page("/item", "<title>one</title>")
    router = Router()

    @router.default
    async def page(html: Html, seed: SeedInfo, pages: Dataset[Page]) -> Retry | None:
        await pages.push(Page(url=seed.url, title=html.css("title::text").get(default="")))
        if seed.attempt == 0:
            return Retry(after=0)
        if seed.attempt == 1:
            raise FetchTimeout("transient", url=seed.url)
        return None

    crawler = Crawler(router, frontier=fast_retries())
    stats = crawler.run([site.url("/item")])
    assert [item.title for item in collect(crawler.dataset(Page))] == ["one"]
    assert (stats.retries, stats.finished, stats.items) == (2, 1, 1)


def test_an_invalid_seed_url_is_a_clear_error() -> None:
    with pytest.raises(InvalidUrl, match="not a valid URL"):
        Seed("http://[broken")
    with pytest.raises(InvalidUrl, match="not an http"):
        Crawler(Router()).run(["ftp://example.invalid/file"])


def test_a_malformed_discovered_link_is_a_counted_skip(site: Site) -> None:
    site.page("/", '<a href="http://[broken">bad</a> <a href="/ok">ok</a> <a href="mailto:x@y.z">mail</a>')
    site.page("/ok", "fine")
    stats = Crawler(tree_router()).run([site.url("/")])
    assert (stats.finished, stats.failed) == (2, 0)
    assert stats.skipped("invalid_url") == 1
    assert stats.skipped("scheme") == 1


def test_redirects_are_followed_hop_by_hop(site: Site, other_site: Site) -> None:
    site.page("/old", "", status=301, headers={"Location": "/middle"})
    site.page("/middle", "", status=302, headers={"Location": other_site.url("/new")})
    other_site.page("/new", "<title>moved</title>")
    got: list[Response] = []
    router = Router()

    @router.default
    async def page(response: Response) -> None:
        got.append(response)

    stats = Crawler(router).run([site.url("/old")])
    (response,) = got
    assert response.url == other_site.url("/new")
    assert response.redirects == (site.url("/old"), site.url("/middle"))
    assert stats.requests == 5  # each origin's robots.txt, then the three hops


def test_a_redirect_chain_longer_than_five_hops_is_a_counted_skip(site: Site) -> None:
    for hop in range(7):
        site.page(f"/r{hop}", "", status=302, headers={"Location": f"/r{hop + 1}"})
    site.page("/r7", "end")
    router = Router()
    failures: list[BaseException | None] = []

    @router.default
    async def page(response: Response) -> None:
        pass

    @router.failed
    async def failed(seed: SeedInfo, error: Error) -> None:
        failures.append(error)

    stats = Crawler(router).run([site.url("/r0")])
    assert (stats.failed, stats.finished) == (0, 0)
    assert stats.skipped("redirects") == 1
    assert len(site.page_requests()) == 6  # the seed and five hops; the sixth target is never asked for
    assert failures == []


def test_a_gzip_bomb_stops_at_the_body_cap(site: Site) -> None:
    bomb = gzip.compress(b"\0" * (20 * 1024 * 1024))
    site.page("/bomb", bomb, content_type="text/html", headers={"Content-Encoding": "gzip"})
    router = Router()

    @router.default
    async def page(response: Response) -> None:
        pass

    crawler = Crawler(router, backend=HttpBackend(max_body_size=1024 * 1024))
    stats = crawler.run([site.url("/bomb")])
    assert stats.failed == 1
    assert stats.errors_by_category["body_limit"] == 1


def test_a_timeout_is_retried_then_fails_with_its_category(site: Site) -> None:
    site.page("/slow", "late", delay=1.0)
    router = Router()

    @router.default
    async def page(response: Response) -> None:
        pass

    crawler = Crawler(router, backend=HttpBackend(timeout=0.2), frontier=fast_retries())
    stats = crawler.run([site.url("/slow")])
    assert (stats.failed, stats.retries) == (1, 2)
    assert stats.errors_by_category["timeout"] == 1


def test_a_shutdown_before_the_run_starts_ends_it_at_once_keeping_the_seeds(site: Site) -> None:
    root = binary_tree(site, 10)
    frontier = MemoryFrontier().dedup()
    crawler = Crawler(tree_router(), frontier=frontier)
    crawler.shutdown()
    first = crawler.run([root])
    assert (first.requests, first.finished) == (0, 0)
    second = crawler.run()
    assert second.finished == 10


def test_a_body_that_trickles_in_fails_at_the_body_timeout() -> None:
    import threading
    import time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Trickle(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", "100")
            self.end_headers()
            try:
                for _ in range(100):  # one byte every 50 ms: each read is quick, the whole body is not
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(0.05)
            except OSError:
                pass  # the crawler hung up, as it should

    server = ThreadingHTTPServer(("127.0.0.1", 0), Trickle)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        router = Router()

        @router.default
        async def page(response: Response) -> None:
            pass

        backend = HttpBackend(timeout=Timeouts(connect=5, read=2, body=0.5))
        started = time.monotonic()
        stats = Crawler(router, backend=backend, frontier=MemoryFrontier().retry(1), robots=False).run(
            [f"http://127.0.0.1:{server.server_address[1]}/slow"]
        )
        took = time.monotonic() - started
    finally:
        server.shutdown()
        server.server_close()
    assert stats.failed == 1
    assert stats.errors_by_category["timeout"] == 1
    assert 0.4 <= took < 2.5  # 100 bytes would take 5 s; the body timeout ends it after about 0.5 s


def test_a_time_budget_ends_the_crawl_and_keeps_what_was_not_done(site: Site) -> None:
    import time

    root = binary_tree(site, 50, delay=0.1)  # slow pages: the budget runs out mid-crawl
    frontier = MemoryFrontier().dedup()
    crawler = Crawler(tree_router(), concurrency=2, frontier=frontier, time_budget=0.5)
    started = time.monotonic()
    first = crawler.run([root])
    took = time.monotonic() - started
    assert 0.45 <= took < 2.0
    assert 0 < first.finished < 50
    assert first.errors_by_category["shut_down"] >= 1  # what was in flight went back to the frontier
    crawler.time_budget = None
    second = crawler.run()
    assert first.finished + second.finished == 50


def test_a_time_budget_does_not_count_a_request_that_never_left(site: Site) -> None:
    released = threading.Event()

    def held(request: Request) -> Reply:
        released.wait(timeout=30)  # the first request holds the one connection past the budget
        return 200, {"Content-Type": "text/html"}, b"<html>late</html>"

    site.route("/a", held)
    site.route("/b", held)
    # One connection: the second request waits for it inside the backend, and is never written.
    backend = HttpBackend(max_connections=1)
    crawler = Crawler(tree_router(), backend=backend, concurrency=2, robots=False, time_budget=0.5)
    try:
        stats = crawler.run([site.url("/a"), site.url("/b")])
    finally:
        released.set()
    assert stats.errors_by_category["shut_down"] == 2
    assert stats.requests == len(site.requests) == 1


@pytest.mark.parametrize("processes", [1, 2])
def test_the_end_says_how_many_links_of_failed_pages_were_not_queued(
    site: Site, caplog: pytest.LogCaptureFixture, processes: int
) -> None:
    site.page("/", "".join(f"<a href='/p{n}'>p{n}</a>" for n in range(7)))
    caplog.set_level(logging.WARNING, logger="spire.crawler")
    stats = Crawler(failing_after_links(), robots=False, processes=processes).run([site.url("/")])
    assert stats.failed == 1
    (summary,) = [record.getMessage() for record in caplog.records if "seed failed" in record.getMessage()]
    assert "7 links found on failed pages were not queued" in summary


def failing_after_links() -> Router:
    routes = Router()

    @routes.default
    async def page(html: Html, links: Links) -> None:
        await links.all()
        raise ValueError("an invalid field")

    return routes


def test_a_time_budget_shuts_the_crawl_down_and_a_stop_does_not(site: Site) -> None:
    root = binary_tree(site, 100, delay=0.05)
    crawler = Crawler(tree_router(), concurrency=2, time_budget=0.3)
    crawler.run([root])
    assert crawler.is_shut_down
    stopping = Router()

    @stopping.default
    async def page(response: Response) -> Stop:
        return Stop()

    other = Crawler(stopping)
    other.run([site.url("/page/1")])
    assert (other.is_shut_down, other.state) == (False, "finished")
