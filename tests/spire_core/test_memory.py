"""A crawl holds each page's parsed tree only while its handler runs, not until the cyclic collector runs."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from spire import Context, Crawler, HostLimits, Html, Links, Router
from spire_core.backend.base import FunctionBackend
from spire_core.response import Headers, Response
from spire_core.seed import Seed


@pytest.fixture
def no_cyclic_gc() -> Iterator[None]:
    """Only reference counting frees objects while the test runs: what a cycle holds stays held."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


async def page(seed: Seed) -> Response:
    number = int(seed.url.rsplit("/", 1)[1] or 0)
    body = f'<html><head><title>{number}</title></head><body><a href="/{number + 1}">next</a></body></html>'
    return Response(url=seed.url, status=200, headers=Headers({"content-type": "text/html"}), body=body.encode())


@pytest.mark.usefixtures("no_cyclic_gc")
def test_the_parsed_page_and_the_request_are_freed_when_its_handler_ends() -> None:
    trees: list[weakref.ref[object]] = []
    contexts: list[weakref.ref[object]] = []
    alive_while_handling: list[tuple[int, int]] = []
    router = Router()

    @router.default
    async def handler(html: Html, links: Links, ctx: Context) -> None:
        alive = (sum(ref() is not None for ref in trees), sum(ref() is not None for ref in contexts))
        alive_while_handling.append(alive)
        trees.append(weakref.ref(html))
        contexts.append(weakref.ref(ctx))  # it holds the response, its body and the seed
        if len(trees) < 20:
            await links.same_origin()

    crawler = Crawler(
        router, concurrency=1, host_limits=HostLimits(max_in_flight=1), backend=FunctionBackend(page), robots=False
    )
    stats = crawler.run(["http://127.0.0.1:1/0"])
    assert stats.pages == 20
    # One page at a time: when a handler starts, no earlier page's tree or request is still alive.
    assert alive_while_handling == [(0, 0)] * 20
