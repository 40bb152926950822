"""ProxyPool through HttpBackend against local forward proxies; rotation and bans read from the proxies' logs."""

from __future__ import annotations

import base64
import logging
import traceback

import anyio
import pytest

from spire import Crawler, HostLimits, Response, Router
from spire_core.backend.http import HttpBackend
from spire_core.blocks import BlockRules
from spire_core.errors import ConfigError, ProxyError, SpireError
from spire_core.frontier.memory import MemoryFrontier
from spire_core.seed import Seed
from spire_core.session.identity import Identity
from spire_core.session.proxies import ProxyAddress, ProxyPool
from spire_core.session.retry import RetryPolicy
from spire_core.session.trace import JsonFormatter
from tests.sites.proxies import ForwardProxy
from tests.sites.server import Site


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def router() -> Router:
    routes = Router()

    @routes.default
    async def page(response: Response) -> None:
        pass

    return routes


def crawl(pool: ProxyPool, urls: list[str], **options: object) -> object:
    frontier = MemoryFrontier().dedup()
    options.setdefault("retry", RetryPolicy.transient(attempts=3, backoff=0.01))
    crawler = Crawler(
        router(),
        backend=HttpBackend(proxies=pool, timeout=5),
        frontier=frontier,
        host_limits=HostLimits(max_in_flight=1),
        robots=False,  # the proxies' logs then hold the pages only
        **options,  # type: ignore[arg-type]
    )
    stats = crawler.run(urls)
    assert anyio.run(frontier.pending) == 0
    return stats


def test_an_origin_sticks_to_one_proxy(site: Site) -> None:
    for n in range(6):
        site.page(f"/p{n}", "ok")
    with ForwardProxy() as a, ForwardProxy() as b:
        pool = ProxyPool([a.url, b.url])
        crawl(pool, [site.url(f"/p{n}") for n in range(6)])
        assert sorted([len(a.log), len(b.log)]) == [0, 6]


def test_a_refusing_proxy_is_struck_and_the_retry_goes_through_another(site: Site) -> None:
    site.page("/", "ok")
    with ForwardProxy(refuse=True) as bad, ForwardProxy() as good:
        pool = ProxyPool([bad.url, good.url], ban_after=1, ban_for=60)
        stats = crawl(pool, [site.url("/")])
        assert stats.finished == 1  # type: ignore[attr-defined]
        assert set(bad.actions()) == {"refuse"}  # (aiohttp may resend once on the reset connection)
        assert good.actions() == ["forward"]
        by_proxy = {s.proxy: s for s in pool.stats()}
        assert by_proxy[bad.url].banned
        assert by_proxy[bad.url].failures == 1


def test_a_proxy_that_bans_after_n_requests_is_banned_and_its_origin_moves(site: Site) -> None:
    for n in range(8):
        site.page(f"/p{n}", "ok")
    with ForwardProxy(ban_after=2) as banning, ForwardProxy() as other:
        clock = Clock()
        pool = ProxyPool([banning.url, other.url], ban_after=1, ban_for=600, clock=clock)
        pool.choose(site.origin)  # the origin starts on the banning proxy
        stats = crawl(pool, [site.url(f"/p{n}") for n in range(8)])
        assert stats.finished == 8  # type: ignore[attr-defined]
        assert banning.actions() == ["forward", "forward", "banned"]
        assert other.actions() == ["forward"] * 6
        assert [s.banned for s in pool.stats()] == [True, False]
        clock.now += 601
        assert [s.banned for s in pool.stats()] == [False, False]  # a ban ends after ban_for


def test_a_block_page_injected_by_a_proxy_rotates_the_origin(site: Site) -> None:
    site.page("/", "ok")
    with ForwardProxy(block_page=True) as blocking, ForwardProxy() as clean:
        pool = ProxyPool([blocking.url, clean.url], ban_after=2).rotate_on_block(BlockRules.builtin())
        pool.choose(site.origin)
        policy = RetryPolicy.transient(attempts=3, backoff=0.01).on_status(403)
        stats = crawl(pool, [site.url("/")], retry=policy)
        assert stats.finished == 1  # type: ignore[attr-defined]
        assert blocking.actions() == ["block"]
        assert clean.actions() == ["forward"]
        by_proxy = {s.proxy: s for s in pool.stats()}
        assert (by_proxy[blocking.url].blocks, by_proxy[blocking.url].strikes) == (1, 1)


def test_every_proxy_banned_is_a_proxy_error(site: Site) -> None:
    site.page("/", "ok")
    with ForwardProxy(refuse=True) as bad:
        pool = ProxyPool([bad.url], ban_after=1, ban_for=60)
        stats = crawl(pool, [site.url("/")], retry=RetryPolicy.transient(attempts=2, backoff=0.01))
        assert stats.errors_by_category["proxy"] == 1  # type: ignore[attr-defined]
        assert set(bad.actions()) == {"refuse"}
        assert pool.stats()[0].requests == 1  # the retry found no healthy proxy and did not send


def test_max_in_flight_counts_an_origin_across_every_proxy(site: Site) -> None:
    for n in range(12):
        site.page(f"/p{n}", "ok", delay=0.05)
    with ForwardProxy() as a, ForwardProxy() as b, ForwardProxy() as c:
        pool = ProxyPool([a.url, b.url, c.url], sticky_for=0)  # no stickiness: requests spread over all three
        crawl(pool, [site.url(f"/p{n}") for n in range(12)])
        assert all(proxy.log for proxy in (a, b, c))  # every proxy carried some
        assert site.peak == 1  # and still one request at a time reached the origin


