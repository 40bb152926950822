"""A seed with a user name and password in its URL (``http://user:pw@host/``), with and without the
crawl's ``credentials=``: sent as Basic auth unless an ``Authorization`` is given, never a raw ValueError."""

from __future__ import annotations

import base64
from collections.abc import Callable

import httpx
import pytest

from spire import Crawler, Response, Router
from spire_core.backend.http import HttpBackend, split_userinfo
from tests.sites.server import Site

Make = Callable[[], HttpBackend]


@pytest.fixture(params=["aiohttp", "httpx"])
def make(request: pytest.FixtureRequest) -> Make:
    if request.param == "aiohttp":
        return HttpBackend
    return lambda: HttpBackend(transport=httpx.AsyncHTTPTransport())


def with_userinfo(site: Site, path: str) -> str:
    return site.url(path).replace("http://", "http://us%40er:p%3Aw@", 1)


def crawl(site: Site, backend: HttpBackend, **options: object) -> tuple[int, int, str | None]:
    site.page("/me", "<p>me</p>")
    router = Router()
    statuses: list[int] = []

    @router.default
    async def page(response: Response) -> None:
        statuses.append(response.status)

    stats = Crawler(router, backend=backend, robots=False, **options).run([with_userinfo(site, "/me")])  # type: ignore[arg-type]
    (request,) = site.page_requests()
    return stats.finished, stats.failed, request.headers.get("Authorization")


def test_url_userinfo_is_sent_as_basic_auth(make: Make, site: Site) -> None:
    finished, failed, authorization = crawl(site, make())
    assert (finished, failed) == (1, 0)
    assert authorization == "Basic " + base64.b64encode(b"us@er:p:w").decode()


def test_the_crawls_credentials_win_over_url_userinfo_without_a_raw_value_error(make: Make, site: Site) -> None:
    credentials = {site.origin: {"Authorization": "Bearer TOKEN"}}
    finished, failed, authorization = crawl(site, make(), credentials=credentials)
    assert (finished, failed) == (1, 0)
    assert authorization == "Bearer TOKEN"


def test_split_userinfo_keeps_the_rest_of_the_url_as_written() -> None:
    assert split_userinfo("http://a.example/x?q=1") == ("http://a.example/x?q=1", None)
    assert split_userinfo("http://a.example/@me?to=a@b") == ("http://a.example/@me?to=a@b", None)
    bare, basic = split_userinfo("http://u:@a.example:8080/x?q=1#f")
    assert bare == "http://a.example:8080/x?q=1#f"
    assert basic == "Basic " + base64.b64encode(b"u:").decode()
