"""One request path: robots.txt reads, downloads, wrapped and explicit backends all carry every guarantee."""

from __future__ import annotations

import logging
import socket
import time
from pathlib import Path

import anyio
import pytest

from spire import Crawler, HostLimits, Links, Response, Router, Seed
from spire_core.backend.abilities import user_agent_of
from spire_core.backend.cache import CachingBackend
from spire_core.backend.http import HttpBackend
from spire_core.blocks import BlockRules
from spire_core.errors import ConfigError, RobotsDisallowed
from spire_core.frontier.sqlite import SqliteFrontier
from spire_core.session.metrics import Metrics
from spire_core.session.proxies import ProxyPool
from spire_core.session.retry import RetryPolicy
from spire_core.session.timeouts import Timeouts
from tests.sites.proxies import ForwardProxy
from tests.sites.raw import RawServer, read_head
from tests.sites.server import Site

FAST = HostLimits(max_in_flight=4)


def passing() -> Router:
    routes = Router()

    @routes.default
    async def page(response: Response) -> None:
        pass

    return routes


def trace_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == "spire.trace"]


def test_robots_reads_are_logged_and_counted_as_requests(site: Site, caplog: pytest.LogCaptureFixture) -> None:
    site.page("/robots.txt", "User-agent: *\nDisallow: /private\n", content_type="text/plain")
    site.page("/a", "a")
    site.page("/b", "b")
    caplog.set_level(logging.INFO, logger="spire.trace")
    metrics = Metrics()
    stats = Crawler(passing(), host_limits=FAST, metrics=metrics).run([site.url("/a"), site.url("/b")])
    assert len(site.requests) == 3
    assert stats.requests == 3
    assert metrics.snapshot().requests == 3
    lines = trace_lines(caplog)
    assert len(lines) == 3
    assert any("/robots.txt" in line and "status=200" in line for line in lines)


