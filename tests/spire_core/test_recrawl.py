"""Recrawls (``Crawler(recrawl=)``): conditional revisits, the change feed, and the revisit policy.

Every test crawls a ``ChangingSite`` on 127.0.0.1 once, edits it as a site's owner would, and crawls
it again on the same frontier.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from pydantic import BaseModel

from spire import Crawler, Dataset, Html, Links, Router, Url
from spire_core.dataset.memory import MemoryDataset
from spire_core.errors import ConfigError
from spire_core.frontier.base import Frontier
from spire_core.frontier.memory import MemoryFrontier
from spire_core.frontier.redis import RedisFrontier
from spire_core.frontier.sqlite import SqliteFrontier
from spire_core.ledger import Fate
from spire_core.limits import HostLimits
from spire_core.recrawl import Recrawl
from spire_core.revisit import Change
from spire_core.session.retry import RetryPolicy
from tests.redis_server import redis_server, redis_url
from tests.sites.changing import ChangingSite
from tests.sites.server import Reply, Request, Site

__all__ = ["redis_server", "redis_url"]  # fixtures

pytestmark = pytest.mark.anyio

PAGES = 20
#: Enough words that a page's body outweighs its headers, as on a real site.
FILLER = " ".join(f"word{n}" for n in range(120))


class Page(BaseModel):
    url: str
    title: str | None


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def site_router() -> Router:
    router = Router()

    @router.default
    async def page(html: Html, links: Links, url: Url, pages: Dataset[Page]) -> None:
        await links.follow(html.css("a::attr(href)").getall())
        await pages.push(Page(url=url, title=html.css("title::text").get()))

    return router


@pytest.fixture
def changing(site: Site) -> ChangingSite:
    """An index at / linking 19 pages, each linking back to it."""
    return build(site, validators=True)


def build(site: Site, *, validators: bool) -> ChangingSite:
    changing = ChangingSite(site, validators=validators)
    changing.put("/", "Index", f"every page {FILLER}", [f"/p{i}" for i in range(1, PAGES)])
    for i in range(1, PAGES):
        changing.put(f"/p{i}", f"Page {i}", f"the words of page {i} {FILLER}", ["/"])
    return changing


Store = Callable[[Path], Frontier]
STORES: dict[str, Store] = {
    "memory": lambda _: MemoryFrontier(),
    "sqlite": lambda folder: SqliteFrontier(folder / "state.db"),
}


@pytest.fixture(params=sorted(STORES))
def frontier(request: pytest.FixtureRequest, tmp_path: Path) -> Frontier:
    return STORES[request.param](tmp_path)


def crawler(frontier: Frontier, recrawl: Recrawl | bool = True, **options: object) -> Crawler:
    options.setdefault("host_limits", HostLimits(max_in_flight=4))
    return Crawler(site_router(), frontier=frontier, recrawl=recrawl, **options)  # type: ignore[arg-type]


async def feed(crawl: Crawler) -> dict[str, str]:
    """The change feed as ``{path: change}``."""
    return {entry.url.split("/", 3)[3] or "/": entry.change async for entry in entries(crawl) if entry.change}


async def entries(crawl: Crawler) -> AsyncIterator:  # type: ignore[type-arg]
    async for entry in crawl.changes():
        yield entry


def edit_the_site(changing: ChangingSite) -> None:
    """Two pages edited, one removed (404, and its link), one added, linked from the index."""
    changing.tick()
    changing.put("/p3", "Page 3", f"the words of page 3, edited {FILLER}", ["/"])
    changing.put("/p7", "Page 7", f"the words of page 7, edited {FILLER}", ["/"])
    changing.remove("/p5")
    changing.link("/", [f"/p{i}" for i in range(1, PAGES) if i != 5] + ["/p20"])
    changing.put("/p20", "Page 20", f"a page added {FILLER}", ["/"])


EXPECTED = {
    "/": "changed",  # it lost a link and gained one
    "p3": "changed",
    "p7": "changed",
    "p5": "gone",
    "p20": "new",
    **{f"p{i}": "unchanged" for i in range(1, PAGES) if i not in (3, 5, 7)},
}


async def test_a_recrawl_says_what_changed_with_conditional_requests_and_a_fraction_of_the_bytes(
    changing: ChangingSite, frontier: Frontier
) -> None:
    crawl = crawler(frontier)
    first = await crawl.arun([changing.url("/")])
    assert first.pages == PAGES
    assert set((await feed(crawl)).values()) == {"new"}
    first_bytes, first_requests = changing.body_bytes, len(changing.site.page_requests())
    edit_the_site(changing)

    again = await crawl.arun([changing.url("/")])

    assert await feed(crawl) == EXPECTED
    revisits = changing.site.page_requests()[first_requests:]
    kept_before = {f"/p{i}" for i in range(1, PAGES)} | {"/"}
    for request in revisits:
        if request.path in kept_before:  # every revisit of a page kept asks only for what changed
            assert request.headers.get("if-none-match", "").startswith('"')
            assert "if-modified-since" in request.headers
        else:
            assert request.path == "/p20"
    assert sorted(request.path for request in revisits) == sorted([*kept_before, "/p20"])
    assert changing.answers(304) == {f"/p{i}" for i in range(1, PAGES) if i not in (3, 5, 7)}
    assert changing.body_bytes - first_bytes < 0.25 * first_bytes
    assert again.pages == 4  # the changed pages and the new one reach a handler; a 304 is no page
    await frontier.aclose()


async def test_the_ledger_pages_the_entries_of_one_change(changing: ChangingSite, frontier: Frontier) -> None:
    crawl = crawler(frontier)
    await crawl.arun([changing.url("/")])
    edit_the_site(changing)
    await crawl.arun([changing.url("/")])
    ledger = crawl.ledger
    assert ledger is not None

    for change in Change:
        found = [entry.url.split("/", 3)[3] or "/" for entry in await ledger.entries(change=change, limit=100)]
        assert sorted(found) == sorted(path for path, said in EXPECTED.items() if said == change), change
    unchanged = await ledger.entries(change="unchanged", limit=100)
    assert len(unchanged) == 16
    paged = [*await ledger.entries(change="unchanged", limit=5), *await ledger.entries(change="unchanged", offset=5)]
    assert paged == list(unchanged)  # a page at a time, in the order met
    gone = [entry.url for entry in await ledger.entries(change="gone", fate=Fate.SKIPPED, reason="status")]
    assert gone == [changing.url("/p5")]
    assert await ledger.entries(change="gone", fate=Fate.KEPT) == []
    (sample,) = (await ledger.summary()).skips["status"][1]  # a sample says its change too
    assert (sample.url, sample.referrer, sample.change) == (changing.url("/p5"), None, "gone")
    await frontier.aclose()


async def test_without_validators_the_fingerprint_decides(site: Site, frontier: Frontier) -> None:
    changing = build(site, validators=False)
    crawl = crawler(frontier)
    await crawl.arun([changing.url("/")])
    first_requests = len(site.page_requests())
    edit_the_site(changing)

    await crawl.arun([changing.url("/")])

    assert await feed(crawl) == EXPECTED
    assert changing.conditional_requests() == []  # nothing to send: the server gave no validators
    assert len(site.page_requests()) - first_requests == PAGES + 1  # every page fetched whole, and the new one
    await frontier.aclose()


async def test_a_footer_that_changes_on_every_request_is_no_change(changing: ChangingSite, frontier: Frontier) -> None:
    changing.put("/p2", "Page 2", f"the words of page 2 {FILLER}", ["/"], footer_clock=True)
    crawl = crawler(frontier)
    await crawl.arun([changing.url("/")])

    await crawl.arun([changing.url("/")])

    changes = {entry.url.rsplit("/", 1)[1]: entry async for entry in entries(crawl)}
    assert {entry.change for entry in changes.values()} == {"unchanged"}
    assert changes["p2"].how == "fetched"  # its bytes and ETag changed: fetched whole, then compared
    assert changes["p1"].how == "not-modified"
    await frontier.aclose()


async def test_handlers_run_for_new_and_changed_pages_only(changing: ChangingSite, frontier: Frontier) -> None:
    items: MemoryDataset[Page] = MemoryDataset(Page)
    crawl = crawler(frontier, datasets={Page: items})
    await crawl.arun([changing.url("/")])
    assert len(await items.items()) == PAGES
    edit_the_site(changing)

    stats = await crawl.arun([changing.url("/")])

    assert sorted(item.url.rsplit("/", 1)[1] for item in (await items.items())[PAGES:]) == ["", "p20", "p3", "p7"]
    assert stats.items == 4
    await frontier.aclose()


async def test_a_revisit_that_fails_is_failed_then_tried_again_by_the_next_recrawl(
    changing: ChangingSite, frontier: Frontier
) -> None:
    crawl = crawler(frontier, retry=RetryPolicy(attempts=1))
    await crawl.arun([changing.url("/")])
    changing.break_page("/p4", 500)

    await crawl.arun([changing.url("/")])
    assert (await feed(crawl))["p4"] == "failed"

    changing.break_page("/p4", None)
    await crawl.arun([changing.url("/")])
    assert (await feed(crawl))["p4"] == "unchanged"  # its state was kept: compared with the first crawl's
    await frontier.aclose()


async def test_a_page_that_failed_the_first_crawl_is_tried_again_and_new(
    changing: ChangingSite, frontier: Frontier
) -> None:
    changing.break_page("/p9", 500)
    crawl = crawler(frontier, retry=RetryPolicy(attempts=1))
    await crawl.arun([changing.url("/")])
    assert "p9" not in await feed(crawl)
    changing.break_page("/p9", None)

    await crawl.arun([changing.url("/")])  # its link is on an unchanged page: it is queued again all the same

    assert (await feed(crawl))["p9"] == "new"
    await frontier.aclose()


async def test_a_page_that_failed_keeps_the_page_it_was_found_on_into_the_recrawl(
    changing: ChangingSite, frontier: Frontier
) -> None:
    changing.break_page("/p9", 500)
    crawl = crawler(frontier, retry=RetryPolicy(attempts=1))
    await crawl.arun([changing.url("/")])
    assert (await crawl.why(changing.url("/p9"))).referrer == changing.url("/")  # type: ignore[union-attr]

    await crawl.arun([changing.url("/")])  # p9 fails again: carried into the recrawl, its referrer with it

    entry = await crawl.why(changing.url("/p9"))
    assert entry is not None
    assert (entry.fate.value, entry.referrer, entry.depth) == ("failed", changing.url("/"), 1)
    await frontier.aclose()


async def test_pages_unchanged_for_several_recrawls_are_put_off_then_revisited(
    changing: ChangingSite, frontier: Frontier
) -> None:
    crawl = crawler(frontier, recrawl=Recrawl(slow_after=2))
    for _ in range(3):  # the first crawl, then two recrawls that find every page unchanged
        await crawl.arun([changing.url("/")])
    before = len(changing.site.page_requests())

    await crawl.arun([changing.url("/")])  # unchanged twice in a row: due every 2nd recrawl

    assert len(changing.site.page_requests()) == before  # nothing fetched
    changes = {entry.url.rsplit("/", 1)[1]: entry async for entry in entries(crawl)}
    assert len(changes) == PAGES
    assert {(entry.change, entry.how) for entry in changes.values()} == {("unchanged", "not-due")}
    assert (await crawl.why(changing.url("/p1"))).reason == "not_due"  # type: ignore[union-attr]

    await crawl.arun([changing.url("/")])  # due again
    assert len(changing.site.page_requests()) == before + PAGES
    await frontier.aclose()


async def test_without_the_adaptive_policy_every_page_is_revisited_every_time(
    changing: ChangingSite, frontier: Frontier
) -> None:
    crawl = crawler(frontier, recrawl=Recrawl(adaptive=False))
    for _ in range(4):
        await crawl.arun([changing.url("/")])
    assert len(changing.site.page_requests()) == 4 * PAGES
    await frontier.aclose()


async def test_a_crawl_that_keeps_page_states_needs_a_store_and_a_ledger_that_keep_them(redis_url: str) -> None:
    frontier = RedisFrontier(redis_url, name="recrawl")
    with pytest.raises(ConfigError, match="use a MemoryFrontier or a SqliteFrontier"):
        Crawler(site_router(), frontier=frontier, recrawl=True)
    await frontier.aclose()
    with pytest.raises(ConfigError, match="ledger"):
        Crawler(site_router(), recrawl=True, ledger=False)
    with pytest.raises(ConfigError, match="full ledger"):
        Crawler(site_router(), recrawl=True, ledger="light")
    with pytest.raises(ConfigError, match="recrawl"):
        await anext(aiter(Crawler(site_router()).changes()))


async def test_with_worker_processes_the_feed_and_the_savings_are_the_same(
    changing: ChangingSite, tmp_path: Path
) -> None:
    async with SqliteFrontier(tmp_path / "state.db") as frontier:
        crawl = crawler(frontier, processes=2)
        await crawl.arun([changing.url("/")])
        edit_the_site(changing)

        await crawl.arun([changing.url("/")])

        assert await feed(crawl) == EXPECTED
        assert changing.answers(304) == {f"/p{i}" for i in range(1, PAGES) if i not in (3, 5, 7)}


async def test_a_crawl_that_kept_no_page_states_is_recrawled_with_every_page_new(
    changing: ChangingSite, tmp_path: Path
) -> None:
    async with SqliteFrontier(tmp_path / "state.db") as frontier:
        await crawler(frontier, recrawl=False).arun([changing.url("/")])
        before = len(changing.site.page_requests())
        crawl = crawler(frontier)

        await crawl.arun([changing.url("/")])

        assert len(changing.site.page_requests()) - before == PAGES  # crawled again, not "complete"
        assert changing.conditional_requests() == []  # no state was kept: nothing to ask with
        assert set((await feed(crawl)).values()) == {"new"}


async def test_a_recrawl_while_robots_txt_answers_503_keeps_every_page_failed_and_the_next_one_finds_them_unchanged(
    site: Site, tmp_path: Path
) -> None:
    changing = ChangingSite(site)
    changing.put("/", "Index", f"every page {FILLER}", [f"/p{i}" for i in range(1, 6)])
    for i in range(1, 6):
        changing.put(f"/p{i}", f"Page {i}", f"the words of page {i} {FILLER}", ["/"])
    frontier = SqliteFrontier(tmp_path / "state.db")
    dataset: MemoryDataset[Page] = MemoryDataset(Page)
    crawl = crawler(frontier, retry=RetryPolicy(attempts=1), datasets={Page: dataset})
    await crawl.arun([changing.url("/")])
    assert len(await dataset.items()) == 6

    down = {"robots": True}

    def robots(request: Request) -> Reply:
        if down["robots"]:
            return 503, {"Content-Type": "text/plain"}, b"down for maintenance"
        return 200, {"Content-Type": "text/plain"}, b"User-agent: *\n"

    site.route("/robots.txt", robots)
    await crawl.arun([changing.url("/")])
    # The host could not be heard: no page is gone, every one is failed and kept for next time.
    assert await feed(crawl) == {"/": "failed", **{f"p{i}": "failed" for i in range(1, 6)}}

    down["robots"] = False
    await crawl.arun([changing.url("/")])
    assert await feed(crawl) == {"/": "unchanged", **{f"p{i}": "unchanged" for i in range(1, 6)}}
    assert len(await dataset.items()) == 6  # no handler ran again: no item twice
    await frontier.aclose()


async def test_a_recrawl_while_the_host_refuses_connections_keeps_every_page_failed(tmp_path: Path) -> None:
    site = Site().start()
    changing = ChangingSite(site)
    changing.put("/", "Index", f"every page {FILLER}", [f"/p{i}" for i in range(1, 6)])
    for i in range(1, 6):
        changing.put(f"/p{i}", f"Page {i}", f"the words of page {i} {FILLER}", ["/"])
    frontier = SqliteFrontier(tmp_path / "state.db")
    crawl = crawler(frontier, retry=RetryPolicy(attempts=1))
    await crawl.arun([changing.url("/")])
    site.stop()  # the port now refuses every connection

    await crawl.arun([changing.url("/")])

    # A host that cannot be reached is no evidence that its pages are gone.
    assert await feed(crawl) == {"/": "failed", **{f"p{i}": "failed" for i in range(1, 6)}}
    await frontier.aclose()


async def test_a_revisit_the_request_budget_left_unsent_is_failed_and_keeps_its_state(
    site: Site, frontier: Frontier
) -> None:
    changing = ChangingSite(site)
    changing.put("/", "Index", f"every page {FILLER}", ["/p1"])
    changing.put("/p1", "Page 1", f"the words of page 1 {FILLER}", ["/"])
    crawl = crawler(frontier)
    await crawl.arun([changing.url("/")])

    def moved(request: Request) -> Reply:
        return 301, {"Location": "/p1-moved"}, b""

    site.route("/p1", moved)  # the revisit of /p1 needs one more request, its redirect's hop
    crawl.max_requests = 3  # robots.txt, / and /p1: the hop is not sent
    await crawl.arun([changing.url("/")])
    assert (await feed(crawl))["p1"] == "failed"  # the budget says nothing of the page: not gone

    changing.put("/p1", "Page 1", f"the words of page 1 {FILLER}", ["/"])  # it answers again, as it was
    crawl.max_requests = None
    await crawl.arun([changing.url("/")])
    assert (await feed(crawl))["p1"] == "unchanged"  # its state was kept: compared with the first crawl's
    await frontier.aclose()
