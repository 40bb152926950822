"""``spire crawl --state FILE``: the same command after a kill -9 resumes and appends, writing no page twice."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

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
    written_first = len(out.read_text(encoding="utf-8").splitlines())
    assert 0 < written_first < PAGES
    second = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    urls = [json.loads(line)["url"] for line in out.read_text(encoding="utf-8").splitlines()]
    assert sorted(urls) == sorted(site.url(f"/p{i}") for i in range(PAGES))  # every page once, none twice
    refetched = [path for path, count in site.hits().items() if count > 1]
    assert len(refetched) <= 4, refetched  # only what was in flight at the kill was asked again


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