def test_a_download_obeys_robots_txt_and_is_counted(
    site: Site, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    site.page("/robots.txt", "User-agent: *\nDisallow: /private/\n", content_type="text/plain")
    site.page("/", "home")
    site.page("/private/secret.pdf", b"%PDF secret", content_type="application/pdf")
    site.page("/public.pdf", b"%PDF public", content_type="application/pdf")
    caplog.set_level(logging.INFO, logger="spire.trace")
    refused: list[BaseException] = []
    written: list[int] = []
    routes = Router()
    crawler = Crawler(routes, host_limits=FAST)

    @routes.default
    async def page(response: Response) -> None:
        written.append(await crawler.download(site.url("/public.pdf"), tmp_path / "public.pdf"))
        try:
            await crawler.download(site.url("/private/secret.pdf"), tmp_path / "secret.pdf")
        except RobotsDisallowed as exc:
            refused.append(exc)

    stats = crawler.run([site.url("/")])
    assert [request.path for request in site.requests] == ["/robots.txt", "/", "/public.pdf"]
    assert written == [len(b"%PDF public")]
    assert len(refused) == 1
    assert refused[0].category == "robots"
    assert not (tmp_path / "secret.pdf").exists()
    assert stats.requests == 3
    assert any("/public.pdf" in line for line in trace_lines(caplog))


def test_a_download_before_the_origin_robots_is_known_reads_it_first(site: Site, tmp_path: Path) -> None:
    site.page("/robots.txt", "User-agent: *\nDisallow: /private/\n", content_type="text/plain")
    site.page("/", "home")
    site.page("/private/x.bin", b"x")

    async def main() -> None:
        crawler = Crawler(passing())
        with pytest.raises(RobotsDisallowed):
            await crawler.download(site.url("/private/x.bin"), tmp_path / "x.bin")

    anyio.run(main)
    assert [request.path for request in site.requests] == ["/robots.txt"]


def test_a_wrapped_backend_keeps_the_robots_agent_and_the_pool_stats(site: Site, tmp_path: Path) -> None:
    site.page(
        "/robots.txt",
        "User-agent: mybot\nDisallow: /mine\n\nUser-agent: *\nDisallow: /\n",
        content_type="text/plain",
    )
    site.page("/open", "open")
    site.page("/mine", "mine")
    backend = CachingBackend(HttpBackend(user_agent="mybot/1.0"), tmp_path / "cache")
    assert user_agent_of(backend) == "mybot/1.0"
    crawler = Crawler(passing(), backend=backend, host_limits=FAST)
    assert crawler.pool_stats() is not None
    stats = crawler.run([site.url("/open"), site.url("/mine")])
    assert [request.path for request in site.requests] == ["/robots.txt", "/open"]  # mybot's group, not *'s
    assert stats.skipped("robots") == 1


def drip(conn: socket.socket) -> None:
    """Headers at once, then one byte of the body a second, for 20 seconds."""
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 20\r\n\r\n")
    for _ in range(20):
        try:
            conn.sendall(b"x")
        except OSError:
            return
        time.sleep(1)


@pytest.mark.parametrize("explicit", [False, True])
def test_the_crawl_body_deadline_holds_for_a_backend_given_explicitly(explicit: bool) -> None:
    with RawServer(drip) as server:
        backend = HttpBackend() if explicit else None
        crawler = Crawler(
            passing(), backend=backend, robots=False, retry=RetryPolicy.never(), timeouts=Timeouts(body=1)
        )
        started = time.monotonic()
        stats = crawler.run([server.url("/drip")])
        elapsed = time.monotonic() - started
    assert stats.failed == 1
    assert stats.errors_by_category["timeout"] == 1
    assert elapsed < 8  # the 1 s body deadline, not the 20 s body (nor the backend's own 60 s)


def test_two_timeouts_for_one_crawl_are_a_config_error() -> None:
    with pytest.raises(ConfigError, match="give them once"):
        Crawler(passing(), backend=HttpBackend(timeout=30), timeouts=Timeouts(body=2))


@pytest.mark.parametrize("name", ["Authorization", "Cookie", "proxy-authorization"])
def test_credential_headers_for_every_host_are_refused_with_the_fix(name: str) -> None:
    with pytest.raises(ConfigError, match=r"credentials="):
        HttpBackend(headers={name: "secret"})


def test_a_retry_of_a_blocked_seed_goes_through_another_proxy(site: Site, caplog: pytest.LogCaptureFixture) -> None:
    for n in range(20):
        site.page(f"/p{n}", "ok")
    caplog.set_level(logging.INFO, logger="spire.trace")
    with ForwardProxy(block_page=True) as blocking, ForwardProxy() as clean, ForwardProxy() as other:
        # strikes never ban here: only the choice of proxy for each retry moves a blocked seed off its proxy
        pool = ProxyPool([blocking.url, clean.url, other.url], ban_after=1000).rotate_on_block(BlockRules.builtin())
        policy = RetryPolicy.transient(attempts=2, backoff=0.01).on_status(403)
        crawler = Crawler(
            passing(),
            backend=HttpBackend(proxies=pool, timeout=5),
            host_limits=HostLimits(max_in_flight=4),
            robots=False,
            retry=policy,
        )
        stats = crawler.run([site.url(f"/p{n}") for n in range(20)])
        blocked_paths = [url for action, url, _ in blocking.log if action == "block"]
    assert stats.finished == 20
    assert stats.failed == 0
    assert len(blocked_paths) == len(set(blocked_paths))  # no seed went back through the proxy that blocked it
    blocked_lines = [line for line in trace_lines(caplog) if "outcome=blocked" in line]
    assert len(blocked_lines) == len(blocked_paths) > 0
    for line in blocked_lines:
        assert "status=403" in line
        assert f"proxy={blocking.url}" in line


def test_every_request_is_counted_with_a_seed_cap_too(site: Site) -> None:
    site.page("/", "home")
    stats = Crawler(passing(), max_seeds=1).run([Seed(site.url("/"))])
    assert stats.requests == len(site.requests) == 2  # robots.txt and the page


@pytest.mark.parametrize("frontier", ["memory", "sqlite"])
def test_a_redirect_is_judged_by_the_strategy_of_the_link_that_queued_it(
    site: Site, other_site: Site, tmp_path: Path, frontier: str
) -> None:
    # same host, another port: the crawl's same_hostname strategy would follow it; the link's same_origin does not
    other = other_site.url("/landing").replace("localhost", "127.0.0.1")
    site.page("/", "<a href='/jump'>jump</a> <a href='/stay'>stay</a>")
    site.page("/jump", "", status=302, headers={"Location": other, "Set-Cookie": "session=secret; Path=/"})
    site.page("/stay", "stay")
    other_site.page("/landing", "landing")
    handled: list[str] = []
    routes = Router()

    @routes.default
    async def page(response: Response, links: Links) -> None:
        handled.append(response.url)
        await links.same_origin()

    store = SqliteFrontier(tmp_path / "f.db") if frontier == "sqlite" else None
    stats = Crawler(routes, host_limits=FAST, frontier=store).run([site.url("/")])
    assert other_site.requests == []  # neither its robots.txt nor the page, nor the first origin's cookie
    assert sorted(handled) == [site.url("/"), site.url("/stay")]
    assert stats.skipped("strategy") == 1


def test_a_start_seed_still_goes_where_its_redirects_lead(site: Site, other_site: Site) -> None:
    site.page("/", "", status=302, headers={"Location": other_site.url("/home")})
    other_site.page("/home", "home")
    stats = Crawler(passing(), host_limits=FAST).run([site.url("/")])
    assert stats.finished == 1
    assert [request.path for request in other_site.requests] == ["/robots.txt", "/home"]


def test_requests_a_banned_proxy_pool_refused_are_neither_counted_nor_spent(site: Site) -> None:
    for n in range(10):
        site.page(f"/p{n}", "ok")
    with ForwardProxy(ban_after=2) as proxy:  # forwards two, then answers 407: the pool bans its only proxy
        pool = ProxyPool([proxy.url], ban_after=1, ban_for=600)
        crawler = Crawler(
            passing(),
            backend=HttpBackend(proxies=pool, timeout=5),
            host_limits=HostLimits(max_in_flight=1),
            robots=False,
            retry=RetryPolicy.never(),
            max_requests=5,
        )
        stats = crawler.run([site.url(f"/p{n}") for n in range(10)])
        assert stats.requests == len(proxy.log) == 3  # the refused ones never went out
        assert (stats.finished, stats.failed) == (2, 8)  # and left the budget to the seeds after them


def _dropping_reused_connections(server: list[int]) -> RawServer:
    """A keep-alive server that answers the first request of each connection and closes the connection,
    unanswered, on the next one; ``server`` counts the requests it read."""

    def serve(conn: socket.socket) -> None:
        server.append(1)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 2\r\n\r\nok")
        if b"\r\n\r\n" not in read_head(conn):
            return
        server.append(1)  # read, and never answered
        conn.close()

    return RawServer(serve)


def test_a_request_aiohttp_sends_again_on_a_new_connection_is_counted_twice() -> None:
    received: list[int] = []
    with _dropping_reused_connections(received) as server:
        urls = [server.url(f"/p{n}") for n in range(5)]
        stats = Crawler(passing(), concurrency=1, robots=False, retry=RetryPolicy.never()).run(urls)
    assert stats.finished == 5
    assert stats.requests == len(received) == 9  # each page after the first went out twice
