"""The router: registration errors at decoration time, routing, middleware and the failed hook."""

from __future__ import annotations

from typing import Annotated, Any

import pytest

from spire import (
    ConfigError,
    Context,
    Crawler,
    Error,
    Extractor,
    Html,
    Next,
    Outcome,
    Response,
    Router,
    Seed,
    SeedInfo,
    Url,
    resolve,
)
from tests.sites.server import Site


def test_a_tag_registered_twice_is_an_error() -> None:
    router = Router()

    @router.handler("a")
    async def first(url: Url) -> None: ...

    with pytest.raises(ConfigError, match="already has a handler"):

        @router.handler("a")
        async def second(url: Url) -> None: ...


def test_an_unknown_annotation_fails_at_decoration_time() -> None:
    router = Router()
    with pytest.raises(ConfigError, match="not something spire can extract"):

        @router.handler("a")
        async def handler(thing: dict[str, int]) -> None: ...


def test_a_missing_annotation_or_a_sync_handler_fails_at_decoration_time() -> None:
    router = Router()
    with pytest.raises(ConfigError, match="no annotation"):

        @router.handler("a")
        async def untyped(url) -> None: ...  # type: ignore[no-untyped-def]

    with pytest.raises(ConfigError, match="async function"):

        @router.handler("b")
        def sync(url: Url) -> None: ...


def test_untagged_seeds_route_by_path_then_default(site: Site) -> None:
    for path in ("/books/1", "/about"):
        site.page(path, "x")
    routed: dict[str, str] = {}
    router = Router()

    @router.handler(path="/books/*")
    async def book(url: Url) -> None:
        routed[url] = "book"

    @router.default
    async def other(url: Url) -> None:
        routed[url] = "default"

    Crawler(router).run([site.url("/books/1"), site.url("/about")])
    assert routed == {site.url("/books/1"): "book", site.url("/about"): "default"}


def test_middleware_wraps_every_handler_outermost_first(site: Site) -> None:
    site.page("/", "x")
    calls: list[str] = []
    router = Router()

    @router.middleware
    async def outer(ctx: Context, call_next: Next) -> Outcome | None:
        calls.append("outer in")
        result = await call_next(ctx)
        calls.append("outer out")
        return result

    @router.middleware
    async def inner(ctx: Context, call_next: Next) -> Outcome | None:
        calls.append("inner")
        return await call_next(ctx)

    @router.default
    async def page(url: Url) -> None:
        calls.append("handler")

    Crawler(router).run([site.url("/")])
    assert calls == ["outer in", "inner", "handler", "outer out"]


def test_the_failed_hook_sees_seeds_that_failed_for_good(site: Site) -> None:
    site.page("/gone", "no", status=404)
    failed: list[tuple[str, str]] = []
    router = Router()

    @router.default
    async def page(response: Response) -> None: ...

    @router.failed
    async def on_failed(seed: SeedInfo, error: Error) -> None:
        failed.append((seed.url, str(error)))

    stats = Crawler(router).run([site.url("/gone")])
    assert stats.failed == 1
    assert failed == [(site.url("/gone"), f"HTTP status 404 ({site.url('/gone')})")]


def test_a_seed_without_a_handler_stops_the_crawl_with_a_clear_error(site: Site) -> None:
    router = Router()

    @router.handler("known")
    async def known(url: Url) -> None: ...

    with pytest.raises(ConfigError, match="no handler for tag 'unknown'"):
        Crawler(router).run([Seed(site.url("/"), tag="unknown")])


def test_a_handler_returning_something_else_than_an_outcome_stops_the_crawl(site: Site) -> None:
    router = Router()

    @router.default
    async def page(url: Url) -> Any:
        return "done"

    with pytest.raises(ConfigError, match=r"handler page returned str"):
        Crawler(router).run([site.url("/")])


class Title(Extractor[str]):
    """A user's own extractor, reusing the built-in Html one."""

    runs = 0

    async def extract(self, ctx: Context) -> str:
        Title.runs += 1
        page = await resolve(ctx, Html)
        return str(page.css("title::text").get(default=""))


#: One extractor instance for two parameters (module level: annotations resolve in the module).
TITLE = Title()


def test_a_user_extractor_runs_once_per_request_and_shares_the_fetch(site: Site) -> None:
    site.page("/", "<title>Hello</title>")
    got: list[tuple[str, str]] = []
    router = Router()

    @router.default
    async def page(a: Annotated[str, TITLE], b: Annotated[str, TITLE], page: Html) -> None:
        got.append((a, b))

    Crawler(router).run([site.url("/")])
    assert got == [("Hello", "Hello")]
    assert Title.runs == 1
    assert site.hits() == {"/": 1}


class NeedsNothingKnown(Extractor[str]):
    """An extractor declaring a dependency spire cannot extract."""

    def requires(self) -> tuple[Any, ...]:
        return (int,)

    async def extract(self, ctx: Context) -> str:
        return ""


class Loops(Extractor[str]):
    """An extractor that declares itself as its own dependency."""

    def requires(self) -> tuple[Any, ...]:
        return (self,)

    async def extract(self, ctx: Context) -> str:
        return ""


def test_an_extractors_declared_dependencies_are_checked_when_the_handler_is_registered() -> None:
    router = Router()
    with pytest.raises(ConfigError, match="needs"):

        @router.handler("bad")
        async def bad(value: Annotated[str, NeedsNothingKnown()]) -> None: ...

    with pytest.raises(ConfigError, match="depends on itself"):

        @router.handler("loop")
        async def loop(value: Annotated[str, Loops()]) -> None: ...


class NeedsPartner(Extractor[str]):
    """One of two extractors that each declare the other as a dependency."""

    def requires(self) -> tuple[Any, ...]:
        return (Partner(),)

    async def extract(self, ctx: Context) -> str:
        return ""


class Partner(Extractor[str]):
    def requires(self) -> tuple[Any, ...]:
        return (NeedsPartner(),)

    async def extract(self, ctx: Context) -> str:
        return ""


def test_two_extractors_requiring_each_other_are_a_config_error_naming_the_cycle() -> None:
    router = Router()
    with pytest.raises(ConfigError, match=r"NeedsPartner\(\) -> Partner\(\) -> NeedsPartner\(\)"):

        @router.handler("pair")
        async def pair(value: Annotated[str, NeedsPartner()]) -> None: ...
