"""Mistakes in a crawl's own code stop the crawl at once with one sentence that names the fix."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from spire import ConfigError, Crawler, Links, Retry, Router, Seed, Url
from spire_core.errors import InvalidUrl
from tests.sites.server import Site


def two_tag_router() -> Router:
    router = Router()

    @router.handler("listing")
    async def listing(url: Url) -> None: ...

    @router.handler("book")
    async def book(url: Url) -> None: ...

    return router


def test_a_seed_tag_typo_is_a_config_error_naming_the_known_tags_and_the_closest(site: Site) -> None:
    with pytest.raises(ConfigError) as raised:
        Crawler(two_tag_router()).run([Seed(site.url("/"), tag="boook")])
    assert "no handler for tag 'boook'" in str(raised.value)
    assert "did you mean 'book'?" in str(raised.value)
    assert "'book', 'listing'" in str(raised.value)
    assert site.hits() == {}  # refused before anything was fetched


def test_a_follow_tag_typo_stops_the_crawl_at_the_call(site: Site) -> None:
    site.page("/", "<a href='/a'>a</a><a href='/b'>b</a>")
    router = Router()
    handled: list[str] = []

    @router.handler("listing")
    async def listing(url: Url, links: Links) -> None:
        handled.append(url)
        await links.follow(["/a", "/b"], tag="lisitng")

    crawler = Crawler(router)
    with pytest.raises(ConfigError, match="did you mean 'listing'"):
        crawler.run([Seed(site.url("/"), tag="listing")])
    assert handled == [site.url("/")]
    assert crawler.stats.failed == 0  # stopped, not failed seed by seed


def test_a_router_with_a_default_takes_untagged_seeds_and_refuses_a_tag_typo(site: Site) -> None:
    site.page("/", "home")
    router = Router()
    handled: list[str] = []

    @router.handler("page")
    async def page(url: Url) -> None: ...

    @router.default
    async def anything(url: Url) -> None:
        handled.append(url)

    assert Crawler(router).run([Seed(site.url("/"))]).finished == 1
    assert handled == [site.url("/")]
    with pytest.raises(ConfigError, match=r"no handler for tag 'pgae': did you mean 'page'\?"):
        Crawler(router).run([Seed(site.url("/"), tag="pgae")])


def test_a_tag_typo_in_a_link_is_caught_with_a_default_too(site: Site) -> None:
    site.page("/", "<a href='/a'>a</a>")
    router = Router()
    handled: list[str] = []

    @router.default
    async def home(url: Url, links: Links) -> None:
        handled.append(url)
        await links.follow(["/a"], tag="detial")

    @router.handler("detail")
    async def detail(url: Url) -> None:
        handled.append(url)

    crawler = Crawler(router)
    with pytest.raises(ConfigError, match="did you mean 'detail'"):
        crawler.run([site.url("/")])
    assert handled == [site.url("/")]  # the default never got the mistyped link


def test_a_router_with_only_a_default_names_the_fix_for_a_tag(site: Site) -> None:
    router = Router()

    @router.default
    async def anything(url: Url) -> None: ...

    with pytest.raises(ConfigError, match="queue the seed without a tag for the default handler"):
        Crawler(router).run([Seed(site.url("/"), tag="whatever")])


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"title": "x"}, r"handler .*returns_it returned a dict \({'title': 'x'}\).*dataset.push"),
        ([1, 2], r"returned a list"),
        (Retry, r"returned the class Retry, not an instance: return Retry\(...\)"),
    ],
)
def test_a_handler_returning_a_non_outcome_stops_the_crawl_naming_it(site: Site, value: Any, message: str) -> None:
    for i in range(5):
        site.page(f"/{i}", "page")
    router = Router()
    calls: list[str] = []

    @router.default
    async def returns_it(url: Url) -> Any:
        calls.append(url)
        return value

    crawler = Crawler(router, concurrency=1)
    with pytest.raises(ConfigError, match=message):
        crawler.run([site.url(f"/{i}") for i in range(5)])
    assert len(calls) == 1  # the first one stops the crawl


def test_an_async_generator_handler_is_rejected_at_decoration() -> None:
    router = Router()
    with pytest.raises(ConfigError, match=r"async generator.*links.follow.*dataset.push"):

        @router.handler("listing")
        async def listing(url: Url) -> Any:
            yield {"url": url}


def test_run_with_one_string_is_one_seed(site: Site) -> None:
    site.page("/", "home")
    seen: list[str] = []
    router = Router()

    @router.default
    async def page(url: Url) -> None:
        seen.append(url)

    stats = Crawler(router).run(site.url("/"))
    assert stats.finished == 1
    assert seen == [site.url("/")]


def test_run_inside_a_running_event_loop_says_to_await_arun() -> None:
    crawler = Crawler(two_tag_router())

    async def inside() -> None:
        crawler.run([])

    with pytest.raises(ConfigError, match=r"await crawler.arun"):
        asyncio.run(inside())


def test_a_seed_url_without_a_scheme_suggests_http() -> None:
    with pytest.raises(InvalidUrl, match=r"did you mean 'http://example.com/shop'"):
        Crawler(two_tag_router()).run("example.com/shop")
