"""``--http2``, ``--http3``, ``--ca-bundle`` and ``--insecure`` on ``spire crawl`` and ``spire run``:
against real local TLS servers speaking HTTP/2 and HTTP/3 (QUIC), certified by a CA of the test's own."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sites.h2 import Http2Site
from tests.sites.h3 import Http3Site

REPO = Path(__file__).parents[3]


@pytest.fixture(scope="module")
def h2_site() -> Iterator[Http2Site]:
    with Http2Site() as site:
        yield site


def crawl(site: Http2Site | Http3Site, out: Path, *options: str) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable, "-m", "spire", "crawl", site.url("/"), "-O", str(out), "--per-second", "0",
        "--progress", "none", "--robots-retry-delays", "", *options,
    ]  # fmt: skip
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)


def texts(out: Path) -> list[str]:
    return [json.loads(line)["text"] for line in out.read_text(encoding="utf-8").splitlines()]


def test_ca_bundle_trusts_the_servers_ca_and_http2_speaks_http2(h2_site: Http2Site, tmp_path: Path) -> None:
    out = tmp_path / "pages.jsonl"
    crawled = crawl(h2_site, out, "--http2", "--ca-bundle", h2_site.ca_file)
    assert crawled.returncode == 0, crawled.stderr
    assert texts(out) == ["2 /"]  # the server says the HTTP version it was asked in
    crawled = crawl(h2_site, out, "--ca-bundle", h2_site.ca_file)
    assert crawled.returncode == 0, crawled.stderr
    assert texts(out) == ["1.1 /"]


def test_without_the_ca_the_crawl_fails_and_insecure_checks_no_certificate(h2_site: Http2Site, tmp_path: Path) -> None:
    out = tmp_path / "pages.jsonl"
    refused = crawl(h2_site, out)
    assert refused.returncode == 1
    crawled = crawl(h2_site, out, "--insecure")
    assert crawled.returncode == 0, crawled.stderr
    assert texts(out) == ["1.1 /"]


def test_http3_only_speaks_http3_for_every_request(tmp_path: Path) -> None:
    out = tmp_path / "pages.jsonl"
    with Http3Site(pages=2) as site:
        crawled = crawl(site, out, "--http3", "only", "--ca-bundle", site.ca_file)
        versions = list(site.versions)
    assert crawled.returncode == 0, crawled.stderr
    assert len(out.read_text(encoding="utf-8").splitlines()) == 3  # / and its two pages
    assert set(versions) == {"3"}  # robots.txt too: over QUIC, nothing over TCP


def test_ca_bundle_and_insecure_go_one_without_the_other(h2_site: Http2Site, tmp_path: Path) -> None:
    both = crawl(h2_site, tmp_path / "p.jsonl", "--insecure", "--ca-bundle", h2_site.ca_file)
    assert both.returncode == 2
    assert "not allowed with argument" in both.stderr
    missing = crawl(h2_site, tmp_path / "p.jsonl", "--ca-bundle", str(tmp_path / "none.pem"))
    assert missing.returncode == 2
    assert "--ca-bundle" in missing.stderr


def test_spire_run_takes_the_same_options(h2_site: Http2Site, tmp_path: Path) -> None:
    script = tmp_path / "crawl.py"
    script.write_text(
        "from pydantic import BaseModel\n"
        "from spire import Dataset, Router, Text\n\n"
        "class Page(BaseModel):\n    text: str\n\n"
        "router = Router()\n\n"
        "@router.default\nasync def page(text: Text, pages: Dataset[Page]) -> None:\n"
        "    await pages.push(Page(text=text))\n",
        encoding="utf-8",
    )
    out = tmp_path / "items.jsonl"
    ran = subprocess.run(
        [sys.executable, "-m", "spire", "run", str(script), "--seed", h2_site.url("/"), "-O", str(out),
         "--progress", "none", "--http2", "--ca-bundle", h2_site.ca_file],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert "2 /" in texts(out)[0]
