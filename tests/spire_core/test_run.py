"""One run object per ``run``/``arun``: its own counts and state, and control flow a handler cannot swallow."""

from __future__ import annotations

import os

import anyio
import pytest

from spire import Crawler, HostLimits, Links, Response, Router, Seed
from spire_core.context import Context
from spire_core.errors import ConfigError
from spire_core.frontier.memory import MemoryFrontier
from spire_core.outcome import Done, Outcome
from spire_core.run import CrawlState
from tests.sites.server import Site

FAST = HostLimits(max_in_flight=4)


def passing() -> Router:
    routes = Router()

    @routes.default
    async def page(response: Response) -> None:
        pass

    return routes


class Swallowing:
    """A worker whose handler catches every ``Exception`` around its fetch, as careless code does."""

    def __init__(self) -> None:
        self.handled: list[str] = []

    def check_tag(self, tag: str | None) -> None:
        pass

    def describe(self, seed: Seed) -> str:
        return "swallowing"

    def runs_here(self, seed: Seed) -> bool:
        return False

    async def handle(self, ctx: Context) -> Outcome | None:
        try:
            response = await ctx.response()
        except Exception:
            return Done()  # swallowed: a refused redirect must still end as a skip
        self.handled.append(response.url)
        return None

    async def handle_failed(self, ctx: Context) -> None:
        pass


@pytest.mark.parametrize("processes", [1, 2])
def test_a_refused_redirect_is_a_skip_even_under_a_handlers_except_exception(site: Site, processes: int) -> None:
    site.page("/robots.txt", "User-agent: *\nDisallow: /private\n", content_type="text/plain")
    site.page("/to-private", "", status=302, headers={"Location": site.url("/private")})
    site.page("/private", "secret")
    worker = Swallowing()
    stats = Crawler(worker, host_limits=FAST, processes=processes).run([site.url("/to-private")])
    assert stats.skipped("robots") == 1
    assert stats.finished == 0
    assert "/private" not in site.hits()


def test_each_run_counts_afresh_and_the_last_runs_counts_stay_readable(site: Site) -> None:
    site.page("/a", "a")
    site.page("/b", "b")
    crawler = Crawler(passing(), host_limits=FAST)
    first = crawler.run([site.url("/a")])
    assert crawler.stats is first
    assert crawler.state is CrawlState.FINISHED
    second = crawler.run([site.url("/b")])
    assert second is not first
    assert (first.pages, second.pages) == (1, 1)
    assert (first.requests, second.requests) == (2, 2)  # each run reads robots.txt once, for itself
    assert crawler.stats is second


def test_arun_on_a_crawler_already_running_is_a_config_error_naming_push(site: Site) -> None:
    site.page("/", "home")
    started, release = anyio.Event(), anyio.Event()
    routes = Router()

    @routes.default
    async def page(response: Response) -> None:
        started.set()
        await release.wait()  # keeps the first run going while the second call is made

    crawler = Crawler(routes, host_limits=FAST)

    async def main() -> str:
        async with anyio.create_task_group() as tg:
            tg.start_soon(crawler.arun, [site.url("/")])
            await started.wait()
            with pytest.raises(ConfigError) as caught:
                await crawler.arun([site.url("/")])
            release.set()
        return str(caught.value)

    assert "push()" in anyio.run(main)


def test_a_shutdown_before_the_run_ends_it_at_once_with_its_seeds_queued(site: Site) -> None:
    site.page("/", "home")
    crawler = Crawler(passing(), host_limits=FAST)
    crawler.shutdown()
    stats = crawler.run([site.url("/")])
    assert stats.requests == 0
    assert crawler.is_shut_down
    assert site.requests == []


def test_a_depth_limit_facade_is_the_crawls_one_depth_limit_decided_by_admission(site: Site) -> None:
    site.page("/", "<a href='/a'>a</a>")
    site.page("/a", "<a href='/b'>b</a>")
    site.page("/b", "b")
    routes = Router()

    @routes.default
    async def page(links: Links) -> None:
        await links.enqueue()

    crawler = Crawler(routes, host_limits=FAST, frontier=MemoryFrontier().max_depth(1))
    stats = crawler.run([site.url("/")])
    assert crawler.policy.max_crawl_depth == 1
    assert stats.finished == 2
    assert stats.skipped("depth") == 1  # /b, counted where every depth skip is
    assert "/b" not in site.hits()


def test_a_local_handler_runs_in_the_crawls_own_process_with_worker_processes(site: Site) -> None:
    for name in ("a", "b", "c"):
        site.page(f"/{name}", name)
    pids: list[int] = []
    routes = Router()

    @routes.handler("tally", local=True)
    async def tally(response: Response) -> None:
        pids.append(os.getpid())  # a list in the crawl's process: a worker's append would be lost

    crawler = Crawler(routes, host_limits=FAST, processes=2)
    stats = crawler.run([Seed(site.url(f"/{name}"), tag="tally") for name in ("a", "b", "c")])
    assert stats.finished == 3
    assert pids == [os.getpid()] * 3
