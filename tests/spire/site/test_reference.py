"""``spire crawl`` on a real documentation site keeps the same pages as a simple reference crawl.

The site is the PostgreSQL 15 manual as Debian's ``postgresql-doc-15`` package installs it (about
1,170 HTML pages), served from a local static server. The reference crawl is a breadth-first walk
over ``<a href>`` links with parsel and urllib: the same host scope, fragments dropped, and only
``200 text/html`` pages kept. Any page the two disagree on must be one the site crawl's documented
rules skip on purpose; the test names each such rule it finds.
"""

from __future__ import annotations

import collections
import functools
import json
import os
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from parsel import Selector

from spire.cli import main
from spire_core import html

MANUAL = Path("/usr/share/doc/postgresql-doc-15/html")


class _Quiet(SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go in two writes; Nagle would hold the body

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128


@pytest.fixture(scope="module")
def manual() -> Iterator[str]:
    """The manual served on 127.0.0.1; its index page's URL."""
    if not (MANUAL / "index.html").is_file():
        message = f"the PostgreSQL manual is not installed at {MANUAL} (apt-get install postgresql-doc-15)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    server = _Server(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(MANUAL)))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/index.html"
    finally:
        server.shutdown()
        server.server_close()


def _fetch(url: str) -> tuple[str, list[str]] | None:
    """The page's text and its links when it is a 200 text/html page; else ``None``."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            if response.status != 200 or response.headers.get_content_type() != "text/html":
                return None
            body = response.read()
    except urllib.error.URLError:
        return None
    document = Selector(body=body, type="html", base_url=url)
    links = [
        urllib.parse.urldefrag(urllib.parse.urljoin(url, href))[0] for href in document.css("a::attr(href)").getall()
    ]
    return html.text(document), links


def reference_crawl(seed: str) -> dict[str, str]:
    """Breadth first over ``<a href>``, on the seed's host and port: each kept URL and its text."""
    authority = urllib.parse.urlsplit(seed).netloc
    seen = {seed}
    frontier = [seed]
    kept: dict[str, str] = {}
    with ThreadPoolExecutor(8) as pool:
        while frontier:
            found = list(pool.map(_fetch, frontier))
            next_frontier: list[str] = []
            for url, result in zip(frontier, found, strict=True):
                if result is None:
                    continue
                kept[url], links = result
                for link in links:
                    parts = urllib.parse.urlsplit(link)
                    if parts.scheme in ("http", "https") and parts.netloc == authority and link not in seen:
                        seen.add(link)
                        next_frontier.append(link)
            frontier = next_frontier
    return kept


@pytest.mark.slow
def test_spire_crawl_keeps_the_pages_a_reference_crawl_finds(manual: str, tmp_path: Path) -> None:
    out = tmp_path / "pages.jsonl"
    options = ["--ignore-robots", "--max-in-flight", "8", "--per-second", "0", "--progress", "none"]
    assert main(["crawl", manual, "-o", str(out), *options]) == 0
    crawled = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    kept = {line["url"] for line in crawled}
    assert len(kept) == len(crawled)  # each page once

    reference = reference_crawl(manual)
    assert len(reference) > 1000

    # The site crawl's one documented rule that applies to this manual: a page of 20 words or more
    # whose text repeats a kept page word for word is skipped. Group the reference pages by their
    # words: each group must be kept exactly once.
    by_words: dict[tuple[str, ...], list[str]] = collections.defaultdict(list)
    for url, text in reference.items():
        by_words[tuple(text.split())].append(url)
    copies = {url for words, urls in by_words.items() if len(urls) > 1 and len(words) >= 20 for url in urls}
    assert kept - set(reference) == set(), "pages the reference crawl did not find"
    assert set(reference) - kept <= copies, "pages skipped without a rule"
    for words, urls in by_words.items():
        if len(urls) > 1 and len(words) >= 20:
            assert len(kept & set(urls)) == 1, f"one of each set of copies is kept: {urls}"
