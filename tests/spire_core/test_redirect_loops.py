"""Redirect loops end as a duplicate skip the first time they return to a URL of their own chain."""

from __future__ import annotations

from spire import Crawler, HostLimits, Response, Router
from spire.testing.site import Request
from spire_core.session.retry import RetryPolicy
from tests.sites.server import Site

FAST = HostLimits(max_in_flight=4)


def crawl(site: Site, path: str) -> tuple[Crawler, list[str]]:
    handled: list[str] = []
    routes = Router()

    @routes.default
    async def page(response: Response) -> None:
        handled.append(response.url)

    crawler = Crawler(routes, host_limits=FAST, robots=False, retry=RetryPolicy.never())
    crawler.run([site.url(path)])
    return crawler, handled


def test_a_page_redirecting_to_itself_is_fetched_once_and_skipped_as_a_duplicate(site: Site) -> None:
    site.page("/self", "", status=302, headers={"Location": "/self"})
    crawler, handled = crawl(site, "/self")
    assert [request.path for request in site.requests] == ["/self"]
    assert handled == []
    assert crawler.stats.skipped("duplicate") == 1
    assert crawler.stats.skipped("redirects") == 0


def test_a_loop_through_the_seed_fetches_each_url_once(site: Site) -> None:
    site.page("/loop1", "", status=302, headers={"Location": "/loop2"})
    site.page("/loop2", "", status=302, headers={"Location": "/loop1"})
    crawler, handled = crawl(site, "/loop1")
    assert [request.path for request in site.requests] == ["/loop1", "/loop2"]
    assert handled == []
    assert crawler.stats.skipped("duplicate") == 1


def test_a_self_redirect_that_sets_a_cookie_is_followed_once(site: Site) -> None:
    def login(request: Request) -> tuple[int, dict[str, str], bytes]:
        cookies = [value for name, value in request.headers.items() if name.lower() == "cookie"]
        if any("session=1" in cookie for cookie in cookies):
            return 200, {"Content-Type": "text/html"}, b"<p>welcome</p>"
        return 302, {"Location": "/login", "Set-Cookie": "session=1; Path=/"}, b""

    site.route("/login", login)
    crawler, handled = crawl(site, "/login")
    assert [request.path for request in site.requests] == ["/login", "/login"]
    assert handled == [site.url("/login")]
    assert crawler.stats.finished == 1
