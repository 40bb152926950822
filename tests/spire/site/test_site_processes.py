"""The site crawl on worker processes: the same pages kept, the same skips, the limit exact."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import spire
from spire.site import SkipReason
from tests.sites.server import Site
from tests.spire.site.helpers import FAST, collect, page, paths, robots, urls_of

pytestmark = pytest.mark.anyio

WORDS = " ".join(f"word{number}" for number in range(30))  # long enough to be compared as a copy


def serve_site(site: Site) -> None:
    """60 pages in a chain of fans, a copy naming its original as canonical, a near-duplicate, a
    disallowed folder."""
    robots(site, "User-agent: *\nDisallow: /private/\n")
    links = [f"/p{n}" for n in range(60)]
    site.page("/", page("home", *links, "/copy", "/twin", "/private/x"))
    for n in range(60):
        site.page(f"/p{n}", page(f"page {n}", f"/p{(n + 1) % 60}", body=f"{WORDS} page{n}"))
    site.page("/copy", page("copy", head='<link rel="canonical" href="/p1">'))
    site.page("/twin", page("page 7", "/p8", body=f"{WORDS} page7"))  # the same words as /p7
    site.page("/private/x", page("secret"))


async def test_two_processes_keep_the_pages_one_process_keeps(site: Site) -> None:
    serve_site(site)
    one = spire.crawl(site.url("/"), host_limits=FAST)
    kept_one, _ = await collect(one)
    two = spire.crawl(site.url("/"), host_limits=FAST, processes=2)
    kept_two, _ = await collect(two)
    assert urls_of(kept_two) == urls_of(kept_one)
    assert len(kept_two) == 61  # home and the 60 pages: the copy and the twin are not kept
    for reason in (SkipReason.CANONICAL, SkipReason.NEAR_DUPLICATE, SkipReason.ROBOTS):
        assert two.stats.skipped(reason) == one.stats.skipped(reason) == 1
    assert "/private/x" not in paths(site)


async def test_the_limit_is_exact_across_processes(site: Site) -> None:
    serve_site(site)
    crawl = spire.crawl(site.url("/"), host_limits=FAST, limit=10, processes=2)
    kept, _ = await collect(crawl)
    assert len(kept) == 10
    assert crawl.stats.pages == 10


def test_spire_crawl_with_processes_writes_each_page_once(site: Site, tmp_path: Path) -> None:
    serve_site(site)
    out = tmp_path / "pages.jsonl"
    command = [sys.executable, "-m", "spire", "crawl", site.url("/"), "-o", str(out), "--processes", "2"]
    command += ["--max-in-flight", "4", "--per-second", "0", "--progress", "none"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    urls = [json.loads(line)["url"] for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(urls) == len(set(urls)) == 61
