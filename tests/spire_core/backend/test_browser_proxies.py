"""A ProxyPool through BrowserBackend: logins answered, stickiness, strikes, bans and rotation as over HTTP.

Real headless Chromium through local forward proxies (``tests.sites.proxies``), read from their logs.
"""

from __future__ import annotations

import base64
import logging

import pytest

from spire import AdaptiveBackend, BrowserBackend, Crawler, HostLimits, Response, Router
from spire_core.blocks import BlockRules
from spire_core.errors import ConfigError
from spire_core.frontier.memory import MemoryFrontier
from spire_core.session.proxies import ProxyPool
from spire_core.session.retry import RetryPolicy
from spire_core.stats import CrawlStats
from tests.sites.proxies import ForwardProxy
from tests.sites.server import Site
from tests.spire_core.backend.local_chrome import LocalChrome

LOGIN = "Basic " + base64.b64encode(b"crawler:s3cret").decode()


def crawl(backend: BrowserBackend | AdaptiveBackend, urls: list[str], **options: object) -> CrawlStats:
    router = Router()

    @router.default
    async def page(response: Response) -> None:
        pass

    options.setdefault("retry", RetryPolicy.transient(attempts=3, backoff=0.01))
    options.setdefault("robots", False)  # the proxies' logs then hold the pages only
    crawler = Crawler(
        router,
        backend=backend,
        frontier=MemoryFrontier().dedup(),
        host_limits=HostLimits(max_in_flight=1),
        **options,  # type: ignore[arg-type]
    )
    return crawler.run(urls)


def test_a_credentialed_pool_logs_in_sticks_and_names_its_proxy_redacted(
    site: Site, chrome: LocalChrome, caplog: pytest.LogCaptureFixture
) -> None:
    for n in range(4):
        site.page(f"/p{n}", f"<p>page {n}</p>")
    caplog.set_level(logging.INFO, logger="spire.trace")
    with (
        ForwardProxy(user="crawler:s3cret", challenge=True) as a,
        ForwardProxy(user="crawler:s3cret", challenge=True) as b,
    ):
        pool = ProxyPool([a.url, b.url])
        stats = crawl(BrowserBackend(drivers=1, proxies=pool, **chrome), [site.url(f"/p{n}") for n in range(4)])
        carried = a if a.log else b
        forwarded = [(url, login) for action, url, login in carried.log if action == "forward"]
    assert (stats.finished, stats.failed) == (4, 0)
    assert not (a.log and b.log)  # the origin stuck to one proxy
    assert sorted(url for url, _ in forwarded) == [site.url(f"/p{n}") for n in range(4)]
    assert {login for _, login in forwarded} == {LOGIN}  # the challenge was answered with the pool's login
    lines = [record.getMessage() for record in caplog.records if record.name == "spire.trace"]
    assert len(lines) == 4
    assert all(f"127.0.0.1:{carried.port}" in line and "s3cret" not in line for line in lines), lines


def test_a_refusing_proxy_is_struck_banned_and_the_retry_goes_through_another(site: Site, chrome: LocalChrome) -> None:
    site.page("/", "<p>ok</p>")
    with ForwardProxy(refuse=True) as bad, ForwardProxy() as good:
        pool = ProxyPool([bad.url, good.url], ban_after=1, ban_for=60)
        stats = crawl(BrowserBackend(drivers=1, proxies=pool, **chrome), [site.url("/")])
        assert stats.finished == 1
        assert set(bad.actions()) == {"refuse"}
        assert good.actions() == ["forward"]
    by_proxy = {proxy.proxy: proxy for proxy in pool.stats()}
    assert by_proxy[bad.url].banned
    assert by_proxy[bad.url].failures == 1


