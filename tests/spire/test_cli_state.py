"""``spire crawl --state FILE``: the same command after a kill -9 resumes and appends, writing no page twice."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.sites.server import Site, held_tree, killed_when_held

REPO = Path(__file__).parents[2]
PAGES = 40
KILL_AFTER = 15


def test_a_killed_crawl_with_state_resumes_and_appends_without_duplicates(site: Site, tmp_path: Path) -> None:
    reached, killed = threading.Event(), threading.Event()
    held_tree(site, PAGES, hold_from=KILL_AFTER, reached=reached, released=killed, prefix="/p")
    out, state = tmp_path / "pages.jsonl", tmp_path / "crawl.sqlite"
    command = [
        sys.executable, "-m", "spire", "crawl", site.url("/p0"), "-o", str(out), "--state", str(state),
        "--max-in-flight", "4", "--per-second", "0", "--progress", "none",
    ]  # fmt: skip

    def wrote_every_answered_page() -> bool:
        return out.exists() and len(out.read_text(encoding="utf-8").splitlines()) >= KILL_AFTER - 1

    # Killed once it has written every page answered before the hold: only the held requests are in
    # flight then (a site crawl handles 16 seeds at once, and a busy machine may lag behind its answers).
    killed_when_held(command, reached=reached, released=killed, cwd=REPO, settled=wrote_every_answered_page)
    first_urls = [json.loads(line)["url"] for line in out.read_text(encoding="utf-8").splitlines()]
    assert 0 < len(first_urls) < PAGES
    second = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    urls = [json.loads(line)["url"] for line in out.read_text(encoding="utf-8").splitlines()]
    assert sorted(urls) == sorted(site.url(f"/p{i}") for i in range(PAGES))  # every page once, none twice
    refetched = [site.url(path) for path, count in site.hits().items() if count > 1]
    unwritten = [url for url in refetched if url not in first_urls]
    assert len(unwritten) <= 4, unwritten  # only what was in flight at the kill was asked again,
    # and pages written whose report had not yet been committed (a site crawl handles 16 at once).
    assert set(refetched) - set(unwritten) <= set(first_urls[-16:]), refetched


def test_rerunning_a_finished_crawl_exits_0_saying_it_is_complete(site: Site, tmp_path: Path) -> None:
    site.page("/", "<title>home</title><a href='/a'>a</a>")
    site.page("/a", "<title>a</title>")
    out, state = tmp_path / "pages.jsonl", tmp_path / "crawl.sqlite"
    command = [
        sys.executable, "-m", "spire", "crawl", site.url("/"), "-o", str(out), "--state", str(state),
        "--per-second", "0", "--progress", "none",
    ]  # fmt: skip
    first = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    assert f"wrote 2 records to {out}" in first.stderr
    again = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert again.stderr.strip().splitlines()[-1] == (
        f"spire: the crawl in {state} is complete: nothing left to crawl (--recrawl crawls it again for what "
        "changed; delete it to start over)"
    )
    assert f"wrote 0 records to {out}" in again.stderr
    assert len(out.read_text(encoding="utf-8").splitlines()) == 2


def lines_in(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def killed_once_it_wrote(command: list[str], out: Path, lines: int, rng: random.Random) -> None:
    """Run ``command`` until ``out`` holds ``lines`` lines, then SIGKILL it a random moment (0-20 ms) after."""
    crawl = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while lines_in(out) < lines and crawl.poll() is None:
            assert time.monotonic() < deadline, "the crawl never wrote that far"
            time.sleep(0.005)  # polling the child's progress, not timing a behaviour
        time.sleep(rng.uniform(0, 0.02))  # a random point of the crawl, not just after a write
        crawl.send_signal(signal.SIGKILL)
    finally:
        crawl.kill()
        crawl.wait()


@pytest.mark.slow
@pytest.mark.parametrize("processes", ["1", "2"])
def test_a_crawl_killed_again_and_again_writes_every_page_it_kept_exactly_once(
    site: Site, tmp_path: Path, processes: str
) -> None:
    pages, kills = 1500, 7
    for i in range(pages):
        links = "".join(f'<a href="/p{c}">p{c}</a>' for c in range(10 * i + 1, 10 * i + 11) if c < pages)
        site.page(f"/p{i}", f"<html><head><title>P{i}</title></head><body><p>page {i}</p>{links}</body></html>")
    out, state = tmp_path / "pages.jsonl", tmp_path / "crawl.sqlite"
    command = [
        sys.executable, "-m", "spire", "crawl", site.url("/p0"), "-o", str(out), "--state", str(state),
        "--max-in-flight", "16", "--per-second", "0", "--progress", "none", "--processes", processes,
    ]  # fmt: skip
    rng = random.Random(31)
    for _ in range(kills):  # each kill lands a random 40-160 pages after the one before
        killed_once_it_wrote(command, out, lines_in(out) + rng.randint(40, 160), rng)
    assert lines_in(out) < pages  # killed mid-crawl every time
    last = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=180)
    assert last.returncode == 0, last.stderr
    urls = [json.loads(line)["url"] for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(urls) == len(set(urls)), "a page was written twice"
    assert set(urls) == {site.url(f"/p{i}") for i in range(pages)}, "a page the state settled as kept is missing"
