"""``processes=N``: worker processes sharing one frontier, one host gate and one seen set.

Real forked processes against a real local server; one worker is killed with SIGKILL mid-crawl.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import anyio
import httpx
import pytest
from pydantic import BaseModel, create_model

from spire import BodyStream, Crawler, Dataset, Html, Links, Response, Router, Seed, SeedInfo, Url
from spire_core.admission import CrawlPolicy
from spire_core.backend.http import HttpBackend
from spire_core.context import Context
from spire_core.errors import ConfigError, RobotsDisallowed
from spire_core.limits import HostLimits
from tests.sites.server import Reply, Request, Site, binary_tree


class Visit(BaseModel):
    url: str
    pid: int


def visits(crawler: Crawler) -> list[Visit]:
    async def read() -> list[Visit]:
        return [visit async for visit in crawler.dataset(Visit)]

    return anyio.run(read)


def tree_router(*, kill_at: str | None = None, flag: Path | None = None, handled: Path | None = None) -> Router:
    """Each page stores a visit (with the handling process's pid) and queues its links.

    With ``kill_at``, the first worker to handle that page kills itself with SIGKILL (once: ``flag``).
    With ``handled``, each handler call appends its URL to that file first, whatever becomes of it.
    """
    router = Router()

    @router.default
    async def page(html: Html, links: Links, url: Url, visits: Dataset[Visit]) -> None:
        if handled is not None:
            fd = os.open(handled, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            os.write(fd, f"{url}\n".encode())  # one small append: whole even when the process dies next
            os.close(fd)
        await visits.push(Visit(url=url, pid=os.getpid()))
        await links.enqueue()
        if kill_at is not None and url.endswith(kill_at) and flag is not None:
            try:
                os.close(os.open(flag, os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                return
            os.kill(os.getpid(), signal.SIGKILL)

    return router


def test_two_processes_crawl_2000_pages_exactly_once_under_one_host_limit(site: Site) -> None:
    root = binary_tree(site, 2000)
    crawler = Crawler(tree_router(), processes=2, concurrency=8, host_limits=HostLimits(max_in_flight=3), robots=False)
    stats = crawler.run([root])
    found = visits(crawler)
    assert stats.finished == 2000
    assert stats.failed == 0
    assert stats.requests == 2000
    assert stats.pages == 2000
    assert stats.items == 2000
    assert len(site.hits()) == 2000
    assert set(site.hits().values()) == {1}
    assert sorted(visit.url for visit in found) == sorted(site.url(f"/page/{i}") for i in range(2000))
    workers = {visit.pid for visit in found}
    assert len(workers) == 2
    assert os.getpid() not in workers
    assert site.peak <= 3  # the host limit held across both processes


@pytest.mark.parametrize("cap", ["max_requests", "max_requests_per_crawl"])
def test_the_request_caps_are_exact_across_processes(site: Site, cap: str) -> None:
    root = binary_tree(site, 500)
    if cap == "max_requests":
        crawler = Crawler(tree_router(), processes=2, concurrency=8, robots=False, max_requests=40)
    else:
        policy = CrawlPolicy(max_requests_per_crawl=40)
        crawler = Crawler(tree_router(), processes=2, concurrency=8, robots=False, policy=policy)
    stats = crawler.run([root])
    assert stats.finished == 40
    assert len(site.hits()) == 40
    assert len(visits(crawler)) == 40


def test_rate_spacing_holds_across_processes(site: Site) -> None:
    root = binary_tree(site, 15)
    limits = HostLimits(max_in_flight=2, per_second=10)
    stats = Crawler(tree_router(), processes=2, concurrency=4, host_limits=limits, robots=False).run([root])
    assert stats.finished == 15
    times = sorted(request.at for request in site.page_requests())
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert min(gaps) >= 0.09  # 10 a second: 0.1 s apart, with the server's clock's tolerance


def test_a_worker_killed_with_sigkill_loses_nothing_and_is_replaced(site: Site, tmp_path: Path) -> None:
    root = binary_tree(site, 2000)
    handled = tmp_path / "handled"
    router = tree_router(kill_at="/page/700", flag=tmp_path / "killed", handled=handled)
    # robots.txt on: the crawl's process has used its backend when the replacement starts, which
    # must not inherit that backend's connections (it is forked from the forker, as the first ones).
    crawler = Crawler(router, processes=2, concurrency=8)
    stats = crawler.run([root])
    found = visits(crawler)
    assert (tmp_path / "killed").exists()  # a worker did die
    assert stats.finished == 2000
    assert stats.failed == 0
    # The counts are exact, the dead worker's last ones included: every request the server saw, and
    # every page that reached a handler (a response the dead worker never read is not a page).
    assert stats.requests == sum(site.hits(robots=True).values())
    assert stats.pages == len(handled.read_text().splitlines()) > 2000
    urls = Counter(visit.url for visit in found)
    assert len(urls) == 2000
    assert set(urls.values()) == {1}
    twice = [path for path, count in site.hits().items() if count > 1]
    assert len(twice) <= 8  # at most the dead worker's pages in flight were fetched again
    assert len({visit.pid for visit in found}) == 3  # the replacement worker took over


def test_a_page_that_kills_every_worker_fails_as_worker_crashed(site: Site, tmp_path: Path) -> None:
    site.page("/", '<a href="/deadly">deadly</a><a href="/fine">fine</a>')
    site.page("/deadly", "boom")
    site.page("/fine", "fine")
    router = Router()
    failed: list[str] = []

    @router.default
    async def page(html: Html, links: Links, url: Url) -> None:
        await links.enqueue()
        if url.endswith("/deadly"):
            os.kill(os.getpid(), signal.SIGKILL)

    @router.failed
    async def on_failed(seed: SeedInfo) -> None:
        failed.append(seed.url)

    stats = Crawler(router, processes=2, robots=False).run([site.url("/")])
    assert stats.finished == 2
    assert stats.failed == 1
    assert stats.errors_by_category["worker"] == 1
    assert failed == [site.url("/deadly")]  # the failed hook runs, in the crawl's process
    assert site.hits()["/deadly"] == 3  # three workers died with it, then it failed


def test_a_handler_error_in_a_worker_fails_the_seed_with_its_traceback(
    site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    site.page("/", "<title>x</title>")
    router = Router()

    class Unpicklable(Exception):
        def __init__(self) -> None:  # a required-argument-free init that pickle cannot rebuild
            super().__init__("custom failure")
            self.handle = lambda: None

    @router.default
    async def page(response: Response) -> None:
        raise Unpicklable()

    stats = Crawler(router, processes=2, robots=False).run([site.url("/")])
    assert stats.failed == 1
    assert stats.errors_by_category["handler"] == 1
    logged = caplog.text
    assert "Unpicklable: custom failure" in logged
    assert "Traceback in worker process" in logged
    assert "raise Unpicklable()" in logged


def test_a_streaming_handler_that_raises_in_a_worker_fails_its_page_as_in_one_process(site: Site) -> None:
    site.page("/file", b"x" * 300_000, content_type="application/octet-stream")
    router = Router()
    heads: list[tuple[int, bytes]] = []

    @router.default
    async def save(body: BodyStream) -> None:
        await body.read()
        raise ValueError("the file is not what it should be")

    @router.failed
    async def failed(ctx: Context) -> None:
        response = await ctx.response()  # the head crossed; the body stream stayed in the worker
        heads.append((response.status, response.body))

    stats = Crawler(router, processes=2, robots=False).run([site.url("/file")])
    assert (stats.failed, stats.errors_by_category["handler"]) == (1, 1)
    assert heads == [(200, b"")]


def test_a_tag_typo_in_a_worker_stops_the_crawl_with_the_config_error(site: Site) -> None:
    site.page("/", '<a href="/a">a</a>')
    router = Router()

    @router.handler("detail")
    async def detail(html: Html, links: Links) -> None:
        await links.enqueue(tag="detial")

    with pytest.raises(ConfigError, match="detial"):
        Crawler(router, processes=2, robots=False).run([Seed(site.url("/"), tag="detail")])


#: A model whose class cannot be found by its name (as one made in a function): pickle cannot send it.
Hidden = create_model("Elsewhere", url=(str, ...))


def test_items_of_a_model_pickle_cannot_find_stop_the_crawl_naming_the_fix(site: Site) -> None:
    site.page("/", "<title>x</title>")
    router = Router()

    @router.default
    async def page(url: Url, found: Dataset[Hidden]) -> None:  # type: ignore[valid-type]
        await found.push({"url": url})

    with pytest.raises(ConfigError, match=r"define item models .* at module level"):
        Crawler(router, processes=2, robots=False).run([site.url("/")])


def test_robots_txt_is_obeyed_and_read_once_for_every_worker(site: Site) -> None:
    site.page("/robots.txt", "User-agent: *\nDisallow: /private\n", content_type="text/plain")
    site.page("/", "".join(f'<a href="/p{i}">p</a><a href="/private/{i}">x</a>' for i in range(20)))
    for i in range(20):
        site.page(f"/p{i}", "page")
        site.page(f"/private/{i}", "secret")
    stats = Crawler(tree_router(), processes=2).run([site.url("/")])
    assert stats.finished == 21
    assert stats.skipped("robots") == 20
    assert not [path for path in site.hits() if path.startswith("/private")]
    assert site.hits(robots=True)["/robots.txt"] == 1  # read by the crawl's process, for both workers


def downloading_crawler(
    site: Site, folder: Path, pages: int, *, also: Site | None = None, pids: Path | None = None, **options: object
) -> Crawler:
    """A crawl of ``/`` and its ``pages`` links; page ``/p{i}`` downloads ``/files/{i}`` (and ``also``'s
    ``/files/{i}``) into ``folder``; a download robots.txt keeps out leaves a ``refused-`` mark instead.
    With ``pids``, the handler of ``/p{i}`` writes its process's pid to ``pids / "p{i}"`` first."""
    site.page("/", "".join(f'<a href="/p{i}">p</a>' for i in range(pages)))
    for where in (site, also) if also is not None else (site,):
        for i in range(pages):
            where.page(f"/files/{i}", f"file {i}", content_type="text/plain")
    for i in range(pages):
        site.page(f"/p{i}", "page")
    router = Router()

    @router.default
    async def page(url: Url, links: Links) -> None:
        await links.enqueue()
        name = url.rsplit("/", 1)[1]
        if not name.startswith("p"):
            return
        if pids is not None:
            (pids / name).write_text(str(os.getpid()))
        for number, where in enumerate((site, also) if also is not None else (site,)):
            target = folder / f"{number}-{name}"
            try:
                await crawler.download(where.url(f"/files/{name[1:]}"), target)
            except RobotsDisallowed:
                (folder / f"refused-{number}-{name}").touch()

    crawler = Crawler(router, processes=2, concurrency=4, **options)  # type: ignore[arg-type]
    return crawler


def test_downloads_in_workers_obey_the_robots_txt_the_crawl_read_once(
    site: Site, other_site: Site, tmp_path: Path
) -> None:
    site.page("/robots.txt", "User-agent: *\nDisallow: /files/3\n", content_type="text/plain")
    other_site.page("/robots.txt", "User-agent: *\nDisallow: /files/5\n", content_type="text/plain")
    stats = downloading_crawler(site, tmp_path, 8, also=other_site).run([site.url("/")])
    assert stats.finished == 9
    assert site.hits(robots=True)["/robots.txt"] == 1  # read by the crawl's process, for its workers' downloads too
    assert other_site.hits(robots=True)["/robots.txt"] == 1  # an origin only downloads reach: read once as well
    assert "/files/3" not in site.hits()
    assert "/files/5" not in other_site.hits()
    assert sorted(path.name for path in tmp_path.glob("refused-*")) == ["refused-0-p3", "refused-1-p5"]
    assert len(list(tmp_path.glob("[01]-p*"))) == 14
    assert stats.requests == sum(site.hits(robots=True).values()) + sum(other_site.hits(robots=True).values())


def test_downloads_in_workers_are_traced_with_the_workers_request_ids(site: Site, tmp_path: Path) -> None:
    log_file = tmp_path / "trace.log"
    folder = tmp_path / "files"
    folder.mkdir()
    handler = logging.FileHandler(log_file)  # the forked workers inherit it and append to the same file
    trace = logging.getLogger("spire.trace")
    trace.addHandler(handler)
    trace.setLevel(logging.INFO)
    try:
        stats = downloading_crawler(site, folder, 10, robots=False).run([site.url("/")])
    finally:
        trace.removeHandler(handler)
        trace.setLevel(logging.NOTSET)
        handler.close()
    lines = [line for line in log_file.read_text().splitlines() if line.startswith("request id=")]
    fields = [dict(field.split("=", 1) for field in line.split()[1:]) for line in lines]
    ids = {line["url"]: line["id"] for line in fields}
    downloads = [request_id for url, request_id in ids.items() if "/files/" in url]
    pages = [request_id for url, request_id in ids.items() if "/p" in url]
    assert len(downloads) == len(pages) == 10
    workers = {request_id.split(".")[0] for request_id in pages}
    assert all("." in request_id and request_id.split(".")[0] in workers for request_id in downloads)
    assert len(lines) == len(set(ids.values())) == stats.requests == 21


def test_downloads_in_workers_hold_a_slot_of_the_crawls_host_limits(site: Site, tmp_path: Path) -> None:
    crawler = downloading_crawler(site, tmp_path, 8, robots=False, host_limits=HostLimits(max_in_flight=1))
    for i in range(8):
        site.page(f"/files/{i}", f"file {i}", content_type="text/plain", delay=0.05)  # slow: overlaps would show
    stats = crawler.run([site.url("/")])
    assert stats.finished == 9
    assert len(list(tmp_path.glob("0-p*"))) == 8
    assert site.peak == 1  # one request at a time, pages and both workers' downloads alike


def test_a_worker_killed_mid_download_gives_its_download_slot_back(site: Site, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    folder = tmp_path / "files"
    folder.mkdir()
    limits = HostLimits(max_in_flight=1)
    # The time budget ends a crawl whose origin is stuck with a slot held by no one, instead of hanging.
    crawler = downloading_crawler(site, folder, 6, pids=pids, robots=False, host_limits=limits, time_budget=20)

    def killing(request: Request) -> Reply:
        """The first request of ``/files/0`` kills the worker downloading it, its download's slot held."""
        try:
            os.close(os.open(tmp_path / "killed", os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return 200, {"Content-Type": "text/plain"}, b"file 0"
        os.kill(int((pids / "p0").read_text()), signal.SIGKILL)
        return 200, {"Content-Type": "text/plain"}, b"too late"

    site.route("/files/0", killing)
    stats = crawler.run([site.url("/")])
    assert (tmp_path / "killed").exists()
    assert stats.finished == 7  # the dead worker's slot went back: its page ran again, the others after it
    assert len(list(folder.glob("0-p*"))) == 6
    assert site.peak == 1


def test_downloads_in_workers_spend_the_crawls_request_budget(site: Site, tmp_path: Path) -> None:
    stats = downloading_crawler(site, tmp_path, 20, robots=False, max_requests=10).run([site.url("/")])
    assert sum(site.hits().values()) == stats.requests == 10
    assert list(tmp_path.glob("0-p*"))  # some downloads went out before the budget was spent


def test_a_redirect_to_a_page_already_seen_is_not_handled_twice(site: Site) -> None:
    site.page("/", '<a href="/old">old</a><a href="/new">new</a>')
    site.route("/old", lambda request: (301, {"Location": "/new"}, b""))
    site.page("/new", "new")
    stats = Crawler(tree_router(), processes=2, concurrency=1, robots=False).run([site.url("/")])
    assert site.hits()["/new"] == 1
    assert stats.finished + stats.skipped("duplicate") >= 3


def test_processes_auto_is_one_a_core_and_zero_is_refused() -> None:
    router = tree_router()
    assert Crawler(router, processes="auto").processes == len(os.sched_getaffinity(0))
    with pytest.raises(ConfigError, match="processes"):
        Crawler(router, processes=0)


def test_processes_under_trio_is_a_config_error_naming_asyncio(site: Site) -> None:
    site.page("/", "<title>x</title>")
    backend = HttpBackend(transport=httpx.AsyncHTTPTransport())  # the transport that runs under trio
    crawler = Crawler(tree_router(), processes=2, backend=backend, robots=False)
    with pytest.raises(ConfigError, match="asyncio"):
        anyio.run(crawler.arun, [site.url("/")], backend="trio")
    assert site.hits() == {}


def test_request_ids_are_unique_across_worker_processes(site: Site, tmp_path: Path) -> None:
    root = binary_tree(site, 200)
    log_file = tmp_path / "trace.log"
    handler = logging.FileHandler(log_file)  # the forked workers inherit it and append to the same file
    trace = logging.getLogger("spire.trace")
    trace.addHandler(handler)
    trace.setLevel(logging.INFO)
    try:
        stats = Crawler(tree_router(), processes=2, concurrency=8, robots=False).run([root])
    finally:
        trace.removeHandler(handler)
        trace.setLevel(logging.NOTSET)
        handler.close()
    ids = [line.split()[1] for line in log_file.read_text().splitlines() if line.startswith("request id=")]
    assert len(ids) == stats.requests == 200
    assert len(set(ids)) == len(ids)


BLOCKING_CRAWL = """
import os, sys, time
from spire import Crawler, Response, Router

router = Router()

@router.default
async def page(response: Response) -> None:
    open(os.path.join(sys.argv[2], str(os.getpid())), "w").close()
    time.sleep(120)  # blocks the worker's event loop: its own orphan check cannot run

Crawler(router, processes=2, concurrency=2, robots=False).run([sys.argv[1] + "/a", sys.argv[1] + "/b"])
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is dead, waiting to be reaped
    except FileNotFoundError:
        return False


def test_no_worker_outlives_a_crawl_killed_with_sigkill_even_when_its_loop_is_blocked(
    site: Site, tmp_path: Path
) -> None:
    site.page("/a", "a")
    site.page("/b", "b")
    script = tmp_path / "blocking.py"
    script.write_text(BLOCKING_CRAWL)
    marks = tmp_path / "pids"
    marks.mkdir()
    crawl = subprocess.Popen([sys.executable, str(script), site.url("").rstrip("/"), str(marks)])
    try:
        deadline = time.monotonic() + 30
        while not list(marks.iterdir()) and time.monotonic() < deadline and crawl.poll() is None:
            time.sleep(0.05)  # polling for a worker's mark, not timing anything
        workers = [int(mark.name) for mark in marks.iterdir()]
        assert workers  # a worker is blocked in its handler
        crawl.kill()
        crawl.wait(10)
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [pid for pid in workers if _alive(pid)]
    finally:
        if crawl.poll() is None:
            crawl.kill()
        for mark in marks.iterdir():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(mark.name), signal.SIGKILL)


def test_a_time_budget_stops_the_workers_at_once_with_their_last_counts(
    site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    root = binary_tree(site, 400, delay=0.05)
    crawler = Crawler(tree_router(), processes=2, concurrency=8, robots=False, time_budget=1.0)
    started = time.monotonic()
    stats = crawler.run([root])
    elapsed = time.monotonic() - started
    # A request sent just before the stop may still wait in the server's backlog: let the server read it.
    settled = time.monotonic() + 10
    while len(site.requests) < stats.requests and time.monotonic() < settled:
        time.sleep(0.01)  # polling the server's progress, not timing a behaviour
    assert 0 < stats.requests == len(site.requests)  # every request a worker sent is counted
    assert not [record for record in caplog.records if "died" in record.getMessage()]  # none taken for dead
    assert elapsed < 1.0 + 4.0  # the pool no longer waits out a dead worker's exit (5 s) on the way out


def test_a_worker_blocked_in_its_handler_does_not_outlive_run(site: Site, tmp_path: Path) -> None:
    site.page("/a", "a")
    marks = tmp_path / "pids"
    marks.mkdir()
    router = Router()

    @router.default
    async def page(response: Response) -> None:
        (marks / str(os.getpid())).touch()
        time.sleep(60)  # noqa: ASYNC251 - blocks the worker's event loop on purpose: it cannot answer a stop

    crawler = Crawler(router, processes=2, concurrency=2, robots=False, time_budget=1.0)
    started = time.monotonic()
    crawler.run([site.url("/a")])
    elapsed = time.monotonic() - started
    workers = [int(mark.name) for mark in marks.iterdir()]
    assert workers
    assert not [pid for pid in workers if _alive(pid)]  # killed, not left behind, when run() returns
    assert elapsed < 1.0 + 2.0 + 3.0  # the budget, the stop grace, and a loaded machine's slack