def test_a_block_page_from_a_proxy_rotates_the_origin_to_another(site: Site, chrome: LocalChrome) -> None:
    site.page("/", "<p>ok</p>")
    with ForwardProxy(block_page=True) as blocking, ForwardProxy() as clean:
        pool = ProxyPool([blocking.url, clean.url], ban_after=2).rotate_on_block(BlockRules.builtin())
        pool.choose(site.origin)  # the origin starts on the blocking proxy
        policy = RetryPolicy.transient(attempts=3, backoff=0.01).on_status(403)
        stats = crawl(BrowserBackend(drivers=1, proxies=pool, **chrome), [site.url("/")], retry=policy)
        assert stats.finished == 1
        assert blocking.actions() == ["block"]
        assert clean.actions() == ["forward"]
    by_proxy = {proxy.proxy: proxy for proxy in pool.stats()}
    assert (by_proxy[blocking.url].blocks, by_proxy[blocking.url].strikes) == (1, 1)


def test_an_adaptive_backend_shares_one_pool_between_http_and_the_browser(site: Site, chrome: LocalChrome) -> None:
    site.page("/", "<p>rendered later</p>")
    with ForwardProxy() as only:
        pool = ProxyPool([only.url])
        backend = AdaptiveBackend(BrowserBackend(drivers=1, proxies=pool, **chrome), default="browser")
        stats = crawl(backend, [site.url("/")], robots=True)
        assert stats.finished == 1
        assert backend.http.proxies is pool  # type: ignore[attr-defined]
        assert only.actions() == ["forward", "forward"]  # robots.txt over HTTP, the page in the browser
    assert pool.stats()[0].requests == 2


def test_proxy_options_name_the_fix(chrome: LocalChrome) -> None:
    pool = ProxyPool(["http://127.0.0.1:3128"])
    with pytest.raises(ConfigError, match=r"proxies=ProxyPool"):
        BrowserBackend(proxy=pool, **chrome)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="not both"):
        BrowserBackend(proxy="http://127.0.0.1:3128", proxies=pool, **chrome)
    with pytest.raises(ConfigError, match="takes a ProxyPool"):
        BrowserBackend(proxies=["http://127.0.0.1:3128"], **chrome)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="SOCKS"):
        BrowserBackend(proxies=ProxyPool(["socks5://u:p@127.0.0.1:1080"]), **chrome)


def test_a_request_through_another_proxy_takes_a_browser_on_that_proxy(site: Site, chrome: LocalChrome) -> None:
    for n in range(4):
        site.page(f"/p{n}", f"<p>page {n}</p>")
    with ForwardProxy() as a, ForwardProxy() as b:
        pool = ProxyPool([a.url, b.url], sticky_for=0)  # no stickiness: each page takes the next proxy
        backend = BrowserBackend(drivers=1, proxies=pool, **chrome)
        stats = crawl(backend, [site.url(f"/p{n}") for n in range(4)])
        assert stats.finished == 4
        assert (a.actions(), b.actions()) == (["forward"] * 2, ["forward"] * 2)
    assert (backend.pool.stats.started, backend.pool.stats.recycled["proxy"]) == (4, 3)


def test_a_proxy_that_refuses_the_login_is_banned_and_its_origin_moves(site: Site, chrome: LocalChrome) -> None:
    for n in range(4):
        site.page(f"/p{n}", f"<p>page {n}</p>")
    with ForwardProxy(user="crawler:s3cret", ban_after=1) as banning, ForwardProxy(user="crawler:s3cret") as other:
        pool = ProxyPool([banning.url, other.url], ban_after=1, ban_for=600)
        pool.choose(site.origin)  # the origin starts on the banning proxy
        stats = crawl(BrowserBackend(drivers=1, proxies=pool, **chrome), [site.url(f"/p{n}") for n in range(4)])
        assert (stats.finished, stats.failed) == (4, 0)
        # the second page: challenged, answered with the login once, refused again: a 407, a strike, a ban
        assert [(action, login) for action, _, login in banning.log] == [
            ("forward", None),
            ("banned", None),
            ("banned", LOGIN),
        ]
        assert other.actions() == ["forward"] * 3
    assert [proxy.banned for proxy in pool.stats()] == [True, False]
