"""A site crawl against a server asking for a wait far past the retry policy's ``max_wait`` fails the
page at once (``retry_wait``), as a Router crawl does, instead of waiting the capped wait on every try."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
import pytest

import spire
from tests.sites.server import Site
from tests.spire.site.helpers import FAST, collect, page, page_paths, paths, robots


@pytest.mark.anyio
async def test_a_429_asking_for_a_day_fails_the_page_at_once(site: Site) -> None:
    site.page("/", "slow down", status=429, headers={"Retry-After": "99999"})
    crawl = spire.crawl(site.url("/"), host_limits=FAST)
    with anyio.fail_after(30):  # before: five minutes a try, 40 minutes and more in all
        pages, errors = await collect(crawl)
    assert pages == []
    assert [(error.url, error.category) for error in errors] == [(site.url("/"), "retry_wait")]
    assert page_paths(site).count("/") == 1


def spire_crawl(site: Site, out: Path) -> subprocess.CompletedProcess[str]:
    """``spire crawl`` of ``site`` with its defaults, bounded: before, it ran 300 s or with no end."""
    command = [sys.executable, "-m", "spire.cli", "crawl", site.url("/"), "-o", str(out), "--progress", "none"]
    return subprocess.run(command, capture_output=True, text=True, timeout=20, check=False)


def test_spire_crawl_of_a_site_whose_robots_txt_asks_for_a_day_ends_at_once(site: Site, tmp_path: Path) -> None:
    site.page("/robots.txt", "", status=429, headers={"Retry-After": "99999"})
    site.page("/", page("Home", body="the only page"))
    done = spire_crawl(site, tmp_path / "pages.jsonl")
    assert done.returncode == 1, done.stderr
    assert "errors.retry_wait=" in done.stderr
    assert "the start page" in done.stderr
    assert "(retry_wait)" in done.stderr
    assert paths(site) == ["/robots.txt"]


def test_spire_crawl_of_a_start_page_queued_behind_a_sitemap_asking_for_a_day_ends_at_once(
    site: Site, tmp_path: Path
) -> None:
    robots(site, f"User-agent: *\nAllow: /\nSitemap: {site.url('/sitemap.xml')}\n")
    site.page("/sitemap.xml", "", status=429, headers={"Retry-After": "99999"})
    site.page("/", page("Home", body="the only page"))
    done = spire_crawl(site, tmp_path / "pages.jsonl")
    assert done.returncode == 1, done.stderr
    assert "errors.retry_wait=2" in done.stderr  # the sitemap, and the start page that waited behind it
    assert paths(site) == ["/robots.txt", "/sitemap.xml"]
