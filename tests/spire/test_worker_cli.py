"""``spire worker``: processes sharing one crawl through a real redis-server, and a clean SIGTERM."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from spire.cli import main
from tests.redis_server import RedisServer, start_redis
from tests.sites.server import Reply, Request, Site, binary_tree

pytest.importorskip("redis")


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    yield from start_redis()


@pytest.fixture
def crawl_name(request: pytest.FixtureRequest) -> str:
    """A crawl name of its own for each test: workers of one test never see another test's keys."""
    return f"test-{request.node.name}"


SCRIPT = """\
import os
from pathlib import Path

from spire import HostLimits, Html, Links, Router, Url

OUT = Path({out!r})
{limits}
OUT.joinpath(f"started-{{os.getpid()}}").touch()
router = Router()


@router.default
async def page(html: Html, links: Links, url: Url) -> None:
    await links.follow(html.css("a::attr(href)").getall())
    with OUT.joinpath(f"handled-{{os.getpid()}}").open("a") as handled:
        handled.write(url + "\\n")
"""


def write_script(tmp_path: Path, limits: str = "") -> Path:
    """A script whose handler follows every link and writes each URL it handled to a file of its process;
    ``limits`` may set its ``host_limits``."""
    out = tmp_path / "out"
    out.mkdir()
    script = tmp_path / "tree.py"
    script.write_text(SCRIPT.format(out=str(out), limits=limits))
    return script


def handled_by_worker(tmp_path: Path) -> dict[str, list[str]]:
    """The URLs each worker process handled, by process id."""
    return {
        path.name.removeprefix("handled-"): path.read_text().splitlines()
        for path in sorted((tmp_path / "out").glob("handled-*"))
    }


def start_worker(redis_url: str, script: Path, name: str, *args: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "spire.cli", "worker", "--redis", redis_url, str(script), "--name", name, *args]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def stats_of(stderr: str) -> dict[str, str]:
    """The ``key=value`` fields of the stats line (the last line a worker writes)."""
    return dict(re.findall(r"([\w.]+)=(\S+)", stderr.strip().splitlines()[-1]))


def wait_for(condition: object, *, within: float) -> None:
    """Poll ``condition`` (a callable) until it holds, failing after ``within`` seconds."""
    deadline = time.monotonic() + within
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {within} s")
        time.sleep(0.02)


def finish(process: subprocess.Popen[str], *, within: float = 30) -> str:
    try:
        _, stderr = process.communicate(timeout=within)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return stderr


def test_two_workers_share_one_crawl_each_page_fetched_once_and_both_exit_0(
    site: Site, redis_server: RedisServer, crawl_name: str, tmp_path: Path
) -> None:
    root = binary_tree(site, 100, delay=0.02)
    # The host takes 8 at once, shared by the fleet: room for both workers' 4 slots.
    script = write_script(tmp_path, "host_limits = HostLimits(max_in_flight=8)")
    started = tmp_path / "out"

    def root_when_both_started(request: Request) -> Reply:
        # The root answers once both workers have loaded the script, so the second one cannot
        # arrive after the first has crawled everything.
        wait_for(lambda: len(list(started.glob("started-*"))) >= 2, within=20)
        return 200, {"Content-Type": "text/html"}, b'<a href="/page/1">1</a> <a href="/page/2">2</a>'

    site.route("/page/0", root_when_both_started)
    # Both with the same seed: the second push of it is a duplicate.
    workers = [
        start_worker(redis_server.url, script, crawl_name, "--seed", root, "--concurrency", "4") for _ in range(2)
    ]
    errors = [finish(worker) for worker in workers]

    assert [worker.returncode for worker in workers] == [0, 0], errors
    hits = site.hits()
    assert set(hits) == {f"/page/{i}" for i in range(100)}
    assert set(hits.values()) == {1}  # every page fetched exactly once, across both workers
    handled = handled_by_worker(tmp_path)
    assert len(handled) == 2
    assert all(urls for urls in handled.values())  # both did some of the work
    assert Counter(url for urls in handled.values() for url in urls) == Counter(site.url(path) for path in hits)
    stats = [stats_of(stderr) for stderr in errors]
    assert all(int(line["finished"]) > 0 for line in stats)
    assert sum(int(line["finished"]) for line in stats) == 100
    assert sum(int(line.get("skipped.duplicate", "0")) for line in stats) >= 1  # the second push of the root


def test_a_worker_stopped_by_sigterm_hands_back_its_leases_and_another_finishes_the_crawl(
    site: Site, redis_server: RedisServer, crawl_name: str, tmp_path: Path
) -> None:
    redis = pytest.importorskip("redis")
    root = binary_tree(site, 60, delay=0.2)
    script = write_script(tmp_path)
    first = start_worker(redis_server.url, script, crawl_name, "--seed", root, "--concurrency", "4")
    try:
        wait_for(lambda: sum(map(len, handled_by_worker(tmp_path).values())) >= 5, within=20)
        first.send_signal(signal.SIGTERM)
        stderr = finish(first, within=10)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 128 + signal.SIGTERM, stderr
    first_stats = stats_of(stderr)
    assert int(first_stats["finished"]) < 60  # it stopped rather than finishing the crawl
    assert "errors.shut_down" in first_stats  # requests in flight were stopped, not finished
    client = redis.Redis.from_url(redis_server.url)
    try:
        assert client.zcard(f"{crawl_name}:leases") == 0  # every lease went back at once
        assert client.get(f"{crawl_name}:queued") not in (None, b"0")  # and work is left
    finally:
        client.close()
    handled_first = {url for urls in handled_by_worker(tmp_path).values() for url in urls}

    second = start_worker(redis_server.url, script, crawl_name, "--seed", root)  # the same seed: a duplicate now
    assert second.wait(timeout=30) == 0, finish(second)
    everything = {site.url(f"/page/{i}") for i in range(60)}
    assert set(site.hits()) == {f"/page/{i}" for i in range(60)}  # every page fetched
    handled = handled_by_worker(tmp_path)
    assert {url for urls in handled.values() for url in urls} == everything
    assert str(second.pid) in handled
    assert everything - handled_first <= set(handled[str(second.pid)])


def test_a_worker_that_loses_redis_mid_crawl_exits_2_with_the_error_not_a_traceback(
    site: Site, redis_server: RedisServer, tmp_path: Path
) -> None:
    own = RedisServer(redis_server.binary, redis_server.directory).start()
    try:
        root = binary_tree(site, 40, delay=0.2)
        script = write_script(tmp_path)
        worker = start_worker(own.url, script, "lost", "--seed", root, "--concurrency", "2")
        try:
            wait_for(lambda: bool(handled_by_worker(tmp_path)), within=20)
            own.stop()
            stderr = finish(worker, within=15)
        finally:
            if worker.poll() is None:
                worker.kill()
    finally:
        own.stop()
    assert worker.returncode == 2, stderr
    assert f"spire: lost the Redis frontier at {own.url}" in stderr
    assert "Traceback" not in stderr


def test_a_worker_that_cannot_reach_redis_exits_2_with_a_message(
    dead_port: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = write_script(tmp_path)
    url = f"redis://127.0.0.1:{dead_port}/0"
    assert main(["worker", "--redis", url, str(script)]) == 2
    assert "spire: cannot use the Redis frontier at" in capsys.readouterr().err


def test_a_worker_refuses_a_script_without_a_router(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "empty.py"
    script.write_text("x = 1\n")
    assert main(["worker", "--redis", "redis://127.0.0.1:1/0", str(script)]) == 2
    assert "router" in capsys.readouterr().err
