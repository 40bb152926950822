"""A recrawl through a browser: no conditional request (a 304 would render as an empty page), so the
fingerprint of what it rendered decides."""

from __future__ import annotations

import anyio

from spire import BrowserBackend, Crawler, Html, Links, Router
from spire_core.frontier.memory import MemoryFrontier
from spire_core.limits import HostLimits
from tests.sites.changing import ChangingSite
from tests.sites.server import Site
from tests.spire_core.test_recrawl import EXPECTED, build, edit_the_site, feed


def test_a_browser_recrawl_compares_what_it_rendered(site: Site, browser: BrowserBackend) -> None:
    changing: ChangingSite = build(site, validators=True)
    router = Router()

    @router.default
    async def page(html: Html, links: Links) -> None:
        await links.follow(html.css("a::attr(href)").getall())

    crawl = Crawler(
        router, backend=browser, frontier=MemoryFrontier(), recrawl=True, host_limits=HostLimits(max_in_flight=2)
    )
    crawl.run([changing.url("/")])
    first = len(site.page_requests())
    edit_the_site(changing)

    crawl.run([changing.url("/")])

    assert anyio.run(feed, crawl) == EXPECTED
    recrawled = site.page_requests()[first:]
    assert not any("if-none-match" in request.headers for request in recrawled)  # spire sent none
    assert changing.answers(304) == set()
