"""WARC recording and replay: a crawl recorded against a local site re-runs offline from its archive."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import logging
import os
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from spire import Crawler
from spire_core.backend.base import FunctionBackend
from spire_core.backend.http import HttpBackend
from spire_core.backend.warc import NotArchived, WarcRecorder, WarcReplay
from spire_core.errors import BodyLimitError, ConfigError
from spire_core.response import Headers, Response
from spire_core.seed import Seed
from tests.sites.server import Site, binary_tree
from tests.spire_core.backend.tree_crawl import crawl, tree_router


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
                except (NotArchived, BodyLimitError) as exc:
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


def records(folder: Path) -> list[Any]:
    """Every record of every WARC file in ``folder``, read by warcio as archivists' tools read them,
    each with its payload as stored (``payload``)."""
    found = []
    for file in sorted(folder.glob("*.warc.gz")):
        with open(file, "rb") as stream:
            for record in ArchiveIterator(stream):
                record.payload = record.raw_stream.read()
                found.append(record)
    return found


@pytest.mark.parametrize("path", ["aiohttp", "httpx"])
def test_a_compressed_body_is_recorded_as_received_with_its_digest_and_replayed_decoded(
    site: Site, tmp_path: Path, path: str
) -> None:
    body = b"<html><title>zipped</title>" + b"x" * 2000 + b"</html>"
    wire = gzip.compress(body)
    site.page("/z", wire, headers={"Content-Encoding": "gzip"})
    fetch_all(WarcRecorder(HttpBackend(http2=path == "httpx"), tmp_path), [Seed(site.url("/z"))])
    (response,) = [record for record in records(tmp_path) if record.rec_type == "response"]
    assert response.payload == wire  # the bytes that came over the wire
    assert response.http_headers.get_header("Content-Encoding") == "gzip"
    assert response.http_headers.get_header("Content-Length") == str(len(wire))
    digest = "sha1:" + base64.b32encode(hashlib.sha1(wire).digest()).decode()
    assert response.rec_headers.get_header("WARC-Payload-Digest") == digest
    assert response.rec_headers.get_header("WARC-Spire-Payload") is None
    (file,) = tmp_path.glob("*.warc.gz")
    checked = warcio("check", "-v", str(file))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    (replayed,) = fetch_all(WarcReplay(tmp_path), [Seed(site.url("/z"))])
    assert isinstance(replayed, Response)
    assert replayed.body == body  # decoded on replay, as HttpBackend decodes
    assert replayed.headers["content-encoding"] == "gzip"


def test_a_body_without_wire_bytes_is_recorded_decoded_and_marked_so(tmp_path: Path) -> None:
    body = b"<html><title>rendered</title></html>"

    async def rendered(seed: Seed) -> Response:  # as the browser answers: the decoded page, no wire bytes
        headers = Headers([("Content-Type", "text/html"), ("Content-Encoding", "br")])
        return Response(url=seed.url, status=200, headers=headers, body=body, seed=seed)

    fetch_all(WarcRecorder(FunctionBackend(rendered), tmp_path), [Seed("http://127.0.0.1:9/page")])
    (response,) = [record for record in records(tmp_path) if record.rec_type == "response"]
    assert response.payload == body
    assert response.rec_headers.get_header("WARC-Spire-Payload") == "decoded"
    assert response.http_headers.get_header("Content-Encoding") is None
    assert response.http_headers.get_header("X-Spire-Decoded-Content-Encoding") == "br"
    (replayed,) = fetch_all(WarcReplay(tmp_path), [Seed("http://127.0.0.1:9/page")])
    assert isinstance(replayed, Response)
    assert replayed.body == body


def gzip_of_zeros(size: int) -> bytes:
    squeeze = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = bytes(2**20)
    return b"".join(squeeze.compress(block) for _ in range(size // len(block))) + squeeze.flush()


def archive(folder: Path, url: str, headers: list[tuple[str, str]], payload: bytes) -> None:
    """A WARC file with one response, written by warcio itself, as another tool would write it."""
    folder.mkdir(exist_ok=True)
    with open(folder / "other-tool.warc.gz", "wb") as file:
        writer = WARCWriter(file, gzip=True)
        http = StatusAndHeaders("200 OK", headers, protocol="HTTP/1.1")
        writer.write_record(writer.create_warc_record(url, "response", payload=io.BytesIO(payload), http_headers=http))


@pytest.mark.parametrize("framing", ["plain", "chunked"])
def test_replay_caps_a_body_that_inflates_past_the_body_cap(tmp_path: Path, framing: str) -> None:
    bomb = gzip_of_zeros(128 * 2**20)  # 128 MiB of zeros in about 128 KB: past the default 100 MiB cap
    assert len(bomb) < 2**20
    headers = [("Content-Type", "text/html"), ("Content-Encoding", "gzip")]
    if framing == "chunked":
        headers.append(("Transfer-Encoding", "chunked"))
        step = 2**16
        bomb = b"".join(
            b"%x\r\n%s\r\n" % (len(bomb[i : i + step]), bomb[i : i + step]) for i in range(0, len(bomb), step)
        )
        bomb += b"0\r\n\r\n"
    archive(tmp_path, "http://127.0.0.1:9/bomb", headers, bomb)
    (result,) = fetch_all(WarcReplay(tmp_path), [Seed("http://127.0.0.1:9/bomb")])
    assert isinstance(result, BodyLimitError), result
    assert result.url == "http://127.0.0.1:9/bomb"
    small = tmp_path / "small"
    archive(small, "http://127.0.0.1:9/ok", headers[:2], gzip.compress(b"fine"))
    (fine,) = fetch_all(WarcReplay(small, max_body_size=4), [Seed("http://127.0.0.1:9/ok")])
    assert isinstance(fine, Response)
    assert fine.body == b"fine"
    (over,) = fetch_all(WarcReplay(small, max_body_size=3), [Seed("http://127.0.0.1:9/ok")])
    assert isinstance(over, BodyLimitError)


# -- secrets ---------------------------------------------------------------------------------------


def secret_site(site: Site) -> None:
    def page(request: object) -> tuple[int, dict[str, str], bytes]:
        return 200, {"Content-Type": "text/html", "Set-Cookie": "session=srv-s3cret; Path=/"}, b"<title>me</title>"

    site.route("/me", page)


def crawl_with_secrets(site: Site, other_site: Site, recorder: WarcRecorder) -> Crawler:
    secret_site(site)
    secret_site(other_site)
    crawler = Crawler(
        tree_router(),
        backend=recorder,
        credentials={site.origin: {"Authorization": "Bearer cred-s3cret", "Cookie": "sid=cookie-s3cret"}},
    )
    crawler.run(
        [
            Seed(site.url("/me"), headers={"X-Api-Key": "key-s3cret"}),
            other_site.url("/me").replace("http://", "http://alice:url-s3cret@"),
        ]
    )
    assert crawler.stats.pages == 2
    return crawler


def test_warc_files_hold_no_credentials_by_default_and_stay_valid(site: Site, other_site: Site, tmp_path: Path) -> None:
    crawl_with_secrets(site, other_site, WarcRecorder(HttpBackend(), tmp_path))
    assert site.page_requests()[0].headers["authorization"] == "Bearer cred-s3cret"  # sent, not archived
    (file,) = tmp_path.glob("*.warc.gz")
    with gzip.open(file) as raw:
        content = raw.read()
    assert b"s3cret" not in content
    assert b"[redacted]" in content
    checked = warcio("check", "-v", str(file))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    found = records(tmp_path)
    requests = [record for record in found if record.rec_type == "request"]
    assert len(requests) == 4  # robots.txt and a page on each site
    for record in requests:
        assert "@" not in record.rec_headers.get_header("WARC-Target-URI")
        assert "@" not in record.http_headers.get_header("Host")
        assert record.http_headers.protocol in ("GET",)
    (mine,) = [r for r in requests if r.rec_headers.get_header("WARC-Target-URI") == site.url("/me")]
    assert mine.http_headers.get_header("Authorization") == "[redacted]"
    assert mine.http_headers.get_header("X-Api-Key") == "[redacted]"
    assert mine.http_headers.get_header("Cookie") == "[redacted]"
    _, replayed = crawl(WarcReplay(tmp_path), site.url("/me"))  # still replays
    assert [page.title for page in replayed] == ["me"]


def test_keep_secrets_archives_every_header_and_url_as_it_was(site: Site, other_site: Site, tmp_path: Path) -> None:
    crawl_with_secrets(site, other_site, WarcRecorder(HttpBackend(), tmp_path, keep_secrets=True))
    (file,) = tmp_path.glob("*.warc.gz")
    with gzip.open(file) as raw:
        content = raw.read()
    for secret in (b"cred-s3cret", b"cookie-s3cret", b"key-s3cret", b"srv-s3cret", b"alice:url-s3cret@"):
        assert secret in content


# -- a full disk -----------------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs: the disk fills after a few pages."""
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)], check=True)
    try:
        yield disk
    finally:
        subprocess.run(["umount", "--lazy", str(disk)], check=True)  # lazy: a file left open cannot keep it


def test_a_full_disk_fails_pages_as_warc_and_the_crawl_still_returns_its_stats(
    site: Site, small_disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pages = 12
    for n in range(pages):  # incompressible bodies of 16 KiB: about four fit
        site.page(f"/p{n}", os.urandom(16 * 1024), content_type="application/octet-stream")
    recorder = WarcRecorder(HttpBackend(), small_disk)
    caplog.set_level(logging.ERROR, logger="spire.warc")
    crawler = Crawler(tree_router(), backend=recorder)
    stats = crawler.run([site.url(f"/p{n}") for n in range(pages)])  # no OSError from the recorder's close
    assert stats.failed >= 1
    assert stats.failed == recorder.failed
    assert stats.pages + stats.failed == pages
    (line,) = [record.getMessage() for record in caplog.records if record.name == "spire.warc"]
    assert f"{recorder.failed} response(s) could not be written to {small_disk}" in line
    assert "No space left on device" in line
    # What was written stays valid WARC: a pair that did not fit was cut from the file.
    found = records(small_disk)
    assert found[0].rec_type == "warcinfo"
    assert sum(record.rec_type == "response" for record in found) == pages + 1 - recorder.failed  # and robots.txt


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
