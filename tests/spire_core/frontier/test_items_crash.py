"""A crawl whose items live beside its SQLite frontier, SIGKILLed at random instants: no item lost or doubled."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import anyio
import pytest
from pydantic import BaseModel

from spire_core import SqliteFrontier
from tests.sites.server import Site, binary_tree
from tests.spire.test_cli import wait_for

CRAWL = Path(__file__).with_name("items_crawl.py")
REPO = Path(__file__).parents[3]
PAGES = 300
KILLS = 5


class Page(BaseModel):
    url: str
    links: int


def start(path: Path, root: str, processes: int = 1) -> subprocess.Popen[str]:
    command = [sys.executable, str(CRAWL), str(path), root, str(processes)]
    return subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


async def stored(path: Path) -> Counter[str]:
    async with SqliteFrontier(path) as frontier:
        return Counter([page.url async for page in frontier.dataset(Page)])


def running_with(path: Path) -> list[int]:
    """The processes whose command line names ``path``: the crawl, and its workers and forker."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and str(path).encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue  # it exited while we looked
    return found


@pytest.mark.parametrize("processes", [1, 2])
def test_killed_at_random_instants_the_crawl_ends_with_every_pages_item_stored_once(
    site: Site, tmp_path: Path, processes: int
) -> None:
    root = binary_tree(site, PAGES, delay=0.02)
    path = tmp_path / "crawl.db"
    rng = random.Random(11)
    counted = threading.Lock()
    kills = 0
    for _ in range(KILLS):
        before = len(site.requests)
        crawl = start(path, root, processes)
        try:
            # Past its start-up (it has fetched a page of this run), then a random instant later.
            deadline = threading.Event()
            while len(site.requests) <= before and crawl.poll() is None:
                deadline.wait(0.01)  # polling the child's progress, not timing a behaviour
            deadline.wait(rng.uniform(0.0, 0.6))
            if crawl.poll() is None:
                crawl.send_signal(signal.SIGKILL)
                with counted:
                    kills += 1
            crawl.communicate(timeout=30)
            # Its workers (with processes=2) notice the crawl's process is gone, and exit.
            wait_for(lambda: not running_with(path), within=10)
        finally:
            if crawl.poll() is None:
                crawl.kill()
                crawl.communicate()
    assert kills >= 3, "the crawl finished before most kills: make the site slower"

    last = start(path, root, processes)
    _, err = last.communicate(timeout=120)
    assert last.returncode == 0, err
    items = anyio.run(stored, path)
    assert set(items) == {site.url(f"/page/{i}") for i in range(PAGES)}  # none lost
    assert set(items.values()) == {1}  # none doubled, whatever instant each kill hit
