"""A download that this machine's disk cannot take (full, or the target is a folder) is a ``LocalFileError``:
its own category, never retried as a network failure would be, and it leaves no partial file."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import anyio
import httpx
import pytest

from spire import Crawler, Router
from spire_core.backend.http import HttpBackend
from spire_core.errors import LocalFileError, SpireError
from spire_core.seed import Seed
from tests.disks import fill, small_disk
from tests.sites.server import Site

Make = Callable[[], HttpBackend]

BODY = os.urandom(200_000)  # more than the 64k disk holds, and incompressible


@pytest.fixture(params=["aiohttp", "httpx"])
def make(request: pytest.FixtureRequest) -> Make:
    if request.param == "aiohttp":
        return HttpBackend
    return lambda: HttpBackend(transport=httpx.AsyncHTTPTransport())


def download_error(backend: HttpBackend, url: str, path: Path) -> SpireError:
    async def main() -> SpireError:
        try:
            with anyio.fail_after(20):
                await backend.download(Seed(url), path)
        except SpireError as exc:
            return exc
        finally:
            await backend.aclose()
        raise AssertionError("the download succeeded")

    return anyio.run(main)


def test_a_full_disk_is_a_local_file_error_not_a_connect_error(make: Make, site: Site, tmp_path: Path) -> None:
    site.page("/big.bin", BODY, content_type="application/octet-stream")
    with small_disk(tmp_path / "disk") as disk:
        error = download_error(make(), site.url("/big.bin"), disk / "big.bin")
        left = sorted(path.name for path in disk.iterdir())
    assert isinstance(error, LocalFileError), repr(error)
    assert (error.category, error.transient) == ("local_file", False)
    assert error.path == str(disk / "big.bin")
    assert "No space left" in str(error)
    assert "big.bin" in str(error)
    assert left == []  # no partial file


def test_a_target_that_is_a_folder_is_a_local_file_error(make: Make, site: Site, tmp_path: Path) -> None:
    site.page("/small.bin", b"data", content_type="application/octet-stream")
    (tmp_path / "small.bin").mkdir()
    error = download_error(make(), site.url("/small.bin"), tmp_path / "small.bin")
    assert isinstance(error, LocalFileError), repr(error)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["small.bin"]


def test_a_download_the_disk_cannot_hold_fails_its_page_once_without_retries(site: Site, tmp_path: Path) -> None:
    site.page("/", "<p>catalog</p>")
    site.page("/big.bin", BODY, content_type="application/octet-stream")
    router = Router()
    crawler: Crawler

    @router.default
    async def page() -> None:
        await crawler.download(site.url("/big.bin"), disk / "big.bin")

    with small_disk(tmp_path / "disk") as disk:
        fill(disk, leave=8192)
        crawler = Crawler(router, robots=False)
        stats = crawler.run([site.url("/")])
    assert (stats.failed, stats.retries) == (1, 0)
    assert stats.errors_by_category["local_file"] == 1
    assert site.hits()["/big.bin"] == 1
