"""``ProxyPool.identified``: each proxy presents its own identity, keeps its own cookie jar and its own
connections, and the request log names the identity; checked on the wire, at two local proxies."""

from __future__ import annotations

import logging
import re

import pytest

from spire import Crawler, HttpBackend, Identity, Links, ProxyPool, Response, Router
from spire_core.errors import ConfigError
from tests.sites.proxies import ForwardProxy
from tests.sites.server import Site

CHROME = Identity("chrome", "windows")
FIREFOX = Identity("firefox", "macos")


def serve_jar_pages(site: Site, cookie: str) -> None:
    """``/set`` sets ``cookie`` and links to ``/next``, which shows what came back."""
    site.page("/set", '<a href="/next">next</a>', headers={"Set-Cookie": f"{cookie}; Path=/"})
    site.page("/next", "<p>next</p>")


@pytest.mark.parametrize("http2", [False, True], ids=["aiohttp", "httpx"])
def test_each_request_carries_the_identity_and_the_cookies_of_its_proxy(
    site: Site, other_site: Site, http2: bool, caplog: pytest.LogCaptureFixture
) -> None:
    serve_jar_pages(site, "first=1")
    serve_jar_pages(other_site, "second=2")
    router = Router()

    @router.default
    async def page(response: Response, links: Links) -> None:
        await links.follow(["/next"]) if response.url.endswith("/set") else None

    with ForwardProxy() as proxy_a, ForwardProxy() as proxy_b:
        pool = ProxyPool.identified({proxy_a.url: CHROME, proxy_b.url: FIREFOX})
        # one at a time, first in first out: both /set pages are fetched before either /next
        crawler = Crawler(router, backend=HttpBackend(proxies=pool, http2=http2), robots=False, concurrency=1)
        with caplog.at_level(logging.INFO, logger="spire.trace"):
            stats = crawler.run([site.url("/set"), other_site.url("/set")])
        assert stats.failed == 0
        # a new origin takes the next proxy in turn: the first site went through a, the other through b
        assert [path for _, path, _ in proxy_a.log] == [site.url("/set"), site.url("/next")]
        assert [path for _, path, _ in proxy_b.log] == [other_site.url("/set"), other_site.url("/next")]
        for headers in proxy_a.headers:
            assert headers["User-Agent"] == CHROME.user_agent
            assert "Sec-CH-UA" in headers
        for headers in proxy_b.headers:
            assert headers["User-Agent"] == FIREFOX.user_agent
            assert "Sec-CH-UA" not in headers  # Firefox sends no client hints
        # cookies match by host, not port: one jar would send both; each proxy's jar holds only its own
        assert proxy_a.headers[1].get("Cookie") == "first=1"
        assert proxy_b.headers[1].get("Cookie") == "second=2"
        assert {stat.identity for stat in pool.stats()} == {"chrome-windows", "firefox-macos"}
    lines = [record.getMessage() for record in caplog.records if record.getMessage().startswith("request ")]
    for line in lines:
        identity = re.search(r" identity=(\S+)", line).group(1)  # type: ignore[union-attr]
        assert identity == ("chrome-windows" if site.url("/") in line else "firefox-macos")
    assert len(lines) == 4


def test_a_retry_moves_to_another_proxy_and_presents_its_identity(site: Site) -> None:
    site.page("/", "<p>home</p>")
    router = Router()

    @router.default
    async def page(response: Response) -> None:
        pass

    with ForwardProxy(refuse=True) as broken, ForwardProxy() as working:
        pool = ProxyPool.identified([(broken.url, CHROME), (working.url, FIREFOX)])
        stats = Crawler(router, backend=HttpBackend(proxies=pool), robots=False).run([site.url("/")])
        assert stats.failed == 0
        assert [headers["User-Agent"] for headers in working.headers] == [FIREFOX.user_agent]
        assert {headers["User-Agent"] for headers in broken.headers} == {CHROME.user_agent}


def test_an_identified_pool_and_an_identity_of_the_backend_are_one_too_many() -> None:
    pool = ProxyPool.identified({"http://127.0.0.1:3128": CHROME})
    with pytest.raises(ConfigError, match="carry their own identities"):
        HttpBackend(proxies=pool, identity=FIREFOX)


def test_an_identified_pool_pairs_each_proxy_with_an_identity() -> None:
    with pytest.raises(ConfigError, match="pairs each proxy with an Identity"):
        ProxyPool.identified({"http://127.0.0.1:3128": "chrome"})  # type: ignore[dict-item]
    assert repr(ProxyPool.identified({"http://u:p@127.0.0.1:3128": CHROME}).choose("http://a.example")) == (
        "<ProxyAddress http://u:***@127.0.0.1:3128 as chrome-windows>"
    )
