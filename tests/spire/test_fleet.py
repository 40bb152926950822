"""A fleet of ``spire worker`` processes on a real redis-server: nothing lost, nothing stored twice.

Workers are killed with SIGKILL, Redis is restarted under them; each page's item is stored once in
the crawl's Redis stream, and the host limits of the script hold across every process.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from spire.cli import main
from tests.redis_server import RedisServer, start_redis
from tests.sites.server import Reply, Request, Site

redis = pytest.importorskip("redis")


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    yield from start_redis()


@pytest.fixture
def crawl_name(request: pytest.FixtureRequest) -> str:
    return f"fleet-{request.node.name}"


SCRIPT = """\
import os
from pathlib import Path

from pydantic import BaseModel

from spire import Dataset, HostLimits, Html, Links, Router, Url

OUT = Path({out!r})
host_limits = {limits}
router = Router()


class Page(BaseModel):
    url: str
    worker: int


@router.default
async def page(html: Html, links: Links, url: Url, pages: Dataset[Page]) -> None:
    await links.follow(html.css("a::attr(href)").getall())
    await pages.push(Page(url=url, worker=os.getpid()))
    with OUT.joinpath(f"handled-{{os.getpid()}}").open("a") as handled:
        handled.write(url + "\\n")
"""


def write_script(tmp_path: Path, limits: str = "HostLimits(max_in_flight=4)") -> Path:
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    script = tmp_path / "fleet.py"
    script.write_text(SCRIPT.format(out=str(out), limits=limits))
    return script


def handled(tmp_path: Path) -> int:
    return sum(len(path.read_text().splitlines()) for path in (tmp_path / "out").glob("handled-*"))


def start_worker(redis_url: str, script: Path, name: str, *args: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "spire.cli", "worker", "--redis", redis_url, str(script), "--name", name, *args]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def wait_for(condition: object, *, within: float) -> None:
    deadline = time.monotonic() + within
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {within} s")
        time.sleep(0.02)  # polling a child process's progress, not timing a behaviour


def finish(process: subprocess.Popen[str], *, within: float = 60) -> str:
    try:
        _, stderr = process.communicate(timeout=within)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return stderr


def stored_items(redis_url: str, name: str) -> Counter[str]:
    """How many times each URL's item is in the crawl's ``page`` stream."""
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        entries = client.xrange(f"{name}:items:page")
    finally:
        client.close()
    return Counter(json.loads(fields["item"])["url"] for _, fields in entries)


def tree(site: Site, pages: int, *, delay: float) -> tuple[str, dict[str, list[float]]]:
    """A binary tree of ``pages`` pages answered ``delay`` late; returns its root and, per path,
    the times each fetch of it began."""
    fetched: dict[str, list[float]] = {}
    lock = threading.Lock()

    def route(i: int) -> None:
        links = "".join(f'<a href="/page/{c}">{c}</a>' for c in (2 * i + 1, 2 * i + 2) if c < pages)
        body = f"<html><body>{links}</body></html>".encode()

        def reply(request: Request) -> Reply:
            with lock:
                fetched.setdefault(request.path, []).append(time.monotonic())
            time.sleep(delay)  # the server is slow; the test never sleeps
            return 200, {"Content-Type": "text/html"}, body

        site.route(f"/page/{i}", reply)

    for i in range(pages):
        route(i)
    return site.url("/page/0"), fetched


def test_four_workers_one_killed_mid_crawl_every_page_crawled_and_its_item_stored_once(
    site: Site, redis_server: RedisServer, crawl_name: str, tmp_path: Path
) -> None:
    pages, ttl, concurrency = 150, 2.0, 2
    root, fetched = tree(site, pages, delay=0.05)
    script = write_script(tmp_path, "HostLimits(max_in_flight=8)")
    seed = ("--seed", root, "--concurrency", str(concurrency), "--lease-ttl", str(ttl))
    workers = [start_worker(redis_server.url, script, crawl_name, *seed) for _ in range(4)]
    try:
        wait_for(lambda: handled(tmp_path) >= 30, within=30)
        victim = workers[0]
        victim.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        errors = [finish(worker) for worker in workers[1:]]
        victim.wait(timeout=10)
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
    assert [worker.returncode for worker in workers[1:]] == [0, 0, 0], errors
    everything = {site.url(f"/page/{i}") for i in range(pages)}
    items = stored_items(redis_server.url, crawl_name)
    assert set(items) == everything  # every page crawled, its item stored
    assert set(items.values()) == {1}  # and stored once, the killed worker's in-flight pages too
    twice = {path: times for path, times in fetched.items() if len(times) > 1}
    assert len(twice) <= concurrency  # only what the killed worker had in flight was fetched again
    assert all(len(times) == 2 for times in twice.values())
    for times in twice.values():
        # Reclaimed once its lease lapsed: within the TTL of the kill, plus a poll (0.5 s) and the time
        # a loaded machine takes to start the fetch; far from the 60 s default.
        assert times[1] - killed_at <= ttl + 2.5


def test_a_page_slower_than_the_lease_ttl_is_fetched_once_its_lease_renewed_while_it_runs(
    site: Site, redis_server: RedisServer, crawl_name: str, tmp_path: Path
) -> None:
    root, _ = tree(site, 3, delay=0.0)
    slow_path = "/page/1"
    site.page(slow_path, "<html><body>slow</body></html>", delay=3.0)  # three TTLs of the workers below
    script = write_script(tmp_path)
    workers = [start_worker(redis_server.url, script, crawl_name, "--seed", root, "--lease-ttl", "1") for _ in range(2)]
    errors = [finish(worker) for worker in workers]
    assert [worker.returncode for worker in workers] == [0, 0], errors
    assert site.hits()[slow_path] == 1
    assert stored_items(redis_server.url, crawl_name)[site.url(slow_path)] == 1


def test_the_scripts_host_limits_hold_across_worker_processes(
    site: Site, redis_server: RedisServer, crawl_name: str, tmp_path: Path
) -> None:
    root, _ = tree(site, 60, delay=0.05)
    script = write_script(tmp_path, "HostLimits(max_in_flight=2)")
    workers = [
        start_worker(redis_server.url, script, crawl_name, "--seed", root, "--concurrency", "4") for _ in range(2)
    ]
    errors = [finish(worker) for worker in workers]
    assert [worker.returncode for worker in workers] == [0, 0], errors
    assert len(stored_items(redis_server.url, crawl_name)) == 60
    # One cap for the host, whatever the number of workers (it was 2 x 4): each worker's robots.txt
    # read takes a slot of the shared cap too.
    assert site.peak <= 2
    assert max(site.hits().values()) == 1


def test_redis_restarted_with_aof_mid_crawl_loses_nothing(
    site: Site, redis_server: RedisServer, tmp_path: Path, crawl_name: str
) -> None:
    data = tmp_path / "redis"
    data.mkdir()
    server = RedisServer(redis_server.binary, str(data), aof=True).start()
    pages = 120
    try:
        root, _ = tree(site, pages, delay=0.05)
        script = write_script(tmp_path)
        seed = ("--seed", root, "--concurrency", "2", "--lease-ttl", "2")
        first = [start_worker(server.url, script, crawl_name, *seed) for _ in range(2)]
        wait_for(lambda: handled(tmp_path) >= 20, within=30)
        server.restart()
        # A worker that lost Redis exits with the error (or rides out the blip, when it retries);
        # workers started after the restart finish whatever is left.
        for worker in first:
            finish(worker)
        assert all(worker.returncode in (0, 2) for worker in first)
        second = [start_worker(server.url, script, crawl_name, *seed) for _ in range(2)]
        errors = [finish(worker) for worker in second]
        assert [worker.returncode for worker in second] == [0, 0], errors
        items = stored_items(server.url, crawl_name)
        assert set(items) == {site.url(f"/page/{i}") for i in range(pages)}  # nothing lost
        assert set(items.values()) == {1}  # nothing stored twice
    finally:
        server.stop()


def test_status_shows_the_crawls_progress_across_its_workers(
    site: Site, redis_server: RedisServer, crawl_name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, _ = tree(site, 40, delay=0.0)
    script = write_script(tmp_path)
    worker = start_worker(redis_server.url, script, crawl_name, "--seed", root)
    assert worker.wait(timeout=60) == 0, finish(worker)
    assert main(["status", "--redis", redis_server.url, "--name", crawl_name]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "queued=0 delayed=0 in_flight=0 done=40 failed=0 workers=0"


def test_status_of_an_unreachable_redis_is_a_clear_error(dead_port: int, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"redis://127.0.0.1:{dead_port}/0"
    assert main(["status", "--redis", url]) == 2
    assert f"spire: cannot use the Redis frontier at {url}" in capsys.readouterr().err


def test_a_worker_refuses_a_lease_ttl_that_is_not_positive(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = write_script(tmp_path)
    assert main(["worker", "--redis", "redis://127.0.0.1:1/0", str(script), "--lease-ttl", "0"]) == 2
    assert "--lease-ttl must be positive" in capsys.readouterr().err