def test_credentials_are_sent_to_the_proxy_and_redacted_everywhere(
    site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    site.page("/", "ok")
    caplog.set_level(logging.INFO, logger="spire.trace")
    with ForwardProxy(user="crawler:s3cret") as proxy, ForwardProxy(refuse=True, user="crawler:s3cret") as bad:
        pool = ProxyPool([proxy.url])
        crawl(pool, [site.url("/")])
        assert proxy.log[0][2] is not None  # a Proxy-Authorization header went to the proxy
        failing = HttpBackend(proxies=ProxyPool([bad.url]))

        async def fetch() -> ProxyError:
            try:
                await failing.fetch(Seed(site.url("/")))
            except ProxyError as exc:
                return exc
            finally:
                await failing.aclose()
            raise AssertionError("no error")

        error = anyio.run(fetch)
    printed = " ".join([str(error), repr(error), str(error.proxy), repr(pool), str(pool.stats()), caplog.text])
    assert "s3cret" not in printed
    assert "crawler:***@" in printed


def test_a_proxy_address_gives_the_browser_its_parts() -> None:
    address = ProxyAddress.parse("http://user:p%40ss@proxy.example:3128")
    assert address.server == "http://proxy.example:3128"
    assert (address.username, address.password) == ("user", "p@ss")
    with pytest.raises(ConfigError):
        ProxyAddress.parse("ftp://proxy.example")
    with pytest.raises(ConfigError):
        ProxyPool([])


@pytest.mark.parametrize("path", ["aiohttp", "httpx"])
def test_a_proxy_that_cannot_reach_the_site_is_proxy_target_and_no_strike(path: str) -> None:
    with ForwardProxy(unreachable=True) as proxy:
        pool = ProxyPool([proxy.url], ban_after=1)
        backend = HttpBackend(proxies=pool, http2=path == "httpx")

        async def fetch() -> SpireError:
            try:
                await backend.fetch(Seed("https://127.0.0.1:9/"))
            except SpireError as exc:
                return exc
            finally:
                await backend.aclose()
            raise AssertionError("no error")

        error = anyio.run(fetch)
        assert proxy.actions() == ["unreachable"]
    assert error.category == "proxy_target", repr(error)
    assert not pool.stats()[0].banned  # the proxy works: the site behind it failed


def test_the_trace_names_the_identity_and_the_redacted_proxy(site: Site, caplog: pytest.LogCaptureFixture) -> None:
    site.page("/", "ok")
    caplog.set_level(logging.INFO, logger="spire.trace")
    with ForwardProxy(user="me:pw") as proxy:
        backend = HttpBackend(proxies=ProxyPool([proxy.url]), identity=Identity("firefox", "linux"))
        Crawler(router(), backend=backend).run([site.url("/")])
    robots, line = [record.getMessage() for record in caplog.records if record.name == "spire.trace"]
    assert "/robots.txt" in robots
    assert "identity=firefox-linux" in line
    assert f"proxy=http://me:***@127.0.0.1:{proxy.port}" in line


@pytest.mark.parametrize(
    "userinfo",
    ["crawler:s3cret-pw", "s3cret-token", "s3cret-apikey:", "crawler:p@s3cret"],
    ids=["user-password", "token", "apikey-colon", "raw-at-in-password"],
)
@pytest.mark.parametrize("path", ["aiohttp", "httpx"])
def test_every_form_of_proxy_userinfo_is_redacted_and_no_aiohttp_error_is_kept(
    site: Site, caplog: pytest.LogCaptureFixture, userinfo: str, path: str
) -> None:
    site.page("/", "ok")
    caplog.set_level(logging.INFO, logger="spire.trace")
    with ForwardProxy(user=userinfo) as good, ForwardProxy(user=userinfo, garbage=True) as garbage:
        pool = ProxyPool([good.url])
        crawl(pool, [site.url("/")])
        failing_pool = ProxyPool([garbage.url])
        failing = HttpBackend(proxies=failing_pool, http2=path == "httpx")
        bearer = "Bearer " + "-".join(["s3cret", "bearer"])  # built, so the traceback's source lines do not show it

        async def fetch() -> SpireError:
            try:
                await failing.fetch(Seed(site.url("/"), headers={"Authorization": bearer}))
            except SpireError as exc:
                return exc
            finally:
                await failing.aclose()
            raise AssertionError("no error")

        error = anyio.run(fetch)
        assert garbage.actions() == ["garbage"]  # the proxy was asked and answered bytes that are no HTTP
    assert error.category == "protocol"
    # Nothing of aiohttp's is kept: its ClientResponseError holds the request headers, Proxy-Authorization too.
    assert error.__cause__ is None
    assert error.__context__ is None
    formatter = JsonFormatter()
    printed = " ".join(
        [
            str(error),
            repr(error),
            "".join(traceback.format_exception(error)),
            str(error.proxy),
            repr(pool),
            str(pool.stats()),
            repr(failing_pool),
            str(failing_pool.stats()),
            caplog.text,
            *(formatter.format(record) for record in caplog.records),
        ]
    )
    assert "s3cret" not in printed
    assert base64.b64encode(userinfo.encode()).decode()[:12] not in printed
    assert "***@127.0.0.1" in printed
