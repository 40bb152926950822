"""The loop a crawl starts: asyncio, on uvloop when uvloop is installed."""

from __future__ import annotations

import asyncio
import importlib.util

import pytest

from spire import Crawler, Response, Router, Seed, Url
from spire_core import loop
from spire_core.backend import FunctionBackend

HAS_UVLOOP = importlib.util.find_spec("uvloop") is not None


@pytest.fixture(autouse=True)
def fresh_options() -> None:
    loop.backend_options.cache_clear()


def test_uvloop_is_chosen_only_when_it_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "uvloop" else real(name))
    assert loop.backend_options() == {}
    loop.backend_options.cache_clear()
    monkeypatch.setattr(importlib.util, "find_spec", real)
    assert loop.backend_options() == ({"use_uvloop": True} if HAS_UVLOOP else {})


def loop_of_a_crawl() -> str:
    """The module of the event loop ``Crawler.run`` started, as a handler saw it (one page, no network)."""
    loops: list[str] = []
    router = Router()

    @router.default
    async def page(url: Url) -> None:
        loops.append(type(asyncio.get_running_loop()).__module__)

    async def fetch(seed: Seed) -> Response:
        return Response(url=seed.url, status=200, body=b"<html></html>", headers={"content-type": "text/html"})

    stats = Crawler(router, backend=FunctionBackend(fetch), robots=False).run(["http://a.example/"])
    assert stats.finished == 1
    assert len(loops) == 1
    return loops[0]


def test_crawler_run_starts_uvloops_loop_when_it_is_installed() -> None:
    assert loop_of_a_crawl().startswith("uvloop") == HAS_UVLOOP


def test_the_plain_asyncio_loop_runs_a_crawl_when_uvloop_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "uvloop" else real(name))
    assert loop_of_a_crawl().startswith("asyncio")
