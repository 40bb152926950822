"""The project's own test sites, on the public test kit (``spire.testing.LocalSite``)."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from spire.testing import LocalSite, Reply, Request, RouteFn

__all__ = ["Reply", "Request", "RouteFn", "Site", "binary_tree", "held_tree", "killed_when_held"]

#: The tests' name for the kit's local site.
Site = LocalSite


def binary_tree(site: Site, pages: int = 100, *, prefix: str = "/page/", delay: float = 0.0) -> str:
    """Serve a binary tree of ``pages`` pages (page i links to 2i+1 and 2i+2); return the root URL."""
    for i in range(pages):
        links = "".join(f'<a href="{prefix}{c}">page {c}</a>\n' for c in (2 * i + 1, 2 * i + 2) if c < pages)
        site.page(f"{prefix}{i}", f"<html><head><title>Page {i}</title></head><body>{links}</body></html>", delay=delay)
    return site.url(f"{prefix}0")


def held_tree(
    site: Site,
    pages: int,
    *,
    hold_from: int,
    reached: threading.Event,
    released: threading.Event,
    prefix: str = "/page/",
    delay: float = 0.0,
) -> str:
    """Serve a binary tree of ``pages`` pages whose answers, from request ``hold_from`` on, wait for
    ``released`` (set ``reached`` first): a crawl killed then dies with those requests in flight.

    Each page has its own words, so no two are near-duplicates. Returns the root URL.
    """
    lock = threading.Lock()
    served = 0

    def route(i: int) -> None:
        links = "".join(f'<a href="{prefix}{c}">page {c}</a>' for c in (2 * i + 1, 2 * i + 2) if c < pages)
        body = (
            f"<html><head><title>Page {i}</title></head>"
            f"<body><p>the words of page number {i} differ</p>{links}</body></html>"
        ).encode()

        def reply(request: Request) -> Reply:
            nonlocal served
            with lock:
                served += 1
                count = served
            if count >= hold_from:
                reached.set()
                released.wait(timeout=30)  # held in flight: the crawl dies with this request unanswered
            time.sleep(delay)  # the server is slow; the test itself never sleeps
            return 200, {"Content-Type": "text/html; charset=utf-8"}, body

        site.route(f"{prefix}{i}", reply)

    for i in range(pages):
        route(i)
    return site.url(f"{prefix}0")


def killed_when_held(
    command: Sequence[str],
    *,
    reached: threading.Event,
    released: threading.Event,
    cwd: Path,
    settled: Callable[[], bool] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``command`` until a ``held_tree`` holds its requests (``reached``), kill it with SIGKILL
    there, then let the tree answer again (``released``): a crawl that died with pages in flight.

    With ``settled``, the kill waits until it holds too (say, every page answered before the hold is
    written): on a busy machine the crawl may still be handling pages the server answered long ago.
    """
    crawl = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert reached.wait(timeout=60), "the crawl never reached the kill point"
        if settled is not None:
            deadline = time.monotonic() + 20  # well within the 30 s the held requests wait
            while not settled():
                assert time.monotonic() < deadline, "the crawl never settled at the kill point"
                time.sleep(0.01)  # polling the child's progress, not timing a behaviour
        crawl.send_signal(signal.SIGKILL)
        _, stderr = crawl.communicate(timeout=30)
    finally:
        if crawl.poll() is None:
            crawl.kill()
            crawl.wait()
        released.set()
    return subprocess.CompletedProcess(list(command), crawl.returncode, "", stderr)
