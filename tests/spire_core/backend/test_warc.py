"""WARC recording and replay: a crawl recorded against a local site re-runs offline from its archive."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from spire_core.backend.http import HttpBackend
from spire_core.backend.warc import NotArchived, WarcRecorder, WarcReplay
from spire_core.errors import ConfigError
from spire_core.response import Response
from spire_core.seed import Seed
from tests.sites.server import Site, binary_tree
from tests.spire_core.backend.tree_crawl import crawl


def warcio(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "warcio.cli", *args], capture_output=True, text=True, timeout=60, check=False
    )


def fetch_all(backend: WarcRecorder | WarcReplay, seeds: list[Seed]) -> list[Response | BaseException]:
    async def go() -> list[Response | BaseException]:
        results: list[Response | BaseException] = []
        try:
            for seed in seeds:
                try:
                    results.append(await backend.fetch(seed))
                except NotArchived as exc:
                    results.append(exc)
        finally:
            await backend.aclose()
        return results

    return anyio.run(go)


def test_a_recorded_crawl_replays_offline_with_the_same_items(tmp_path: Path) -> None:
    with Site() as site:
        start = binary_tree(site, 25)
        recorder = WarcRecorder(HttpBackend(), tmp_path / "archive")
        _, recorded = crawl(recorder, start)
        assert len(site.page_requests()) == 25
    # The site is stopped: only the archive can answer now.
    replayed_crawler, replayed = crawl(WarcReplay(tmp_path / "archive"), start)
    assert replayed == recorded
    assert len(replayed) == 25
    assert replayed_crawler.stats.cached == 26  # the 25 pages and the robots.txt read first
    assert replayed_crawler.stats.failed == 0


def test_warc_files_pass_warcio_check_and_index_with_a_warcinfo_record_first(site: Site, tmp_path: Path) -> None:
    start = binary_tree(site, 10)
    recorder = WarcRecorder(HttpBackend(), tmp_path)
    crawl(recorder, start)
    (file,) = recorder.files
    assert file.name.endswith(".warc.gz")
    checked = warcio("check", "-v", str(file))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    indexed = warcio("index", "-f", "warc-type,warc-target-uri,http:status", str(file))
    assert indexed.returncode == 0, indexed.stderr
    rows = [json.loads(line) for line in indexed.stdout.splitlines()]
    assert rows[0]["warc-type"] == "warcinfo"
    responses = {row["warc-target-uri"]: row["http:status"] for row in rows if row["warc-type"] == "response"}
    # Every request of the crawl is archived: robots.txt (a 404 here), read first, and the ten pages.
    assert responses == {site.url("/robots.txt"): "404", **{site.url(f"/page/{i}"): "200" for i in range(10)}}
    assert sum(row["warc-type"] == "request" for row in rows) == 11
    with gzip.open(file, "rb") as raw:  # gzip per record: still one valid multi-member gzip stream
        assert raw.read().startswith(b"WARC/1.1\r\n")


def test_the_recorder_rotates_files_by_size_each_with_its_warcinfo(site: Site, tmp_path: Path) -> None:
    start = binary_tree(site, 12)
    recorder = WarcRecorder(HttpBackend(), tmp_path, prefix="tree", max_size=1)
    crawl(recorder, start)
    assert len(recorder.files) == 13  # robots.txt and 12 pages; every pair passes one byte: a new file after each
    for file in recorder.files:
        assert file.name.startswith("tree-")
        assert warcio("check", str(file)).returncode == 0
        first = warcio("index", "-f", "warc-type", str(file)).stdout.splitlines()[0]
        assert json.loads(first) == {"warc-type": "warcinfo"}
    _, replayed = crawl(WarcReplay(tmp_path), start)  # a folder of files replays as one archive
    assert len(replayed) == 12


def test_a_compressed_body_is_stored_decoded_with_headers_that_say_so(site: Site, tmp_path: Path) -> None:
    body = b"<html><title>zipped</title>" + b"x" * 2000 + b"</html>"
    site.page("/z", gzip.compress(body), headers={"Content-Encoding": "gzip"})
    fetch_all(WarcRecorder(HttpBackend(), tmp_path), [Seed(site.url("/z"))])
    (replayed,) = fetch_all(WarcReplay(tmp_path), [Seed(site.url("/z"))])
    assert isinstance(replayed, Response)
    assert replayed.body == body
    assert "content-encoding" not in replayed.headers
    assert replayed.headers["x-spire-decoded-content-encoding"] == "gzip"
    assert replayed.headers["content-length"] == str(len(body))


def test_replay_answers_by_method_and_key_and_a_missing_url_is_not_archived(site: Site, tmp_path: Path) -> None:
    def echo(request: object) -> tuple[int, dict[str, str], bytes]:
        return 200, {"Content-Type": "text/plain"}, b"posted " + getattr(request, "body", b"")

    site.route("/form", echo)
    site.page("/gone", "no", status=404)
    post = Seed(site.url("/form"), method="POST", body=b"q=1")
    fetch_all(WarcRecorder(HttpBackend(), tmp_path), [post, Seed(site.url("/gone"))])
    results = fetch_all(
        WarcReplay(tmp_path),
        [post, Seed(site.url("/gone")), Seed(site.url("/form")), Seed(site.url("/never"))],
    )
    posted, gone, as_get, never = results
    assert isinstance(posted, Response)
    assert posted.body == b"posted q=1"
    assert isinstance(gone, Response)
    assert gone.status == 404
    assert isinstance(as_get, NotArchived)
    assert isinstance(never, NotArchived)
    assert never.category == "not_archived"


def test_replaying_nothing_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no WARC"):
        fetch_all(WarcReplay(tmp_path / "missing"), [Seed("http://127.0.0.1/")])
